"""What a kernel tells the world: events to listeners, and statistics of finished calls.

The scheduler builds the events and returns them as ``TELL`` actions; the async layer gives them
to the listeners (``deliver``) once the operation that decided them has returned. Events are
built only when somebody listens (a listener of the kernel's, or a ``stream`` sink of
the call's): on a kernel nobody watches, a call costs no event at all.

Lease contention is tallied on the waiting path only: a call that has to wait notes, once, the
resources it waits on and since when (``blocked``), and its wait is added to them when it
finishes. A call that never waits costs one ``None`` check more.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from . import _waits as waits
from ._call import CallState, ToolResult
from ._events import CallBlocked, CallEvent, CallFinished
from ._listeners import FileAccessListener, KernelListener, LeaseListener
from ._observe import (
    ContentionTally,
    KernelSnapshot,
    KernelStatistics,
    ToolTally,
    freeze_tallies,
    snapshot_of,
)
from ._record import CallRecord

__all__ = ["Reporter", "UNKNOWN_TOOL_TALLY"]

_log = logging.getLogger("toolkernel")

UNKNOWN_TOOL_TALLY = "(unknown tool)"
"""The statistics bucket of calls naming tools the kernel does not have: one, however many
names a model invents."""


class Reporter:
    """A kernel's listeners and tallies."""

    def __init__(self, max_concurrency: int | None) -> None:
        self.listeners: list[Callable[[CallEvent], None]] = []
        self._max_concurrency = max_concurrency
        self._slot_wait = waits.slot_wait(max_concurrency)
        self._tallies: dict[str, ToolTally] = {}
        self._finished = 0
        self._contention = ContentionTally()
        # The ``file_accessed`` methods of listeners that are ``FileAccessListener``s (see
        # ``_listeners``). Called from the worker threads doing the I/O.
        self.access_listeners: list[Callable[[Any], None]] = []
        # The ``leases_returned`` methods of listeners that are ``LeaseListener``s: told when a
        # call's leases return before its ``CallFinished``.
        self.release_listeners: list[Callable[[str], None]] = []

    def listening(self, record: CallRecord) -> bool:
        """Whether anyone listens to ``record``'s events: build none when nobody does."""
        return bool(self.listeners or record.sinks)

    def deliver(self, record: CallRecord, event: CallEvent) -> None:
        """Give ``event`` to every listener of the kernel and of ``record``'s stream (the
        async layer, once the scheduler's operation has returned)."""
        for listener in [*self.listeners, *record.sinks]:
            try:
                listener(event)
            except KeyboardInterrupt:
                raise
            except BaseException:  # SystemExit too: a listener's exit is not the kernel's
                # A broken listener must not break the calls it watches; drop it, say so.
                if listener in self.listeners:
                    self.listeners.remove(listener)
                record.sinks = tuple(s for s in record.sinks if s is not listener)
                _log.exception("toolkernel: removed an event listener that raised")

    def blocked(self, record: CallRecord, now: float) -> CallBlocked | None:
        """``record`` waits for its leases (or a slot): note on what, for the contention
        statistics; the event saying behind whom, if anyone listens."""
        announce = bool(self.listeners or record.sinks)
        claims = record.claims
        behind: list[CallRecord] = []
        # Nobody asks behind whom: a deep queue on one file, or a big batch waiting for slots,
        # would ask it of every call.
        if not announce and record.waiting_in is not None and claims and len(claims) == 1:
            resources = waits.contested_alone(claims[0])
        elif not announce and record.waiting_in is None and not record.awaiting:
            resources = self._slot_wait  # it holds its leases and waits for a slot
        else:
            behind = waits.waits_for(record)
            resources = waits.contested(record, self._max_concurrency, behind)
        if record.contested is None:
            record.contested, record.blocked_at = resources, now
        else:  # waiting again (its paths changed meaning): the first wait's start stands
            record.contested += tuple(r for r in resources if r not in record.contested)
        if not announce:
            return None
        blockers = tuple(r.call.id for r in behind)
        return CallBlocked(record.call.id, record.name, now, blockers, resources)

    def finished(self, record: CallRecord, result: ToolResult) -> CallFinished | None:
        """Count ``record``'s result; the event saying it finished, if anyone listens."""
        self._finished += 1
        name = record.call.name if record.tool is not None else UNKNOWN_TOOL_TALLY
        tally = self._tallies.get(name)
        if tally is None:
            tally = self._tallies[name] = ToolTally(name)
        tally.add(result)
        if record.contested is not None:  # it waited: count its wait against what it waited on
            started_at = result.started_at
            end = result.finished_at if started_at is None else started_at
            self._contention.add(record.contested, end - record.blocked_at)
        if not (self.listeners or record.sinks):
            return None
        return CallFinished(result.call_id, result.name, result.finished_at, result)

    def snapshot(self, live: Mapping[int, CallRecord]) -> KernelSnapshot:
        """What runs, what waits for leases (and behind whom), what is pending."""
        return snapshot_of(live)

    def add_listener(self, listener: KernelListener) -> Callable[[], None]:
        """Tell ``listener`` every event, every file access if it is a ``FileAccessListener``,
        and every early return of leases if it is a ``LeaseListener``; returns a function that
        removes it (``Kernel.add_listener``)."""
        listeners, watchers, returns = (
            self.listeners,
            self.access_listeners,
            self.release_listeners,
        )
        listeners.append(listener)
        watch = listener.file_accessed if isinstance(listener, FileAccessListener) else None
        if watch is not None:
            watchers.append(watch)
        returned = listener.leases_returned if isinstance(listener, LeaseListener) else None
        if returned is not None:
            returns.append(returned)

        def remove() -> None:
            if listener in listeners:
                listeners.remove(listener)
            if watch in watchers:
                watchers.remove(watch)
            if returned in returns:
                returns.remove(returned)

        return remove

    def file_observer(self) -> Callable[[Any], None] | None:
        """What to tell of every file a call touches, if anyone listens."""
        return self.file_accessed if self.access_listeners else None

    def leases_returned(self, record: CallRecord) -> None:
        """Tell the listeners that watch it that ``record``'s leases are back while its
        after-hooks still run (its ``CallFinished`` comes later)."""
        for listener in list(self.release_listeners):
            try:
                listener(record.call.id)
            except KeyboardInterrupt:
                raise
            except BaseException:
                if listener in self.release_listeners:
                    self.release_listeners.remove(listener)
                _log.exception("toolkernel: removed a lease listener that raised")

    def file_accessed(self, access: Any) -> None:
        """Pass one file access (a ``toolkernel.tools.FileAccessed``) to the listeners that
        watch them; called in the worker thread that does the I/O."""
        for listener in list(self.access_listeners):
            try:
                listener(access)
            except KeyboardInterrupt:
                raise
            except BaseException:
                if listener in self.access_listeners:
                    self.access_listeners.remove(listener)
                _log.exception("toolkernel: removed a file-access listener that raised")

    def statistics(self, live: Mapping[int, CallRecord], peak_running: int) -> KernelStatistics:
        """Counts by state; per tool: count, errors by type, wait and run percentiles; the peak
        number of calls running at once; the contended resources."""
        counts = dict.fromkeys(CallState, 0)
        for record in live.values():
            counts[record.state] += 1
        return KernelStatistics(
            pending=counts[CallState.PENDING],
            queued=counts[CallState.QUEUED],
            running=counts[CallState.RUNNING],
            finished=self._finished,
            tools=freeze_tallies(self._tallies.values()),
            peak_running=peak_running,
            contention=self._contention.freeze(),
        )

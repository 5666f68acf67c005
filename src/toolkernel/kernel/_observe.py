"""What a kernel tells the world: the :class:`Reporter` that builds events and tallies finished
calls, and the snapshots and statistics it gives, immutable values cheap to compare and print."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import attrs

from ..locks import Claim
from ._call import OK, CallState, ToolResult
from ._leasing import waits_for

if TYPE_CHECKING:
    from ._record import CallRecord

import logging
from collections.abc import Callable
from typing import Any

from . import _leasing as leasing
from ._events import (
    CallBlocked,
    CallEvent,
    CallFinished,
    FileAccessListener,
    KernelListener,
    LeaseListener,
)
from ._record import AHEAD, AWAITING, CallRecord

__all__ = [
    "CallInfo",
    "KernelSnapshot",
    "KernelStatistics",
    "ToolStatistics",
    "ResourceContention",
    "ToolTally",
    "ContentionTally",
    "snapshot_of",
    "Reporter",
    "UNKNOWN_TOOL_TALLY",
]


# -- What a kernel tells the world: events to listeners, and statistics of finished calls ---------
# The scheduler builds the events and returns them as ``TELL`` actions; the async layer gives them
# to the listeners (``deliver``) once the operation that decided them has returned. Events are
# built only when somebody listens (a listener of the kernel's, or a ``stream`` sink of
# the call's): on a kernel nobody watches, a call costs no event at all.
#
# Lease contention is tallied on the waiting path only: a call that has to wait notes, once, the
# resources it waits on and since when (``blocked``), and its wait is added to them when it
# finishes. A call that never waits costs one ``None`` check more.
_log = logging.getLogger("toolkernel")

UNKNOWN_TOOL_TALLY = "(unknown tool)"
"""The statistics bucket of calls naming tools the kernel does not have: one, however many
names a model invents."""


class Reporter:
    """A kernel's listeners and tallies."""

    def __init__(self, max_concurrency: int | None) -> None:
        self.listeners: list[Callable[[CallEvent], None]] = []
        self._max_concurrency = max_concurrency
        # What a top-level call waiting for nothing but a slot waits on, spelled once.
        self.slot_wait = leasing.slot_wait(max_concurrency)
        self._tallies: dict[str, ToolTally] = {}
        self._finished = 0
        self._contention = ContentionTally()
        # The ``file_accessed`` methods of listeners that are ``FileAccessListener``s (see
        # ``_events``). Called from the worker threads doing the I/O.
        self.access_listeners: list[Callable[[Any], None]] = []
        # The ``leases_returned`` methods of listeners that are ``LeaseListener``s: told when a
        # call's leases return before its ``CallFinished``.
        self.release_listeners: list[Callable[[str], None]] = []
        self.grant_listeners: list[Callable[[str], None]] = []  # LeaseListener.leases_granted

    def deliver(self, record: CallRecord, event: CallEvent) -> list[Callable[[CallEvent], None]]:
        """Give ``event`` to every listener of the kernel and of ``record``'s stream (the
        async layer, once the scheduler's operation has returned). Returns the stream
        listeners that raised, for the scheduler to detach from the call."""
        broken: list[Callable[[CallEvent], None]] = []
        for listener in [*self.listeners, *record.sinks]:
            try:
                listener(event)
            except KeyboardInterrupt:
                raise
            except BaseException:  # SystemExit too: a listener's exit is not the kernel's
                # A broken listener must not break the calls it watches; drop it, say so.
                if listener in self.listeners:
                    self.listeners.remove(listener)
                if listener in record.sinks:
                    broken.append(listener)
                _log.exception("toolkernel: removed an event listener that raised")
        return broken

    def blocked(self, record: CallRecord, now: float) -> tuple[tuple[str, ...], CallBlocked | None]:
        """``record`` waits for its leases (or a slot): the resources it waits on, spelled for
        people (the scheduler notes them on the record, for the contention statistics), and
        the event saying behind whom, if anyone listens."""
        announce = bool(self.listeners or record.sinks)
        claims = record.claims
        behind: list[CallRecord] = []
        # Nobody asks behind whom: a deep queue on one file, or a big batch waiting for slots,
        # would ask it of every call.
        if not announce and record.hold.waiting_in is not None and claims and len(claims) == 1:
            resources = leasing.contested_alone(claims[0])
        elif not announce and record.hold.waiting_in is None and not record.awaiting:
            resources = self.slot_wait  # it holds its leases and waits for a slot
        else:
            behind = leasing.waits_for(record)
            resources = leasing.contested(record, self._max_concurrency, behind)
        if not announce:
            return resources, None
        blockers = tuple(r.call.id for r in behind)
        return resources, CallBlocked(record.call.id, record.name, now, blockers, resources)

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
        granted = getattr(listener, "leases_granted", None) if returned is not None else None
        if granted is not None:
            self.grant_listeners.append(granted)

        def remove() -> None:
            if listener in listeners:
                listeners.remove(listener)
            if watch in watchers:
                watchers.remove(watch)
            if returned in returns:
                returns.remove(returned)
            if granted in self.grant_listeners:
                self.grant_listeners.remove(granted)

        return remove

    def file_observer(self) -> Callable[[Any], None] | None:
        """What to tell of every file a call touches, if anyone listens."""
        return self.file_accessed if self.access_listeners else None

    def leases_returned(self, record: CallRecord) -> None:
        """Tell the listeners that watch it that ``record``'s leases are back while its
        after-hooks still run (its ``CallFinished`` comes later)."""
        self._tell_leases(self.release_listeners, record)

    def leases_granted(self, record: CallRecord) -> None:
        """Tell the listeners that watch it that ``record``, which started ahead of its
        grant, holds its leases now."""
        self._tell_leases(self.grant_listeners, record)

    @staticmethod
    def _tell_leases(listeners: list[Callable[[str], None]], record: CallRecord) -> None:
        for listener in list(listeners):
            try:
                listener(record.call.id)
            except KeyboardInterrupt:
                raise
            except BaseException:
                if listener in listeners:
                    listeners.remove(listener)
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

    def statistics(
        self,
        live: Mapping[int, CallRecord],
        peak_running: int,
        ran_ahead: int = 0,
        ahead_thrown_away: int = 0,
    ) -> KernelStatistics:
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
            ran_ahead=ran_ahead,
            ahead_thrown_away=ahead_thrown_away,
        )


MAX_ERROR_TYPES = 32
"""Error types counted apart per tool; any more share one bucket, ``OTHER_ERRORS``."""
OTHER_ERRORS = "(other types)"
MAX_CONTENDED = 1_000
"""Resources whose contention is tallied apart; the least waited-on of them is folded into
``OTHER_RESOURCES`` to make room for a new one, so memory stays bounded however many paths a
long session touches."""
OTHER_RESOURCES = "(other resources)"
KEPT_TIMES = 10_000
"""Wait and run times kept per tool for percentiles (the most recent ones)."""


# -- What a snapshot and the statistics say -------------------------------------------------------
@attrs.frozen
class CallInfo:
    """One unfinished call in a :class:`KernelSnapshot`."""

    call_id: str
    name: str
    state: CallState
    claims: tuple[Claim, ...]
    """Its canonical claims (empty while not yet computed)."""
    waits_for: tuple[str, ...]
    """While queued: the calls it waits behind. While pending: the calls it depends on."""
    since: float
    """When it entered its current state."""
    parent: str | None
    """The call that made it through ``ctx.call``, if any."""
    ahead: bool = False
    """Running, but ahead of its grant (``toolkernel.kernel.Ahead``): its request still waits,
    behind the calls ``waits_for`` names."""


@attrs.frozen
class KernelSnapshot:
    """What a kernel is doing right now."""

    running: tuple[CallInfo, ...]
    queued: tuple[CallInfo, ...]
    pending: tuple[CallInfo, ...]


@attrs.frozen
class ToolStatistics:
    """Per-tool counts and time percentiles (seconds) over the calls that finished.

    Percentiles are nearest-rank: always a time some call took (of 1 s and 3 s, p50 is 1 s).
    """

    name: str
    count: int
    """Calls finished."""
    errors: int
    """Calls that did not end OK."""
    wait_p50: float
    wait_p90: float
    wait_p99: float
    run_p50: float
    run_p90: float
    run_p99: float
    errors_by_type: tuple[tuple[str, int], ...] = ()
    """``(error type, count)`` for the calls that did not end OK, most frequent first: the
    exception class behind the result (``result.error_type``, such as ``"RunTimeoutError"`` or
    the tool's ``"ValueError"``). At most 32 types; the rest are counted as
    ``"(other types)"``."""


@attrs.frozen
class ResourceContention:
    """How much calls waited on one resource: one line of :attr:`KernelStatistics.contention`.

    A call that has to wait for its leases is counted against the resources it was found
    waiting on when it began to wait (the claims of its that conflict with the calls ahead of
    it, as ``CallBlocked.resources`` spells them), for the whole of its wait.
    """

    resource: str
    """The resource, spelled for people (``src/a.py``, ``workspace``, ``device:android``, ``one
    of 4 concurrency slots``)."""
    waits: int
    """Calls that waited on it."""
    total_wait: float
    """Seconds they waited, summed."""
    max_wait: float
    """The longest of those waits, in seconds."""

    @property
    def mean_wait(self) -> float:
        """Seconds waited per wait."""
        return self.total_wait / self.waits if self.waits else 0.0


@attrs.frozen
class KernelStatistics:
    """Cheap counts of a kernel's calls, per-tool statistics, and where calls waited."""

    pending: int
    queued: int
    running: int
    finished: int
    tools: tuple[ToolStatistics, ...]
    peak_running: int = 0
    """The most calls that were running their tools at one time (nested calls included)."""
    contention: tuple[ResourceContention, ...] = ()
    """The resources calls waited on, the most waited-on (by total wait) first: the hot paths
    and devices. At most 1,000 resources are kept apart (those waited on least are folded into
    ``"(other resources)"``)."""
    ran_ahead: int = 0
    """Calls started before their leases were granted (their tools run them ahead and commit
    under the leases: ``toolkernel.kernel.Ahead``)."""
    ahead_thrown_away: int = 0
    """Of those, runs thrown away because a call that finished meanwhile changed what they
    may have read: their tools ran them again, holding their leases (the built-in Read, Grep
    and Glob, and Bash; a tool of one's own says so with ``ctx.report_thrown_away()``).
    ``ahead_thrown_away / ran_ahead`` is the share speculation cost."""


def _percentile(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))
    return ordered[index]


@attrs.define
class ToolTally:
    """Running tally for one tool; keeps the most recent times for percentiles."""

    name: str
    count: int = 0
    errors: int = 0
    waits: deque[float] = attrs.field(factory=lambda: deque(maxlen=KEPT_TIMES))
    runs: deque[float] = attrs.field(factory=lambda: deque(maxlen=KEPT_TIMES))
    error_types: dict[str, int] | None = None  # made at the first error

    def add(self, result: ToolResult) -> None:
        self.count += 1
        if result.status is not OK:
            self.errors += 1
            self._count_error(result.error_type or result.status.name)
        # ``result.wait_time`` and ``result.run_time``, spelled out: this runs for every call.
        started_at = result.started_at
        if started_at is None:
            self.waits.append(result.finished_at - result.queued_at)
        else:
            self.waits.append(started_at - result.queued_at)
            self.runs.append(result.finished_at - started_at)

    def _count_error(self, error_type: str) -> None:
        types = self.error_types
        if types is None:
            types = self.error_types = {}
        if error_type not in types and len(types) >= MAX_ERROR_TYPES:
            error_type = OTHER_ERRORS
        types[error_type] = types.get(error_type, 0) + 1

    def freeze(self) -> ToolStatistics:
        waits, runs = list(self.waits), list(self.runs)
        by_type = sorted((self.error_types or {}).items(), key=lambda item: (-item[1], item[0]))
        return ToolStatistics(
            name=self.name,
            count=self.count,
            errors=self.errors,
            wait_p50=_percentile(waits, 0.5),
            wait_p90=_percentile(waits, 0.9),
            wait_p99=_percentile(waits, 0.99),
            run_p50=_percentile(runs, 0.5),
            run_p90=_percentile(runs, 0.9),
            run_p99=_percentile(runs, 0.99),
            errors_by_type=tuple(by_type),
        )


@attrs.define
class _Waited:
    waits: int = 0
    total: float = 0.0
    longest: float = 0.0


class ContentionTally:
    """Waits per contested resource, bounded: see :data:`MAX_CONTENDED`."""

    def __init__(self, limit: int = MAX_CONTENDED) -> None:
        self._limit = limit
        self._resources: dict[str, _Waited] = {}

    def add(self, resources: Iterable[str], waited: float) -> None:
        """One call waited ``waited`` seconds on ``resources``."""
        for resource in resources:
            entry = self._resources.get(resource)
            if entry is None:
                entry = self._make_room_for(resource)
            entry.waits += 1
            entry.total += waited
            if waited > entry.longest:
                entry.longest = waited

    def _make_room_for(self, resource: str) -> _Waited:
        resources = self._resources
        if len(resources) >= self._limit:
            # Fold the least waited-on resource into the shared bucket (a scan, but only when
            # a new resource arrives with the table full, and only on the waiting path).
            kept = [name for name in resources if name != OTHER_RESOURCES]
            coldest = min(kept, key=lambda name: resources[name].total)
            folded = resources.pop(coldest)
            other = resources.setdefault(OTHER_RESOURCES, _Waited())
            other.waits += folded.waits
            other.total += folded.total
            other.longest = max(other.longest, folded.longest)
        entry = resources[resource] = _Waited()
        return entry

    def freeze(self) -> tuple[ResourceContention, ...]:
        ordered = sorted(self._resources.items(), key=lambda item: (-item[1].total, item[0]))
        return tuple(
            ResourceContention(name, entry.waits, entry.total, entry.longest)
            for name, entry in ordered
        )


def freeze_tallies(tallies: Iterable[ToolTally]) -> tuple[ToolStatistics, ...]:
    return tuple(t.freeze() for t in sorted(tallies, key=lambda t: t.name))


def snapshot_of(live: Mapping[int, CallRecord]) -> KernelSnapshot:
    """A snapshot of the unfinished calls ``live`` (by uid)."""
    infos: dict[CallState, list[CallInfo]] = {s: [] for s in CallState}
    for uid in sorted(live):
        record = live[uid]
        ahead = record.stage is AHEAD or record.stage is AWAITING
        if record.state is CallState.QUEUED or ahead:
            behind = tuple(r.call.id for r in waits_for(record))
        elif record.state is CallState.PENDING:
            deps = sorted(record.deps_left or ())
            behind = tuple(live[dep].call.id for dep in deps if dep in live)
        else:
            behind = ()
        infos[record.state].append(
            CallInfo(
                call_id=record.call.id,
                name=record.name,
                state=record.state,
                claims=record.claims or (),
                waits_for=behind,
                since=record.state_since,
                parent=record.parent.call.id if record.parent else None,
                ahead=ahead,
            )
        )
    return KernelSnapshot(
        running=tuple(infos[CallState.RUNNING]),
        queued=tuple(infos[CallState.QUEUED]),
        pending=tuple(infos[CallState.PENDING]),
    )

"""``Recorder``: a kernel listener that keeps what every call held, when, and what it touched.

Attach it with ``kernel.add_listener(recorder)`` before submitting calls; read
``recorder.recording`` (an immutable :class:`Recording`) whenever you like, and hand it to
:func:`~toolkernel.testing.check_race_free`.

Times come from the events (the kernel's clock: virtual under ``MockClock`` or
``VirtualClockEventLoop``). Every event also gets a sequence number in the order the kernel
emitted it, so two intervals that touch at the same instant (one call ends at t=1, the next
starts at t=1) are still ordered: a call's run is ``(started, finished)`` in that order, and two
runs overlap only if each started before the other finished. A call's run ends when its leases
return, which is before its ``CallFinished`` when after-hooks run (the kernel tells the recorder
through its ``leases_returned`` method).

Files come from ``ctx.fs``: the recorder has a ``file_accessed`` method, so the kernel passes
it every access a call makes through its file access (see ``Kernel.add_listener``). I/O a tool
does behind ``ctx.fs`` (``open()``, a subprocess) is not seen; that is what
:func:`~toolkernel.testing.assert_serializable` is for.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import attrs

from ..kernel import (
    CallBlocked,
    CallEvent,
    CallFinished,
    CallQueued,
    CallStarted,
    FileAccessListener,
    LeaseListener,
    Status,
    ToolResult,
)
from ..locks import Claim
from ..tools import FileAccessed

__all__ = ["Recorder", "Recording", "CallRecording", "Interval"]


@attrs.frozen
class Interval:
    """A stretch of a call's life: times on the kernel's clock, and the sequence numbers of the
    events that opened and closed it (the order the kernel emitted them)."""

    start: float
    end: float
    first: int
    """Sequence number of the event that opened it."""
    last: int
    """Sequence number of the event that closed it."""

    @property
    def duration(self) -> float:
        return self.end - self.start

    def overlaps(self, other: Interval) -> bool:
        """True iff the two were open at the same time (judged by event order)."""
        return self.first < other.last and other.first < self.last


@attrs.frozen
class CallRecording:
    """What one call did, from its ``CallQueued`` to its ``CallFinished``."""

    call_id: str
    name: str
    claims: tuple[Claim, ...]
    """The canonical claims it requested (as ``CallQueued`` gave them)."""
    parent: str | None
    """The call that made it through ``ctx.call``, if any."""
    wait: Interval | None
    """From admission to start (or to the end, if it never started); None while unfinished."""
    run: Interval | None
    """From ``CallStarted`` to the return of its leases: its ``CallFinished``, or, when
    after-hooks run in between, the moment before them (``Recorder.leases_returned``). None if
    it never ran (or has not finished)."""
    waited_behind: tuple[str, ...]
    """Ids of the calls it was blocked behind (from its ``CallBlocked`` events)."""
    contested: tuple[str, ...]
    """The resources it waited on, spelled for people."""
    accesses: tuple[FileAccessed, ...]
    """Every access it made through ``ctx.fs``, in order, allowed or refused."""
    result: ToolResult | None
    """Its result; None while unfinished."""

    @property
    def status(self) -> Status | None:
        return None if self.result is None else self.result.status

    @property
    def finished(self) -> bool:
        return self.result is not None


@attrs.frozen
class Recording:
    """Every call a :class:`Recorder` saw, in the order they were queued."""

    calls: tuple[CallRecording, ...]

    def __iter__(self) -> Iterator[CallRecording]:
        return iter(self.calls)

    def __len__(self) -> int:
        return len(self.calls)

    def by_id(self, call_id: str) -> CallRecording:
        """The latest call with this id (ids may repeat across batches); ``KeyError`` if none."""
        for call in reversed(self.calls):
            if call.call_id == call_id:
                return call
        raise KeyError(f"no call {call_id!r} in the recording")

    def peak_running(self) -> int:
        """The most calls that were running at once."""
        edges = sorted(
            (seq, step)
            for call in self.calls
            if call.run is not None
            for seq, step in ((call.run.first, 1), (call.run.last, -1))
        )
        running = peak = 0
        for _, step in edges:
            running += step
            peak = max(peak, running)
        return peak


@attrs.define(eq=False)
class _Entry:
    call_id: str
    name: str
    claims: tuple[Claim, ...]
    parent: str | None
    queued: float
    queued_seq: int
    started: float | None = None
    started_seq: int = 0
    waited_behind: list[str] = attrs.field(factory=list)
    contested: list[str] = attrs.field(factory=list)
    accesses: list[FileAccessed] = attrs.field(factory=list)
    result: ToolResult | None = None
    finished_seq: int = 0
    released_seq: int = 0  # its leases returned before CallFinished (after-hooks ran)

    def freeze(self) -> CallRecording:
        wait = run = None
        if self.result is not None:
            end = self.result.finished_at
            if self.started is None:
                wait = Interval(self.queued, end, self.queued_seq, self.finished_seq)
            else:
                wait = Interval(self.queued, self.started, self.queued_seq, self.started_seq)
                last = self.released_seq or self.finished_seq
                run = Interval(self.started, end, self.started_seq, last)
        return CallRecording(
            call_id=self.call_id,
            name=self.name,
            claims=self.claims,
            parent=self.parent,
            wait=wait,
            run=run,
            waited_behind=tuple(self.waited_behind),
            contested=tuple(self.contested),
            accesses=tuple(self.accesses),
            result=self.result,
        )


@attrs.define(eq=False, repr=False)
class Recorder(FileAccessListener, LeaseListener):
    """A kernel listener recording every call's claims, wait and run intervals, and files.

    ::

        recorder = Recorder()
        kernel.add_listener(recorder)
        await kernel.run(calls)
        assert check_race_free(recorder.recording) == []

    One recorder may watch several kernels one after another, or one kernel over many batches.
    """

    _entries: list[_Entry] = attrs.field(factory=list, init=False)
    # Unfinished calls by id; a list per id, since a model may repeat an id (the kernel fails
    # the repeat at once, so the newest entry is always the one an event is about).
    _live: dict[str, list[_Entry]] = attrs.field(factory=dict, init=False)
    _sequence: int = attrs.field(default=0, init=False)
    # ``file_accessed`` runs in worker threads, the rest on the event loop.
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    def __call__(self, event: CallEvent) -> None:
        with self._lock:
            self._sequence += 1
            seq = self._sequence
            if isinstance(event, CallQueued):
                entry = _Entry(
                    event.call_id, event.name, event.claims, event.parent, event.time, seq
                )
                self._entries.append(entry)
                self._live.setdefault(event.call_id, []).append(entry)
                return
            stack = self._live.get(event.call_id)
            if not stack:
                return  # queued before the recorder was added
            entry = stack[-1]
            if isinstance(event, CallBlocked):
                behind, contested = entry.waited_behind, entry.contested
                behind.extend(i for i in event.waits_for if i not in behind)
                contested.extend(r for r in event.resources if r not in contested)
            elif isinstance(event, CallStarted):
                entry.started, entry.started_seq = event.time, seq
            elif isinstance(event, CallFinished):
                entry.result, entry.finished_seq = event.result, seq
                stack.pop()
                if not stack:
                    del self._live[event.call_id]

    def __repr__(self) -> str:
        return f"<Recorder: {len(self._entries)} calls, {len(self._live)} unfinished>"

    def leases_returned(self, call_id: str) -> None:
        """Called by the kernel when a call's leases return before its ``CallFinished`` (its
        after-hooks run in between): its run, as far as races go, ends here."""
        with self._lock:
            self._sequence += 1
            stack = self._live.get(call_id)
            if stack and stack[-1].started is not None:
                stack[-1].released_seq = self._sequence

    def file_accessed(self, access: FileAccessed) -> None:
        """Called by the kernel (from a worker thread) for every access through ``ctx.fs``."""
        with self._lock:
            stack = self._live.get(access.call_id or "")
            if stack:
                stack[-1].accesses.append(access)

    @property
    def recording(self) -> Recording:
        """Everything recorded so far, as an immutable value."""
        with self._lock:
            return Recording(tuple(entry.freeze() for entry in self._entries))

    def clear(self) -> None:
        """Forget every finished call (unfinished ones stay, to be completed)."""
        with self._lock:
            live = {id(e) for stack in self._live.values() for e in stack}
            self._entries = [e for e in self._entries if id(e) in live]

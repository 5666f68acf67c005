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

Ids may repeat: only the calls of one batch need ids of their own, so two agents sharing a
kernel may each have a call ``c1`` running at once (and each of those a nested ``c1.1``). The
events name a call only by its id, so the recorder numbers the calls itself (``serial``) and
follows each run through the task running it: a ``CallStarted`` binds the call to that task's
context, which its worker threads and the tasks it starts inherit, so its file accesses, the
return of its leases, its ``CallFinished`` and the nested calls it makes are its own, whatever
other call shares its id. Which call a ``CallStarted`` is about, when several with its id wait
to start, is told the same way: a nested call runs in its parent's task, and a call granted at
its admission starts in a task started by the task that queued it. A call granted later, by
another's end, is taken to be the one queued first, and a wrong guess is put right when it
finishes (its result says when it was queued); only calls with one id queued at one instant
(on virtual time) and granted together later are told apart by that guess alone.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator, Mapping

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
    it never ran (or has not finished). For a call that started ahead of its grant, the
    interval opens (``first``) at its grant (``Recorder.leases_granted``): what it did before
    was invisible."""
    waited_behind: tuple[str, ...]
    """Ids of the calls it was blocked behind (from its ``CallBlocked`` events)."""
    contested: tuple[str, ...]
    """The resources it waited on, spelled for people."""
    accesses: tuple[FileAccessed, ...]
    """Every access it made through ``ctx.fs``, in order, allowed or refused."""
    result: ToolResult | None
    """Its result; None while unfinished."""
    serial: int | None = None
    """Its number among the calls its recorder saw, from 1, in the order they were queued:
    unlike ``call_id``, which batches may repeat, no two calls share one. None in a recording
    made by hand."""
    parent_serial: int | None = None
    """The ``serial`` of the call that made it (``parent``), when the recorder saw that call."""

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
class _Run:
    """A call's run, as the task running it knows it (its :class:`_Here`), and the worker
    threads and tasks that task starts."""

    entry: _Entry
    started: float
    started_seq: int
    outer: _Run | None
    """What the task was running before: a nested call's parent, run in the same task."""
    accesses: list[FileAccessed] = attrs.field(factory=list)
    released_seq: int = 0  # its leases returned before CallFinished (after-hooks ran)
    ahead: bool = False  # it started ahead of its grant, and has not been told of it yet


@attrs.define(eq=False)
class _Entry:
    serial: int
    call_id: str
    name: str
    claims: tuple[Claim, ...]
    parent: str | None
    parent_run: _Run | None
    queued: float
    queued_seq: int
    run: _Run | None = None
    waited_behind: list[str] = attrs.field(factory=list)
    contested: list[str] = attrs.field(factory=list)
    result: ToolResult | None = None
    finished_seq: int = 0

    def freeze(self) -> CallRecording:
        wait = run = None
        current = self.run
        if self.result is not None:
            end = self.result.finished_at
            if current is None or current.ahead:  # it never ran, or never held its leases
                wait = Interval(self.queued, end, self.queued_seq, self.finished_seq)
            else:
                wait = Interval(self.queued, current.started, self.queued_seq, current.started_seq)
                last = current.released_seq or self.finished_seq
                run = Interval(current.started, end, current.started_seq, last)
        parent = self.parent_run
        return CallRecording(
            call_id=self.call_id,
            name=self.name,
            claims=self.claims,
            parent=self.parent,
            wait=wait,
            run=run,
            waited_behind=tuple(self.waited_behind),
            contested=tuple(self.contested),
            accesses=() if current is None else tuple(current.accesses),
            result=self.result,
            serial=self.serial,
            parent_serial=None if parent is None else parent.entry.serial,
        )


@attrs.frozen(eq=False)
class _Here:
    """What a recorder knows of the task it is told something in (and of the worker threads
    and tasks that task starts, which inherit its context)."""

    run: _Run | None = None
    """The run this task is in: set by a ``CallStarted`` here."""
    queued: dict[str, _Entry] = attrs.field(factory=dict)
    """The top-level calls of the batch this task queued last, by id. The kernel starts the
    task of a call granted at its admission from the task admitting it: the first call started
    in a task made then, with one of these ids, is this one."""
    queued_seq: int = 0
    """The sequence number of the last of them: a batch's ``CallQueued`` events follow one
    another, and its ids are its own."""


_here: contextvars.ContextVar[Mapping[Recorder, _Here] | None] = contextvars.ContextVar(
    "toolkernel_testing_here", default=None
)
"""Each recorder's :class:`_Here` in this context. One variable for every recorder: a context
keeps each variable it ever held alive."""


@attrs.define(eq=False, repr=False)
class Recorder(FileAccessListener, LeaseListener):
    """A kernel listener recording every call's claims, wait and run intervals, and files.

    ::

        recorder = Recorder()
        kernel.add_listener(recorder)
        await kernel.run(calls)
        assert check_race_free(recorder.recording) == []

    One recorder may watch several kernels one after another, or one kernel over many batches,
    among them batches that reuse ids, even while calls with those ids run.
    """

    _entries: list[_Entry] = attrs.field(factory=list, init=False)
    # Unfinished calls by id, in the order queued: a list per id, since ids need only be unique
    # within a batch, and calls of several batches may share one.
    _live: dict[str, list[_Entry]] = attrs.field(factory=dict, init=False)
    _sequence: int = attrs.field(default=0, init=False)
    _serial: int = attrs.field(default=0, init=False)
    # ``file_accessed`` runs in worker threads, the rest on the event loop.
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    def __call__(self, event: CallEvent) -> None:
        with self._lock:
            self._sequence += 1
            seq = self._sequence
            if isinstance(event, CallQueued):
                self._queued(event, seq)
            elif isinstance(event, CallBlocked):
                entry = self._blocked(event)
                if entry is not None:
                    behind, contested = entry.waited_behind, entry.contested
                    behind.extend(i for i in event.waits_for if i not in behind)
                    contested.extend(r for r in event.resources if r not in contested)
            elif isinstance(event, CallStarted):
                self._started(event, seq)
            elif isinstance(event, CallFinished):
                entry = self._finished(event)
                if entry is not None:
                    entry.result, entry.finished_seq = event.result, seq
                    stack = self._live[entry.call_id]
                    stack.remove(entry)
                    if not stack:
                        del self._live[entry.call_id]

    def __repr__(self) -> str:
        unfinished = sum(len(stack) for stack in self._live.values())
        return f"<Recorder: {len(self._entries)} calls, {unfinished} unfinished>"

    def leases_returned(self, call_id: str) -> None:
        """Called by the kernel when a call's leases return before its ``CallFinished`` (its
        after-hooks run in between): its run, as far as races go, ends here."""
        with self._lock:
            self._sequence += 1
            run = self._running(call_id)
            if run is not None:
                run.released_seq = self._sequence

    def leases_granted(self, call_id: str) -> None:
        """Called by the kernel, in the call's task, when a call that started ahead of its
        grant (``CallStarted.ahead``) holds its leases: as far as races go, its run starts
        here (its ``run`` interval opens at this event; its start time stays its start's)."""
        with self._lock:
            self._sequence += 1
            run = self._running(call_id)
            if run is not None and run.ahead:
                run.ahead, run.started_seq = False, self._sequence

    def file_accessed(self, access: FileAccessed) -> None:
        """Called by the kernel (from a worker thread) for every access through ``ctx.fs``."""
        with self._lock:
            run = self._running(access.call_id or "")
            if run is not None:
                run.accesses.append(access)

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

    # -- which call an event is about ------------------------------------------------------------

    def _here(self) -> _Here:
        return (_here.get() or {}).get(self) or _Here()

    def _set_here(self, here: _Here) -> None:
        everyone = dict(_here.get() or {})
        everyone[self] = here
        _here.set(everyone)

    def _current(self) -> _Run | None:
        """The unfinished run this task (or worker thread) is in, as far as this recorder saw."""
        run = self._here().run
        if run is None or run.entry.result is not None or run.entry.run is not run:
            return None  # its call ended elsewhere, or another call's run was started here
        return run

    def _running(self, call_id: str) -> _Run | None:
        """The run of the call ``call_id`` that this task (or worker thread) is in; failing that
        (a thread the tool started itself, events fed by hand), the latest running one."""
        run = self._current()
        if run is not None and run.entry.call_id == call_id:
            return run
        for entry in reversed(self._live.get(call_id, ())):
            if entry.run is not None:
                return entry.run
        return None

    def _queued(self, event: CallQueued, seq: int) -> None:
        parent_run = None
        if event.parent is not None:
            # A nested call is queued in the task running its parent's tool.
            parent_run = self._running(event.parent)
        self._serial += 1
        entry = _Entry(
            self._serial,
            event.call_id,
            event.name,
            event.claims,
            event.parent,
            parent_run,
            event.time,
            seq,
        )
        self._entries.append(entry)
        self._live.setdefault(event.call_id, []).append(entry)
        if parent_run is None:
            here = self._here()
            batch = here.queued
            if batch and here.queued_seq == seq - 1 and event.call_id not in batch:
                batch[event.call_id] = entry  # the same batch (its ids are its own)
                here = attrs.evolve(here, queued_seq=seq)
            else:
                here = attrs.evolve(here, queued={event.call_id: entry}, queued_seq=seq)
            self._set_here(here)

    def _blocked(self, event: CallBlocked) -> _Entry | None:
        """Who waits: the call of that id this task just queued, if it has not started; else a
        call not running (the latest queued); or, asking for more (``HoldMore``), the one this
        task runs."""
        stack = self._live.get(event.call_id, ())
        queued = self._here().queued.get(event.call_id)
        if queued is not None and queued.run is None and queued.result is None:
            return queued
        for entry in reversed(stack):
            if entry.run is None:
                return entry
        run = self._current()
        if run is not None and run.entry.call_id == event.call_id:
            return run.entry
        return stack[-1] if stack else None

    def _started(self, event: CallStarted, seq: int) -> None:
        stack = self._live.get(event.call_id, ())
        waiting = [e for e in stack if e.run is None and e.name == event.name]
        here, current = self._here(), self._current()
        if waiting:
            entry = _which_started(waiting, current, here.queued.get(event.call_id))
            run = entry.run = _Run(entry, event.time, seq, current)
        else:
            # Started again: its tool asked to hold more (``HoldMore``), in this task or after
            # a wait.
            if current is not None and current.entry.call_id == event.call_id:
                run = current
            else:
                again = [e.run for e in stack if e.run is not None]
                if not again:
                    return  # queued before the recorder was added
                run = again[-1]
            run.started, run.started_seq = event.time, seq
        run.ahead = event.ahead
        # What this task queued is no guide to the next call started in it (a call chained
        # after this one, granted by its end, may come from any batch).
        self._set_here(_Here(run))

    def _finished(self, event: CallFinished) -> _Entry | None:
        result = event.result
        stack = self._live.get(event.call_id)
        if not stack:
            return None  # queued before the recorder was added
        run = self._current()
        if run is not None and run.entry.call_id == event.call_id and result.started_at is not None:
            # It ends in the task that ran it: the run is its own. Which call that run was is
            # a guess when several with its id waited to start at once; its result says when
            # it was queued.
            self._set_here(_Here(run.outer))
            entry = run.entry
            if entry.queued != result.queued_at:
                for other in stack:
                    if other is not entry and other.queued == result.queued_at:
                        _swap_runs(entry, other)
                        return other
            return entry
        # It never started, or ended outside the task that ran it (cancelled with its parent):
        # the calls with its id that fit its result, those its task's call made first, and of
        # those the latest (a call failed at admission is the one just queued).
        fits = [e for e in stack if _fits(e, result)] or list(stack)
        own = [e for e in fits if run is not None and e.parent_run is run]
        return (own or fits)[-1]


def _which_started(waiting: list[_Entry], current: _Run | None, queued: _Entry | None) -> _Entry:
    """Which of ``waiting`` (calls with one id and tool, none started) a ``CallStarted`` is
    about, in a task running ``current`` that queued ``queued`` (or was started by the task
    that did): the one ``current`` made (a nested call runs in its parent's task); else
    ``queued``; else the one queued first. Only the last is a guess; it is put right when the
    call finishes, if its result says it was queued at another time."""
    if current is not None:
        for entry in waiting:
            if entry.parent_run is current:
                return entry
    if queued is not None and queued in waiting:
        return queued
    return waiting[0]


def _fits(entry: _Entry, result: ToolResult) -> bool:
    """True if ``result`` may be the end of ``entry``: queued and started when it was."""
    if entry.queued != result.queued_at:
        return False
    if result.started_at is None:
        return entry.run is None
    return entry.run is not None and entry.run.started == result.started_at


def _swap_runs(a: _Entry, b: _Entry) -> None:
    """``a`` and ``b``, two calls with one id, each had the other's run (which started was a
    guess): give each its own."""
    a.run, b.run = b.run, a.run
    for entry in (a, b):
        if entry.run is not None:
            entry.run.entry = entry

"""A minimal async layer without an event loop, for transcript tests of the scheduler.

:class:`Harness` drives a :class:`~toolkernel.kernel._scheduler.Scheduler` the way ``_kernel.py``
does, one step at a time, on a hand-driven clock, and writes down every action the scheduler
returns (``log``). Where the async layer would spawn a task, the harness notes the call and
waits for the test to say what the task does next:

- ``START``: the call is in ``spawned``; ``begin`` is its task starting (its keys looked at
  again if it waited, its tool started, its run deadline noted), ``end`` its tool returning,
  ``raise_in`` its tool raising, ``hold_more`` its tool asking for more;
- ``PREPHASE``: the call is in ``prephases``; ``prephase`` gives its before-hooks' answers and
  runs the policy; ``approve`` gives the approver's answer;
- ``INTERRUPT``: a call whose hooks or tool run has its scope cancelled (``cancelled``), and its
  task unwinds at the next ``settle`` (or ``advance``); any other call is finished at once;
- ``TELL``: the events are given to the listeners (``Reporter.deliver``) before the operation's
  other actions are taken, as ``Kernel._act`` gives them, a listener's own operations' events
  after them;
- ``WAKE``: a nested call's parent, or a call waiting on a handle, goes on after the step.

A nested call (``nested``) is its parent's task working through ``Kernel._call_nested``: a
generator, resumed when its request is granted or its tool ends. Time passes with ``advance``:
the timer expires lease waits, and tools whose run deadline passed are cut short.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import attrs

from toolkernel.errors import InvalidArgumentsError
from toolkernel.kernel import _messages as messages
from toolkernel.kernel._actions import Act, Action, Telling
from toolkernel.kernel._ahead import Ahead
from toolkernel.kernel._call import Status, ToolCall, ToolResult
from toolkernel.kernel._events import CallEvent
from toolkernel.kernel._messages import ASKED, CancelReason
from toolkernel.kernel._options import KernelOptions
from toolkernel.kernel._policy import Decision, Permission
from toolkernel.kernel._record import CallRecord, Stage
from toolkernel.kernel._scheduler import Scheduler
from toolkernel.locks import Claim, device, exclusive, path, pool, reads, units, writes

__all__ = ["AheadTool", "Harness", "PlainTool", "call", "claims_of"]


def claims_of(spec: str, key: Callable[[str], Any] = path) -> list[Claim]:
    """Claims from a short spelling: ``"r:a w:b dev:phone pool:net:2 pool:net"`` (a pool with no
    count is claimed whole); ``""`` is no claims at all; ``"boom"`` makes the claims fail."""
    claims: list[Claim] = []
    for word in spec.split():
        kind, _, rest = word.partition(":")
        if kind == "r":
            claims.append(reads(key(rest)))
        elif kind == "w":
            claims.append(writes(key(rest)))
        elif kind == "dev":
            claims.append(exclusive(device(rest)))
        elif kind == "pool":
            name, _, count = rest.partition(":")
            claims.append(units(pool(name), int(count)) if count else exclusive(pool(name)))
        else:
            raise ValueError(f"no claim is spelled {word!r}")
    return claims


@attrs.define
class PlainTool:
    """A KernelTool without the decorator: claims from a ``path`` and a ``mode`` argument, or
    spelled out in a ``claims`` one (``claims_of``); none of either is undeclared (a barrier).
    An argument named ``bad`` is refused when the arguments are parsed."""

    name: str
    wait_timeout: float | None = None
    run_timeout: float | None = None

    def parse_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        if "bad" in arguments:
            raise InvalidArgumentsError(f"{self.name} takes no argument 'bad'")
        return dict(arguments)

    def claims(self, arguments: Mapping[str, Any], key: Any) -> Sequence[Claim] | None:
        if "claims" in arguments:
            return claims_of(arguments["claims"], key)
        if "path" not in arguments:
            return None
        make = writes if arguments.get("mode") == "w" else reads
        return [make(key(arguments["path"]))]

    async def invoke(self, ctx: Any, arguments: Mapping[str, Any]) -> Any:
        raise AssertionError("transcripts never run tools")


@attrs.define
class AheadTool(PlainTool):
    """A :class:`PlainTool` whose calls may run ahead of their grant (``Ahead``): speculative
    ones with ``arguments={"ahead": "speculative"}``, others with ``"once"``."""

    def ahead(self, arguments: Mapping[str, Any], key: Any) -> Ahead | None:
        spelled = arguments.get("ahead")
        return None if spelled is None else Ahead(speculative=spelled == "speculative")


def call(
    call_id: str,
    p: str | None = None,
    mode: str = "r",
    *,
    claims: str | None = None,
    **options: Any,
) -> ToolCall:
    """A call of the tool ``t``: on path ``p`` (``mode`` "r" or "w"), or with the ``claims``
    spelled out (``claims_of``), or undeclared; ``options`` are ``ToolCall``'s (``after=``,
    ``priority=``, ``wait_timeout=``, ``run_timeout=``), or, with ``tool=``, another tool's."""
    name = options.pop("tool", "t")
    arguments: dict[str, Any] = {} if p is None else {"path": p, "mode": mode}
    if claims is not None:
        arguments["claims"] = claims
    arguments.update(options.pop("arguments", {}))
    return ToolCall(call_id, name, arguments, **options)


Task = Generator[str, None, None]
"""A nested call's parent's task, between two awaits (``Harness.nested``)."""


@attrs.define(eq=False)
class Harness:
    """A scheduler with a hand-driven clock and the async layer's bookkeeping, no event loop."""

    now: float = 0.0
    links: dict[str, str] = attrs.field(factory=dict)
    """What a path spelled one way names now (a symlink): ``key("l")`` is ``path(links["l"])``."""
    log: list[str] = attrs.field(factory=list)
    """Every action taken, in order: ``"start w1"``, ``"tell CallQueued w1"``, ``"timer 5"``."""
    spawned: list[str] = attrs.field(factory=list)
    prephases: list[str] = attrs.field(factory=list)
    deadlines: list[float] = attrs.field(factory=list)
    woken: list[str] = attrs.field(factory=list)
    changed: list[str] = attrs.field(factory=list)  # told what an earlier call changed
    told: list[tuple[str, str]] = attrs.field(factory=list)
    revoked: list[str] = attrs.field(factory=list)
    interrupted: list[str] = attrs.field(factory=list)
    runs: list[tuple[str, object]] = attrs.field(factory=list)
    """Each time a tool started: the call, and the state its last run left (``HoldMore``)."""
    heard: list[CallEvent] = attrs.field(factory=list)
    """The events the listener ``open`` adds (``listen=True``) was given."""
    scheduler: Scheduler = attrs.field(init=False)
    records: dict[str, CallRecord] = attrs.field(factory=dict)
    """Every call submitted or made, by id (the latest with that id)."""
    # The async layer's own state, by record: the tasks that run hooks or tools, with a cancel
    # scope (and its deadline), and whether it was cancelled; the approvals being asked.
    scopes: dict[CallRecord, float] = attrs.field(factory=dict)
    cancelled: set[CallRecord] = attrs.field(factory=set)
    prephasing: set[CallRecord] = attrs.field(factory=set)
    asking: dict[CallRecord, Decision] = attrs.field(factory=dict)
    _tasks: dict[CallRecord, Task] = attrs.field(factory=dict)  # nested calls' parents' tasks
    _waits: dict[CallRecord, str] = attrs.field(factory=dict)  # what each of those awaits
    _handles: dict[CallRecord, list[CallRecord]] = attrs.field(factory=dict)  # awaited: callers
    _ready: deque[Callable[[], None]] = attrs.field(factory=deque)  # woken, to go on
    _to_tell: deque[Telling] = attrs.field(factory=deque)
    _telling: bool = False
    _depth: int = 0

    def open(self, *, tools: Sequence[Any] = (), listen: bool = False, **options: Any) -> Harness:
        """Open the scheduler with the tool ``t`` (``tool_wait``/``tool_run``: its limits),
        ``tools`` besides, and ``KernelOptions``; ``listen`` adds a listener noting events."""
        t = PlainTool("t", options.pop("tool_wait", None), options.pop("tool_run", None))
        self.scheduler = Scheduler(
            [t, *tools], KernelOptions(**options), key=self.key, clock=lambda: self.now
        )
        if listen:
            self.scheduler.add_listener(self.heard.append)
        return self

    def key(self, spelled: str) -> Any:
        return path(self.links.get(spelled, spelled))

    # -- taking actions: what ``Kernel._act`` does --------------------------------------------

    @contextmanager
    def _step(self) -> Iterator[None]:
        """One step of the harness: tasks woken during it go on once it is over."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        if self._depth == 0:
            while self._ready:
                self._ready.popleft()()

    def do(self, actions: Sequence[Action]) -> None:
        with self._step():
            for act, payload in actions:
                if act is Act.TELL:
                    event = payload.event
                    self.log.append(f"tell {type(event).__name__} {event.call_id}")
                    self.told.append((type(event).__name__, event.call_id))
                    self._to_tell.append(payload)
                    continue
                if self._to_tell and not self._telling:
                    self._tell()
                self._take(act, payload)
            if self._to_tell and not self._telling:
                self._tell()

    def _tell(self) -> None:
        self._telling = True
        try:
            while self._to_tell:
                record, event = self._to_tell.popleft()
                self.scheduler.report.deliver(record, event)
        finally:
            self._telling = False

    def _take(self, act: Act, record: Any) -> None:
        if act is Act.TIMER:
            deadline = self.scheduler.next_deadline()
            self.log.append(f"timer {deadline:g}")
            self.deadlines.append(deadline)
            return
        self.log.append(f"{act.value} {record.call.id}")
        if act is Act.START:
            self.spawned.append(record.call.id)
        elif act is Act.PREPHASE:
            self.prephases.append(record.call.id)
        elif act is Act.REVOKE:
            self.revoked.append(record.call.id)
        elif act is Act.CHANGED:
            self.changed.append(record.call.id)  # its tool's watch, if any, is woken
        elif act is Act.WAKE:
            self.woken.append(record.call.id)
            if self._waits.get(record) == "leases":  # its parent's task waits for its grant
                self._ready.append(lambda: self._resume(record))
            for caller in self._handles.pop(record, ()):
                self.scheduler.stop_awaiting_handle(caller, record)
        elif record in self.scopes:  # INTERRUPT: its task unwinds
            self.interrupted.append(record.call.id)
            self.cancelled.add(record)
        elif record.stage is not Stage.FINISHED:  # INTERRUPT, and no task runs it
            reason = record.cancel_reason or ASKED
            self.do(self.scheduler.finish_failed(record, Status.CANCELLED, cancelled(reason)))

    # -- submitting, cancelling ---------------------------------------------------------------

    def submit(
        self,
        *calls: ToolCall,
        awaited_by: CallRecord | None = None,
        tools: Sequence[Any] | None = None,
        sink: Callable[[CallEvent], None] | None = None,
    ) -> dict[str, CallRecord]:
        """Submit a batch (``Kernel.submit_batch``; ``awaited_by``: the running call whose tool
        runs it, as ``kernel.run`` from inside a tool); its records by id."""
        with self._step():
            records, actions = self.scheduler.submit(calls, sink, awaited_by, tools)
            self.records.update((r.call.id, r) for r in records)
            self.do(actions)
        return {r.call.id: r for r in records}

    def cancel(self, record: CallRecord, reason: CancelReason = ASKED) -> None:
        self.do(self.scheduler.cancel(record, reason))

    def cancel_all(self) -> None:
        self.do(self.scheduler.cancel_all())

    def close(self) -> None:
        self.do(self.scheduler.close())

    def time_out(self, records: Mapping[str, CallRecord], limit: float) -> None:
        """The time limit of ``run(records, timeout=limit)`` ran out."""
        self.do(self.scheduler.time_out(records.values(), limit))

    # -- hooks and policy: what ``Kernel._prephase_task`` does --------------------------------

    def prephase(self, record: CallRecord, *answers: object) -> None:
        """The call's prephase task runs: its before-hooks answer ``answers``, then the policy
        decides (an ``ASK`` waits in ``asking`` for ``approve``)."""
        assert record.call.id in self.prephases and record not in self.scopes
        with self._step():
            self.scopes[record] = math.inf
            self.prephasing.add(record)
            if self._hooks_and_policy(record, answers):
                self._prephase_done(record)

    def _hooks_and_policy(self, record: CallRecord, answers: tuple[object, ...]) -> bool:
        scheduler = self.scheduler
        for answer in answers:
            if record.stage is not Stage.FINISHED:
                self.do(scheduler.take_before_answer(record, answer))
            if record.stage is Stage.FINISHED:
                self._leave_prephase(record)
                return False
        if record.stage is Stage.HOOKED:
            self.do(scheduler.hooks_answered(record))
        decision = scheduler.policy_verdict(record)
        if not isinstance(decision, Decision):
            self._leave_prephase(record)
            self.do(scheduler.finish_failed(record, *decision))
            return False
        if decision.permission is Permission.ASK:
            self.asking[record] = decision
            return False
        return True

    def approve(self, record: CallRecord, answer: object = True) -> None:
        """The approver answers ``answer`` for a call in ``asking``."""
        decision = self.asking.pop(record)
        with self._step():
            if record in self.cancelled:  # the question was cancelled: the task unwinds
                self._unwind_prephase(record)
                return
            self.do(self.scheduler.take_approval(record, decision, answer))
            if record.stage is not Stage.FINISHED:
                self._prephase_done(record)
            else:
                self._leave_prephase(record)

    def _leave_prephase(self, record: CallRecord) -> None:
        self.scopes.pop(record, None)
        self.prephasing.discard(record)

    def _prephase_done(self, record: CallRecord) -> None:
        self._leave_prephase(record)
        if record in self.cancelled:
            self.cancelled.discard(record)
            reason = record.cancel_reason or ASKED
            self.do(self.scheduler.finish_failed(record, Status.CANCELLED, cancelled(reason)))
        else:
            self.do(self.scheduler.mark_ready(record))

    def _unwind_prephase(self, record: CallRecord) -> None:
        self._leave_prephase(record)
        self.cancelled.discard(record)
        self.asking.pop(record, None)
        reason = record.cancel_reason or ASKED
        self.do(self.scheduler.finish_failed(record, Status.CANCELLED, cancelled(reason)))

    # -- running: what ``Kernel._run_task`` and ``_run_granted`` do ---------------------------

    def begin(self, record: CallRecord) -> None:
        """A granted call's task runs until its tool does: its keys are looked at again if it
        waited (``confirm_keys``); it starts (``start``), and its tool runs."""
        scheduler = self.scheduler
        with self._step():
            if record.parent is None:  # a nested call's parent's task runs it as it is
                if record.stage is Stage.GRANTED:
                    self.do(scheduler.confirm_keys(record))
                if record.stage not in (Stage.FRESH, Stage.GRANTED, Stage.AHEAD):
                    return  # back in line (its keys changed meaning), or finished
            elif record.stage is Stage.FINISHED:
                return
            if record.cancel_reason is not None:  # cancelled between its grant and its start
                self.do(scheduler.finish_failed(record, Status.CANCELLED, cancelled(record)))
                return
            self.runs.append((record.call.id, record.resumed))
            deadline, actions = scheduler.start(record)
            self.do(actions)
            if not finished(record):  # else a listener of its CallStarted cancelled it
                self.scopes[record] = deadline

    def end(self, record: CallRecord, status: Status = Status.OK, output: Any = "done") -> None:
        """The call's tool returns (or its scope was cancelled and it unwinds: ``settle``)."""
        self._ended(record, status, output, None)

    def raise_in(self, record: CallRecord, exception: BaseException) -> None:
        """The call's tool raises ``exception``."""
        self._ended(record, Status.ERROR, None, exception)

    def _ended(
        self, record: CallRecord, status: Status, output: Any, failure: BaseException | None
    ) -> None:
        scheduler = self.scheduler
        with self._step():
            deadline = self.scopes.pop(record)
            if record in self.cancelled or deadline <= self.now:  # the scope caught it
                self.cancelled.discard(record)
                output = None
                if record.cancel_reason is not None:
                    status, failure = Status.CANCELLED, cancelled(record)
                else:
                    limit = scheduler.run_timeout(record) or 0.0
                    status, failure = Status.TIMEOUT, messages.run_timed_out(limit)
            self.do(scheduler.release(record))
            if record.stage is not Stage.FINISHED:  # else its parent ended first
                self.do(
                    scheduler.finish(record, scheduler.make_result(record, status, output, failure))
                )
            if self._waits.get(record) == "tool":
                self._resume(record)

    def run_to_end(self, record: CallRecord, status: Status = Status.OK) -> None:
        """A granted call's task runs it to the end: its tool returns with ``status``."""
        self.begin(record)
        if record in self.scopes:
            self.end(record, status)

    def hold_more(self, record: CallRecord, more: Sequence[Claim], state: object = None) -> None:
        """The call's tool raises ``HoldMore(more, state)``: back in line; run again at once
        if it holds everything already."""
        with self._step():
            self.scopes.pop(record)
            self.do(self.scheduler.hold_more(record, more, state))
            if record.stage is Stage.FRESH:
                self.begin(record)

    def wait_granted(self, record: CallRecord) -> bool:
        """The call's tool awaits ``ctx.wait_granted()`` (``Kernel._wait_granted``): True if
        it goes on at once (granted already, and holding a slot); else it waits for its
        ``WAKE`` (see ``woken``)."""
        self.do(self.scheduler.await_grant(record))
        return record.stage is Stage.RUNNING

    def progress(self, record: CallRecord, message: str, data: Any = None) -> None:
        self.do(self.scheduler.progress(record, message, data))

    def await_handle(self, caller: CallRecord, record: CallRecord) -> None:
        """``caller``'s tool awaits ``record``'s handle (``Kernel._wait_finished``)."""
        with self._step():
            self.do(self.scheduler.await_handle(caller, record))
            if record.stage is Stage.FINISHED:
                self.scheduler.stop_awaiting_handle(caller, record)
            else:
                self._handles.setdefault(record, []).append(caller)

    # -- time passing, tasks unwinding ---------------------------------------------------------

    def settle(self) -> None:
        """Every task whose scope was cancelled (or whose deadline passed) unwinds."""
        with self._step():
            for record in sorted(self.scopes, key=lambda r: r.uid):
                if record not in self.cancelled and self.scopes[record] > self.now:
                    continue
                if record in self.prephasing:
                    self._unwind_prephase(record)
                else:
                    self.end(record)

    def advance(self, to: float) -> None:
        """Time passes until ``to``: the timer expires lease waits; tasks unwind."""
        assert to >= self.now
        self.now = to
        with self._step():
            if self.scheduler.next_deadline() <= to:
                self.do(self.scheduler.expire(to))
            self.settle()

    # -- nested calls: what ``Kernel._call_nested`` does in the parent's task ------------------

    def nested(
        self, parent: CallRecord, p: str | None = None, mode: str = "r", **more: Any
    ) -> CallRecord:
        """``parent``'s tool calls ``t`` on ``p`` (``ctx.call``); the nested call's record. The
        parent's task goes on as far as it can: it waits while the call waits for its leases,
        and for the test to ``end`` its tool."""
        arguments = call("", p, mode, **more).arguments
        assert not isinstance(arguments, str)
        with self._step():
            record, actions = self.scheduler.admit_nested(parent, "t", arguments)
            self.records[record.call.id] = record
            self.do(actions)
            self._tasks[record] = self._call_nested(record)
            self._resume(record)
        return record

    def _resume(self, record: CallRecord) -> None:
        task = self._tasks.get(record)
        if task is None:
            return
        try:
            self._waits[record] = next(task)
        except StopIteration:
            del self._tasks[record]
            self._waits.pop(record, None)

    def _call_nested(self, record: CallRecord) -> Task:
        scheduler = self.scheduler
        try:
            if record.stage is Stage.FINISHED:
                return
            decision = scheduler.policy_verdict(record)  # no before-hooks for nested calls here
            if not isinstance(decision, Decision):
                self.do(scheduler.finish_failed(record, *decision))
                return
            assert decision.permission is Permission.ALLOW, "the harness asks no approver inline"
            for claims, inside in scheduler.nested_requests(record):
                if not finished(record):
                    yield from self._acquire_nested(record, claims, inside=inside)
            if not finished(record):
                self.begin(record)
                if record in self.scopes:
                    yield "tool"  # until the test ends it (``end``, ``settle``)
        finally:
            self.do(scheduler.end_nested(record))

    def _acquire_nested(self, record: CallRecord, claims: tuple[Claim, ...], inside: bool) -> Task:
        actions = self.scheduler.request_nested(record, claims, inside)
        granted = (Act.WAKE, record) in actions  # granted at once, or failed (a deadlock)
        self.do(actions)
        if not granted:
            yield "leases"  # until its WAKE

    # -- reading ------------------------------------------------------------------------------

    def result(self, call_id: str) -> ToolResult:
        result = self.records[call_id].result
        assert result is not None, f"{call_id} has not finished"
        return result

    def status(self, *call_ids: str) -> list[Status | None]:
        """The status of each call, None while unfinished."""
        return [getattr(self.records[i].result, "status", None) for i in call_ids]

    def stages(self, *call_ids: str) -> list[Stage]:
        return [self.records[i].stage for i in call_ids]

    def clear(self) -> None:
        """Forget what was written down so far."""
        for notes in (self.log, self.spawned, self.prephases, self.deadlines, self.woken):
            notes.clear()
        for more in (self.told, self.revoked, self.interrupted, self.heard):
            more.clear()


def finished(record: CallRecord) -> bool:
    """Whether ``record`` has finished (asked again after each step: any step may finish it)."""
    return record.stage is Stage.FINISHED


def cancelled(reason: CancelReason | CallRecord) -> BaseException:
    if isinstance(reason, CallRecord):
        reason = reason.cancel_reason or ASKED
    return messages.cancelled(reason)

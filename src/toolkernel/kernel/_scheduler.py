"""The scheduler: every decision about every call, as synchronous state changes. No event loop.

Lifecycle of one call (states in ``_call.CallState``; every move goes through ``_move``)::

    submit ─admit─► PENDING ─deps, hooks, policy, its turn─► QUEUED ─grant─► RUNNING
                       │                                        │               │
                       └── rejected / denied / skipped / cancelled / timed out ─┴─► FINISHED

- *Admission* (``_admission``): look the tool up, parse and validate the arguments, compute and
  canonicalize the claims, link ``after=`` edges. Every call of a batch is admitted (and its
  ``CallQueued`` emitted) before any of them can finish; failures become results.
- *PENDING*: waits for ``after=`` dependencies (a callback, not a task), then before-hooks and
  the permission policy (the async layer runs a short task only if one of them has to await;
  this module interprets what they answer). Within a batch, calls ask for leases in emission
  order (``_order``).
- *QUEUED*: the request is in the lease table. The call is **not** a task: nothing runs until
  the table grants it, either at once or inside some other call's release. Lease-wait limits
  are kept in a heap (``_deadlines``); the async layer sleeps until the earliest.
- *RUNNING*: the grant asks the async layer to spawn the call's task (nested calls run inline
  in their parent's task). The task confirms the call's path keys, runs the tool in a cancel
  scope carrying the run timeout, and reports back.
- *FINISHED*: ``finish`` is the one way out, whatever happened: it revokes the call's context,
  releases every lease (granting, and so spawning, whoever is next before anything else can
  run), records the result, emits ``CallFinished``, wakes whoever waits, and moves dependents on.

The async layer (``_kernel.py``) gives the scheduler a clock and three callbacks (spawn a call's
task, spawn a pre-phase task, the next lease-wait deadline changed) and hangs its cancel scopes
and events on the records; it never changes a record itself.

The way through when nothing is in the way (no hooks, the default policy, nobody listening, the
leases granted at once) is taken by every call of a large batch, so it is kept short: PENDING
goes straight to RUNNING, the clock is read once per step, records allocate their containers
only when a call needs them, and a finished call leaves behind only what ``after=`` needs.
``benchmarks/overhead.py`` measures it against bare trio.
"""

from __future__ import annotations

import logging
import math
from collections import ChainMap
from collections.abc import Callable, Iterable
from typing import Any, cast

import attrs

from .._errors import KernelClosedError
from ..locks import Path
from . import _messages as messages
from . import _waits as waits
from ._admission import (
    CallNames,
    admit,
    gc_paused_for,
    link_dependencies,
    set_arguments,
    tools_by_name,
)
from ._call import (
    CANCELLED,
    ERROR,
    FINISHED,
    OK,
    PENDING,
    QUEUED,
    RUNNING,
    CallState,
    Status,
    ToolCall,
    ToolResult,
    check_transition,
)
from ._events import CallEvent, CallProgress, CallQueued, CallStarted
from ._leasing import Leasing
from ._nested import NestedCalls
from ._observe import KernelSnapshot, KernelStatistics
from ._options import KernelOptions
from ._order import next_requests
from ._outputs import fill_in
from ._policy import Decision, Permission, RewriteArguments, SupplyResult, allow_all
from ._prephase import approval_verdict, before_hook_verdict, policy_verdict
from ._protocol import KernelTool
from ._record import Batch, CallRecord
from ._report import Reporter
from ._requeue import MAX_REQUEUES, Requeuing
from ._slots import WAITING, Slots

__all__ = ["Scheduler", "MAX_REQUEUES"]

_log = logging.getLogger("toolkernel")


def _limit(own: float | None, tool: Any, name: str, default: float | None) -> float | None:
    if own is not None:
        return own
    by_tool: float | None = getattr(tool, name, None)
    return default if by_tool is None else by_tool


class Scheduler(NestedCalls, Requeuing):
    """All of a kernel's state and every decision about its calls. See the module docstring."""

    def __init__(
        self,
        tools: Iterable[KernelTool],
        options: KernelOptions,
        *,
        key: Callable[[str], Path],
        clock: Callable[[], float],
        spawn_call: Callable[[CallRecord], None],
        spawn_prephase: Callable[[CallRecord], None],
        deadline_changed: Callable[[float], None],
    ) -> None:
        self.tools = tools_by_name(tools)
        self.max_concurrency = options.max_concurrency
        self.slots = Slots(options.max_concurrency)
        self.leasing = Leasing(
            options.pools,
            clock=clock,
            granted=self._granted,
            wait_timeout=self.wait_timeout,
            deadline_changed=deadline_changed,
        )
        self._key = key
        self._now = clock
        self._spawn_call = spawn_call
        self._spawn_prephase = spawn_prephase
        self._policy = options.policy
        self._has_before_hooks = bool(options.before_hooks)
        self._max_depth = options.max_depth
        self._wait_timeout = options.wait_timeout
        self._run_timeout = options.run_timeout
        self._serial = 0
        self._live: dict[int, CallRecord] = {}
        # Top-level calls by id, for ``after=`` and ``cancel``: the unfinished ones, and of the
        # most recent finished ones only what ``after=`` needs (tool name, status, error), so
        # that neither their records nor their outputs stay alive.
        self._names = CallNames()
        self.report = Reporter(self.max_concurrency)
        self._running_tools = 0  # calls between ``start`` and ``finish``
        self._peak_running = 0
        self.closed = False
        self._admitting: Batch | None = None  # the batch ``submit`` is admitting, if any

    # -- submitting and cancelling ----------------------------------------------------------------

    def submit(
        self,
        calls: Iterable[ToolCall],
        sink: Callable[[CallEvent], None] | None,
        awaited_by: CallRecord | None = None,
        tools: Iterable[KernelTool] | None = None,
    ) -> list[CallRecord]:
        """Admit a batch; every call is queued (and says so) before any of them can finish.
        ``awaited_by``: the running call whose tool submits the batch and waits for it;
        ``tools``: tools of this batch alone, found by name before the kernel's own."""
        if self.closed:
            raise KernelClosedError("can't submit calls: the kernel is closed")
        calls = list(calls)
        extra = None if tools is None else tools_by_name(tools)
        with gc_paused_for(len(calls)):
            return self._submit(calls, sink, awaited_by, extra)

    def _submit(
        self,
        calls: list[ToolCall],
        sink: Callable[[CallEvent], None] | None,
        awaited_by: CallRecord | None,
        tools: dict[str, KernelTool] | None = None,
    ) -> list[CallRecord]:
        for call in calls:  # all or nothing: check everything before admitting anything
            if not isinstance(call, ToolCall):
                raise TypeError(f"expected ToolCall, got {type(call).__name__}")
        self._serial += 1
        batch = Batch(self._serial, len(calls), self._serial + 1)
        batch.tools = None if tools is None else ChainMap(tools, self.tools)
        now = self._now()  # the batch is admitted at one moment
        # When every call is ready the moment it is admitted (no hooks, the default policy, no
        # after=), the calls ask for their leases in emission order straight away: none can be
        # held back behind an earlier one that has not asked yet, so the batch keeps no list of
        # who has not (``_order``).
        in_order = (
            not self._has_before_hooks
            and self._policy is allow_all
            and not any(call.after for call in calls)
        )
        records = [self._new_record(call, batch, now, in_order) for call in calls]
        if awaited_by is not None and awaited_by.result is None:
            # A tool waiting for calls of its own kernel: if one of them waits for its leases,
            # a cycle through it is found and broken like a nested call's (``_nested``).
            batch.awaited_by = awaited_by
            awaited_by.awaiting = (awaited_by.awaiting or set()) | set(records)
        if self._has_before_hooks:
            for record in records:
                record.provisional = True
        if sink is not None:
            for record in records:
                record.sinks = (sink,)
        failures: dict[int, tuple[Status, BaseException]] = {}
        for record in records:
            failure = self._admit(record)
            if failure is not None:
                failures[record.uid] = (ERROR, failure)
        link_dependencies(records, failures, self._names)
        announced = bool(self.report.listeners) or sink is not None
        if announced:  # build no events when nobody listens
            batch.announcing = True  # a listener cancelling a call now is heard after this
            try:
                for record in records:
                    claims = record.claims or ()
                    self.report.emit(record, CallQueued(record.call.id, record.name, now, claims))
            finally:
                batch.announcing = False
        for record in records:
            failed = failures.get(record.uid)
            if failed is None and announced and record.cancel_reason is not None:
                failed = (CANCELLED, messages.cancelled(record.cancel_reason))
            if failed is not None:
                self.finish_failed(record, *failed)
        self._admitting = batch
        try:
            if in_order:
                for record in records:
                    if record.state is PENDING:  # not failed, nor cancelled by a listener
                        record.ready = True
                        self._request_top_level(record)
                return records
            for record in records:
                if record.state is not PENDING or record.deps_left:
                    continue
                if record.unfilled is None or self._fill_in(record):
                    self._begin_prephase(record)
            self._issue_requests(batch)
        finally:
            self._admitting = None
        return records

    def is_live(self, record: CallRecord) -> bool:
        """Whether ``record`` is an unfinished call of this scheduler's."""
        return self._live.get(record.uid) is record

    def live_call(self, call_id: str) -> CallRecord | None:
        """The unfinished top-level call with this id, if any."""
        return self._names.live.get(call_id)

    def cancel(self, record: CallRecord, reason: str) -> None:
        """Cancel a call (synchronous); it finishes CANCELLED, now or when its task unwinds."""
        if record.result is not None:
            return
        if record.cancel_reason is None:
            record.cancel_reason = reason
        if record.batch.announcing:
            return  # its batch is being announced: it finishes once every call is (``_submit``)
        if record.scope is not None:
            record.scope.cancel()  # the pre-phase or running task finishes it
        else:
            # Pending, queued, granted with its task not started yet (the task then finds it
            # finished and does nothing: on asyncio a task cancelled before it starts never
            # runs at all), or a nested call between two steps of its parent's task.
            self.finish_failed(record, CANCELLED, messages.cancelled(reason))
        for child in sorted(record.awaiting or (), key=lambda r: r.uid):
            self.cancel(child, f"cancelled with its parent call {record.call.id}")

    def time_out(self, records: Iterable[CallRecord], limit: float) -> None:
        """The time limit of the batch of ``records`` ran out: each unfinished one is cancelled
        and ends TIMEOUT (``make_result``); the results of those that finished are kept."""
        for record in records:
            if record.result is None:
                record.batch.time_limit = limit
                self.cancel(record, messages.OUT_OF_TIME)

    def cancel_all(self, reason: str = "cancelled") -> None:
        """Cancel every unfinished call."""
        for record in sorted(self._live.values(), key=lambda r: r.uid):
            self.cancel(record, reason)

    def close(self) -> None:
        """Refuse new calls and cancel every unfinished one."""
        self.closed = True
        self.cancel_all("cancelled: the kernel is closing")

    # -- admission ------------------------------------------------------------------------------

    def _new_record(
        self,
        call: ToolCall,
        batch: Batch,
        now: float,
        in_order: bool = False,
        parent: CallRecord | None = None,
    ) -> CallRecord:
        self._serial += 1
        # Positional arguments, here and for the other objects made for every call: an attrs
        # class called with keywords costs twice as much (the keywords go through a dict).
        record = CallRecord(
            call,
            self._serial,  # uid
            batch,
            now,  # queued_at
            now,  # state_since
            parent,
            0 if parent is None else parent.depth + 1,  # depth
        )
        self._live[record.uid] = record
        if parent is None:
            self._names.add(record)
        if not in_order:
            batch.unrequested[record.uid] = record
        return record

    def _admit(self, record: CallRecord) -> BaseException | None:
        tools = record.batch.tools or self.tools
        return admit(record, tools, self._key, self.leasing.pools)

    def _fill_in(self, record: CallRecord) -> bool:
        """Fill a call's placeholders from its finished sources and admit its arguments; False
        if that failed it."""
        results = {i: r.result for i, r in (record.sources or {}).items() if r.result is not None}
        arguments, record.unfilled, record.sources = record.unfilled, None, None
        failure = set_arguments(record, fill_in(arguments, results), self._key, self.leasing.pools)
        if failure is not None:
            self.finish_failed(record, ERROR, failure)
            return False
        return True

    # -- pre-phase: dependencies, hooks and policy ------------------------------------------------

    def _begin_prephase(self, record: CallRecord) -> None:
        if self._has_before_hooks:
            self._spawn_prephase(record)
            return
        if self._policy is allow_all:  # it allows everything: don't ask it, call by call
            self.mark_ready(record)
            return
        decision = self.decide(record)
        if decision is None:
            return  # finished: denied, or the policy failed
        if decision.permission is Permission.ALLOW:
            self.mark_ready(record)
        else:
            self._spawn_prephase(record)  # ASK: someone has to be asked, and that takes a task

    def visible_call(self, record: CallRecord) -> ToolCall:
        """The call as hooks and the policy see it: with its parsed arguments."""
        return attrs.evolve(record.call, arguments=dict(record.arguments))

    def take_before_answer(self, record: CallRecord, answer: object) -> bool:
        """Act on what a before-hook answered; False if that finished the call."""
        verdict = before_hook_verdict(answer)
        if verdict is None:
            return True
        if isinstance(verdict, SupplyResult):
            self.finish(record, self.make_result(record, OK, verdict.output))
            return False
        if isinstance(verdict, RewriteArguments):
            failure = set_arguments(record, verdict.arguments, self._key, self.leasing.pools)
            if failure is None:
                return True
            verdict = (ERROR, failure)
        self.finish_failed(record, *verdict)
        return False

    def hooks_answered(self, record: CallRecord) -> None:
        """Every before-hook has answered: ``record``'s claims are final, so later calls of its
        batch that do not conflict with them need not wait for it any more."""
        record.provisional = False
        if record.parent is None and record.batch.unrequested:
            self._issue_requests(record.batch)

    def decide(self, record: CallRecord) -> Decision | None:
        """Ask the policy; None if that finished the call (denied, or the policy failed)."""
        # The default policy ignores the call: don't copy its arguments for it.
        call = record.call if self._policy is allow_all else self.visible_call(record)
        verdict = policy_verdict(self._policy, call)
        if isinstance(verdict, Decision):
            return verdict
        self.finish_failed(record, *verdict)
        return None

    def take_approval(self, record: CallRecord, decision: Decision, answer: object) -> bool:
        """Act on an approver's answer; False if that finished the call."""
        verdict = approval_verdict(answer, record.name, decision.reason)
        if verdict is None:
            return True
        self.finish_failed(record, *verdict)
        return False

    def mark_ready(self, record: CallRecord) -> None:
        """Hooks and policy are done: the call may request its leases when its turn comes."""
        record.ready = True
        batch = record.batch
        if record.uid > batch.last_ready:
            batch.last_ready = record.uid
        if record.parent is None:
            self._issue_requests(batch)

    # -- requesting and granting -----------------------------------------------------------------

    def _issue_requests(self, batch: Batch) -> None:
        for record in next_requests(batch):
            # A listener (say, on the CallBlocked of an earlier one) may have cancelled it.
            if record.state is PENDING:
                self._request_top_level(record)

    def _request_top_level(self, record: CallRecord) -> None:
        self.leasing.request_top_level(record)
        if record.waiting_in is not None:
            self._move(record, QUEUED, self._now())
            self.report.blocked(record, self._now())
            self._break_wait_cycles()

    def _granted(self, record: CallRecord) -> None:
        """Leases granted: start the call if it gets a slot (nested calls need none: their
        parent's task runs them)."""
        if record.granted is not None:
            if record.waiting_in is not None:
                self.leasing.stop_waiting(record)
            record.granted.set()
            return
        waited, record.waiting_in = record.waiting_in is not None, None
        if record.batch is self._admitting:
            record.keys_fresh = True
        # A call a running call's tool awaits takes no slot: it runs in the slot of the call
        # waiting for it (which would otherwise wait for a slot it holds itself).
        if record.batch.awaited_by is not None or self.slots.take(record):
            if record.wait_token:
                self.leasing.stop_wait_clock(record)
            self._move(record, RUNNING, self._now())
            self._spawn_call(record)
        elif not waited:  # it holds its leases, and waits for a running call to finish
            self._move(record, QUEUED, self._now())
            self.report.blocked(record, self._now())
            self.leasing.start_wait_clock(record)
        # else its wait limit runs on: it covers the wait for leases and for a slot together

    def _hand_slot_on(self, record: CallRecord) -> None:
        """``record`` gives up its slot (or its place in line for one)."""
        if record.slot == WAITING:
            self.leasing.stop_wait_clock(record)
        nxt = self.slots.give_back(record)
        if nxt is not None:
            self.leasing.stop_wait_clock(nxt)
            self._move(nxt, RUNNING, self._now())
            self._spawn_call(nxt)

    def release(self, record: CallRecord) -> None:
        """Revoke the call's context, give back every lease and withdraw every request; whoever
        is next is granted (and started) before this returns. Idempotent."""
        if record.awaiting:
            self.end_children(record)
        context = record.context
        if context is not None:
            record.context = None
            context.close()
        self.leasing.release(record)

    # -- running ----------------------------------------------------------------------------------

    def start(self, record: CallRecord) -> float:
        """The tool is about to run; returns the deadline of its run (``inf`` for none)."""
        started_at = record.started_at = self._now()
        running = self._running_tools = self._running_tools + 1
        if running > self._peak_running:
            self._peak_running = running
        if record.state is not RUNNING:
            self._move(record, RUNNING, started_at)
        if self.report.listeners or record.sinks:
            self.report.emit(record, CallStarted(record.call.id, record.name, started_at))
        timeout = self.run_timeout(record)
        return math.inf if timeout is None else started_at + timeout

    def take_after_answer(
        self, record: CallRecord, result: ToolResult, answer: object
    ) -> ToolResult:
        """What an after-hook's answer makes of ``result``."""
        if answer is None:
            return result
        if isinstance(answer, ToolResult):
            return answer
        error = messages.hook_answer("an after-hook", answer, "a ToolResult or None")
        return self.make_result(record, ERROR, None, error)

    # -- finishing: the one way out ----------------------------------------------------------------

    def make_result(
        self,
        record: CallRecord,
        status: Status,
        output: Any = None,
        exception: BaseException | None = None,
    ) -> ToolResult:
        call = record.call
        if status is CANCELLED and record.cancel_reason is messages.OUT_OF_TIME:
            status, exception = Status.TIMEOUT, self._out_of_time(record)
        if exception is None:
            error = error_type = None
        else:
            error, error_type = messages.describe(exception), type(exception).__name__
        return ToolResult(  # positionally, as in ``_new_record``
            call.id,
            call.name,
            status,
            output,
            error,
            record.queued_at,
            record.started_at,
            self._now(),  # finished_at
            error_type,
            exception,
        )

    def _out_of_time(self, record: CallRecord) -> BaseException:
        """Why a call cut short by its batch's time limit ended: where it was then."""
        limit = record.batch.time_limit or 0.0
        if record.started_at is not None:
            return messages.batch_timed_out(limit, self._now() - record.started_at, "")
        queued = record.state is QUEUED
        behind = waits.describe_waits(record, self.max_concurrency) if queued else ""
        return messages.batch_timed_out(limit, None, behind)

    def finish_failed(self, record: CallRecord, status: Status, exception: BaseException) -> None:
        self.finish(record, self.make_result(record, status, None, exception))

    def finish(self, record: CallRecord, result: ToolResult) -> None:
        """Give ``record`` its result: release, record, tell, wake, move dependents on.

        Dependents skipped because it failed are finished in this same loop, not by recursion:
        a chain of thousands of ``after=`` calls whose head fails ends in one pass."""
        if record.result is not None:
            return
        self._settle(record, result)
        done = [record]
        while done:
            record = done.pop()
            result = cast(ToolResult, record.result)
            for dependent in record.dependents or ():
                if dependent.result is not None:
                    continue
                if result.status is not OK:
                    why = messages.dependency_failed(
                        record.call.id, record.name, result.status, result.error
                    )
                    self._settle(dependent, self.make_result(dependent, Status.SKIPPED, None, why))
                    done.append(dependent)
                else:
                    assert dependent.deps_left is not None
                    dependent.deps_left.discard(record.uid)
                    if dependent.deps_left:
                        continue
                    if dependent.unfilled is None or self._fill_in(dependent):
                        self._begin_prephase(dependent)
            if record.parent is None:
                self._names.forget(record, result.status, result.error)
                batch = record.batch
                if batch.unrequested:  # else every call of the batch has asked already
                    self._issue_requests(batch)

    def _settle(self, record: CallRecord, result: ToolResult) -> None:
        """Release, record, tell and wake for one call (``finish`` moves its dependents on)."""
        if record.slot:  # first, so a call waiting for a slot goes before those granted now
            self._hand_slot_on(record)
        if record.lease_group or record.waiting_in or record.context is not None:
            self.release(record)
        if record.started_at is not None:
            self._running_tools -= 1
        self._move(record, FINISHED, result.finished_at)
        record.result = result
        del self._live[record.uid]
        batch = record.batch
        if batch.unrequested:
            batch.unrequested.pop(record.uid, None)
        self.report.finished(record, result)
        if record.finished is not None:
            record.finished.set()
        if record.granted is not None:
            record.granted.set()  # a nested call: its parent's task goes on
        if batch.awaited_by is not None and batch.awaited_by.awaiting:
            batch.awaited_by.awaiting.discard(record)
        batch.unfinished -= 1
        if batch.unfinished == 0 and batch.done is not None:
            batch.done.set()

    # -- timeouts ----------------------------------------------------------------------------------

    def wait_timeout(self, record: CallRecord) -> float | None:
        """How long ``record`` may wait for its leases: its own limit, its tool's, the kernel's."""
        return _limit(record.call.wait_timeout, record.tool, "wait_timeout", self._wait_timeout)

    def run_timeout(self, record: CallRecord) -> float | None:
        """How long ``record`` may run: its own limit, its tool's, or the kernel's."""
        return _limit(record.call.run_timeout, record.tool, "run_timeout", self._run_timeout)

    def next_deadline(self) -> float:
        """When the earliest lease wait runs out (``inf`` if none is timed)."""
        return self.leasing.next_deadline()

    def expire(self, now: float) -> None:
        """Fail the calls whose lease wait ran out by ``now``."""
        for record in self.leasing.expired(now):
            if record.result is None and record.state is QUEUED:
                behind = waits.describe_waits(record, self.max_concurrency)
                limit = self.wait_timeout(record) or 0
                error = messages.wait_timed_out(limit, behind)
                self.finish_failed(record, Status.TIMEOUT, error)

    # -- observing ---------------------------------------------------------------------------------

    def _move(self, record: CallRecord, state: CallState, now: float) -> None:
        """Move ``record`` to ``state`` at time ``now`` (the caller's: reading the clock once
        per step, not once per move, is a measurable part of a call's cost)."""
        check_transition(record.call.id, record.state, state)
        record.state = state
        record.state_since = now

    def progress(self, record: CallRecord, message: str, data: Any) -> None:
        if self.report.listeners or record.sinks:
            event = CallProgress(record.call.id, record.name, self._now(), message, data)
            self.report.emit(record, event)

    def snapshot(self) -> KernelSnapshot:
        """What runs, what waits for leases (and behind whom), what is pending."""
        return self.report.snapshot(self._live)

    def statistics(self) -> KernelStatistics:
        """Counts by state; per tool: count, errors by type, wait and run percentiles; peak
        concurrency; lease contention per resource."""
        return self.report.statistics(self._live, self._peak_running)

"""The scheduler: every decision about every call, as synchronous state changes. No event loop.

Lifecycle of one call (public states in ``_call.CallState``; the record keeps one finer
``_record.Stage`` that every question is answered from, and every move goes through ``move``)::

    submit ─admit─► PENDING ─deps, hooks, policy, its turn─► QUEUED ─grant─► RUNNING
                       │                                        │               │
                       └── rejected / denied / skipped / cancelled / timed out ─┴─► FINISHED

    stages:   HOOKED → PENDING → READY → QUEUED → HELD or FOR_SLOT → FRESH or GRANTED → RUNNING
              (each step but the last may be skipped; any stage may end FINISHED)
    ahead:    QUEUED → AHEAD → (AWAITING → AWAITING_SLOT →) RUNNING
              (its tool runs before the grant, waits for it holding no slot, goes on with one)

- *Admission* (``_admission``): look the tool up, parse and validate the arguments, compute and
  canonicalize the claims, link ``after=`` edges. Every call of a batch is admitted (and its
  ``CallQueued`` emitted) before any of them can finish; failures become results.
- *PENDING*: waits for ``after=`` dependencies (a callback, not a task), then before-hooks and
  the permission policy (the async layer runs a short task only if one of them has to await;
  this module interprets what they answer). Within a batch, calls ask for leases in emission
  order (``next_requests``, below).
- *QUEUED*: the request is in the lease table. The call is **not** a task: nothing runs until
  the table grants it, either at once or inside some other call's release. Lease-wait limits
  are kept in a heap (``_leasing.Deadlines``); the async layer sleeps until the earliest.
- *RUNNING*: the grant asks the async layer to start the call's task (nested calls run inline
  in their parent's task). The task confirms the call's path keys, runs the tool in a cancel
  scope carrying the run timeout, and reports back.
- *Running ahead* (``_ahead``): a queued call whose tool answers ``ahead(arguments, key)``
  may be started before its grant, its request still waiting in the table at its place, when
  a slot is free and nothing earlier it conflicts with can change what it reads before it
  commits (``may_run_ahead``; looked at again whenever a call is queued or finishes or a slot
  is given back, at the hand-over of an operation's actions). Its tool awaits its grant
  (``await_grant``) before it makes anything visible, giving its slot back meanwhile, within
  its lease-wait limit; calls it conflicts with that release their leases meanwhile are noted
  for it, with what they changed (``changed_meanwhile``). Its keys are not looked at again
  after the grant: what it commits is keyed by its tool, entry by entry, when it commits.
- *FINISHED*: ``finish`` is the one way out, whatever happened: it has the call's context
  revoked, releases every lease (granting, and so spawning, whoever is next before anything else can
  run), records the result, emits ``CallFinished``, wakes whoever waits, and moves dependents on.

The scheduler never calls into the async layer (``_kernel.py``): every operation that changes
what runs returns the :mod:`~toolkernel.kernel._actions` the async layer must take (start a
call's task, await its hooks, interrupt it, wake its waiters, move the timer), in the order
decided. The async layer gives it a clock, keeps its cancel scopes, events and the calls' contexts
itself, and never changes a record: this module is the only writer of a call's record (h11's
rule), nested calls and a call's going back in line included. What a call holds and waits for
(its leases, the table it waits in, its wait limit, its slot) is the record's ``Hold``, kept by
``_leasing`` and written by it alone; admission returns what it found (a tool, arguments and
claims, whom a call waits for) and this module sets it. ``tests/kernel/test_one_writer.py``
checks both from the sources. Listeners are never called from
here: events come back as ``TELL`` actions, given once the operation has returned, so a
listener that cancels or submits calls starts an operation of its own on a settled scheduler.

This module holds, besides the :class:`Scheduler`, the pure rules it decides with that have no
other user: which ready calls of a batch may ask for their leases (emission order), and what a
before-hook, the policy or an approver answered. Nested calls (``ctx.call``: admitted like any
call, run inline in their parent's task, claims its leases cover requested in its own lease
group) and a granted call's going back in line (its paths changed meaning, or its tool asked to
hold more) are sections of the scheduler itself.

The way through when nothing is in the way (no hooks, the default policy, nobody listening, the
leases granted at once) is taken by every call of a large batch, so it is kept short, and it is
measured against the least executor built from the same pieces (``benchmarks/overhead.py``, its
floor; ``callgrind`` counts instructions where a shared machine makes timings noisy). What was
chosen, and why:

- A ready batch requests in one pass (``_request_in_order``): a call granted at once with a
  free slot is FRESH and started in the step that admitted it, one without a slot is HELD with
  its wait noted as the slots' (nobody to ask whom it waits behind); only a call that waits
  for leases takes the general way. PENDING goes straight on, the clock is read once per
  step, records allocate their containers only when a call needs them, and a finished call
  leaves behind only what ``after=`` needs.
- A call's end is one operation (``complete``: release, result, finish), acted on once, and a
  finished call with no dependents skips the work list ``_finish`` keeps for chains of them.
- A batch is keyed through one ``_admission.KeyLog``, not a closure per call.
- Tried and dropped: interning a call's claims with one dictionary look-up instead of two
  (the benchmark's paths, like an agent's, repeat, so the look-up nearly always hits, and it
  measured no better). Not done: asking the lease table once for a whole batch; what a request
  costs is mostly its walk down the trie, which calls on distinct files do not share.
"""

from __future__ import annotations

import logging
import math
from collections import ChainMap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import takewhile
from typing import Any, cast

import attrs

from .._errors import InvalidBatchError, InvalidCallError, InvalidClaimError, KernelClosedError
from ..locks import Claim, LeaseTableStatistics, Mode, Path, claims_conflict, path
from . import _leasing as leasing
from . import _messages as messages
from ._actions import (
    CHANGED,
    INTERRUPT,
    NO_ACTIONS,
    PREPHASE,
    REVOKE,
    START,
    TELL,
    TIMER,
    WAKE,
    Action,
    Telling,
)
from ._admission import (
    CallNames,
    KeyLog,
    Links,
    Unfilled,
    admit,
    compute_claims,
    fill_in,
    gc_paused_for,
    keys_unchanged,
    link_dependencies,
    parse,
    skip,
    split_by_cover,
    tools_by_name,
    with_more,
)
from ._ahead import Ahead, ChangedMeanwhile
from ._call import CANCELLED, ERROR, OK, CallState, Status, ToolCall, ToolResult, malformed
from ._events import CallEvent, CallProgress, CallQueued, CallStarted, KernelListener
from ._leasing import Leasing, Slots
from ._messages import ASKED, OUT_OF_TIME, CancelReason, RootCause, Why
from ._observe import KernelSnapshot, KernelStatistics, Reporter
from ._options import KernelOptions
from ._policy import (
    Block,
    Decision,
    Permission,
    RewriteArguments,
    SupplyResult,
    allow_all,
    as_decision,
)
from ._protocol import KernelTool
from ._record import (
    AHEAD,
    AWAITING,
    AWAITING_SLOT,
    FINISHED,
    FOR_SLOT,
    FRESH,
    GRANTED,
    HELD,
    HOOKED,
    MOVES,
    PENDING,
    QUEUED,
    READY,
    RUNNING,
    Batch,
    CallRecord,
    Stage,
    illegal_move,
)

__all__ = [
    "Scheduler",
    "MAX_REQUEUES",
    "Refusal",
    "before_hook_verdict",
    "policy_verdict",
    "approval_verdict",
    "next_requests",
    "may_conflict",
    "may_run_ahead",
]


# -- Emission order: which ready calls of a batch may ask for their leases now. Pure --------------
# The lease table is FIFO among conflicting requests, so a batch's calls keep the model's order
# if they *request* in that order. But calls become ready at different times (a before-hook or an
# approval may take a while, ``after=`` may hold one back), so a call does not request while an
# earlier call of its batch that may conflict with it is still pending: an approval for one call
# never lets a later conflicting call jump ahead of it. Calls that cannot conflict with anything
# earlier and pending request at once.
#
# A call whose before-hooks have not all answered may conflict with anything: a hook may rewrite
# its arguments, and with them its claims.
#
# One exception: ``after=`` wins over emission order. If holding a call back for an earlier one
# would make the earlier one wait (through ``after=`` and this very rule) for the held-back call,
# as in ``[edit(a, after=c2), c2: edit(a)]``, the later call goes first.
def next_requests(batch: Batch) -> list[CallRecord]:
    """The calls of ``batch`` that may request their leases now, in emission order; they are
    taken out of ``batch.unrequested``. Calls no longer pending are dropped from it too."""
    unrequested = batch.unrequested
    if not unrequested:  # every call of the batch has asked already
        return []
    # Calls past the last ready one would only be added to ``ahead``: leave them unvisited.
    last = batch.last_ready
    head = batch.head
    while head <= last and head not in unrequested:
        head += 1
    batch.head = head
    if head > last:
        return []  # no call up to the last ready one is left to ask
    if head == last:
        # The common case (a batch being submitted, a call after its turn came): the only call
        # to visit is the last ready one, and nobody of the batch is ahead of it.
        record = unrequested[head]
        if record.stage is READY:
            del unrequested[head]
            return [record]
        if record.state is not CallState.PENDING:
            del unrequested[head]
        return []
    ahead: list[CallRecord] = []
    found: list[CallRecord] = []
    for record in list(takewhile(lambda r: r.uid <= last, unrequested.values())):
        if record.state is not CallState.PENDING:
            del unrequested[record.uid]
        elif record.stage is READY and not any(holds_back(earlier, record) for earlier in ahead):
            del unrequested[record.uid]
            found.append(record)
        else:
            ahead.append(record)
    return found


def holds_back(earlier: CallRecord, record: CallRecord) -> bool:
    """Whether ``earlier``, a pending call of the batch, keeps ``record`` from requesting.

    It does if they may conflict, unless ``earlier`` may itself be waiting for ``record``
    (through ``after=`` and this very rule): holding ``record`` back would then deadlock.
    """
    if not may_conflict(record.table_claims, _known_claims(earlier)):
        return False
    return not (record.batch.has_deps and _may_wait_for(earlier, record))


def _may_wait_for(start: CallRecord, target: CallRecord) -> bool:
    """True if ``start`` may wait for ``target`` along ``after=`` edges and hold-backs."""
    batch = start.batch
    seen = {start.uid}
    stack = [start]
    while stack:
        current = stack.pop()
        # Dependencies that requested already, or live in older batches, wait in the lease
        # table only for requests older than ``target``'s (which has not requested): skip them.
        following = [
            batch.unrequested[uid] for uid in current.deps_left or () if uid in batch.unrequested
        ]
        for other in batch.unrequested.values():
            if other.uid >= current.uid:
                break
            if other.state is CallState.PENDING and may_conflict(
                _known_claims(current), _known_claims(other)
            ):
                following.append(other)
        for nxt in following:
            if nxt is target:
                return True
            if nxt.uid not in seen:
                seen.add(nxt.uid)
                stack.append(nxt)
    return False


def _known_claims(record: CallRecord) -> tuple[Claim, ...] | None:
    """A pending call's claims, or None while a before-hook may still rewrite its arguments
    (and so its claims): until then it may conflict with anything."""
    return None if record.stage is HOOKED else record.table_claims


def may_conflict(claims: tuple[Claim, ...] | None, earlier: tuple[Claim, ...] | None) -> bool:
    """Whether two claim sets may conflict (unknown claims may conflict with anything)."""
    if claims is None or earlier is None:
        return True
    return any(claims_conflict(a, b) for a in claims for b in earlier)


# -- Running ahead of the grant: whether a queued call may start before its leases are granted --
# (``_ahead`` says why that is sound for a tool that commits its writes under its leases). Pure.
# A call may pass an earlier unfinished call it conflicts with only where that call can't change
# what it reads before it commits: where every conflict between them is the earlier call reading
# what this one writes (it commits after that reader, in the table's order; for a call that is
# not speculative, which can't run again, only a reader that writes no path at all, since what
# such a call may have read is the whole workspace), or, for a
# speculative call, where the earlier call runs ahead itself (what it writes lands at its commit,
# which this call is told of at its grant, and validates against). A call claiming anything but
# paths never runs ahead: only the workspace has writes that wait for a commit.
#
# "Earlier" is what this kernel knows: its own calls emitted before, those of a higher priority,
# and every nested call (they request at a raised priority, ahead of it). Calls of other agents,
# through a lease service shared with them, are ordered by the table alone: the call's request
# waits there at its place, and its commit waits for its grant (and its shared leases).
def may_run_ahead(record: CallRecord, earlier: Iterable[CallRecord]) -> bool:
    """Whether ``record``, queued, may start before its grant, given the unfinished calls
    ``earlier`` than it (see above)."""
    ahead = record.ahead
    if ahead is None or record.handle_waiters:
        return False  # a call whose handle a running call awaits runs in that call's slot
    # A speculative call is validated against what its claims may read; one that is not passes
    # only readers, of anything it may commit.
    mine = record.claims if ahead.speculative else record.table_claims
    if not mine or not all(isinstance(c.resource, Path) for c in mine):
        return False
    for other in earlier:
        theirs = _known_claims(other)
        if theirs is None:
            return False  # its hooks may still give it any claims
        for claim in mine:
            for their in theirs:
                if not claims_conflict(claim, their):
                    continue
                if (
                    their.mode is Mode.SHARED
                    and claim.mode is Mode.EXCLUSIVE
                    and (ahead.speculative or not _writes_paths(theirs))
                ):
                    continue  # it reads what this call writes: this call commits after it
                if ahead.speculative and other.ahead is not None:
                    continue  # its writes land at its commit, which this call validates against
                return False
    return True


def _writes_paths(claims: tuple[Claim, ...]) -> bool:
    return any(c.mode is Mode.EXCLUSIVE and isinstance(c.resource, Path) for c in claims)


# -- What before-hooks, the permission policy and the approver answered, and what it means for ----
# the call. Pure: the async layer awaits them, these functions read their answers, and the
# scheduler acts on the verdict.
#
# A verdict is None (go on), or a refusal: the status and the exception the call finishes with.
# Whatever misbehaves (raises, or answers with the wrong type) is a clear failure of that call,
# never an exception out of the kernel; a misbehaving policy fails closed (DENIED).
Refusal = tuple[Status, BaseException]
"""How a refused call finishes: its status, and the exception its result carries."""


def before_hook_verdict(answer: object) -> Refusal | SupplyResult | RewriteArguments | None:
    """A before-hook's answer: None (go on), new arguments, a supplied result, or a refusal."""
    if answer is None or isinstance(answer, SupplyResult | RewriteArguments):
        return answer
    if isinstance(answer, Block):
        return Status.DENIED, messages.blocked(answer.reason)
    expected = "None, Block, SupplyResult or RewriteArguments"
    return Status.ERROR, messages.hook_answer("a before-hook", answer, expected)


def policy_verdict(policy: Callable[[ToolCall], object], call: ToolCall) -> Decision | Refusal:
    """Ask ``policy`` about ``call``: its decision to allow or ask, or a refusal."""
    try:
        answer = policy(call)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit included: the policy's bug, this call's denial
        failure = messages.hook_failed("the permission policy", exc)
        return Status.DENIED, messages.policy_failed(call.name, failure)
    decision = as_decision(answer)
    if decision is None:
        failure = messages.hook_answer("the permission policy", answer, "a Decision")
        return Status.DENIED, messages.policy_failed(call.name, failure)
    if decision.permission is Permission.DENY:
        return Status.DENIED, messages.denied(call.name, decision.reason)
    return decision


def approval_verdict(answer: object, name: str, reason: str) -> Refusal | None:
    """An approver's answer: None if it approved, else the refusal (anything but a bool is
    the approver's error: a truthy ``"no"`` must not approve)."""
    if answer is True:
        return None
    if answer is False:
        return Status.DENIED, messages.not_approved(name, reason)
    return Status.ERROR, messages.hook_answer("the approver", answer, "True or False")


_log = logging.getLogger("toolkernel")

MAX_REQUEUES = 3
"""How often a call may go back to the queue (its paths changed meaning, its tool asked for
more) before it fails."""


# -- The scheduler --------------------------------------------------------------------------------
def _limit(own: float | None, tool: Any, name: str, default: float | None) -> float | None:
    if own is not None:
        return own
    by_tool: float | None = getattr(tool, name, None)
    return default if by_tool is None else by_tool


class Scheduler:
    """All of a kernel's state and every decision about its calls. See the module docstring."""

    def __init__(
        self,
        tools: Iterable[KernelTool],
        options: KernelOptions,
        *,
        key: Callable[[str], Path],
        clock: Callable[[], float],
    ) -> None:
        self.tools = tools_by_name(tools)
        self.max_concurrency = options.max_concurrency
        self.slots = Slots(options.max_concurrency)
        # What the async layer must do, gathered as decided; each operation hands it over.
        self._out: list[Action] = []
        # The events decided since then (``TELL``): handed over ahead of the rest, in order.
        self._told: list[Action] = []
        self.leasing = Leasing(options.pools, clock=clock)
        self.key = key
        self.now = clock
        self._max_depth = options.max_depth
        self._policy = options.policy
        self._has_before_hooks = bool(options.before_hooks)
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
        # Running ahead (``may_run_ahead``): queued calls whose tools may run them ahead, those
        # running ahead and not granted yet, whether a change since the last look may let one
        # start (a call queued or finished, a slot given back), and how many did.
        self._ahead_queued: dict[int, CallRecord] = {}
        self._ahead_running: dict[int, CallRecord] = {}
        self._ahead_dirty = False
        self._ran_ahead = 0
        self._ahead_thrown_away = 0

    def _take(self) -> Sequence[Action]:
        """Hand over what was decided since the last hand-over: its events first."""
        if self._ahead_dirty:
            self._start_ahead()
        out, told = self._out, self._told
        if told:
            self._told = []
            if out:
                self._out = []
                return told + out
            return told
        if not out:
            return NO_ACTIONS
        self._out = []
        return out

    def _start_wait_clock(self, record: CallRecord) -> None:
        """Start ``record``'s wait limit; the async layer's timer wakes earlier if it must."""
        if self.leasing.start_wait_clock(record, self.wait_timeout(record)):
            self._out.append((TIMER, None))

    # -- submitting and cancelling ----------------------------------------------------------------

    def submit(
        self,
        calls: Iterable[ToolCall],
        sink: Callable[[CallEvent], None] | None,
        awaited_by: CallRecord | None = None,
        tools: Iterable[KernelTool] | None = None,
    ) -> tuple[list[CallRecord], Sequence[Action]]:
        """Admit a batch; every call is queued (and says so) before any of them can finish.
        ``awaited_by``: the running call whose tool submits the batch and waits for it;
        ``tools``: tools of this batch alone, found by name before the kernel's own."""
        if self.closed:
            raise KernelClosedError("can't submit calls: the kernel is closed")
        calls = list(calls)
        extra = None if tools is None else tools_by_name(tools)
        with gc_paused_for(len(calls)):
            records = self._submit(calls, sink, awaited_by, extra)
        return records, self._take()

    def _submit(
        self,
        calls: list[ToolCall],
        sink: Callable[[CallEvent], None] | None,
        awaited_by: CallRecord | None,
        tools: dict[str, KernelTool] | None = None,
    ) -> list[CallRecord]:
        for call in calls:  # all or nothing: check everything before admitting anything
            if not isinstance(call, ToolCall):
                raise InvalidBatchError(
                    f"a batch is a list of ToolCall; expected ToolCall, got {type(call).__name__}"
                )
        self._serial += 1
        batch = Batch(self._serial, len(calls), self._serial + 1)
        batch.tools = None if tools is None else ChainMap(tools, self.tools)
        now = self.now()  # the batch is admitted at one moment
        # When every call is ready the moment it is admitted (no hooks, the default policy, no
        # after=), the calls ask for their leases in emission order straight away: none can be
        # held back behind an earlier one that has not asked yet, so the batch keeps no list of
        # who has not (``next_requests``).
        in_order = (
            not self._has_before_hooks
            and self._policy is allow_all
            and not any(call.after for call in calls)
        )
        # A call whose before-hooks have not answered is HOOKED from the start: nothing has seen
        # it yet.
        stage = HOOKED if self._has_before_hooks else PENDING
        records = [self._new_record(call, batch, now, in_order, None, stage) for call in calls]
        if awaited_by is not None and awaited_by.stage is not FINISHED:
            # A tool waiting for calls of its own kernel: if one of them waits for its leases,
            # a cycle through it is found and broken like a nested call's (``break_wait_cycles``).
            batch.awaited_by = awaited_by
            awaited_by.awaiting = (awaited_by.awaiting or set()) | set(records)
        if sink is not None:
            for record in records:
                record.sinks = (sink,)
        failures: dict[int, tuple[Status, BaseException]] = {}
        # The batch is keyed at one moment: a path its calls name many times (a deep queue on
        # one file, a Read and an Edit of it) is looked up once.
        key = self.key if self.key is path else KeyLog(self.key, once=len(records) > 1)
        noting = isinstance(key, KeyLog) and key.noting()  # the links, for the whole batch
        try:
            for record in records:
                failure = self._admit(record, key)
                if failure is not None:
                    failures[record.uid] = (ERROR, failure)
        finally:
            if noting:
                cast(KeyLog, key).done_noting()
        if not in_order or len(records) > 1:  # else no after=, and no id twice
            self._link(*link_dependencies(records, failures, self._names))
        if self.report.listeners or sink is not None:  # build no events when nobody listens
            for record in records:
                claims = record.claims or ()
                self.tell(record, CallQueued(record.call.id, record.name, now, claims))
        for record in records:
            failed = failures.get(record.uid)
            if failed is not None:
                self.fail(record, *failed)
        self._admitting = batch
        try:
            if in_order:
                if batch.awaited_by is not None:
                    for record in records:
                        if record.stage is PENDING:  # not failed, nor cancelled by a listener
                            self.move(record, READY, now)
                            self._request_top_level(record)
                else:
                    self._request_in_order(records, now)
                return records
            for record in records:
                if record.state is not CallState.PENDING or record.deps_left:
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

    def live_calls(self, call_id: str) -> list[CallRecord]:
        """The unfinished top-level calls with this id (more than one only if two batches
        used it), the newest first."""
        return self._names.all_live(call_id)

    def cancel(self, record: CallRecord, reason: CancelReason) -> Sequence[Action]:
        """Cancel a call and the calls it awaits; each finishes CANCELLED when the async layer
        acts on its ``INTERRUPT``: at once, or when the task running it unwinds."""
        self._cancel(record, reason)
        return self._take()

    def _cancel(self, record: CallRecord, reason: CancelReason) -> None:
        if record.stage is FINISHED:
            return
        if record.cancel_reason is None:
            record.cancel_reason = reason
        self.interrupt(record)
        for child in sorted(record.awaiting or (), key=lambda r: r.uid):
            if child.parent is record or child.batch.awaited_by is record:  # not a handle's
                self._cancel(child, CancelReason(Why.WITH_PARENT, record.call.id))

    def time_out(self, records: Iterable[CallRecord], limit: float) -> Sequence[Action]:
        """The time limit of the batch of ``records`` ran out: each unfinished one is cancelled
        and ends TIMEOUT (``make_result``); the results of those that finished are kept."""
        unfinished = [record for record in records if record.stage is not FINISHED]
        for record in unfinished:
            # All marked before any is cancelled: a call finished at once (it had no task) then
            # finds its dependents cut short too, not skipped because of it.
            record.batch.time_limit = limit
            if record.cancel_reason is None:
                record.cancel_reason = OUT_OF_TIME
        for record in unfinished:
            self._cancel(record, OUT_OF_TIME)
        return self._take()

    def cancel_all(self, reason: CancelReason = ASKED) -> Sequence[Action]:
        """Cancel every unfinished call."""
        for record in sorted(self._live.values(), key=lambda r: r.uid):
            self._cancel(record, reason)
        return self._take()

    def close(self) -> Sequence[Action]:
        """Refuse new calls and cancel every unfinished one."""
        self.closed = True
        return self.cancel_all(CancelReason(Why.KERNEL_CLOSING))

    # -- admission ------------------------------------------------------------------------------

    def _new_record(
        self,
        call: ToolCall,
        batch: Batch,
        now: float,
        in_order: bool = False,
        parent: CallRecord | None = None,
        stage: Stage = PENDING,
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
            stage,
        )
        self._live[record.uid] = record
        if parent is None:
            self._names.add(record)
        if not in_order:
            batch.unrequested[record.uid] = record
        return record

    def _admit(
        self, record: CallRecord, key: Callable[[str], Path] | None = None
    ) -> BaseException | None:
        """Admit ``record`` (``_admission.admit``): set what was found, or return why not."""
        tools = record.batch.tools or self.tools
        record.tool, found = admit(record.call, tools, key or self.key, self.leasing.pools)
        if type(found) is tuple:
            record.arguments, record.claims, record.keyed = found
            if getattr(record.tool, "ahead", None) is not None:  # few tools have it
                self._ask_ahead(record)
            return None
        if isinstance(found, Unfilled):
            record.unfilled = found.arguments  # admitted in full once its sources have finished
            return None
        assert isinstance(found, BaseException)
        return found

    def _set_arguments(self, record: CallRecord, raw: object) -> BaseException | None:
        """Parse ``raw`` as ``record``'s arguments and set them and their claims, or return why
        not (the record is left as it was)."""
        assert record.tool is not None
        found = parse(record.tool, raw, self.key, self.leasing.pools)
        if isinstance(found, BaseException):
            return found
        record.arguments, record.claims, record.keyed = found
        self._ask_ahead(record)
        return None

    @staticmethod
    def _link(links: Links, roots: Iterable[tuple[CallRecord, RootCause]]) -> None:
        """Set what admission found the calls of a batch wait for (``link_dependencies``)."""
        for record, root in roots:
            record.root_cause = root
        for record, sources, waits in links:
            record.sources = sources
            if waits:
                record.deps_left = {dep.uid for dep in waits}
                record.batch.has_deps = True
                for dep in waits:
                    if dep.dependents is None:
                        dep.dependents = []
                    dep.dependents.append(record)

    def _admit_alone(
        self, call: ToolCall, parent: CallRecord
    ) -> tuple[CallRecord, BaseException | None]:
        """Admit ``call``, made inside ``parent``, as a batch of its own."""
        self._serial += 1
        batch = Batch(self._serial, 1, self._serial + 1)
        batch.tools = parent.batch.tools  # the tools its parent's batch was given, too
        record = self._new_record(call, batch, self.now(), True, parent)
        return record, self._admit(record)

    def _fill_in(self, record: CallRecord) -> bool:
        """Fill a call's placeholders from its finished sources and admit its arguments; False
        if that failed it."""
        results = {i: r.result for i, r in (record.sources or {}).items() if r.result is not None}
        arguments, record.unfilled, record.sources = record.unfilled, None, None
        failure = self._set_arguments(record, fill_in(arguments, results))
        if failure is not None:
            self.fail(record, ERROR, failure)
            return False
        return True

    # -- pre-phase: dependencies, hooks and policy ------------------------------------------------

    def _begin_prephase(self, record: CallRecord) -> None:
        if self._has_before_hooks:
            self._out.append((PREPHASE, record))
            return
        if self._policy is allow_all:  # it allows everything: don't ask it, call by call
            self._mark_ready(record)
            return
        decision = self.policy_verdict(record)
        if not isinstance(decision, Decision):
            self.fail(record, *decision)  # denied, or the policy failed
        elif decision.permission is Permission.ALLOW:
            self._mark_ready(record)
        else:
            self._out.append((PREPHASE, record))  # ASK: someone has to be asked: a task

    def visible_call(self, record: CallRecord) -> ToolCall:
        """The call as hooks and the policy see it: with its parsed arguments."""
        return attrs.evolve(record.call, arguments=dict(record.arguments))

    def take_before_answer(self, record: CallRecord, answer: object) -> Sequence[Action]:
        """Act on what a before-hook answered (it may finish the call: a supplied result, a
        block, a bad answer)."""
        verdict = before_hook_verdict(answer)
        if verdict is None:
            return NO_ACTIONS
        if isinstance(verdict, SupplyResult):
            self._finish(record, self.make_result(record, OK, verdict.output))
            return self._take()
        if isinstance(verdict, RewriteArguments):
            failure = self._set_arguments(record, verdict.arguments)
            if failure is None:
                return NO_ACTIONS
            verdict = (ERROR, failure)
        self.fail(record, *verdict)
        return self._take()

    def hooks_answered(self, record: CallRecord) -> Sequence[Action]:
        """Every before-hook has answered: ``record``'s claims are final, so later calls of its
        batch that do not conflict with them need not wait for it any more."""
        self.move(record, PENDING, self.now())
        if record.parent is None and record.batch.unrequested:
            self._issue_requests(record.batch)
        return self._take()

    def policy_verdict(self, record: CallRecord) -> Decision | Refusal:
        """What the policy decides for ``record``, or the refusal to finish it with (denied,
        or the policy failed). Changes nothing."""
        # The default policy ignores the call: don't copy its arguments for it.
        call = record.call if self._policy is allow_all else self.visible_call(record)
        return policy_verdict(self._policy, call)

    def take_approval(
        self, record: CallRecord, decision: Decision, answer: object
    ) -> Sequence[Action]:
        """Act on an approver's answer (a refusal finishes the call)."""
        verdict = approval_verdict(answer, record.name, decision.reason)
        if verdict is None:
            return NO_ACTIONS
        self.fail(record, *verdict)
        return self._take()

    def mark_ready(self, record: CallRecord) -> Sequence[Action]:
        """Hooks and policy are done: the call may request its leases when its turn comes."""
        self._mark_ready(record)
        return self._take()

    def _mark_ready(self, record: CallRecord) -> None:
        self.move(record, READY, self.now())
        batch = record.batch
        if record.uid > batch.last_ready:
            batch.last_ready = record.uid
        if record.parent is None:
            self._issue_requests(batch)

    # -- requesting and granting -----------------------------------------------------------------

    def _issue_requests(self, batch: Batch) -> None:
        for record in next_requests(batch):
            self._request_top_level(record)

    def _request_top_level(self, record: CallRecord) -> None:
        # Asked only of a batch a running call awaits: every call of a plain batch asks here.
        owner = None if record.batch.awaited_by is None else self._covering(record)
        if owner is not None:
            claims = cast(tuple[Claim, ...], record.claims)
            held = self.leasing.request_within(record, owner, claims, record.batch.uid)
        else:
            held = self.leasing.request_top_level(record)
        if held:
            self._granted(record)
        else:
            self._wait_for_leases(record)

    def _request_in_order(self, records: list[CallRecord], now: float) -> None:
        """The calls of a batch admitted ready (no hooks, the default policy, no ``after=``,
        no running call awaiting it) ask for their leases in emission order, at the moment
        ``now`` the batch was admitted.

        ``_request_top_level`` and ``_granted`` written out for them, as nearly every call of
        a large batch comes this way: a call granted at once that gets a slot starts (FRESH)
        in this step, with no wait bookkeeping; one that gets no slot holds its leases (HELD),
        its wait noted as the slots' without asking whom it waits behind (nobody: it holds its
        leases), unless someone listens; a call that must wait for leases takes the general
        way."""
        leasing, slots, out = self.leasing, self.slots, self._out
        report = self.report
        for record in records:
            if record.stage is not PENDING:
                continue  # failed, or cancelled by a listener
            self.move(record, READY, now)
            if not leasing.request_top_level(record):
                self._wait_for_leases(record)
            elif slots.take(record):
                self.move(record, FRESH, now)  # keyed in this very step
                out.append((START, record))
            else:  # it holds its leases, and waits for a running call to finish
                self.move(record, HELD, now)
                if report.listeners or record.sinks:
                    self._blocked(record, now)
                else:
                    record.contested, record.blocked_at = report.slot_wait, now
                self._start_wait_clock(record)
                if leasing.watched:
                    self.lend_slots()  # an awaited call may be waiting for these leases

    def _wait_for_leases(self, record: CallRecord) -> None:
        """``record``'s request waits in the lease table: time it, and say on what."""
        self._start_wait_clock(record)
        now = self.now()
        self.move(record, QUEUED, now)
        self._blocked(record, now)
        self.break_wait_cycles()
        # Looked at now, so that it has a free slot before later calls of its batch.
        if (
            record.ahead is not None
            and record.hold.waiting_in is not None
            and not self._try_ahead(record)
        ):
            self._ahead_queued[record.uid] = record

    def _ask_ahead(self, record: CallRecord) -> None:
        """Set what the call's tool answers to ``ahead(arguments, key)``, asked as its claims
        are set; None (it does not run ahead, and holds its claims only) for a call made inside
        a running call (nested, or in a batch a running call awaits: it runs in that call's
        slot, and maybe inside its leases) and when the tool fails to answer."""
        ahead = getattr(record.tool, "ahead", None)  # optional: few tools have it
        if ahead is None or record.parent is not None or record.batch.awaited_by is not None:
            record.ahead = None
            return
        try:
            answer = ahead(record.arguments, self.key)
        except Exception:  # a tool's failure to say: it does not run ahead
            _log.exception("toolkernel: %s.ahead raised; its call does not run ahead", record.name)
            answer = None
        record.ahead = answer if isinstance(answer, Ahead) else None

    def _start_ahead(self) -> None:
        """Start the queued calls that may run ahead now (``may_run_ahead``), in emission
        order, while a slot is free."""
        self._ahead_dirty = False
        queued = self._ahead_queued
        for uid, record in list(queued.items()):
            if record.stage is not QUEUED or record.hold.waiting_in is None:
                del queued[uid]  # granted, finished, or back in line after a run
                continue
            if not self.slots.has_free():
                return
            if self._try_ahead(record):
                del queued[uid]

    def _try_ahead(self, record: CallRecord) -> bool:
        """Start ``record``, queued, ahead of its grant if it may, and a slot is free."""
        if not may_run_ahead(record, self._earlier(record)) or not self.slots.take_free(record):
            return False
        self.leasing.stop_wait_clock(record)  # a fresh limit when its tool waits for it
        self.move(record, AHEAD, self.now())
        record.meanwhile = []
        self._ahead_running[record.uid] = record
        self._ran_ahead += 1
        self._out.append((START, record))
        return True

    def _earlier(self, record: CallRecord) -> Iterator[CallRecord]:
        """The unfinished calls ahead of ``record`` in the lease queue, or that may come to be:
        those submitted before it, those of a higher priority, and every nested call
        (requested at a raised priority)."""
        uid, priority = record.uid, record.call.priority
        for other in self._live.values():
            if other is not record and (
                other.uid < uid or other.parent is not None or other.call.priority > priority
            ):
                yield other

    def _granted_ahead(self, record: CallRecord) -> None:
        """A call running ahead is granted its leases: it runs on in its slot if its tool
        has not asked for them yet (or starts in it as any granted call, if its task has not
        begun), else it takes a slot (or waits for one) and its tool goes on."""
        del self._ahead_running[record.uid]
        now = self.now()
        if record.stage is AHEAD and not record.has_context:
            # Granted before its task began (the call it passed ended first): it never ran
            # ahead. It keeps the slot it took and starts as a call granted after a wait does
            # (its task, on its way, looks at its keys); its tool sees no run ahead.
            self.leasing.stop_wait_clock(record)
            record.meanwhile = None
            self._ran_ahead -= 1
            self.move(record, GRANTED, now)
        elif record.stage is AHEAD:
            self.leasing.stop_wait_clock(record)
            self.move(record, RUNNING, now)
        elif self.slots.take(record):
            self.leasing.stop_wait_clock(record)
            self.move(record, RUNNING, now)
            self._out.append((WAKE, record))
        else:  # its wait limit runs on: it covers the wait for the leases and for a slot
            self.move(record, AWAITING_SLOT, now)

    @staticmethod
    def _covering(record: CallRecord) -> CallRecord | None:
        """The running call awaiting ``record``'s batch (a tool that ran ``kernel.run``, as an
        agent used as a tool runs its own calls), if its leases cover all of ``record``'s
        claims: ``record`` then runs inside them, as a nested call (``ctx.call``) does, instead
        of waiting for the very call that waits for it."""
        owner = record.batch.awaited_by
        if owner is None or owner.stage is not RUNNING or not record.claims or not owner.claims:
            return None
        return None if split_by_cover(owner.claims, record.claims)[1] else owner

    def _granted(self, record: CallRecord) -> None:
        """Leases granted: start the call if it gets a slot (nested calls need none: their
        parent's task runs them, and is woken)."""
        waited = record.hold.waiting_in is not None
        if record.parent is not None:
            if waited:
                self.leasing.stop_waiting(record)
            self._out.append((WAKE, record))
            return
        if waited:
            self.leasing.stop_waiting(record, keep_clock=True)
        if record.stage is AHEAD or record.stage is AWAITING:
            self._granted_ahead(record)
            return
        # A call a running call's tool awaits takes no slot: it runs in the slot of the call
        # waiting for it (which would otherwise wait for a slot it holds itself).
        if record.batch.awaited_by is not None or record.handle_waiters or self.slots.take(record):
            self.leasing.stop_wait_clock(record)
            # Granted in the step that keyed its claims (its batch's admission), its keys need
            # no second look; else its task looks again (``_confirm_keys``).
            fresh = record.batch is self._admitting and record.stage is not QUEUED
            self.move(record, FRESH if fresh else GRANTED, self.now())
            self._out.append((START, record))
        else:  # it holds its leases, and waits for a running call to finish
            now = self.now()
            fresh = not waited and record.batch is self._admitting
            self.move(record, HELD if fresh else FOR_SLOT, now)
            if not waited:
                self._blocked(record, now)
                self._start_wait_clock(record)
            # else its wait limit runs on: it covers the wait for leases and for a slot together
            self.lend_slots()  # an awaited call may be waiting for these leases

    def hand_slot_on(self, record: CallRecord) -> None:
        """``record`` gives up its slot (or its place in line for one)."""
        if record.stage is HELD or record.stage is FOR_SLOT or record.stage is AWAITING_SLOT:
            self.leasing.stop_wait_clock(record)
        nxt = self.slots.give_back(record)
        if nxt is not None:
            self._start_in_slot(nxt)

    def release(self, record: CallRecord) -> Sequence[Action]:
        """Revoke the call's context, give back every lease and withdraw every request; whoever
        is next is granted (and to be started) before this returns. Idempotent."""
        self._release(record)
        return self._take()

    def _release(self, record: CallRecord) -> None:
        if record.awaiting:
            self._end_children(record)
        if record.has_context:
            record.has_context = False
            self._out.append((REVOKE, record))
        if self._ahead_running and record.hold.group is not None:
            self._tell_ahead(record)
        for granted in self.leasing.release(record):
            self._granted(granted)

    def _request_nested_leases(
        self, record: CallRecord, claims: tuple[Claim, ...], inside: bool
    ) -> None:
        """Request a nested call's claims (``Leasing.request_nested``), granted at once if free."""
        if self.leasing.request_nested(record, claims, inside):
            self._granted(record)
        else:
            self._start_wait_clock(record)

    def _requeue_leases(self, record: CallRecord) -> bool:
        """Request a granted call's claims (changed) again keeping its place in line; True
        if it holds them at once. Whoever else that lets in is granted."""
        held, others = self.leasing.requeue(record)
        if not held:
            self._start_wait_clock(record)  # a fresh wait, with a fresh limit
        for granted in others:
            self._granted(granted)
        return held

    # -- nested calls and going back in line: the async layer's operations ----------------------

    def admit_nested(
        self, parent: CallRecord, name: str, arguments: Mapping[str, Any]
    ) -> tuple[CallRecord, Sequence[Action]]:
        """Admit a call made from inside ``parent``'s tool; it may come back finished."""
        record = self._admit_nested(parent, name, arguments)
        return record, self._take()

    @staticmethod
    def nested_requests(record: CallRecord) -> list[tuple[tuple[Claim, ...], bool]]:
        """The requests a nested call makes, in order, each ``(claims, inside)``: the claims
        its parent's leases don't cover from the kernel, first (so a deadlock is found before
        it holds its siblings' place), then those they cover inside them (even none: its
        place among its siblings)."""
        parent = record.parent
        assert parent is not None and parent.claims is not None
        inside, outside = split_by_cover(parent.claims, record.claims or ())
        requests = [(outside, False)] if outside else []
        if inside or not outside:
            requests.append((inside, True))
        return requests

    def request_nested(
        self, record: CallRecord, claims: tuple[Claim, ...], inside: bool
    ) -> Sequence[Action]:
        """Request a nested call's claims (``_request_nested``); its ``WAKE`` comes when
        its parent's task may go on."""
        self._request_nested(record, claims, inside)
        return self._take()

    def end_nested(self, record: CallRecord) -> Sequence[Action]:
        """The parent's task is done with this nested call, whatever happened to it."""
        self._end_nested(record)
        return self._take()

    def await_handle(self, caller: CallRecord, record: CallRecord) -> Sequence[Action]:
        """``caller``'s tool waits for ``record`` through its handle: a wait like that for a
        batch it runs, seen by the wait-for graph (a cycle fails ``record`` with a deadlock
        error) and by the slots (``record`` runs in ``caller``'s), but cancelling ``caller``
        leaves ``record`` be. ``stop_awaiting_handle`` ends it."""
        record.handle_waiters += 1
        if record.stage is FINISHED or caller.stage is FINISHED:
            return NO_ACTIONS
        caller.awaiting = (caller.awaiting or set()) | {record}
        if record.stage is HELD or record.stage is FOR_SLOT:
            self.slots.lend(record)
            self._start_in_slot(record)
        elif record.hold.waiting_in is not None:
            self.leasing.watch(record)
            self.break_wait_cycles()
        return self._take()

    def stop_awaiting_handle(self, caller: CallRecord, record: CallRecord) -> None:
        record.handle_waiters -= 1
        mine = record.parent is caller or record.batch.awaited_by is caller
        if caller.awaiting and not mine:
            caller.awaiting.discard(record)

    def lend_slots(self) -> None:
        """Run, each in the slot of the call awaiting, the calls waiting for a slot that an
        awaited call (nested, or of a batch a tool awaits) waits for, maybe through others:
        the awaiting call keeps its slot until they run, so they would wait for ever."""
        if self.slots.limit is None:
            return
        for waiting in self.leasing.watched_waits():
            for record in leasing.slot_waiters_behind(waiting):
                stage = record.stage
                if stage is HELD or stage is FOR_SLOT or stage is AWAITING_SLOT:  # not lent
                    self.slots.lend(record)
                    self._start_in_slot(record)

    def _start_in_slot(self, record: CallRecord) -> None:
        """``record``, granted its leases, has a slot now: start it (or, if it ran ahead,
        wake its tool, which waits for this)."""
        self.leasing.stop_wait_clock(record)
        if record.stage is AWAITING_SLOT:
            self.move(record, RUNNING, self.now())
            self._out.append((WAKE, record))
            return
        self.move(record, FRESH if record.stage is HELD else GRANTED, self.now())
        self._out.append((START, record))

    def confirm_keys(self, record: CallRecord) -> Sequence[Action]:
        """Check a granted call's path keys before it runs (``_confirm_keys``): it
        may run now if it is still RUNNING and unfinished afterwards."""
        self._confirm_keys(record)
        return self._take()

    def hold_more(self, record: CallRecord, more: object, state: object) -> Sequence[Action]:
        """The call's tool asked to hold ``more`` (``HoldMore``): its run ends and it goes back
        in line; it may run again at once if it is still RUNNING and unfinished afterwards."""
        if record.stage is not RUNNING:  # it runs ahead of its grant: it can't go back in line
            self.fail(record, ERROR, messages.hold_more_before_grant(record.name))
            return self._take()
        self._running_tools -= 1
        if record.has_context:
            record.has_context = False
            self._out.append((REVOKE, record))
        self._hold_more(record, more, state)
        return self._take()

    # -- running ahead of the grant: the async layer's operations --------------------------------

    def await_grant(self, record: CallRecord) -> Sequence[Action]:
        """``record``'s tool waits for its leases (``ctx.wait_granted``). A call that runs
        ahead of its grant gives its slot back meanwhile (else a call before it, waiting for a
        slot, could wait on it, which waits on that call's leases) and starts its wait limit;
        its ``WAKE`` comes once it is granted and has a slot again. Any other call holds its
        leases already: nothing changes."""
        if record.stage is AHEAD:
            self.move(record, AWAITING, self.now())
            self.hand_slot_on(record)
            self._start_wait_clock(record)
            self._ahead_dirty = True  # its slot may let another run ahead
        return self._take()

    @staticmethod
    def changed_meanwhile(record: CallRecord) -> tuple[ChangedMeanwhile, ...]:
        """The calls that conflicted with ``record`` and finished while it ran ahead of its
        grant, in the order they finished (none for a call that did not run ahead)."""
        return tuple(record.meanwhile or ())

    def may_be_told(self, record: CallRecord) -> bool:
        """Whether an earlier call may yet tell ``record`` what it changed: it runs ahead of
        its grant, ungranted."""
        return record.uid in self._ahead_running

    @staticmethod
    def report_changes(record: CallRecord, changed: Iterable[Claim]) -> None:
        """``record``'s tool says what it changed (``ctx.report_changes``): what calls
        running ahead of their grant are told of it when it finishes."""
        record.changed = tuple(changed)

    def report_thrown_away(self, record: CallRecord) -> None:
        """``record``'s tool threw away what it did ahead of its grant, and runs again
        (``ctx.report_thrown_away``): counted for ``statistics``."""
        if record.meanwhile is not None:  # it ran ahead: any other call has nothing to throw
            self._ahead_thrown_away += 1

    # -- nested calls: admitted like any call, run inline in their parent's task ----------------

    def _admit_nested(
        self, parent: CallRecord, name: str, arguments: Mapping[str, Any]
    ) -> CallRecord:
        """Admit a call made from inside ``parent``'s tool; it may come back finished."""
        parent.nested_count += 1
        call = ToolCall(
            f"{parent.call.id}.{parent.nested_count}",
            name,
            dict(arguments),
            priority=parent.call.priority,
            agent=parent.call.agent,  # on behalf of the same agent, as the same kind of caller
            read_first=parent.call.read_first,
        )
        record, failure = self._admit_alone(call, parent)
        if self.report.listeners:
            event = CallQueued(call.id, name, record.queued_at, record.claims or (), parent.call.id)
            self.tell(record, event)
        if failure is None and record.depth > self._max_depth:
            failure = messages.too_deep(parent.call.id, parent.name, name, self._max_depth)
        if failure is not None:
            self.fail(record, ERROR, failure)
            return record
        if parent.awaiting is None:
            parent.awaiting = set()
        parent.awaiting.add(record)
        return record

    def _request_nested(self, record: CallRecord, claims: tuple[Claim, ...], inside: bool) -> None:
        """Request a nested call's claims: within its parent's lease group, or from the kernel
        at a raised priority. Its parent's task is woken when it may go on: granted, or
        finished (a wait that would deadlock fails at once)."""
        if record.state is CallState.PENDING:
            self.move(record, QUEUED, self.now())
        self._request_nested_leases(record, claims, inside)
        if record.hold.waiting_in is not None:
            self.break_wait_cycles()  # this wait may close a cycle: then it fails at once
            if record.hold.waiting_in is not None:
                self._blocked(record, self.now())

    def _end_nested(self, record: CallRecord) -> None:
        """The parent's task is done with this nested call, whatever happened to it."""
        parent = record.parent
        assert parent is not None
        if parent.awaiting is not None:
            parent.awaiting.discard(record)
        if record.stage is not FINISHED:  # the parent was cancelled while this call waited or ran
            reason = record.cancel_reason or CancelReason(Why.WITH_PARENT, parent.call.id)
            self.fail(record, CANCELLED, messages.cancelled(reason))

    def _end_children(self, parent: CallRecord) -> None:
        """``parent``'s leases are going while nested calls it started, or calls of a batch
        it submitted that run inside its leases (``_covering``), are still in flight (its tool
        returned without awaiting them, say from a background task): they ran inside those
        leases, so they end now, CANCELLED, before the leases go."""
        for child in sorted(parent.awaiting or (), key=lambda r: r.uid):
            group = child.hold.group
            if child.parent is not parent and (group is None or group.owner is not parent):
                continue  # a call of a batch its tool submitted, holding leases of its own
            if child.cancel_reason is None:
                child.cancel_reason = CancelReason(Why.PARENT_ENDED, parent.call.id, parent.name)
            self.interrupt(child)  # its task unwinds; its result is given now
            self.fail(child, CANCELLED, messages.cancelled(child.cancel_reason))

    def break_wait_cycles(self) -> None:
        """Fail every awaited waiting call whose wait closes a cycle, whenever a request starts
        waiting: a cycle can close after such a call began its wait (a higher-priority
        request queues ahead of someone in it). Only awaited calls can close one."""
        for record, chain in self.leasing.deadlocked():
            owner = record.parent or record.batch.awaited_by
            parent_id = owner.call.id if owner is not None else None
            self.fail(record, ERROR, messages.deadlock(chain, parent_id))
        self.lend_slots()

    # -- going back in line: keys that changed meaning, a tool asking to hold more ---------------

    def _confirm_keys(self, record: CallRecord) -> bool:
        """Recompute a granted call's claims (or, when they follow its keys alone, key the
        paths it spelled again: ``KernelTool.claims``); if a path now names something else (a
        symlink or a rename changed it since admission), send the call back to the queue keeping
        its place.

        Returns True if the call may run now with what it holds. A claims function or a
        workspace that fails now fails the call, as it would have at admission. A call granted
        in the step that admitted it is not looked at again: nothing ran in between, and what
        changes later, between this check and the I/O, ``ctx.fs`` refuses anyway (it opens
        what it checked, relative to directory descriptors, without following links).
        """
        if record.stage is FRESH or record.cancel_reason is not None or record.tool is None:
            return True  # keyed a moment ago, or it will not run anyway
        if record.keyed is not None and keys_unchanged(record.keyed, self.key):
            return True  # its claims follow its keys alone, and those stand
        pools = self.leasing.pools
        keyed: list[tuple[str, Path]] | None = None if record.keyed is None else []
        try:
            fresh = compute_claims(record.tool, record.arguments, self.key, pools, keyed)
            if record.more_claims:
                fresh = with_more(record.name, fresh, record.more_claims, pools)
        except (InvalidCallError, InvalidClaimError) as exc:
            self.fail(record, ERROR, exc)
            return False
        if keyed is not None:
            record.keyed = tuple(keyed)
        if fresh == record.claims:
            return True
        return self._back_in_line(record, fresh, messages.paths_kept_changing)

    def _hold_more(self, record: CallRecord, more: object, state: object) -> bool:
        """The call's tool asked to hold ``more`` as well (``HoldMore``): its run ends, and the
        call goes back in line, in its place, with its claims and ``more``. Returns True if it
        holds them at once (its tool may run again now); else it waits (holding nothing), and
        is started again when granted. A request that can't be met fails the call (the
        scheduler has ended its run and revoked its context already)."""
        assert record.claims is not None
        try:
            fresh = with_more(record.name, record.claims, more, self.leasing.pools)
        except InvalidClaimError as exc:
            self.fail(record, ERROR, exc)
            return False
        assert isinstance(more, list | tuple)
        record.more_claims, record.resumed = (*record.more_claims, *more), state
        return self._back_in_line(record, fresh, messages.asked_too_often)

    def _back_in_line(
        self, record: CallRecord, fresh: tuple[Claim, ...], too_often: Callable[[int], Exception]
    ) -> bool:
        """Requeue a granted call with ``fresh`` claims, keeping its place: True if it holds
        them at once; else it waits, its slot going to the next in line."""
        record.requeues += 1
        if record.requeues > MAX_REQUEUES:
            self.fail(record, ERROR, too_often(MAX_REQUEUES))
            return False
        owner = record.hold.group.owner if record.hold.group is not None else None
        if owner is not None and split_by_cover(owner.claims or (), fresh)[1]:
            # It runs inside the leases of the call awaiting it (``_covering``): its place in
            # line is among that call's, which can't hold what they don't cover.
            self.fail(record, ERROR, messages.beyond_awaiting_leases(record.name, owner.call.id))
            return False
        record.claims = fresh
        now = self.now()
        self.move(record, QUEUED, now)
        if self._requeue_leases(record):
            self.move(record, FRESH, now)  # keyed in this very step
            return True
        self.hand_slot_on(record)
        self._blocked(record, self.now())
        self.break_wait_cycles()
        return False

    # -- running ----------------------------------------------------------------------------------

    def start(self, record: CallRecord) -> tuple[float, Sequence[Action]]:
        """The tool is about to run, with a context the async layer gives it (and revokes on
        ``REVOKE``), and the state ``record.resumed`` its last run left (``HoldMore``), read
        before this; returns the deadline of its run (``inf`` for none)."""
        record.has_context, record.resumed = True, None
        started_at = record.started_at = self.now()
        running = self._running_tools = self._running_tools + 1
        if running > self._peak_running:
            self._peak_running = running
        ahead = record.stage is AHEAD
        if record.stage is not RUNNING and not ahead:
            self.move(record, RUNNING, started_at)
        if self.report.listeners or record.sinks:
            self.tell(record, CallStarted(record.call.id, record.name, started_at, ahead))
        timeout = record.call.run_timeout  # ``run_timeout(record)``, written out
        if timeout is None:
            timeout = getattr(record.tool, "run_timeout", None)
            if timeout is None:
                timeout = self._run_timeout
        actions = self._take() if self._told or self._out else NO_ACTIONS
        return math.inf if timeout is None else started_at + timeout, actions

    def take_after_answer(
        self, record: CallRecord, result: ToolResult, answer: object
    ) -> ToolResult:
        """What an after-hook's answer makes of ``result``."""
        if answer is None:
            return result
        if isinstance(answer, ToolResult):
            problem = malformed(answer)
            if problem is not None:  # it would fail the machine as the call finishes
                error = messages.hook_answer(
                    "an after-hook", answer, f"a whole ToolResult ({problem})"
                )
                return self.make_result(record, ERROR, None, error)
            if answer.call_id != result.call_id or answer.name != result.name:
                # A rewritten result is still this call's: every call gets one, under its id.
                return attrs.evolve(answer, call_id=result.call_id, name=result.name)
            return answer
        error = messages.hook_answer("an after-hook", answer, "a ToolResult or None")
        return self.make_result(record, ERROR, None, error)

    def interrupt(self, record: CallRecord) -> None:
        """Ask the async layer to cancel ``record``: the task running it unwinds and finishes
        it, or, if no task runs it now, the async layer finishes it at once."""
        self._out.append((INTERRUPT, record))

    # -- finishing: the one way out ----------------------------------------------------------------

    def make_result(
        self,
        record: CallRecord,
        status: Status,
        output: Any = None,
        exception: BaseException | None = None,
    ) -> ToolResult:
        call = record.call
        if status is CANCELLED and record.cancel_reason is OUT_OF_TIME:
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
            self.now(),  # finished_at
            error_type,
            exception,
        )

    def _out_of_time(self, record: CallRecord) -> BaseException:
        """Why a call cut short by its batch's time limit ended: where it was then."""
        limit = record.batch.time_limit or 0.0
        if record.started_at is not None:
            return messages.batch_timed_out(limit, self.now() - record.started_at, "")
        if record.hold.slot == leasing.WAITING:  # holding its leases
            return messages.batch_timed_out(limit, None, "", self.max_concurrency)
        queued = record.state is CallState.QUEUED
        behind = leasing.describe_waits(record, self.max_concurrency) if queued else ""
        return messages.batch_timed_out(limit, None, behind)

    def finish_failed(
        self, record: CallRecord, status: Status, exception: BaseException
    ) -> Sequence[Action]:
        """Finish ``record`` with ``status`` and the exception that says why."""
        self._finish(record, self.make_result(record, status, None, exception))
        return self._take()

    def fail(self, record: CallRecord, status: Status, exception: BaseException) -> None:
        self._finish(record, self.make_result(record, status, None, exception))

    def complete(
        self,
        record: CallRecord,
        status: Status,
        output: Any = None,
        exception: BaseException | None = None,
    ) -> Sequence[Action]:
        """The call's run ended, and nothing is awaited before its result (no after-hooks, no
        shared leases): ``release``, its result, and ``finish``, as one operation, so the
        async layer acts once on what they decided. Nothing if its parent ended first (its
        tool ran on): it was finished then."""
        self._release(record)
        if record.stage is not FINISHED:
            self._finish(record, self.make_result(record, status, output, exception))
        return self._take()

    def finish(self, record: CallRecord, result: ToolResult) -> Sequence[Action]:
        """Give ``record`` its result: release, record, tell, wake, move dependents on."""
        self._finish(record, result)
        return self._take()

    def _finish(self, record: CallRecord, result: ToolResult) -> None:
        """The one way out. Dependents skipped because ``record`` failed are finished in this
        same loop, not by recursion: a chain of thousands of ``after=`` calls whose head fails
        ends in one pass."""
        if record.stage is FINISHED:
            return
        self._settle(record, result)
        if record.dependents is None and record.parent is None:  # nearly every call
            self._names.forget(record, result.status, result.error)
            batch = record.batch
            if batch.unrequested:
                self._issue_requests(batch)
            return
        done = [record]
        while done:
            record = done.pop()
            result = cast(ToolResult, record.result)
            for dependent in record.dependents or ():
                if dependent.stage is FINISHED:
                    continue
                if dependent.cancel_reason is OUT_OF_TIME:  # its batch ran out of time too
                    cut_short = messages.cancelled(OUT_OF_TIME)
                    self._settle(dependent, self.make_result(dependent, CANCELLED, None, cut_short))
                    done.append(dependent)
                elif result.status is not OK:
                    dependent.root_cause, why = skip(
                        record.call.id, record.name, result.status, result.error, record.root_cause
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
        hold = record.hold
        if hold.slot:  # first, so a call waiting for a slot goes before those granted now
            self.hand_slot_on(record)
        if hold.group or hold.waiting_in or record.has_context:
            self._release(record)
        if record.started_at is not None:
            self._running_tools -= 1
        if self._ahead_running or self._ahead_queued:
            self._ahead_dirty = True  # its end may let a queued call run ahead
            self._ahead_queued.pop(record.uid, None)
            self._ahead_running.pop(record.uid, None)
        self.move(record, FINISHED, result.finished_at)
        record.result = result
        del self._live[record.uid]
        batch = record.batch
        if batch.unrequested:
            batch.unrequested.pop(record.uid, None)
        event = self.report.finished(record, result)
        if event is not None:
            self.tell(record, event)
        if batch.awaited_by is not None and batch.awaited_by.awaiting:
            batch.awaited_by.awaiting.discard(record)
        batch.unfinished -= 1
        self._out.append((WAKE, record))  # its waiters, its parent's task, its batch's

    def _tell_ahead(self, record: CallRecord) -> None:
        """``record``'s leases are going, its changes made: the calls running ahead that it
        conflicts with are told what it changed, before its leases may grant them theirs."""
        running = self._ahead_running
        claims = record.table_claims
        if record.started_at is None or not claims or record.uid in running:
            return  # it never ran (it changed nothing), or it runs ahead itself, ungranted
        changed = record.changed
        if changed is None:
            changed = tuple(c for c in claims if c.mode is Mode.EXCLUSIVE)
        told = None
        for other in running.values():
            if may_conflict(other.table_claims, claims):
                if told is None:
                    told = ChangedMeanwhile(record.call.id, record.name, changed)
                assert other.meanwhile is not None
                other.meanwhile.append(told)
                self._out.append((CHANGED, other))  # its tool may stop a run this spoils

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

    def expire(self, now: float) -> Sequence[Action]:
        """Fail the calls whose lease wait ran out by ``now``."""
        for record in self.leasing.expired(now):
            if record.stage is AWAITING or record.stage is AWAITING_SLOT:
                # Its tool waits for its grant (it ran ahead): its task unwinds, its result is
                # given now, as for a call waiting in the queue.
                limit = self.wait_timeout(record) or 0
                if record.stage is AWAITING_SLOT:
                    error = messages.slot_wait_timed_out(limit, self.max_concurrency)
                else:
                    error = messages.wait_timed_out(
                        limit, leasing.describe_waits(record, self.max_concurrency)
                    )
                self.interrupt(record)
                self.fail(record, Status.TIMEOUT, error)
            elif record.stage is not FINISHED and record.state is CallState.QUEUED:
                limit = self.wait_timeout(record) or 0
                if record.hold.slot == leasing.WAITING:  # holding its leases
                    error = messages.slot_wait_timed_out(limit, self.max_concurrency)
                else:
                    behind = leasing.describe_waits(record, self.max_concurrency)
                    error = messages.wait_timed_out(limit, behind)
                self.fail(record, Status.TIMEOUT, error)
        return self._take()

    # -- observing ---------------------------------------------------------------------------------

    def move(self, record: CallRecord, stage: Stage, now: float) -> None:
        """Move ``record`` to ``stage`` at time ``now`` (the caller's: reading the clock once
        per step, not once per move, is a measurable part of a call's cost). ``state_since``
        tells when its public state changed, not its stage within it."""
        old = record.stage
        if stage not in MOVES[old]:
            raise illegal_move(record.call.id, old, stage)
        record.stage = stage
        if old.state is not stage.state:
            record.state_since = now

    def progress(self, record: CallRecord, message: str, data: Any) -> Sequence[Action]:
        """The call's tool reports progress: a ``CallProgress`` for whoever listens."""
        if self.report.listeners or record.sinks:
            event = CallProgress(record.call.id, record.name, self.now(), message, data)
            self.tell(record, event)
        return self._take()

    def detach(self, records: Iterable[CallRecord], sink: Callable[[CallEvent], None]) -> None:
        """``sink`` (a ``stream``'s) listens to ``records`` no more."""
        for record in records:
            if sink in record.sinks:
                record.sinks = tuple(s for s in record.sinks if s is not sink)

    def tell(self, record: CallRecord, event: CallEvent) -> None:
        """Have the async layer give ``event`` to the listeners once this operation returns."""
        self._told.append((TELL, Telling(record, event)))

    def _blocked(self, record: CallRecord, now: float) -> None:
        """``record`` waits for leases or a slot: note on what, and say so if anyone listens."""
        resources, event = self.report.blocked(record, now)
        if record.contested is None:
            record.contested, record.blocked_at = resources, now
        else:  # waiting again (its paths changed meaning): the first wait's start stands
            record.contested += tuple(r for r in resources if r not in record.contested)
        if event is not None:
            self.tell(record, event)

    def add_listener(self, listener: KernelListener) -> Callable[[], None]:
        """Tell ``listener`` what happens (``Reporter.add_listener``); returns its remover."""
        return self.report.add_listener(listener)

    def file_observer(self) -> Callable[[Any], None] | None:
        """What ``ctx.fs`` tells of every file a call touches, if anyone listens."""
        return self.report.file_observer()

    def leases_returned(self, record: CallRecord) -> bool:
        """``record``'s leases are back before its after-hooks run: tell the listeners that
        watch for it. True if there were any (one may have cancelled the call)."""
        if not self.report.release_listeners:
            return False
        self.report.leases_returned(record)
        return True

    def leases_granted(self, record: CallRecord) -> None:
        """``record``, which ran ahead of its grant, holds its leases now, in its own task:
        tell the listeners that watch for it."""
        if self.report.grant_listeners:
            self.report.leases_granted(record)

    def lease_statistics(self) -> LeaseTableStatistics:
        """The statistics of the top-level lease table."""
        return self.leasing.main.table.statistics()

    def snapshot(self) -> KernelSnapshot:
        """What runs, what waits for leases (and behind whom), what is pending."""
        return self.report.snapshot(self._live)

    def statistics(self) -> KernelStatistics:
        """Counts by state; per tool: count, errors by type, wait and run percentiles; peak
        concurrency; lease contention per resource."""
        return self.report.statistics(
            self._live, self._peak_running, self._ran_ahead, self._ahead_thrown_away
        )

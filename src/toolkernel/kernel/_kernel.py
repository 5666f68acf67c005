"""The kernel: admits tool calls, queues them for leases, and runs each the moment it is granted.

Lifecycle of one call (states in ``_call.CallState``; every move goes through ``_move``)::

    submit ─admit─► PENDING ─deps, hooks, policy, its turn─► QUEUED ─grant─► RUNNING
                       │                                        │               │
                       └── rejected / denied / skipped / cancelled / timed out ─┴─► FINISHED

- *Admission* (synchronous): look the tool up, parse and validate the arguments, compute and
  canonicalize the claims. Failures become ERROR results.
- *PENDING*: waits for ``after=`` dependencies (a callback, not a task), then before-hooks and the
  permission policy (a short task only if one of them has to await). Within a batch, calls ask
  for leases in emission order: a call does not request while an earlier call of its batch that
  may conflict with it is still pending, so an approval for one call never lets a later
  conflicting call jump ahead of it.
- *QUEUED*: the request is in the lease table. The call is **not** a task: nothing runs until the
  table grants it, either at once or inside some other call's ``release``. Lease-wait timeouts are
  kept by one timer task for the whole kernel.
- *RUNNING*: the grant spawned its task (nested calls run inline in their parent's task). The tool
  runs inside a cancel scope carrying the run timeout; the leases are released on every way out,
  and the release grants (and spawns) whoever is next before anything else can run.
- *FINISHED*: after-hooks may rewrite the result; ``CallFinished`` is emitted; dependents move on.

The way through when nothing is in the way (no hooks, the default policy, nobody listening, the
leases granted at once) is taken by every call of a large batch, so it is kept short: PENDING
goes straight to RUNNING, the clock is read once per step, records allocate their containers
only when a call needs them, ``run`` waits on one event per batch, and a finished call leaves
behind only what ``after=`` needs. ``benchmarks/overhead.py`` measures it against bare trio.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from itertools import takewhile
from types import MappingProxyType
from typing import Any, cast

import attrs
import trio

from .._errors import (
    CapacityError,
    DeadlockError,
    DependencyCycleError,
    InvalidArgumentsError,
    InvalidCallError,
    InvalidClaimError,
    KernelClosedError,
    ToolError,
    UndeclaredAccessError,
    UnknownPoolError,
    UnknownToolError,
)
from ..locks import (
    EVERYTHING,
    Claim,
    LeaseTable,
    Path,
    Pool,
    canonical_claims,
    claims_conflict,
    covers,
    exclusive,
    path,
    pool,
    units,
)
from ._call import CallState, Status, ToolCall, ToolResult, check_transition
from ._context import ToolContext
from ._events import CallBlocked, CallEvent, CallFinished, CallProgress, CallQueued, CallStarted
from ._observe import CallInfo, KernelSnapshot, KernelStatistics, ToolTally, freeze_tallies
from ._policy import (
    AfterHook,
    Approver,
    BeforeHook,
    Block,
    Decision,
    Permission,
    Policy,
    RewriteArguments,
    SupplyResult,
    allow_all,
)
from ._protocol import Environment, KernelTool

__all__ = ["Kernel", "CallHandle", "open_kernel_core"]

_log = logging.getLogger("toolkernel")

CONCURRENCY_POOL = "toolkernel.concurrency"
"""The pool every top-level call takes one unit of when ``max_concurrency`` is set."""

MAX_REQUEUES = 3
"""How often a call may go back to the queue because its paths changed meaning."""

NESTED_PRIORITY_BOOST = 1_000_000
"""Nested calls are part of a call that already holds leases: they overtake plain waiters."""

_NO_ARGUMENTS: Mapping[str, Any] = MappingProxyType({})

# The enum members the hot paths compare with, as module globals: on Python 3.11 reading
# ``CallState.RUNNING`` goes through the enum metaclass's ``__getattr__`` hook (about 0.1 us a
# time), and a call's way through the kernel reads a dozen of them.
_PENDING, _QUEUED, _RUNNING, _FINISHED = (
    CallState.PENDING,
    CallState.QUEUED,
    CallState.RUNNING,
    CallState.FINISHED,
)
_OK = Status.OK

_CALL_TASK_NAME = "toolkernel.kernel._kernel.Kernel._run_task"
"""The name of every call's task. Given, not derived: trio would format one for every spawn."""


class _LeaseGroup:
    """A lease table and the calls whose requests are in it.

    The kernel has one for top-level calls; a running call gets its own, lazily, for the nested
    calls its leases cover (so they run inside its leases but still exclude each other).
    """

    def __init__(self, table: LeaseTable, owner: _CallRecord | None) -> None:
        self.table = table
        self.owner = owner
        self.records: dict[int, _CallRecord] = {}


@attrs.define(eq=False)
class _Batch:
    """Calls submitted together; they request leases in emission order."""

    uid: int
    # Calls of this batch that have not finished; ``run`` waits for this to reach 0.
    unfinished: int
    # No call with a uid below ``head`` is in ``unrequested`` (it may be stale-low, never high),
    # so the common case, "the call just marked ready is the first not to have requested",
    # is found without walking the dict (which would also step over every deleted entry).
    # It starts at the first call's uid, ``uid + 1``.
    head: int
    # Calls of this batch that have not requested leases yet, in emission order (their uids
    # follow the batch's own: uid + 1, uid + 2, ...).
    unrequested: dict[int, _CallRecord] = attrs.field(factory=dict)
    # The highest uid of a call marked ready: calls after it can't request yet, so the scan in
    # ``_issue_requests`` stops there (without it, submitting n calls costs O(n^2)).
    last_ready: int = 0
    # Whether any call of this batch waits through ``after=``; only then can holding a call
    # back for an earlier one close a cycle (see ``_holds_back``).
    has_deps: bool = False
    # Set when ``unfinished`` reaches 0, if someone (``run``) is waiting for that.
    done: trio.Event | None = None


# Containers a call needs only sometimes are None (or an empty tuple) until then: a batch keeps
# thousands of records alive, and every container in them is one more object to allocate and
# for the garbage collector to visit again and again.
@attrs.define(eq=False)
class _CallRecord:
    call: ToolCall
    uid: int
    batch: _Batch
    queued_at: float
    state_since: float
    parent: _CallRecord | None = None
    depth: int = 0
    state: CallState = CallState.PENDING
    tool: KernelTool | None = None
    arguments: Mapping[str, Any] = _NO_ARGUMENTS
    claims: tuple[Claim, ...] | None = None
    ready: bool = False  # pre-phase done: may request leases when its turn comes
    # Its leases, held or waiting, in the order requested. Nearly every call has exactly one,
    # kept in two plain fields so that it costs no container; a nested call may have a second.
    lease_group: _LeaseGroup | None = None
    lease_id: int = 0
    more_leases: list[tuple[_LeaseGroup, int]] | None = None
    waiting_in: _LeaseGroup | None = None
    own_group: _LeaseGroup | None = None  # for nested calls covered by this call's leases
    wait_deadline: float = math.inf
    started_at: float | None = None
    result: ToolResult | None = None
    finished: trio.Event | None = None  # made by the first ``CallHandle.wait_finished``
    granted: trio.Event | None = None  # nested calls: set when the parent task may run it
    scope: trio.CancelScope | None = None  # the pre-phase task's or the running task's
    cancel_reason: str | None = None
    deps_left: set[int] | None = None  # uids of the ``after=`` calls it still waits for
    dependents: list[_CallRecord] | None = None  # calls waiting for it through ``after=``
    awaiting: set[_CallRecord] | None = None  # nested calls it is waiting for
    sinks: tuple[Callable[[CallEvent], None], ...] = ()  # ``stream`` listeners
    nested_count: int = 0
    requeues: int = 0

    @property
    def name(self) -> str:
        return self.call.name

    def leases(self) -> list[tuple[_LeaseGroup, int]]:
        """Its leases, held or waiting, in the order requested."""
        if self.lease_group is None:
            return []
        return [(self.lease_group, self.lease_id), *(self.more_leases or ())]


@attrs.define(eq=False)
class CallHandle:
    """A submitted call: wait for it, cancel it, read its result."""

    call: ToolCall
    _record: _CallRecord = attrs.field(repr=False, alias="record")
    _kernel: Kernel = attrs.field(repr=False, alias="kernel")

    @property
    def call_id(self) -> str:
        return self.call.id

    @property
    def finished(self) -> bool:
        """True once the call has its result."""
        return self._record.result is not None

    async def wait_finished(self) -> ToolResult:
        """Wait until the call has finished and return its result."""
        record = self._record
        if record.result is None:
            if record.finished is None:
                record.finished = trio.Event()
            await record.finished.wait()
        else:
            await trio.lowlevel.checkpoint()  # as waiting on a set event would
        assert record.result is not None
        return record.result

    def cancel(self) -> None:
        """Cancel the call (synchronous); it finishes with a CANCELLED result."""
        self._kernel._cancel(self._record, "cancelled")

    def result(self) -> ToolResult:
        """The result; raises ``RuntimeError`` if the call has not finished."""
        if self._record.result is None:
            raise RuntimeError(f"call {self.call.id} has not finished")
        return self._record.result


def _describe_exception(exc: BaseException) -> str:
    if isinstance(exc, ToolError):
        return str(exc)
    if isinstance(exc, UndeclaredAccessError):
        return f"undeclared access: {exc}"
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe_exception(e) for e in exc.exceptions)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _format_seconds(seconds: float) -> str:
    return f"{seconds:g} s"


class Kernel:
    """Runs tool calls concurrently, each as soon as its declared leases are granted.

    Make one with ``toolkernel.open_kernel`` (or :func:`open_kernel_core` without a workspace).
    """

    def __init__(
        self,
        tools: Iterable[KernelTool],
        nursery: trio.Nursery | None = None,
        *,
        environment: Environment | None = None,
        max_concurrency: int | None = None,
        pools: Mapping[str, int] | None = None,
        policy: Policy = allow_all,
        approver: Approver | None = None,
        approval_timeout: float | None = 300.0,
        before_hooks: Sequence[BeforeHook] = (),
        after_hooks: Sequence[AfterHook] = (),
        max_depth: int = 8,
        wait_timeout: float | None = None,
        run_timeout: float | None = None,
    ) -> None:
        self._tools: dict[str, KernelTool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"two tools are named {tool.name!r}")
            self._tools[tool.name] = tool
        self._nursery_or_none = nursery
        self._environment = environment
        # How path spellings become keys: through the workspace, or lexically.
        self._key: Callable[[str], Path] = environment.key if environment is not None else path
        # A call's task: with a workspace its keys are checked again first (``_run_task``).
        self._call_task = self._run_task if environment is not None else self._execute
        # trio's clock, read directly (``trio.current_time`` costs twice as much); set by
        # ``open_kernel_core``, or by ``_now`` on first use.
        self._clock: trio.abc.Clock | None = None
        all_pools = dict(pools or {})
        if max_concurrency is not None:
            if max_concurrency < 1:
                raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
            all_pools[CONCURRENCY_POOL] = max_concurrency
        self._max_concurrency = max_concurrency
        self._pools = all_pools
        self._main = _LeaseGroup(LeaseTable(all_pools), None)
        self._policy = policy
        self._approver = approver
        self._approval_timeout = approval_timeout
        self._before_hooks = tuple(before_hooks)
        self._after_hooks = tuple(after_hooks)
        self._max_depth = max_depth
        self._default_wait_timeout = wait_timeout
        self._default_run_timeout = run_timeout
        self._serial = 0
        self._live: dict[int, _CallRecord] = {}
        # Top-level calls by id, for ``after=`` and ``cancel``: the unfinished ones, and of the
        # finished ones only what ``after=`` needs (tool name, status, error), so that neither
        # their records nor their outputs stay alive.
        self._by_call_id: dict[str, _CallRecord] = {}
        self._ended: dict[str, tuple[str, Status, str | None]] = {}
        self._finished_count = 0
        self._tallies: dict[str, ToolTally] = {}
        self._listeners: list[Callable[[CallEvent], None]] = []
        self._closed = False
        self._timer_scope: trio.CancelScope | None = None
        self._timed: dict[int, _CallRecord] = {}

    @property
    def _tasks(self) -> trio.Nursery:
        if self._nursery_or_none is None:
            raise KernelClosedError("the kernel is not open: use `async with open_kernel(...)`")
        return self._nursery_or_none

    def _now(self) -> float:
        """``trio.current_time()``."""
        if self._clock is None:
            self._clock = trio.lowlevel.current_clock()
        return self._clock.current_time()

    # -- public API ----------------------------------------------------------------------------

    @property
    def tools(self) -> Mapping[str, KernelTool]:
        """The tools by name."""
        return dict(self._tools)

    def add_listener(self, listener: Callable[[CallEvent], None]) -> Callable[[], None]:
        """Call ``listener`` synchronously with every event; returns a function that removes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def submit(self, call: ToolCall) -> CallHandle:
        """Submit one call (a batch of one); synchronous. Returns its handle."""
        return self.submit_batch([call])[0]

    def submit_batch(self, calls: Iterable[ToolCall]) -> list[CallHandle]:
        """Submit calls as one batch (synchronous); one handle per call, in order.

        Conflicting calls of a batch run in the order given; the others overlap.
        """
        return [CallHandle(record.call, record, self) for record in self._submit(calls, None)]

    def _submit(
        self, calls: Iterable[ToolCall], sink: Callable[[CallEvent], None] | None
    ) -> list[_CallRecord]:
        if self._closed:
            raise KernelClosedError("can't submit calls: the kernel is closed")
        calls = list(calls)
        for call in calls:
            if not isinstance(call, ToolCall):
                raise TypeError(f"expected ToolCall, got {type(call).__name__}")
        self._serial += 1
        batch = _Batch(self._serial, len(calls), self._serial + 1)
        now = self._now()  # the batch is admitted at one moment
        records = [self._new_record(call, batch, now) for call in calls]
        if sink is not None:
            for record in records:
                record.sinks = (sink,)
        # Admission: every call is queued (and says so) before any of them can finish.
        failures: dict[int, tuple[Status, str]] = {}
        for record in records:
            failure = self._admit(record)
            if failure is not None:
                failures[record.uid] = (Status.ERROR, failure)
        self._link_dependencies(records, failures)
        if self._listeners or sink is not None:  # build no events when nobody listens
            for record in records:
                self._emit(
                    record,
                    CallQueued(record.call.id, record.name, record.queued_at, record.claims or ()),
                )
        if failures:
            for record in records:
                if record.uid in failures:
                    status, message = failures[record.uid]
                    self._finish(record, status, error=message)
        for record in records:
            if record.state is _PENDING and not record.deps_left:
                self._begin_prephase(record)
        self._issue_requests(batch)
        return records

    async def run(self, calls: Iterable[ToolCall]) -> list[ToolResult]:
        """Run a batch and return one result per call, in call order, whatever happened.

        If the caller is cancelled, the batch's calls are cancelled too.
        """
        records = self._submit(calls, None)
        if not records:
            return []
        batch = records[0].batch
        try:
            # One event for the whole batch, not one per call: a batch of thousands would
            # otherwise wake this task thousands of times.
            if batch.unfinished:
                batch.done = trio.Event()
                await batch.done.wait()
            else:
                await trio.lowlevel.checkpoint()  # every call failed at admission
        except BaseException:
            for record in records:
                self._cancel(record, "cancelled")
            raise
        # Every call of the batch has its result now.
        return cast(list[ToolResult], [record.result for record in records])

    @asynccontextmanager
    async def stream(self, calls: Iterable[ToolCall]) -> AsyncIterator[AsyncIterator[CallEvent]]:
        """Submit a batch and iterate over its events; the iteration ends when all finished.

        Leaving the block early cancels what is still running.
        """
        send, receive = trio.open_memory_channel[CallEvent](math.inf)
        calls = list(calls)
        remaining = len(calls)

        def sink(event: CallEvent) -> None:
            nonlocal remaining
            send.send_nowait(event)
            if isinstance(event, CallFinished):
                remaining -= 1
                if remaining == 0:
                    send.close()

        if not calls:
            send.close()
        # Attach before admission, so the batch's first events (CallQueued) are not missed.
        records = self._submit(calls, sink)
        try:
            async with receive:
                yield receive
        finally:
            for record in records:
                record.sinks = tuple(s for s in record.sinks if s is not sink)
                self._cancel(record, "cancelled")

    def cancel(self, *call_ids: str) -> None:
        """Cancel calls by id (synchronous); unknown or finished ids are ignored.

        Each cancelled call gets a CANCELLED result and its leases return.
        """
        for call_id in call_ids:
            record = self._by_call_id.get(call_id)
            if record is not None:
                self._cancel(record, "cancelled")

    def cancel_all(self) -> None:
        """Cancel every unfinished call."""
        for record in sorted(self._live.values(), key=lambda r: r.uid):
            self._cancel(record, "cancelled")

    def snapshot(self) -> KernelSnapshot:
        """What runs, what waits for leases (and behind whom), what is pending."""
        infos: dict[CallState, list[CallInfo]] = {s: [] for s in CallState}
        for record in sorted(self._live.values(), key=lambda r: r.uid):
            if record.state is _QUEUED:
                waits = self._waits_for(record)
            elif record.state is _PENDING:
                deps = record.deps_left or ()
                waits = tuple(r.call.id for r in self._live.values() if r.uid in deps)
            else:
                waits = ()
            infos[record.state].append(
                CallInfo(
                    call_id=record.call.id,
                    name=record.name,
                    state=record.state,
                    claims=record.claims or (),
                    waits_for=waits,
                    since=record.state_since,
                    parent=record.parent.call.id if record.parent else None,
                )
            )
        return KernelSnapshot(
            running=tuple(infos[CallState.RUNNING]),
            queued=tuple(infos[CallState.QUEUED]),
            pending=tuple(infos[CallState.PENDING]),
        )

    def statistics(self) -> KernelStatistics:
        """Counts by state and per-tool count, errors, wait and run percentiles."""
        counts = dict.fromkeys(CallState, 0)
        for record in self._live.values():
            counts[record.state] += 1
        return KernelStatistics(
            pending=counts[CallState.PENDING],
            queued=counts[CallState.QUEUED],
            running=counts[CallState.RUNNING],
            finished=self._finished_count,
            tools=freeze_tallies(self._tallies.values()),
        )

    def lease_statistics(self) -> Any:
        """The statistics of the kernel's top-level lease table."""
        return self._main.table.statistics()

    # -- admission -----------------------------------------------------------------------------

    def _new_record(
        self, call: ToolCall, batch: _Batch, now: float, parent: _CallRecord | None = None
    ) -> _CallRecord:
        self._serial += 1
        # Positional arguments, here and for the other objects made for every call: an attrs
        # class called with keywords costs twice as much (the keywords go through a dict).
        record = _CallRecord(
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
            self._by_call_id[call.id] = record
        batch.unrequested[record.uid] = record
        return record

    def _admit(self, record: _CallRecord) -> str | None:
        """Find the tool, parse the arguments, compute claims. Returns an error message or None."""
        call = record.call
        tool = self._tools.get(call.name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return (
                f"{UnknownToolError.__name__}: there is no tool named {call.name!r}; "
                f"available tools: {known}"
            )
        record.tool = tool
        return self._set_arguments(record, call.arguments)

    def _set_arguments(self, record: _CallRecord, raw: Mapping[str, Any] | str) -> str | None:
        assert record.tool is not None
        tool = record.tool
        try:
            if isinstance(raw, str):
                try:
                    loaded = json.loads(raw) if raw.strip() else {}
                except json.JSONDecodeError as exc:
                    raise InvalidArgumentsError(
                        f"the arguments of {tool.name} are not valid JSON ({exc.msg} at "
                        f"character {exc.pos}); send a JSON object"
                    ) from None
                raw = loaded
            if type(raw) is not dict and not isinstance(raw, Mapping):  # dict: the usual, cheap
                raise InvalidArgumentsError(
                    f"the arguments of {tool.name} must be a JSON object, not {type(raw).__name__}"
                )
            arguments = tool.parse_arguments(raw)
            declared = tool.claims(arguments, self._key)
        except (InvalidCallError, InvalidClaimError) as exc:
            return f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # a tool's own claims function failing is the call's error
            return f"can't compute the claims of {tool.name}: {_describe_exception(exc)}"
        claims = (exclusive(EVERYTHING),) if declared is None else tuple(declared)
        try:
            canonical = canonical_claims(claims)
            self._check_pools(tool.name, canonical)
        except InvalidClaimError as exc:
            return f"{type(exc).__name__}: {exc}"
        record.claims = canonical
        record.arguments = arguments
        return None

    def _check_pools(self, tool_name: str, claims: tuple[Claim, ...]) -> None:
        """Refuse pool claims the lease table could never grant (it would raise on request)."""
        for claim in claims:
            if not isinstance(claim.resource, Pool):
                continue
            name = claim.resource.name
            capacity = self._pools.get(name)
            if capacity is None:
                known = ", ".join(sorted(set(self._pools) - {CONCURRENCY_POOL})) or "none"
                raise UnknownPoolError(
                    f"{tool_name} claims pool {name!r}, which this kernel does not have "
                    f"(its pools: {known}); open the kernel with pools={{{name!r}: n}}"
                )
            if not claim.is_exclusive and claim.units > capacity:
                raise CapacityError(
                    f"{tool_name} claims {claim.units} units of pool {name!r}, "
                    f"but its capacity is {capacity}"
                )

    def _link_dependencies(
        self, records: list[_CallRecord], failures: dict[int, tuple[Status, str]]
    ) -> None:
        in_batch = {}
        for record in records:
            if record.call.id in in_batch:
                failures.setdefault(
                    record.uid,
                    (
                        Status.ERROR,
                        f"{InvalidCallError.__name__}: call id {record.call.id!r} "
                        f"is used twice in this batch; ids must be unique",
                    ),
                )
            else:
                in_batch[record.call.id] = record
        if not any(record.call.after for record in records):
            return  # no edges, so no cycles and nothing to wait for
        edges: dict[int, list[_CallRecord]] = {}
        failed_before: dict[int, str] = {}  # calls after a call that has already failed
        for record in records:
            deps = []
            for dep_id in record.call.after:
                dep = in_batch.get(dep_id) or self._by_call_id.get(dep_id)
                ended = self._ended.get(dep_id) if dep is None else None
                if ended is not None:
                    if ended[1] is not _OK and record.uid not in failed_before:
                        failed_before[record.uid] = self._skip_message(dep_id, *ended)
                    continue
                if dep is None or dep is record:
                    why = "itself" if dep is record else "not a known call"
                    failures.setdefault(
                        record.uid,
                        (
                            Status.ERROR,
                            f"{InvalidCallError.__name__}: it must run after "
                            f"{dep_id!r}, which is {why}",
                        ),
                    )
                    continue
                deps.append(dep)
            edges[record.uid] = deps
        for cycle in _find_cycles(records, edges):
            names = " -> ".join(r.call.id for r in [*cycle, cycle[0]])
            for record in cycle:
                failures.setdefault(
                    record.uid,
                    (
                        Status.ERROR,
                        f"{DependencyCycleError.__name__}: calls wait for each "
                        f"other through after=: {names}",
                    ),
                )
        for record in records:
            if record.uid in failures:
                continue
            if record.uid in failed_before:
                failures[record.uid] = (Status.SKIPPED, failed_before[record.uid])
                continue
            for dep in edges[record.uid]:
                if dep.result is None:
                    if record.deps_left is None:
                        record.deps_left = set()
                    record.deps_left.add(dep.uid)
                    record.batch.has_deps = True
                    if dep.dependents is None:
                        dep.dependents = []
                    dep.dependents.append(record)
                elif dep.result.status is not _OK and record.uid not in failures:
                    failures[record.uid] = (
                        Status.SKIPPED,
                        self._skip_message(
                            dep.call.id, dep.name, dep.result.status, dep.result.error
                        ),
                    )

    @staticmethod
    def _skip_message(call_id: str, name: str, status: Status, error: str | None) -> str:
        return (
            f"skipped: it had to run after {call_id} ({name}), which ended "
            f"{status.value}: {error or status.value}"
        )

    # -- pre-phase: hooks and policy ------------------------------------------------------------

    def _begin_prephase(self, record: _CallRecord) -> None:
        if self._before_hooks:
            self._tasks.start_soon(self._prephase_task, record)
            return
        if self._policy is allow_all:  # it allows everything: don't ask it, call by call
            self._mark_ready(record)
            return
        decision = self._decide(record)
        if decision.permission is Permission.ALLOW:
            self._mark_ready(record)
        elif decision.permission is Permission.DENY:
            self._finish(record, Status.DENIED, error=self._denial(record, decision.reason))
        else:
            self._tasks.start_soon(self._prephase_task, record)

    async def _prephase_task(self, record: _CallRecord) -> None:
        with trio.CancelScope() as scope:
            record.scope = scope
            if record.cancel_reason is not None:
                scope.cancel()
            outcome = await self._run_prephase(record)
        record.scope = None
        if record.result is not None:
            return
        if scope.cancelled_caught or outcome is None:
            self._finish(record, Status.CANCELLED, error=record.cancel_reason or "cancelled")
        elif outcome is True:
            self._mark_ready(record)

    async def _run_prephase(self, record: _CallRecord) -> bool | None:
        """Before-hooks, then the policy. True: may run; False: it was finished here."""
        for hook in self._before_hooks:
            try:
                returned: Any = hook(self._visible_call(record))
                action = await returned if inspect.isawaitable(returned) else returned
            except Exception as exc:
                self._finish(
                    record, Status.ERROR, error=f"a before-hook failed: {_describe_exception(exc)}"
                )
                return False
            if action is None:
                continue
            if isinstance(action, Block):
                self._finish(record, Status.DENIED, error=f"blocked: {action.reason}")
                return False
            if isinstance(action, SupplyResult):
                self._finish(record, Status.OK, output=action.output)
                return False
            if isinstance(action, RewriteArguments):
                failure = self._set_arguments(record, action.arguments)
                if failure is not None:
                    self._finish(record, Status.ERROR, error=failure)
                    return False
        decision = self._decide(record)
        if decision.permission is Permission.DENY:
            self._finish(record, Status.DENIED, error=self._denial(record, decision.reason))
            return False
        if decision.permission is Permission.ASK:
            approved = False
            if self._approver is not None:
                timeout = math.inf if self._approval_timeout is None else self._approval_timeout
                with trio.move_on_after(timeout):
                    try:
                        approved = bool(
                            await self._approver(self._visible_call(record), decision.reason)
                        )
                    except Exception as exc:
                        self._finish(
                            record,
                            Status.ERROR,
                            error=f"the approver failed: {_describe_exception(exc)}",
                        )
                        return False
            if not approved:
                why = decision.reason or "approval was not given"
                self._finish(
                    record,
                    Status.DENIED,
                    error=f"permission denied for {record.name}: {why} "
                    f"(the user did not approve it)",
                )
                return False
        return True

    def _decide(self, record: _CallRecord) -> Decision:
        try:
            # The default policy ignores the call: don't copy its arguments for it.
            call = record.call if self._policy is allow_all else self._visible_call(record)
            decision = self._policy(call)
        except Exception as exc:
            return Decision.deny(f"the permission policy failed: {_describe_exception(exc)}")
        if isinstance(decision, Permission):
            return Decision(decision)
        return decision

    @staticmethod
    def _denial(record: _CallRecord, reason: str) -> str:
        why = f": {reason}" if reason else ""
        return f"permission denied for {record.name}{why}; do not retry it unchanged"

    @staticmethod
    def _visible_call(record: _CallRecord) -> ToolCall:
        return attrs.evolve(record.call, arguments=dict(record.arguments))

    def _mark_ready(self, record: _CallRecord) -> None:
        record.ready = True
        batch = record.batch
        if record.uid > batch.last_ready:
            batch.last_ready = record.uid
        if record.parent is None:
            self._issue_requests(batch)

    # -- requesting, granting, running ---------------------------------------------------------

    def _issue_requests(self, batch: _Batch) -> None:
        """Let ready calls request leases, in emission order, never ahead of an earlier pending
        call of the batch that may conflict with them."""
        unrequested = batch.unrequested
        if not unrequested:  # every call of the batch has asked already
            return
        # Calls past the last ready one would only be added to ``ahead``: leave them unvisited.
        last = batch.last_ready
        head = batch.head
        while head <= last and head not in unrequested:
            head += 1
        batch.head = head
        if head > last:
            return  # no call up to the last ready one is left to ask
        if head == last:
            # The common case (a batch being submitted, a call after its turn came): the only
            # call to visit is the last ready one, and nobody of the batch is ahead of it.
            record = unrequested[head]
            if record.state is not _PENDING:
                del unrequested[head]
            elif record.ready:
                del unrequested[head]
                self._request_top_level(record)
            return
        ahead: list[_CallRecord] = []
        for record in list(takewhile(lambda r: r.uid <= last, unrequested.values())):
            if record.state is not _PENDING:
                # pop, not del: a listener may have re-entered this scan (say, by cancelling a
                # call on its CallBlocked event) and removed the record already.
                batch.unrequested.pop(record.uid, None)
                continue
            if record.ready and not any(self._holds_back(earlier, record) for earlier in ahead):
                batch.unrequested.pop(record.uid, None)
                self._request_top_level(record)
            else:
                ahead.append(record)

    def _holds_back(self, earlier: _CallRecord, record: _CallRecord) -> bool:
        """Whether ``earlier``, a pending call of the batch, keeps ``record`` from requesting.

        It does if they may conflict, unless ``earlier`` may itself be waiting for ``record``
        (through ``after=`` and this very rule): holding ``record`` back would then deadlock,
        as in ``[edit(a, after=c2), c2: edit(a)]``. ``after=`` wins over emission order.
        """
        if not _may_conflict(record.claims, earlier.claims):
            return False
        return not (record.batch.has_deps and self._may_wait_for(earlier, record))

    def _may_wait_for(self, start: _CallRecord, target: _CallRecord) -> bool:
        """True if ``start`` may wait for ``target`` along ``after=`` edges and hold-backs."""
        seen = {start.uid}
        stack = [start]
        while stack:
            current = stack.pop()
            deps = current.deps_left or ()
            following = [self._live[uid] for uid in deps if uid in self._live]
            for other in current.batch.unrequested.values():
                if other.uid >= current.uid:
                    break
                if other.state is _PENDING and _may_conflict(current.claims, other.claims):
                    following.append(other)
            for nxt in following:
                if nxt is target:
                    return True
                if nxt.uid not in seen:
                    seen.add(nxt.uid)
                    stack.append(nxt)
        return False

    def _request_top_level(self, record: _CallRecord) -> None:
        assert record.claims is not None
        claims = record.claims
        if self._max_concurrency is not None:
            claims = (*claims, units(pool(CONCURRENCY_POOL), 1))
        self._request(record, self._main, claims, record.call.priority, record.batch.uid)
        if record.state is _QUEUED:
            self._announce_block(record)

    def _request(
        self,
        record: _CallRecord,
        group: _LeaseGroup,
        claims: Sequence[Claim],
        priority: int,
        table_group: object,
    ) -> None:
        table = group.table
        lease_id = table.request(claims, priority=priority, group=table_group, owner=record)
        group.records[lease_id] = record
        if record.lease_group is None:
            record.lease_group, record.lease_id = group, lease_id
        elif record.more_leases is None:
            record.more_leases = [(group, lease_id)]
        else:
            record.more_leases.append((group, lease_id))
        if table.is_held(lease_id):
            self._granted(record)  # a pending call goes straight to RUNNING
            return
        record.waiting_in = group
        now = self._now()
        if record.state is not _QUEUED:
            self._move(record, _QUEUED, now)
        timeout = self._wait_timeout(record)
        if timeout is not None:
            record.wait_deadline = now + timeout
            self._timed[record.uid] = record
            self._reset_timer()

    def _granted(self, record: _CallRecord) -> None:
        """Leases granted: start the call (nested calls are started by their parent's task)."""
        if record.waiting_in is not None:
            record.waiting_in = None
            self._timed.pop(record.uid, None)
            record.wait_deadline = math.inf
        if record.granted is not None:
            record.granted.set()
            return
        self._move(record, _RUNNING, self._now())
        self._tasks.start_soon(self._call_task, record, name=_CALL_TASK_NAME)

    def _release_all(self, record: _CallRecord) -> None:
        """Give back every lease and withdraw every request of ``record``; start whoever is next."""
        if record.waiting_in is not None:
            record.waiting_in = None
            self._timed.pop(record.uid, None)
        group, lease_id, more = record.lease_group, record.lease_id, record.more_leases
        if group is None:
            return
        record.lease_group = record.more_leases = None
        for other_group, other_id in reversed(more or ()):
            self._give_back(record, other_group, other_id)
        self._give_back(record, group, lease_id)

    def _give_back(self, record: _CallRecord, group: _LeaseGroup, lease_id: int) -> None:
        del group.records[lease_id]
        for granted_id in group.table.release(lease_id, owner=record):
            self._granted(group.records[granted_id])

    async def _run_task(self, record: _CallRecord) -> None:
        if record.cancel_reason is None and not self._keys_still_hold(record):
            return  # back in the queue; a later grant starts a new task
        await self._execute(record)

    def _keys_still_hold(self, record: _CallRecord) -> bool:
        """Recompute a granted call's path keys; if one now names something else (a symlink or a
        rename changed it since admission), send the call back to the queue keeping its place.

        Returns True if the call may run now with what it holds.
        """
        if self._environment is None or record.tool is None:
            return True
        try:
            declared = record.tool.claims(record.arguments, self._environment.key)
            fresh = canonical_claims(
                (exclusive(EVERYTHING),) if declared is None else tuple(declared)
            )
        except (InvalidClaimError, InvalidCallError) as exc:
            self._release_all(record)
            self._finish(record, Status.ERROR, error=f"{type(exc).__name__}: {exc}")
            return False
        if fresh == record.claims:
            return True
        record.requeues += 1
        if record.requeues > MAX_REQUEUES:
            self._release_all(record)
            self._finish(
                record,
                Status.ERROR,
                error=f"its paths kept changing meaning while it waited (re-queued "
                f"{MAX_REQUEUES} times); try again",
            )
            return False
        record.claims = fresh
        claims = fresh
        if self._max_concurrency is not None:
            claims = (*claims, units(pool(CONCURRENCY_POOL), 1))
        group, lease_id = record.lease_group, record.lease_id
        assert group is not None
        now = self._now()
        self._move(record, _QUEUED, now)
        granted = group.table.requeue(lease_id, claims, owner=record)
        for granted_id in granted:
            if granted_id != lease_id:
                self._granted(group.records[granted_id])
        if lease_id in granted:
            self._move(record, _RUNNING, now)
            return True
        record.waiting_in = group
        timeout = self._wait_timeout(record)
        if timeout is not None:  # a fresh wait, with a fresh limit
            record.wait_deadline = now + timeout
            self._timed[record.uid] = record
            self._reset_timer()
        self._announce_block(record)
        return False

    async def _execute(self, record: _CallRecord) -> None:
        """Run a granted call's tool in this task; release its leases; finish it."""
        assert record.tool is not None and record.claims is not None
        if record.cancel_reason is not None:  # cancelled between its grant and its start
            self._release_all(record)
            self._finish(record, Status.CANCELLED, error=record.cancel_reason)
            return
        started_at = record.started_at = self._now()
        if record.state is not _RUNNING:
            self._move(record, _RUNNING, started_at)
        if self._listeners or record.sinks:
            self._emit(record, CallStarted(record.call.id, record.name, started_at))
        status, output, error = _OK, None, None
        run_timeout = self._run_timeout(record)
        try:
            with trio.CancelScope() as scope:
                record.scope = scope
                if run_timeout is not None:
                    scope.deadline = started_at + run_timeout
                if record.cancel_reason is not None:
                    scope.cancel()
                fs = None
                if self._environment is not None:
                    fs = self._environment.file_access(record.claims)
                call = record.call
                # call_id, tool_name, claims, depth, fs, kernel, record (positionally, as in
                # ``_new_record``)
                ctx = ToolContext(call.id, call.name, record.claims, record.depth, fs, self, record)
                output = await record.tool.invoke(ctx, record.arguments)
            if scope.cancelled_caught:
                output = None
                if record.cancel_reason is not None:
                    status, error = Status.CANCELLED, record.cancel_reason
                else:
                    status = Status.TIMEOUT
                    error = (
                        f"timed out after running for {_format_seconds(run_timeout or 0)}; "
                        f"try a smaller piece of work or a longer timeout"
                    )
        except trio.Cancelled:
            # The kernel (or the parent call) is being cancelled: record it, let it propagate.
            record.scope = None
            self._release_all(record)
            self._finish(record, Status.CANCELLED, error=record.cancel_reason or "cancelled")
            raise
        except Exception as exc:
            status, output, error = Status.ERROR, None, _describe_exception(exc)
        finally:
            record.scope = None
            self._release_all(record)
        result = self._make_result(record, status, output, error)
        if self._after_hooks:
            result = await self._apply_after_hooks(record, result)
        self._finish_with(record, result)

    async def _apply_after_hooks(self, record: _CallRecord, result: ToolResult) -> ToolResult:
        for hook in self._after_hooks:
            try:
                returned: Any = hook(self._visible_call(record), result)
                replacement = await returned if inspect.isawaitable(returned) else returned
            except Exception as exc:
                return attrs.evolve(
                    result,
                    status=Status.ERROR,
                    output=None,
                    error=f"an after-hook failed: {_describe_exception(exc)}",
                )
            if replacement is not None:
                result = replacement
        return result

    # -- nested calls --------------------------------------------------------------------------

    async def _call_nested(
        self, parent: _CallRecord, name: str, arguments: Mapping[str, Any]
    ) -> ToolResult:
        parent.nested_count += 1
        call = ToolCall(
            f"{parent.call.id}.{parent.nested_count}",
            name,
            dict(arguments),
            priority=parent.call.priority,
        )
        self._serial += 1
        batch = _Batch(self._serial, 1, self._serial + 1)
        record = self._new_record(call, batch, self._now(), parent=parent)
        record.batch.unrequested.clear()
        failure = self._admit(record)
        self._emit(record, CallQueued(call.id, name, record.queued_at, record.claims or ()))
        if failure is None and record.depth > self._max_depth:
            failure = (
                f"NestingDepthError: calls nested more than {self._max_depth} deep; "
                f"{parent.call.id} ({parent.name}) can't call {name}"
            )
        if failure is not None:
            self._finish(record, Status.ERROR, error=failure)
            assert record.result is not None
            return record.result
        awaiting = parent.awaiting
        if awaiting is None:
            awaiting = parent.awaiting = set()
        awaiting.add(record)
        try:
            if await self._run_prephase(record) and record.result is None:
                await self._acquire_nested(record)
                if record.result is None:
                    await self._execute(record)
        finally:
            awaiting.discard(record)
            if record.result is None:
                # The parent was cancelled while this call waited or ran.
                self._release_all(record)
                self._finish(record, Status.CANCELLED, error="cancelled with its parent call")
        assert record.result is not None
        return record.result

    async def _acquire_nested(self, record: _CallRecord) -> None:
        """Request a nested call's leases: covered ones in the parent's group, the rest outside."""
        parent = record.parent
        assert parent is not None and parent.claims is not None and record.claims is not None
        inside = [c for c in record.claims if any(covers(p, c) for p in parent.claims)]
        outside = [c for c in record.claims if c not in inside]
        self._move(record, _QUEUED, self._now())
        record.granted = trio.Event()
        if outside:
            # Outside claims first, so a deadlock is found before holding siblings' resources.
            self._request(
                record,
                self._main,
                outside,
                record.call.priority + NESTED_PRIORITY_BOOST,
                ("nested", record.uid),
            )
            await self._wait_nested_grant(record)
            if record.result is not None:
                return
        if inside or not outside:
            if parent.own_group is None:
                # With the kernel's pools: a parent holding a whole pool lends its units.
                parent.own_group = _LeaseGroup(LeaseTable(self._pools), parent)
            record.granted = trio.Event()
            self._request(record, parent.own_group, inside, record.call.priority, None)
            await self._wait_nested_grant(record)

    async def _wait_nested_grant(self, record: _CallRecord) -> None:
        assert record.granted is not None
        if record.granted.is_set():
            return
        cycle = self._find_wait_cycle(record)
        if cycle is not None:
            self._release_all(record)
            self._finish(record, Status.ERROR, error=self._deadlock_message(record, cycle))
            return
        self._announce_block(record)
        await record.granted.wait()

    def _find_wait_cycle(self, start: _CallRecord) -> list[_CallRecord] | None:
        """A chain start -> ... -> start of "waits for" edges, if one exists.

        A queued call waits for the calls whose leases it waits behind; a running call waits
        for the nested calls it is awaiting. A cycle means nobody in it can ever move.
        """
        visited: set[int] = set()
        stack: list[tuple[_CallRecord, list[_CallRecord]]] = [(start, [start])]
        while stack:
            record, trail = stack.pop()
            for nxt in self._waits_for_records(record):
                if nxt is start:
                    return trail
                if nxt.uid not in visited:
                    visited.add(nxt.uid)
                    stack.append((nxt, [*trail, nxt]))
        return None

    def _waits_for_records(self, record: _CallRecord) -> list[_CallRecord]:
        group = record.waiting_in
        if group is not None:
            lease_id = next(i for g, i in record.leases() if g is group)
            return [group.records[i] for i in group.table.waits_for(lease_id)]
        return sorted(record.awaiting or (), key=lambda r: r.uid)

    def _deadlock_message(self, record: _CallRecord, cycle: list[_CallRecord]) -> str:
        chain = " -> ".join(f"{r.call.id} ({r.name})" for r in [*cycle, record])
        return (
            f"{DeadlockError.__name__}: waiting for its leases would deadlock: {chain} "
            f"wait for each other; it was not run. Retry it after "
            f"{record.parent.call.id if record.parent else 'the other calls'} finishes, "
            f"or declare the resources on the outer call"
        )

    # -- finishing -----------------------------------------------------------------------------

    def _make_result(
        self, record: _CallRecord, status: Status, output: Any, error: str | None
    ) -> ToolResult:
        call = record.call
        return ToolResult(  # positionally, as in ``_new_record``
            call.id,
            call.name,
            status,
            output,
            error,
            record.queued_at,
            record.started_at,
            self._now(),  # finished_at
        )

    def _finish(
        self, record: _CallRecord, status: Status, *, output: Any = None, error: str | None = None
    ) -> None:
        self._finish_with(record, self._make_result(record, status, output, error))

    def _finish_with(self, record: _CallRecord, result: ToolResult) -> None:
        if record.result is not None:
            return
        self._move(record, _FINISHED, result.finished_at)
        record.result = result
        del self._live[record.uid]
        if self._timed:
            self._timed.pop(record.uid, None)
        batch = record.batch
        if batch.unrequested:
            batch.unrequested.pop(record.uid, None)
        self._finished_count += 1
        name = record.call.name
        tally = self._tallies.get(name)
        if tally is None:
            tally = self._tallies[name] = ToolTally(name)
        tally.add(result)
        if self._listeners or record.sinks:
            self._emit(record, CallFinished(record.call.id, name, result.finished_at, result))
        if record.finished is not None:
            record.finished.set()
        batch.unfinished -= 1
        if batch.unfinished == 0 and batch.done is not None:
            batch.done.set()
        for dependent in record.dependents or ():
            if dependent.result is not None:
                continue
            if result.status is not _OK:
                message = self._skip_message(record.call.id, name, result.status, result.error)
                self._finish(dependent, Status.SKIPPED, error=message)
            else:
                assert dependent.deps_left is not None
                dependent.deps_left.discard(record.uid)
                if not dependent.deps_left:
                    self._begin_prephase(dependent)
        if record.parent is None:
            call_id = record.call.id
            if self._by_call_id.get(call_id) is record:  # not since shadowed by a newer call
                del self._by_call_id[call_id]
                self._ended[call_id] = (name, result.status, result.error)
            if batch.unrequested:  # else every call of the batch has asked already
                self._issue_requests(batch)

    def _cancel(self, record: _CallRecord, reason: str) -> None:
        if record.result is not None:
            return
        if record.cancel_reason is None:
            record.cancel_reason = reason
        if record.scope is not None:
            record.scope.cancel()  # the pre-phase or running task finishes it
        elif record.state is _RUNNING:
            pass  # its task has not started yet; it sees cancel_reason when it does
        elif record.parent is not None and record.state is _QUEUED:
            # A nested call waiting inline: withdraw and wake its parent's task.
            self._release_all(record)
            self._finish(record, Status.CANCELLED, error=reason)
            if record.granted is not None:
                record.granted.set()
        else:
            self._release_all(record)
            self._finish(record, Status.CANCELLED, error=reason)
        for child in list(record.awaiting or ()):
            self._cancel(child, f"cancelled with its parent call {record.call.id}")

    # -- timeouts ------------------------------------------------------------------------------

    def _wait_timeout(self, record: _CallRecord) -> float | None:
        if record.call.wait_timeout is not None:
            return record.call.wait_timeout
        if record.tool is not None and record.tool.wait_timeout is not None:
            return record.tool.wait_timeout
        return self._default_wait_timeout

    def _run_timeout(self, record: _CallRecord) -> float | None:
        if record.call.run_timeout is not None:
            return record.call.run_timeout
        if record.tool is not None and record.tool.run_timeout is not None:
            return record.tool.run_timeout
        return self._default_run_timeout

    def _reset_timer(self) -> None:
        if self._timer_scope is not None:
            self._timer_scope.deadline = min(
                (r.wait_deadline for r in self._timed.values()), default=math.inf
            )

    async def _timer(self) -> None:
        """Expire lease waits that ran past their deadline (one task for the whole kernel)."""
        while not self._closed:
            with trio.CancelScope() as scope:
                self._timer_scope = scope
                self._reset_timer()
                await trio.sleep_forever()
            now = self._now()
            due = sorted(
                (r for r in self._timed.values() if r.wait_deadline <= now), key=lambda r: r.uid
            )
            for record in due:
                if record.result is not None or record.state is not _QUEUED:
                    continue
                behind = self._describe_waits(record)
                timeout = self._wait_timeout(record) or 0
                self._release_all(record)
                self._finish(
                    record,
                    Status.TIMEOUT,
                    error=f"timed out after waiting {_format_seconds(timeout)} for its "
                    f"leases{behind}; try again later",
                )
                if record.granted is not None:
                    record.granted.set()

    # -- observing -----------------------------------------------------------------------------

    def _move(self, record: _CallRecord, state: CallState, now: float) -> None:
        """Move ``record`` to ``state`` at time ``now`` (the caller's: reading the clock once
        per step, not once per move, is a measurable part of a call's cost)."""
        check_transition(record.call.id, record.state, state)
        record.state = state
        record.state_since = now

    def _emit(self, record: _CallRecord, event: CallEvent) -> None:
        for listener in [*self._listeners, *record.sinks]:
            try:
                listener(event)
            except Exception:
                # A broken listener must not break the calls it watches; drop it, say so.
                if listener in self._listeners:
                    self._listeners.remove(listener)
                record.sinks = tuple(s for s in record.sinks if s is not listener)
                _log.exception("toolkernel: removed an event listener that raised")

    def _report_progress(self, record: _CallRecord, message: str, data: Any) -> None:
        self._emit(record, CallProgress(record.call.id, record.name, self._now(), message, data))

    def _waits_for(self, record: _CallRecord) -> tuple[str, ...]:
        return tuple(r.call.id for r in self._waits_for_records(record))

    def _contested(self, record: _CallRecord) -> tuple[str, ...]:
        mine = record.claims or ()
        found: list[str] = []
        for other in self._waits_for_records(record):
            for claim in mine:
                for theirs in other.claims or ():
                    if claims_conflict(claim, theirs) or claim.node == theirs.node:
                        text = str(claim.resource) if claim.node != ("path",) else "workspace"
                        if text not in found:
                            found.append(text)
        if not found and self._max_concurrency is not None and record.parent is None:
            found.append(f"one of {self._max_concurrency} concurrency slots")
        return tuple(found)

    def _describe_waits(self, record: _CallRecord) -> str:
        others = self._waits_for_records(record)
        if not others:
            return ""
        names = ", ".join(f"{r.call.id} ({r.name})" for r in others[:5])
        resources = ", ".join(self._contested(record)[:5])
        on = f" on {resources}" if resources else ""
        return f" behind {names}{on}"

    def _announce_block(self, record: _CallRecord) -> None:
        if not (self._listeners or record.sinks):
            return  # working out whom it waits behind is not free
        self._emit(
            record,
            CallBlocked(
                record.call.id,
                record.name,
                self._now(),
                self._waits_for(record),
                self._contested(record),
            ),
        )

    # -- closing -------------------------------------------------------------------------------

    def _close(self) -> None:
        self._closed = True
        self.cancel_all()
        if self._timer_scope is not None:
            self._timer_scope.cancel()


def _may_conflict(claims: tuple[Claim, ...] | None, earlier: tuple[Claim, ...] | None) -> bool:
    if claims is None or earlier is None:
        return True
    return any(claims_conflict(a, b) for a in claims for b in earlier)


def _find_cycles(
    records: list[_CallRecord], edges: dict[int, list[_CallRecord]]
) -> list[list[_CallRecord]]:
    """Cycles among ``records`` through their dependency edges (iterative DFS, in order)."""
    by_uid = {r.uid: r for r in records}
    color: dict[int, int] = {}  # 1 on the stack, 2 done
    cycles: list[list[_CallRecord]] = []
    for root in records:
        if root.uid in color:
            continue
        stack: list[tuple[_CallRecord, int]] = [(root, 0)]
        trail: list[_CallRecord] = []
        while stack:
            record, index = stack.pop()
            if index == 0:
                color[record.uid] = 1
                trail.append(record)
            deps = [d for d in edges.get(record.uid, ()) if d.uid in by_uid]
            if index < len(deps):
                stack.append((record, index + 1))
                dep = deps[index]
                state = color.get(dep.uid)
                if state is None:
                    stack.append((dep, 0))
                elif state == 1:
                    cycles.append(trail[trail.index(dep) :])
            else:
                color[record.uid] = 2
                trail.pop()
    return cycles


@asynccontextmanager
async def open_kernel_core(tools: Iterable[KernelTool], **options: Any) -> AsyncIterator[Kernel]:
    """Open a :class:`Kernel` without a workspace (paths are keyed lexically, ``ctx.fs`` is None).

    On exit every unfinished call is cancelled and gets its result; leases all return.
    """
    # Built before the nursery opens, so bad options raise plainly, not in an ExceptionGroup.
    kernel = Kernel(tools, **options)
    async with trio.open_nursery() as nursery:
        kernel._nursery_or_none = nursery
        nursery.start_soon(kernel._timer)
        try:
            yield kernel
        finally:
            kernel._close()

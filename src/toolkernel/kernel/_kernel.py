"""The kernel's async layer: tasks, cancel scopes and waits, acting on the scheduler's decisions.

Every decision about a call (admission, emission order, grants, timeouts, deadlocks, results)
is taken synchronously by the :class:`~toolkernel.kernel._scheduler.Scheduler`; its module
docstring describes a call's lifecycle. This module only does what needs an event loop:

- it takes the actions the scheduler's operations return (``_actions``): it spawns a task when
  the scheduler grants a call (or when hooks or the policy have to await), runs the tool in a
  cancel scope carrying the run timeout, and reports the outcome;
- it runs every await made on a user's behalf (before-hooks, the approver, the tool, after-hooks)
  inside a cancel scope the scheduler can cancel, so cancelling a call or closing the kernel
  always returns;
- it sleeps until the earliest lease-wait deadline, in one timer task;
- it lets callers wait: for a batch (one event per batch), a call, or a nested call's grant;
- with leases shared with other processes (``open_kernel(leases=...)``), it takes a granted
  call's claims from the shared backend too before the tool starts, and gives them back when
  its local leases go (see ``_take_shared``).

Its cancel scopes, events and the calls' contexts are its own, kept here by record; nothing is
hung on the records, and it changes none: it asks the scheduler. Here too are what it hands
out: a submitted call's :class:`CallHandle`, and the events of a timed ``stream``.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import math
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, NoReturn, cast

import anyio
import anyio.abc
import anyio.lowlevel

from .._errors import HoldMore
from ..leases._backend import Fence, Grant, LeaseBackend
from ..leases._fencing import CoveringFence
from ..locks import Claim, LeaseTableStatistics, path
from . import _loop as loop
from . import _messages as messages
from ._actions import CHANGED, INTERRUPT, PREPHASE, REVOKE, START, TELL, TIMER, Action, Telling
from ._admission import split_by_cover
from ._ahead import ChangedMeanwhile
from ._call import CANCELLED, ERROR, OK, Status, ToolCall, ToolResult
from ._context import ToolContext
from ._events import CallEvent, CallFinished, KernelListener
from ._messages import ASKED, CancelReason, Why
from ._observe import KernelSnapshot, KernelStatistics
from ._options import KernelOptions, check_seconds
from ._policy import Decision, Permission
from ._protocol import Environment, KernelTool
from ._record import (
    AHEAD,
    AWAITING,
    AWAITING_SLOT,
    FINISHED,
    FRESH,
    GRANTED,
    HOOKED,
    RUNNING,
    Batch,
    CallRecord,
)
from ._scheduler import Scheduler

__all__ = ["Kernel", "open_kernel_core", "NoPublicConstructor", "TimedEvents", "CallHandle"]


# -- A submitted call's handle: what is known of the call, waiting for it, cancelling it ----------
# One shape for the objects users hold (a handle, a tool): what is already known and cheap to
# read is an attribute or a property (``handle.call_id``, ``handle.finished``, ``handle.result``;
# ``tool.name``, ``tool.reads``); what waits, acts or computes is a method
# (``await handle.wait_finished()``, ``handle.cancel()``; ``tool.parameters_schema()``, which
# writes a fresh schema, and ``tool.claims(arguments, key)``).
class CallHandle:
    """A submitted call: read its state and result, wait for it, cancel it.

    ``kernel.submit`` and ``kernel.submit_batch`` make them::

        handle = kernel.submit(ToolCall("c1", "Read", {"file_path": "a.txt"}))
        result = await handle.wait_finished()      # waits
        assert handle.finished and handle.result is result
    """

    __slots__ = ("_kernel", "_record", "call")

    def __init__(self, call: ToolCall, record: CallRecord, kernel: Kernel) -> None:
        self.call = call
        """The call as submitted."""
        self._record = record
        self._kernel = kernel

    def __repr__(self) -> str:
        return f"<CallHandle {self.call.id!r} {self._record.state.name}>"

    @property
    def call_id(self) -> str:
        """The call's id."""
        return self.call.id

    @property
    def finished(self) -> bool:
        """True once the call has its result."""
        return self._record.stage is FINISHED

    @property
    def result(self) -> ToolResult:
        """The call's result; raises ``RuntimeError`` if it has not finished (see
        ``finished``; ``await wait_finished()`` waits for it).

        It was a method: ``handle.result()`` still works, with a ``DeprecationWarning``.
        """
        result = self._record.result
        if result is None:
            raise RuntimeError(f"call {self.call.id} has not finished")
        return result

    async def wait_finished(self) -> ToolResult:
        """Wait until the call has finished and return its result. Always a checkpoint."""
        return await self._kernel._wait_finished(self._record)

    def cancel(self) -> None:
        """Cancel the call (synchronous); it finishes with a CANCELLED result, unless its tool
        finishes anyway (a commit it shields from cancellation) and says what it did."""
        self._kernel._cancel_call(self._record)


# -- The events of a streamed batch with a time limit (``Kernel.stream(calls, timeout=...)``) -----
# The limit is kept by the reader's own waits, not by a task of its own: each wait for the next
# event runs in a cancel scope with the batch's deadline, and when one reaches it, the batch's
# unfinished calls are timed out (``Scheduler.time_out``), whose ``CallFinished`` events (TIMEOUT)
# the reader then gets like any other. A reader that stops reading for a while times the batch
# out at its next read. Receiving from a memory stream is cancellation-safe: no event is lost.
class TimedEvents:
    """``events``, calling ``expire`` (once) when a wait for the next reaches ``deadline``."""

    __slots__ = ("_clock", "_deadline", "_events", "_expire")

    def __init__(
        self,
        events: AsyncIterator[CallEvent],
        deadline: float,
        clock: Callable[[], float],
        expire: Callable[[], None],
    ) -> None:
        self._events = events
        self._deadline = deadline
        self._clock = clock
        self._expire: Callable[[], None] | None = expire

    def __aiter__(self) -> TimedEvents:
        return self

    async def __anext__(self) -> CallEvent:
        expire = self._expire
        if expire is not None:
            if self._clock() < self._deadline:
                with anyio.CancelScope(deadline=self._deadline):
                    return await self._events.__anext__()
            # Out of time: before any wait (a limit of 0 starts no call), or while waiting.
            self._expire = None
            expire()
        return await self._events.__anext__()


def _listed(calls: Iterable[ToolCall], method: str) -> list[ToolCall]:
    """``calls`` as a list; a lone ``ToolCall`` (not iterable) is refused saying so."""
    if isinstance(calls, list):
        return calls
    if isinstance(calls, ToolCall) or not isinstance(calls, Iterable):
        raise messages.not_a_batch(method, calls)
    return list(calls)


# -- Objects that only work when opened by their context manager have no public constructor -------
class NoPublicConstructor(type):
    """As trio's ``Nursery``: ``Kernel(...)`` raises; ``open_kernel`` builds one with
    ``Kernel._create(...)``."""

    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            f"{cls.__module__}.{cls.__qualname__} has no public constructor; "
            f"use `async with toolkernel.open_kernel(...) as kernel:`"
        )

    def _create(cls, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*args, **kwargs)


_log = logging.getLogger("toolkernel")

_CALL_TASK_NAME = "toolkernel.kernel._kernel.Kernel._run_chain"
"""The name of every call's task. Given, not derived: trio would format one for every spawn."""
_PREPHASE_TASK_NAME = "toolkernel.kernel._kernel.Kernel._prephase_task"

_running_call: contextvars.ContextVar[CallRecord | None] = contextvars.ContextVar(
    "toolkernel_running_call", default=None
)
"""The call whose tool this task runs (tasks it starts inherit it): a tool that calls
``kernel.run`` on its own kernel waits for those calls, which the wait-for graph must know."""


# -- The async layer ------------------------------------------------------------------------------
class _KeptScope:
    """A call's cancel scope, in the kernel's ``_scopes`` while it is entered (cancelling the
    call cancels it; ``Kernel._interrupt``) and forgotten as it is left, however it is left."""

    __slots__ = ("_record", "_scope", "_scopes")

    def __init__(self, scopes: dict[CallRecord, Any], record: CallRecord, scope: Any) -> None:
        self._scopes, self._record, self._scope = scopes, record, scope

    def __enter__(self) -> Any:
        self._scopes[self._record] = self._scope
        return self._scope.__enter__()

    def __exit__(self, *exc_info: Any) -> bool | None:
        if self._scopes.get(self._record) is self._scope:
            del self._scopes[self._record]
        return self._scope.__exit__(*exc_info)  # type: ignore[no-any-return]


class Kernel(metaclass=NoPublicConstructor):
    """Runs tool calls concurrently, each as soon as its declared leases are granted.

    Open one with ``toolkernel.open_kernel`` (or :func:`open_kernel_core` without a workspace);
    it works only inside that ``async with`` block.
    """

    def __init__(
        self,
        tools: Iterable[KernelTool],
        environment: Environment | None,
        options: KernelOptions,
        shared: LeaseBackend | None = None,
        shared_at: str | None = None,
    ) -> None:
        self._environment = environment
        # Leases shared with other processes, and what this kernel's calls hold there.
        self._shared = shared
        self._leases = "in-process" if shared is None else shared_at or "shared"
        self._grants: dict[CallRecord, Grant] = {}
        self._before_hooks = options.before_hooks
        self._after_hooks = options.after_hooks
        self._approver = options.approver
        timeout = options.approval_timeout
        self._approval_timeout = math.inf if timeout is None else timeout
        self._loop = loop.current()
        self._spawn: loop.Spawn | None = None
        self._timer_scope: anyio.CancelScope | None = None
        # The async layer's own handles, by record: the scope a call's hooks or tool run in;
        # what a handle's ``wait_finished`` or a nested call's parent waits on; ``run``'s wait.
        self._scopes: dict[CallRecord, Any] = {}
        self._waiters: dict[CallRecord, Any] = {}  # the loop's events (``Loop.Event``)
        self._grant_waiters: dict[CallRecord, Any] = {}  # tools run ahead: their grants
        self._change_waiters: dict[CallRecord, Any] = {}  # and what changed meanwhile
        self._contexts: dict[CallRecord, ToolContext] = {}  # revoked when their leases go
        self._batch_waiters: dict[Batch, Any] = {}
        self._scheduler = Scheduler(
            tools,
            options,
            key=environment.key if environment is not None else path,
            clock=self._loop.clock,
        )
        # With a workspace, a granted call's keys are confirmed before it runs.
        self._call_task = (
            self._run_task
            if environment is not None
            else self._run_granted
            if shared is None
            else self._execute
        )
        # A call's task runs on the calls its end starts (``_run_chain``); these say whether the
        # ``START`` actions taken now are kept for it, and the one kept.
        self._catching = False
        self._caught: CallRecord | None = None
        # Events to give, in the order the scheduler decided them, and whether they are being
        # given (``_act``): a listener's own operations add theirs behind.
        self._told: deque[Telling] = deque()
        self._telling = False

    # -- public API ----------------------------------------------------------------------------

    @property
    def tools(self) -> Mapping[str, KernelTool]:
        """The tools by name."""
        return dict(self._scheduler.tools)

    @property
    def leases(self) -> str:
        """Where this kernel's leases are decided: ``"in-process"`` (its own lease table
        alone), or the ``leases=`` URL of the backend it shares them through (``"unix:PATH"``,
        ``"etcd://host:port"``); with ``leases="auto"``, whichever was found. Read-only."""
        return self._leases

    def add_listener(self, listener: KernelListener) -> Callable[[], None]:
        """Call ``listener`` synchronously with every event; returns a function that removes it.

        Each event is given in the task where it happens: ``CallQueued`` in the task that
        submitted the call, ``CallStarted`` in the task that runs it, just before its tool
        runs (so a listener may set context there, as ``toolkernel.trace.otel`` does).

        A listener that is also a :class:`~toolkernel.kernel.FileAccessListener` (it has a
        ``file_accessed`` method) sees every file access made through ``ctx.fs``; one that is a
        :class:`~toolkernel.kernel.LeaseListener` (a ``leases_returned`` method) is told when a
        call's leases return before its ``CallFinished``. ``toolkernel.testing.Recorder`` is
        both. The protocols' docstrings say when each is called.

        A listener that raises is removed (and the error logged); it never breaks a call.
        """
        return self._scheduler.add_listener(listener)

    def submit(
        self,
        call: ToolCall,
        *,
        tools: Iterable[KernelTool] | None = None,
        within: CallHandle | None = None,
    ) -> CallHandle:
        """Submit one call (a batch of one); synchronous. Returns its handle."""
        return self.submit_batch([call], tools=tools, within=within)[0]

    def submit_batch(
        self,
        calls: Iterable[ToolCall],
        *,
        tools: Iterable[KernelTool] | None = None,
        within: CallHandle | None = None,
    ) -> list[CallHandle]:
        """Submit calls as one batch (synchronous); one handle per call, in order.

        Conflicting calls of a batch run in the order given; the others overlap. ``tools``:
        tools for this batch alone, found by name before the kernel's own (an adapter's tools,
        which the kernel was not opened with). ``within``: the running call these calls are
        made from inside, when its tool awaits them from a task the kernel can't tell is its
        own (a framework's, as an agent used as a tool runs its agent's calls): they run
        inside its leases where those cover them, as ``ctx.call`` and ``run`` from its own
        task do, and a wait for it that could never end fails with a ``DeadlockError``.
        Raises ``TypeError`` (and submits nothing) if an item is not a ``ToolCall``, and
        ``KernelClosedError`` once the kernel is closing.
        """
        self._loop.check_caller("kernel.submit", "anyio.from_thread.run_sync(kernel.submit, call)")
        calls = _listed(calls, "submit_batch")
        awaited_by = None
        if within is not None:
            record = within._record
            live = record.stage is not FINISHED and self._scheduler.is_live(record)
            awaited_by = record if live and within._kernel is self else None
        records, actions = self._scheduler.submit(calls, None, awaited_by, tools)
        self._act(actions)
        return [CallHandle(r.call, r, self) for r in records]

    async def run(
        self,
        calls: Iterable[ToolCall],
        *,
        tools: Iterable[KernelTool] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - not a cancel scope: results are kept
    ) -> list[ToolResult]:
        """Run a batch and return one result per call, in call order, whatever happened.

        ``timeout`` (seconds): the calls unfinished when it runs out end ``TIMEOUT`` (their
        leases return), the others keep their results (a ``move_on_after`` around ``run``
        would lose them). If the caller is cancelled, the calls are cancelled too. A lone
        call granted at once runs in the caller's task unless timed. ``tools``: as for
        ``submit_batch``.
        """
        self._loop.check_caller("kernel.run", "anyio.from_thread.run(kernel.run, calls)")
        check_seconds("timeout", timeout)
        calls = calls if isinstance(calls, list) else _listed(calls, "run")
        records, actions = self._scheduler.submit(calls, None, self._caller(), tools)
        inline = None
        if len(records) == 1 and timeout is None and actions:
            # A lone call granted at once runs in this task, not one of its own; every other
            # action is taken as usual (a listener may have submitted or cancelled calls).
            start = (START, records[0])
            if start in actions:
                inline = records[0]
                actions = [action for action in actions if action != start]
        self._act(actions)
        if not records:
            await anyio.lowlevel.checkpoint()
            return []
        batch = records[0].batch
        try:
            if inline is not None:
                await self._loop.checkpoint()  # a schedule point, whatever the tool does
                await self._call_task(inline)
            # One event for the whole batch, not one per call: a batch of thousands would
            # otherwise wake this task thousands of times.
            if batch.unfinished:
                done = self._batch_waiters[batch] = self._loop.Event()
                if timeout is None:
                    await done.wait()
                elif timeout != 0:  # with 0 no call starts (on asyncio, its task would begin)
                    with anyio.move_on_after(timeout):
                        await done.wait()
                if batch.unfinished:  # out of time (the caller's own cancellation raised)
                    self._act(self._scheduler.time_out(records, cast(float, timeout)))
                    await self._unwound(batch)
                    await anyio.lowlevel.checkpoint()  # with 0, nothing above awaited
            elif inline is None:
                await anyio.lowlevel.checkpoint()  # every call failed at admission
        except BaseException:
            self._cancel_batch(records, CancelReason(Why.CALLER_CANCELLED))
            await self._unwound(batch)
            raise
        finally:
            self._batch_waiters.pop(batch, None)
        # Every call has its result now (not ``cast`` for each: a function call a call).
        return [record.result for record in records]  # type: ignore[misc]

    def _cancel_batch(self, records: list[CallRecord], reason: CancelReason) -> None:
        for record in records:
            self._act(self._scheduler.cancel(record, reason))

    def _caller(self) -> CallRecord | None:
        """The running call of this kernel whose tool (or a task it started) is submitting."""
        record = _running_call.get()
        if record is None or record.stage is FINISHED:
            return None
        return record if self._scheduler.is_live(record) else None

    async def _unwound(self, batch: Batch) -> None:
        """Wait, shielded, until every call of a cancelled batch has finished: as a nursery,
        ``run`` and ``stream`` leave no call of theirs running or holding a lease."""
        if batch.unfinished:
            with anyio.CancelScope(shield=True):
                done = self._batch_waiters.setdefault(batch, self._loop.Event())
                await done.wait()

    @asynccontextmanager
    async def stream(
        self,
        calls: Iterable[ToolCall],
        *,
        tools: Iterable[KernelTool] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - as for ``run``
    ) -> AsyncIterator[AsyncIterator[CallEvent]]:
        """Submit a batch and iterate over its events; the iteration ends when all finished.

        Leaving the block early cancels what is still running. ``tools`` and ``timeout`` as for
        ``run`` (calls it cuts short end TIMEOUT, with their ``CallFinished``).
        """
        self._loop.check_caller("kernel.stream", "anyio.from_thread.run(...)")
        check_seconds("timeout", timeout)
        calls = _listed(calls, "stream")
        send, receive = anyio.create_memory_object_stream[CallEvent](math.inf)
        remaining = len(calls)

        def sink(event: CallEvent) -> None:
            nonlocal remaining
            try:
                send.send_nowait(event)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return  # the reader has gone: nobody wants the rest
            if isinstance(event, CallFinished):
                remaining -= 1
                if remaining == 0:
                    send.close()

        if not calls:
            send.close()
        # Attached before admission, so the batch's first events (CallQueued) are not missed.
        records, actions = self._scheduler.submit(calls, sink, self._caller(), tools)
        self._act(actions)
        events: AsyncIterator[CallEvent] = receive
        if timeout is not None:
            out_of_time = partial(self._time_out, records, timeout)
            clock = self._loop.clock
            events = TimedEvents(receive, clock() + timeout, clock, out_of_time)
        try:
            async with receive:
                yield events
        finally:
            # Detach from every call first: cancelling one can start or finish others.
            self._scheduler.detach(records, sink)
            send.close()
            self._cancel_batch(records, CancelReason(Why.STREAM_LEFT))
            if records:
                batch = records[0].batch
                try:
                    await self._unwound(batch)
                finally:
                    self._batch_waiters.pop(batch, None)

    def _time_out(self, records: list[CallRecord], limit: float) -> None:
        self._act(self._scheduler.time_out(records, limit))

    def cancel(self, *call_ids: str) -> None:
        """Cancel calls by id (synchronous); unknown or finished ids are ignored. An id two
        unfinished batches share cancels the call of each.

        Each cancelled call gets a CANCELLED result and its leases return, unless its tool
        finishes anyway (a commit it shields from cancellation): its result then says what it
        did. Raises ``TypeError`` (cancelling nothing) if an id is not a string.
        """
        for call_id in call_ids:
            if not isinstance(call_id, str):
                raise TypeError(f"call ids are strings, not {type(call_id).__name__}")
        self._loop.check_caller("kernel.cancel", "anyio.from_thread.run_sync(kernel.cancel, id)")
        for call_id in call_ids:
            for record in self._scheduler.live_calls(call_id):  # each batch's, if several
                self._act(self._scheduler.cancel(record, ASKED))

    def cancel_all(self) -> None:
        """Cancel every unfinished call."""
        self._loop.check_caller("kernel.cancel_all", "anyio.from_thread.run_sync(...)")
        self._act(self._scheduler.cancel_all())

    def snapshot(self) -> KernelSnapshot:
        """What runs, what waits for leases (and behind whom), what is pending."""
        return self._scheduler.snapshot()

    def statistics(self) -> KernelStatistics:
        """Counts by state; per tool: count, errors by type, wait and run percentiles; the
        peak number of calls running at once; and lease contention per resource (which paths
        are hot, how long calls waited on each). Memory stays bounded: see
        :class:`KernelStatistics`."""
        return self._scheduler.statistics()

    def lease_statistics(self) -> LeaseTableStatistics:
        """The statistics of the kernel's top-level lease table."""
        return self._scheduler.lease_statistics()

    # -- what the scheduler asks for -------------------------------------------------------------

    def _act(self, actions: Sequence[Action]) -> None:
        """Take the actions a scheduler operation returned (``_actions``): first give its events
        (``TELL``), in order, as the events they follow were given before them, then the rest,
        in order.

        The events go first, as they went when they were given in the middle of the
        operation: a task started now inherits the context its call's ``CallQueued`` listeners
        set (``testing.Recorder`` follows a run that way). A listener that cancels or submits
        calls starts an operation of its own on a settled scheduler, whose events are given
        after these; what it makes of the actions here (a call it cancelled has no task to
        start) the tasks find, as a task cancelled before it begins does."""
        told = self._told
        for act, record in actions:
            if act is TELL:  # the scheduler hands an operation's events over first
                told.append(record)
                continue
            if told and not self._telling:
                self._tell()
            if act is START:
                if self._catching and self._caught is None:
                    self._caught = record  # the ending call's task runs it
                else:
                    self._spawn_task(self._run_chain, record, _CALL_TASK_NAME)
            elif act is INTERRUPT:
                self._interrupt(record)
            elif act is REVOKE:
                context = self._contexts.pop(record, None)
                if context is not None:
                    context.close()
            elif act is TIMER:
                scope = self._timer_scope
                deadline = self._scheduler.next_deadline()
                if scope is not None and deadline < scope.deadline:
                    scope.deadline = deadline
            elif act is PREPHASE:
                self._spawn_task(self._prephase_task, record, _PREPHASE_TASK_NAME)
            elif act is CHANGED:
                waiter = self._change_waiters.pop(record, None)
                if waiter is not None:
                    waiter.set()
            else:  # WAKE
                if self._grant_waiters and record.stage is not FINISHED:
                    waiter = self._grant_waiters.pop(record, None)
                    if waiter is not None:  # granted: its tool goes on; its handles wait on
                        waiter.set()
                        continue
                waiter = self._waiters.pop(record, None) if self._waiters else None
                if waiter is not None:
                    waiter.set()
                if self._grant_waiters:
                    waiter = self._grant_waiters.pop(record, None)
                    if waiter is not None:
                        waiter.set()
                if record.batch.unfinished == 0 and self._batch_waiters:
                    done = self._batch_waiters.pop(record.batch, None)
                    if done is not None:
                        done.set()
        if told and not self._telling:
            self._tell()

    def _tell(self) -> None:
        """Give the events waiting to be given, in order, to the listeners."""
        scheduler = self._scheduler
        told, deliver = self._told, scheduler.report.deliver
        self._telling = True
        try:
            while told:
                record, event = told.popleft()
                for broken in deliver(record, event):
                    scheduler.detach((record,), broken)
        finally:
            self._telling = False

    def _interrupt(self, record: CallRecord) -> None:
        scope = self._scopes.get(record)
        if scope is not None:
            scope.cancel()  # the task running it unwinds and finishes it
        elif record.stage is not FINISHED:
            # Pending, queued, granted with its task not started yet (the task then finds it
            # finished and does nothing: on asyncio a task cancelled before it starts never
            # runs at all), or a nested call between two steps of its parent's task.
            reason = record.cancel_reason or ASKED
            self._act(self._scheduler.finish_failed(record, CANCELLED, messages.cancelled(reason)))

    def _spawn_task(self, function: Any, record: Any, name: str) -> None:
        spawn = self._spawn
        assert spawn is not None
        if _running_call.get() is None:
            spawn(function, record, name)
            return
        # Spawned from inside a tool's task (its nested call released leases another call was
        # waiting for): a task inherits its spawner's context, and this one must not take that
        # tool's call for its own (``_caller``).
        context = contextvars.copy_context()
        context.run(_running_call.set, None)
        context.run(spawn, function, record, name)

    def _scope(self, record: CallRecord, deadline: float = math.inf) -> _KeptScope:
        """The cancel scope ``record``'s hooks or tool run in, under ``deadline``; cancelled
        already if the call was. Kept while it is entered: cancelling the call cancels it."""
        scope = self._loop.CancelScope()
        if deadline != math.inf:
            scope.deadline = deadline
        if record.cancel_reason is not None:
            scope.cancel()
        return _KeptScope(self._scopes, record, scope)

    async def _wait_finished(self, record: CallRecord) -> ToolResult:
        """For ``CallHandle``: wait until ``record`` has finished."""
        if record.stage is not FINISHED:
            self._loop.check_caller(
                "CallHandle.wait_finished", "anyio.from_thread.run(handle.wait_finished)"
            )
            caller = self._caller()
            if caller is not None and caller is not record:
                self._act(self._scheduler.await_handle(caller, record))
            try:
                if record.stage is not FINISHED:
                    waiter = self._waiters.get(record)
                    if waiter is None:
                        waiter = self._waiters[record] = self._loop.Event()
                    await waiter.wait()
            finally:
                if caller is not None and caller is not record:
                    self._scheduler.stop_awaiting_handle(caller, record)
        else:
            await anyio.lowlevel.checkpoint()  # as waiting on a set event would
        assert record.result is not None
        return record.result

    def _cancel_call(self, record: CallRecord) -> None:
        """For ``CallHandle``: cancel ``record``."""
        self._loop.check_caller("CallHandle.cancel", "anyio.from_thread.run_sync(handle.cancel)")
        self._act(self._scheduler.cancel(record, ASKED))

    async def _wait_granted(self, record: CallRecord) -> tuple[ChangedMeanwhile, ...]:
        """For ``ToolContext.wait_granted``: wait until ``record``'s leases are granted (at
        once for a call that did not run ahead), and, with shared leases, taken from the
        backend too; the calls that changed something it conflicts with meanwhile."""
        scheduler = self._scheduler
        if record.stage is AHEAD:
            waiter = self._grant_waiters[record] = self._loop.Event()
            try:
                self._act(scheduler.await_grant(record))
                if record.stage is AWAITING or record.stage is AWAITING_SLOT:
                    await waiter.wait()
                else:
                    await self._loop.checkpoint()
            finally:
                self._grant_waiters.pop(record, None)
        else:  # granted already: while it ran ahead, or before it started
            await self._loop.checkpoint()
        if record.meanwhile is not None and record.stage is RUNNING:
            scheduler.leases_granted(record)  # in its own task, as ``leases_returned``
        if (
            self._shared is not None
            and record.meanwhile is not None  # it ran ahead: its shared leases are taken now
            and record.stage is RUNNING
            and record not in self._grants
        ):
            claims = self._shared_claims(record)
            if claims:
                await self._take_shared(record, claims)  # if it fails, the call is finished
        return scheduler.changed_meanwhile(record)

    async def _wait_changed(self, record: CallRecord, seen: int) -> tuple[ChangedMeanwhile, ...]:
        """For ``ToolContext.wait_changed``: wait until more than ``seen`` calls have told
        ``record``, running ahead, what they changed; all of them. Once it is granted, or if it
        never ran ahead, none can come: this waits until cancelled."""
        scheduler = self._scheduler
        while True:
            told = scheduler.changed_meanwhile(record)
            if len(told) > seen:
                await self._loop.checkpoint()
                return scheduler.changed_meanwhile(record)
            if not scheduler.may_be_told(record):
                await anyio.sleep_forever()
            waiter = self._change_waiters.get(record)
            if waiter is None:
                waiter = self._change_waiters[record] = self._loop.Event()
            try:
                await waiter.wait()
            finally:
                if self._change_waiters.get(record) is waiter:
                    del self._change_waiters[record]

    def _report_changes(self, record: CallRecord, changed: Iterable[Claim]) -> None:
        """For ``ToolContext.report_changes``."""
        self._scheduler.report_changes(record, changed)

    @staticmethod
    def _ran_ahead(record: CallRecord) -> bool:
        """For ``ToolContext.ran_ahead``."""
        return record.meanwhile is not None

    @staticmethod
    def _before_grant(record: CallRecord) -> bool:
        """For ``ToolContext.fs``: whether ``record`` runs ahead of its grant, ungranted."""
        return record.stage is AHEAD or record.stage is AWAITING

    def _report_thrown_away(self, record: CallRecord) -> None:
        """For ``ToolContext.report_thrown_away``."""
        self._scheduler.report_thrown_away(record)

    def _progress(self, record: CallRecord, message: str, data: Any) -> None:
        """For ``ToolContext.progress``."""
        self._act(self._scheduler.progress(record, message, data))

    def _file_observer(self) -> Callable[..., None] | None:
        """For ``ToolContext.fs``: what to tell of every file a call touches, if anyone
        listens."""
        return self._scheduler.file_observer()

    def _fence_for(self, record: CallRecord) -> Fence | None:
        """For ``ToolContext.fs``: the fence its writes go through, None without shared leases.

        A nested call's claims its parent's leases cover were not taken again (``_shared_claims``):
        its writes there go through the nearest ancestor's grant, the rest through its own.
        """
        if self._shared is None:
            return None
        grants = []
        holder: CallRecord | None = record
        while holder is not None:
            grant = self._grants.get(holder)
            if grant is not None:
                grants.append(grant)
            holder = holder.parent
        if not grants:
            return None  # it holds no claims: ctx.fs refuses every write before any fence
        if len(grants) == 1:
            return self._shared.fence(grants[0])
        return CoveringFence(tuple((g.claims, self._shared.fence(g)) for g in grants))

    async def _timer(self, _: None) -> None:
        """Expire lease waits that ran past their deadline (one task for the whole kernel)."""
        scheduler = self._scheduler
        while not scheduler.closed:
            with anyio.CancelScope(deadline=scheduler.next_deadline()) as scope:
                self._timer_scope = scope
                await anyio.sleep_forever()
            self._timer_scope = None
            self._act(scheduler.expire(self._loop.clock()))

    # -- pre-phase: hooks and policy --------------------------------------------------------------

    async def _prephase_task(self, record: CallRecord) -> None:
        if record.stage is FINISHED:
            return  # cancelled before this task began
        try:
            with self._scope(record) as scope:
                ready = await self._prephase(record)
        except BaseException:
            self._fail(record, CANCELLED, messages.cancelled(record.cancel_reason or ASKED))
            raise
        if record.stage is FINISHED:
            return
        if scope.cancelled_caught or not ready:
            self._fail(record, CANCELLED, messages.cancelled(record.cancel_reason or ASKED))
        else:
            self._act(self._scheduler.mark_ready(record))

    async def _prephase(self, record: CallRecord) -> bool:
        """Before-hooks, then the policy (and the approver). True: the call may go on."""
        scheduler = self._scheduler
        for hook in self._before_hooks:
            try:
                answer: Any = hook(scheduler.visible_call(record))
                if inspect.isawaitable(answer):
                    answer = await answer
            except BaseException as exc:
                if self._loop.propagates(exc):
                    raise
                self._fail(record, ERROR, messages.hook_failed("a before-hook", exc))
                return False
            if record.stage is not FINISHED:
                self._act(scheduler.take_before_answer(record, answer))
            if record.stage is FINISHED:
                return False
        if record.stage is HOOKED:
            self._act(scheduler.hooks_answered(record))
        decision = scheduler.policy_verdict(record)
        if not isinstance(decision, Decision):
            self._fail(record, *decision)
            return False
        if decision.permission is not Permission.ASK:
            return True
        if self._approver is None:
            self._fail(record, Status.DENIED, messages.no_approver(record.name, decision.reason))
            return False
        with anyio.move_on_after(self._approval_timeout) as waiting:
            try:
                answer = await self._approver(scheduler.visible_call(record), decision.reason)
            except BaseException as exc:
                if self._loop.propagates(exc):
                    raise
                self._fail(record, ERROR, messages.hook_failed("the approver", exc))
                return False
        if waiting.cancelled_caught:
            limit = self._approval_timeout
            refusal = messages.approval_timed_out(record.name, decision.reason, limit)
            self._fail(record, Status.DENIED, refusal)
            return False
        if record.stage is not FINISHED:
            self._act(scheduler.take_approval(record, decision, answer))
        return record.stage is not FINISHED

    def _fail(self, record: CallRecord, status: Status, exception: BaseException) -> None:
        self._act(self._scheduler.finish_failed(record, status, exception))

    def _fail_unwinding(self, record: CallRecord) -> None:
        """The task running ``record`` is being cancelled (the kernel closing, the caller of a
        lone call's run(), a parent call): finish it CANCELLED; the cancellation goes on."""
        reason = record.cancel_reason or CancelReason(Why.TASK_CANCELLED)
        self._fail(record, CANCELLED, messages.cancelled(reason))

    # -- running ---------------------------------------------------------------------------------

    async def _run_chain(self, record: CallRecord) -> None:
        """A call's task. It runs the call, then the first call that call's end started (the
        next in line for its file, or for its slot), and so on, with a schedule point between
        two: a deep queue on one file spawns one task, not one a call. Only where nothing is
        awaited between a call's release and its finish (no after-hooks, no shared leases)."""
        if self._shared is not None or self._after_hooks:
            await self._call_task(record)
            return
        # ``_run_task``'s steps, written out: this loop runs every call of a big batch.
        keyed = self._environment is not None
        while True:
            if keyed and record.stage is GRANTED:  # it waited: look at its keys
                self._act(self._scheduler.confirm_keys(record))
            stage = record.stage
            if stage is not FRESH and stage is not GRANTED and stage is not AHEAD:
                return  # finished (cancelled before it began), or back in line
            # AHEAD: it runs before its grant, its keys its tool's care
            successor = await self._run_granted(record, True)
            if successor is None:
                return
            try:
                await self._loop.checkpoint()
            except BaseException:
                self._fail_unwinding(successor)  # the kernel is closing
                raise
            record = successor

    async def _run_task(self, record: CallRecord, chain: bool = False) -> CallRecord | None:
        if record.stage is AHEAD:  # it runs before its grant: its keys are its tool's care
            return await self._run_granted(record, chain)
        if record.stage is GRANTED and record.stage is not FINISHED:  # it waited: look at its keys
            self._act(self._scheduler.confirm_keys(record))
        if (record.stage is FRESH or record.stage is GRANTED) and record.stage is not FINISHED:
            # Its keys still mean what they did: run it (straight away without a backend).
            if self._shared is None:
                return await self._run_granted(record, chain)
            await self._execute(record)
        return None

    async def _execute(self, record: CallRecord) -> None:
        """Run a granted call: with shared leases, once the backend granted them too."""
        if self._shared is None or record.stage is FINISHED or record.stage is AHEAD:
            await self._run_granted(record)  # ahead: shared leases are taken at its grant
            return
        claims = self._shared_claims(record)
        if not claims:
            await self._run_granted(record)
            return
        if not await self._take_shared(record, claims):
            return
        try:
            await self._run_granted(record)
        finally:
            self._give_shared(record)

    def _shared_claims(self, record: CallRecord) -> tuple[Claim, ...]:
        """What ``record`` must hold in the shared backend: its claims, less what its parent,
        or the running call it runs inside (``Scheduler._covering``), holds there for it
        already."""
        claims = record.claims or ()
        parent = record.parent
        if parent is None and record.hold.group is not None:
            parent = record.hold.group.owner  # it runs inside the leases of a call awaiting it
        if parent is None or parent.claims is None:
            return claims
        return split_by_cover(parent.claims, claims)[1]

    async def _take_shared(self, record: CallRecord, claims: tuple[Claim, ...]) -> bool:
        """Wait for ``claims`` from the shared backend, holding the local leases meanwhile (a
        wait that can't close a cycle: the backend's waits only go to earlier requests, and
        local waiters wait only for calls holding their backend leases or asking for them).
        Bounded by the call's lease-wait limit; cancellable like any wait. False if that
        finished the call."""
        backend = self._shared
        assert backend is not None
        held = self._grants.get(record)
        if held is not None:
            if held.claims == claims:
                return True  # run again after HoldMore granted at once: what it held stands
            self._give_shared(record)
        limit = self._scheduler.wait_timeout(record)
        deadline = math.inf if limit is None else self._loop.clock() + limit
        label = f"{record.call.id} ({record.name})"
        grant: Grant | None = None
        try:
            with self._scope(record, deadline):
                grant = await backend.acquire(claims, priority=record.call.priority, label=label)
        except BaseException as exc:
            if self._loop.propagates(exc):
                self._fail_unwinding(record)
                raise
            self._fail(record, ERROR, messages.shared_leases_failed(exc))
            return False
        if grant is not None:
            if record.stage is FINISHED:  # finished meanwhile (its parent ended first)
                backend.release(grant)
                return False
            self._grants[record] = grant
            return True
        if record.stage is not FINISHED:
            if record.cancel_reason is not None:
                self._fail(record, CANCELLED, messages.cancelled(record.cancel_reason))
            else:
                self._fail(record, Status.TIMEOUT, messages.shared_wait_timed_out(limit or 0.0))
        return False

    def _give_shared(self, record: CallRecord) -> None:
        grant = self._grants.pop(record, None)
        if grant is not None:
            assert self._shared is not None
            self._shared.release(grant)

    async def _run_granted(self, record: CallRecord, chain: bool = False) -> CallRecord | None:
        """Run a granted call's tool in this task; release its leases; finish it. With
        ``chain`` (``_run_chain``), return the first call its end started, not spawned."""
        scheduler = self._scheduler
        if record.stage is FINISHED:
            return None  # a nested call cancelled between two steps of its parent
        if record.cancel_reason is not None:  # cancelled between its grant and its start
            self._fail(record, CANCELLED, messages.cancelled(record.cancel_reason))
            return None
        tool = record.tool
        assert tool is not None and record.claims is not None
        resumed = record.resumed
        deadline, actions = scheduler.start(record)
        if actions:
            self._act(actions)  # its CallStarted, in this task, before its tool runs
        if record.stage is FINISHED:
            return None  # a listener of its CallStarted cancelled it: its leases are gone
        call = record.call
        # Positionally: call_id, tool_name, claims, depth, environment, kernel, record.
        context = ToolContext(
            call.id, call.name, record.claims, record.depth, self._environment, self, record
        )
        context.resumed = resumed
        self._contexts[record] = context
        status, output, failure = OK, None, None
        # ``self._scope(record, deadline)``, written out: every call's tool runs here.
        scope = self._loop.CancelScope()
        if deadline != math.inf:
            scope.deadline = deadline
        if record.cancel_reason is not None:  # a listener of its CallStarted cancelled it
            scope.cancel()
        scopes = self._scopes
        scopes[record] = scope
        try:
            try:
                with scope:
                    running = _running_call.set(record)
                    try:
                        output = await tool.invoke(context, record.arguments)
                    finally:
                        _running_call.reset(running)
            finally:
                if scopes.get(record) is scope:
                    del scopes[record]
        except BaseException as exc:
            if self._loop.propagates(exc):
                self._fail_unwinding(record)
                raise
            if isinstance(exc, HoldMore) and record.parent is None and not scope.cancel_called:
                self._act(scheduler.hold_more(record, exc.claims, exc.state))
                if record.stage is FRESH and record.stage is not FINISHED:
                    await self._execute(record)  # it holds them already: run it again
                return None  # else it is started again when granted, or it failed
            if isinstance(exc, HoldMore):
                exc = messages.nested_hold_more(call.name)
            elif isinstance(exc, Exception):
                exc = self._loop.foreign(exc, call.name)  # a trio tool on asyncio, say
            status, output, failure = ERROR, None, exc
            _log.debug("toolkernel: call %s (%s) raised", call.id, call.name, exc_info=exc)
        else:
            if scope.cancelled_caught:
                output = None
                if record.cancel_reason is not None:
                    status, failure = CANCELLED, messages.cancelled(record.cancel_reason)
                else:
                    limit = scheduler.run_timeout(record) or 0.0
                    status, failure = Status.TIMEOUT, messages.run_timed_out(limit)
        if chain:
            # Nothing is awaited from here on (``_run_chain`` chains only without after-hooks or
            # shared leases): the first call the release or the finish starts is kept for this
            # task to run next, not given a task of its own.
            self._catching = True
            try:
                self._act(scheduler.complete(record, status, output, failure))
            except BaseException:
                if self._caught is not None:  # started: it must not be lost
                    self._spawn_task(self._run_chain, self._caught, _CALL_TASK_NAME)
                raise
            finally:
                self._catching = False
                caught, self._caught = self._caught, None
            return caught
        self._act(scheduler.release(record))
        if self._grants:
            self._give_shared(record)  # with its local leases, not after its after-hooks
        if record.stage is FINISHED:
            return None  # finished while its tool ran on (its parent ended first)
        result = scheduler.make_result(record, status, output, failure)
        if self._after_hooks:
            if scheduler.leases_returned(record) and record.stage is FINISHED:
                return None  # a listener told cancelled it: its after-hooks are not run
            try:
                result = await self._after(record, result, deadline)
            except BaseException:
                self._fail(record, CANCELLED, messages.cancelled(record.cancel_reason or ASKED))
                raise
        self._act(scheduler.finish(record, result))
        return None

    async def _after(self, record: CallRecord, result: ToolResult, deadline: float) -> ToolResult:
        """After-hooks, in a scope the scheduler can cancel like the tool's own, and under the
        same run deadline: the run limit bounds the tool and its after-hooks together."""
        scheduler = self._scheduler
        with self._scope(record, deadline) as scope:
            for hook in self._after_hooks:
                try:
                    answer: Any = hook(scheduler.visible_call(record), result)
                    if inspect.isawaitable(answer):
                        answer = await answer
                except BaseException as exc:
                    if self._loop.propagates(exc):
                        raise
                    error = messages.hook_failed("an after-hook", exc)
                    result = scheduler.make_result(record, ERROR, None, error)
                    break
                result = scheduler.take_after_answer(record, result, answer)
        if scope.cancelled_caught:
            if record.cancel_reason is not None:
                cancelled = messages.cancelled(record.cancel_reason)
                return scheduler.make_result(record, CANCELLED, None, cancelled)
            timed_out = messages.run_timed_out(scheduler.run_timeout(record) or 0.0)
            return scheduler.make_result(record, Status.TIMEOUT, None, timed_out)
        return result

    # -- nested calls ----------------------------------------------------------------------------

    async def _call_nested(
        self, parent: CallRecord, name: str, arguments: Mapping[str, Any]
    ) -> ToolResult:
        """For ``ToolContext.call``: run a call made from inside ``parent``'s tool, in this
        task, and return its result."""
        self._loop.check_caller("ctx.call", "anyio.from_thread.run(ctx.call, name)")
        scheduler = self._scheduler
        record, actions = scheduler.admit_nested(parent, name, arguments)
        self._act(actions)
        try:
            if record.stage is not FINISHED:
                with self._scope(record):
                    ready = await self._prephase(record)
                if ready and record.stage is not FINISHED:
                    for claims, inside in scheduler.nested_requests(record):
                        if record.stage is not FINISHED:
                            await self._acquire_nested(record, claims, inside=inside)
                    await self._execute(record)
        finally:
            self._waiters.pop(record, None)
            self._act(scheduler.end_nested(record))
        assert record.result is not None
        return record.result

    async def _acquire_nested(self, record: CallRecord, claims: Any, *, inside: bool) -> None:
        actions = self._scheduler.request_nested(record, claims, inside)
        if record.hold.waiting_in is None or record.stage is FINISHED:
            self._act(actions)  # granted at once, or failed (a deadlock)
            return
        granted = self._waiters[record] = self._loop.Event()
        self._act(actions)
        await granted.wait()

    # -- closing -----------------------------------------------------------------------------------

    def _close(self) -> None:
        self._act(self._scheduler.close())
        if self._timer_scope is not None:
            self._timer_scope.cancel()


@asynccontextmanager
async def open_kernel_core(
    tools: Iterable[KernelTool] = (),
    *,
    environment: Environment | None = None,
    options: KernelOptions | None = None,
    shared: LeaseBackend | None = None,
    shared_at: str | None = None,
) -> AsyncIterator[Kernel]:
    """Open a :class:`Kernel` with ``options`` (checked already: a :class:`KernelOptions`);
    without an ``environment`` paths are keyed lexically and there is no ``ctx.fs``. ``shared``:
    the backend leases are taken from beside the kernel's own table, and ``shared_at`` the
    ``leases=`` URL it was opened from (what :attr:`Kernel.leases` says).
    ``toolkernel.open_kernel`` is the way applications open one; it documents the options.

    On exit every unfinished call is cancelled and gets its result; leases all return.
    """
    # Built before the tasks open, so bad options raise plainly, not in an ExceptionGroup.
    kernel: Kernel = Kernel._create(
        tools, environment, options or KernelOptions(), shared, shared_at
    )
    async with kernel._loop.tasks() as spawn:
        kernel._spawn = spawn
        spawn(kernel._timer, None, "toolkernel: lease-wait timer")
        try:
            yield kernel
        finally:
            kernel._close()

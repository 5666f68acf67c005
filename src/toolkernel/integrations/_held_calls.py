"""A framework's tool call whose leases a call of the kernel holds while the framework's own
task runs the tool.

Agent frameworks run each tool call in a task of their own, whose context variables (tracing
spans, the run's context) and cancellation (their timeouts, a failed sibling) the tool must
keep. So the tool is not run by the kernel: :meth:`Calls.submit` submits a call of a stand-in
tool (``_Hold``) carrying the real tool's claims; when its leases are granted, the stand-in
wakes the framework's task (:func:`run_held`), which runs the tool and then lets the stand-in
return, giving the leases back.

- A call the kernel ends without running the stand-in (its policy denied it, the wait for
  leases timed out, the kernel closed, a before-hook answered) wakes the framework's task too
  (a kernel listener hears its ``CallFinished``), with the kernel's error to hand to the tool's
  failure handling.
- The framework cancelling its task withdraws the waiting call, or cancels the running one;
  the cancellation goes on once the leases are back. A blocking tool (a plain ``def`` the
  framework runs in a worker thread) is run by :func:`blocking` in a task of its own, which no
  cancellation stops (its thread could not be stopped either): a cancelled call of it ends
  CANCELLED, and the cancellation goes on at once, but the call keeps its leases until the tool
  has returned, as the kernel's own ``thread=True`` tools do. The kernel cancelling the stand-in
  (``kernel.cancel``, closing) cancels the tool, and holds the leases until it has stopped:
  by cancelling the framework's task, or (``run_held(..., scoped=True)``, for a framework
  that takes a cancelled task for a cancelled run) a cancel scope around the tool only, the
  call then answered as one the kernel ended unrun.
- The tool raising makes the kernel's result an ERROR saying what it raised.
- A call made from inside a tool that holds leases (an agent used as a tool, its agent calling
  leased tools of the same kernel) is submitted ``within`` the innermost of those calls, which
  the kernel can't tell from the framework's task: it runs inside that call's leases where they
  cover it, as a nested call does, in that call's place in ``max_concurrency``. If it waits
  behind its callers' leases all the same, or for a place in ``max_concurrency`` while only its
  callers run, it would wait for ever, and fails with a
  :class:`~toolkernel.errors.DeadlockError` saying so instead.

The calls a task runs inside (:func:`holding`, :func:`callers`) are one context for every
adapter, and a kernel's calls (:meth:`Calls.of`) one registry, whichever adapters submit them:
so a call of one framework's tool made from inside another's (a pydantic-ai agent run by an
Agents SDK tool, an SDK agent run by a LangGraph tool) is seen to be nested too.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import itertools
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import anyio

from .._errors import DeadlockError, KernelClosedError, ToolError
from ..kernel import (
    CallBlocked,
    CallEvent,
    CallFinished,
    CallHandle,
    CallStarted,
    Kernel,
    KeyFunction,
    Status,
    ToolCall,
)
from ..kernel import ToolContext as KernelContext
from ..locks import Claim

__all__ = [
    "Calls",
    "ClaimsOf",
    "HeldCall",
    "Invocation",
    "blocking",
    "callers",
    "holding",
    "outlasting",
    "run_held",
]

T = TypeVar("T")

ClaimsOf = Callable[[Mapping[str, Any], KeyFunction], Sequence[Claim] | None]
"""A call's claims from its arguments and the kernel's key function; None for a barrier."""


class HeldCall:
    """A kernel's call holding leases while a framework runs its tool outside the kernel: what
    a call made from inside the tool must not wait for."""

    __slots__ = ("call_id", "handle", "kernel")

    def __init__(self, kernel: Kernel, call_id: str, handle: CallHandle | None = None) -> None:
        self.kernel = kernel
        self.call_id = call_id
        self.handle = handle

    @property
    def holds(self) -> bool:
        """Whether the kernel's call is still on (submitted and not finished)."""
        handle = self.handle
        return handle is not None and not handle.finished


_running: contextvars.ContextVar[tuple[HeldCall, ...]] = contextvars.ContextVar(
    "toolkernel_integrations_running", default=()
)
"""The calls whose tools this task runs, of any adapter and kernel (the tasks and threads a
tool starts inherit it): a call made from inside one, as by an agent used as a tool, must not
wait for it."""


def callers(kernel: Kernel) -> tuple[HeldCall, ...]:
    """The calls of ``kernel`` this task runs inside and that still hold their leases."""
    return tuple(c for c in _running.get() if c.kernel is kernel and c.holds)


@contextlib.contextmanager
def holding(call: HeldCall) -> Iterator[None]:
    """Run the tool of ``call`` (a call made within sees it among its callers)."""
    token = _running.set((*_running.get(), call))
    try:
        yield
    finally:
        _running.reset(token)


class Invocation(HeldCall):
    """One call of a framework's tool: submitted to the kernel when the framework invokes the
    tool; granted when the kernel's call starts; ended when the tool returns or fails."""

    __slots__ = (
        "callers",
        "deadlock",
        "done",
        "ended",
        "failure",
        "granted",
        "ready",
        "scope",
        "started",
        "stopped",
        "task",
        "waits_for",
        "workers",
    )

    def __init__(self, kernel: Kernel, call_id: str) -> None:
        super().__init__(kernel, call_id)
        loop = asyncio.get_running_loop()
        self.callers = callers(kernel)  # the leased tools this call is made from inside
        self.deadlock: str | None = None  # why it would wait for one of them for ever
        self.waits_for: tuple[str, ...] = ()  # the calls it waits behind, when blocked
        # Each future has one waiter (cancelling a waiter cancels its future, so the flags
        # say what happened): ``ready`` the framework's task, ``done`` the kernel's call.
        self.ready: asyncio.Future[None] = loop.create_future()  # granted, or finished unrun
        self.done: asyncio.Future[None] = loop.create_future()  # the tool has ended
        self.granted = False
        self.ended = False
        self.stopped = False  # the kernel cancelled the call
        self.failure: str | None = None  # why the tool failed, for the kernel's result
        self.started = False  # the framework awaited the invocation
        self.task: asyncio.Task[Any] | None = None  # the framework's task running the tool
        self.scope: anyio.CancelScope | None = None  # around the tool only (``scoped``)
        self.workers: list[asyncio.Future[Any]] = []  # a blocking tool's run (``blocking``)

    def wake(self) -> None:
        if not self.ready.done():
            self.ready.set_result(None)

    def end(self, failure: BaseException | None = None) -> None:
        if failure is not None and self.failure is None:
            self.failure = f"{type(failure).__name__}: {failure}"
        self.ended = True
        if not self.done.done():
            self.done.set_result(None)

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
        self.end()

    @property
    def working(self) -> bool:
        """Whether a blocking tool's run (:func:`blocking`) still goes on."""
        return any(not worker.done() for worker in self.workers)

    async def held(self) -> None:
        """The kernel's call: hold the leases until the tool has ended. If the kernel cancels
        the call (closing, ``kernel.cancel``), the tool is cancelled in its own task (by its
        scope, or else the task: the framework then answers the model as for any cancelled
        tool) and the leases are held until it has ended. A blocking tool's run, which no
        cancellation stops, holds them until it has returned, however the call ended."""
        try:
            if not self.ended:
                await self.done
        finally:
            if not self.ended:
                self.stopped = True
                if self.scope is not None:
                    self.scope.cancel()
                elif self.task is not None:
                    self.task.cancel()
                with anyio.CancelScope(shield=True):
                    self.done = asyncio.get_running_loop().create_future()
                    await self.done
            if self.working:
                with anyio.CancelScope(shield=True):
                    await asyncio.wait(self.workers)

    def unrun_output(self) -> Any:
        """For a call the kernel finished without running the tool: the output a before-hook
        supplied, or else the kernel's error raised (for the tool's failure handling)."""
        if self.deadlock is not None:
            raise DeadlockError(self.deadlock)
        result = self.handle.result if self.handle is not None else None
        if result is not None and result.status is Status.OK:
            return result.output
        if result is None:
            raise KernelClosedError("the kernel closed before the call could be submitted")
        error = result.exception
        if isinstance(error, Exception):
            raise error
        raise ToolError(result.error or result.status.value)


class _Hold:
    """The kernel's side of one call, as a tool of its batch: its claims, and a run that holds
    the leases until the framework's task has run the tool."""

    __slots__ = ("_claims", "_invocation", "name")
    wait_timeout = None
    run_timeout = None  # the framework's own timeout bounds the tool, in its task

    def __init__(self, name: str, claims: ClaimsOf, invocation: Invocation) -> None:
        self.name = name
        self._claims = claims
        self._invocation = invocation

    def parse_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return dict(arguments)  # checked by the framework, in the tool's own way

    def claims(self, arguments: Mapping[str, Any], key: KeyFunction) -> Sequence[Claim] | None:
        return self._claims(arguments, key)

    async def invoke(self, ctx: KernelContext, arguments: Mapping[str, Any]) -> Any:
        invocation = self._invocation
        invocation.granted = True
        invocation.wake()
        await invocation.held()
        if invocation.failure is not None:
            raise ToolError(invocation.failure)
        return None


class Calls:
    """A kernel's calls of framework tools, by call id: tells each when the kernel finished it
    without running the tool (denied, timed out waiting, cancelled, closed), and fails one that
    would wait for ever for the tools it was made from inside."""

    # Weak both ways: the kernel's listener keeps its registry, and the registry its kernel.
    _kernels: ClassVar[weakref.WeakKeyDictionary[Kernel, weakref.ref[Calls]]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.live: dict[str, Invocation] = {}
        self.nested_waiting: dict[str, Invocation] = {}  # blocked, made inside leased tools
        self._numbers = itertools.count(2)
        kernel.add_listener(self._event)

    @classmethod
    def of(cls, kernel: Kernel) -> Calls:
        """The registry of ``kernel``'s calls, shared by every adapter."""
        known = cls._kernels.get(kernel)
        found = known() if known is not None else None
        if found is None:
            found = cls(kernel)
            cls._kernels[kernel] = weakref.ref(found)
        return found

    def _event(self, event: CallEvent) -> None:
        if type(event) is CallFinished:
            invocation = self.live.get(event.call_id)
            # The id may be another call's, of the kernel's own tools: ours has its result.
            handle = invocation.handle if invocation is not None else None
            if invocation is not None and handle is not None and handle.finished:
                del self.live[event.call_id]
                self.nested_waiting.pop(event.call_id, None)
                invocation.wake()
            if self.nested_waiting:
                self._check_nested()  # the call that ended may leave only their callers
        elif type(event) is CallBlocked:
            blocked = self.live.get(event.call_id)
            if blocked is not None and blocked.callers:
                blocked.waits_for = event.waits_for
                self.nested_waiting[event.call_id] = blocked
                self._check_nested()
        elif type(event) is CallStarted and self.nested_waiting:
            self.nested_waiting.pop(event.call_id, None)

    def _check_nested(self) -> None:
        """Fail each call made from inside leased tools (an agent used as a tool) that waits
        for them: behind one of their leases, or for a place in ``max_concurrency`` while
        only they run. They hold what they hold until the call has ended: it would wait for
        ever."""
        running = None
        for call_id, blocked in list(self.nested_waiting.items()):
            callers = [c for c in blocked.callers if c.holds]
            if not callers:
                continue
            held = next((c for c in callers if c.call_id in blocked.waits_for), None)
            if held is not None:
                what = "leases"
            else:
                if running is None:
                    running = [info.call_id for info in self.kernel.snapshot().running]
                ids = {c.call_id for c in callers}
                if not running or len(running) > len(ids) or not ids.issuperset(running):
                    continue
                held, what = callers[-1], "places in max_concurrency"
            assert held.handle is not None  # it holds
            name = held.handle.call.name
            blocked.deadlock = (
                f"this call waits for the {what} of the tool {name!r} (call {held.call_id}), "
                f"which it was made from inside: that tool holds them until this call has "
                f"ended, so it would wait for ever. Declare what {name!r} itself touches (for "
                f"a tool that runs an agent whose own tools hold their leases: "
                f"claims={{{name!r}: lambda args: []}}), and leave its calls room in "
                f"max_concurrency"
            )
            del self.nested_waiting[call_id]
            if blocked.handle is not None:
                blocked.handle.cancel()

    def submit(
        self, name: str, call_id: str, arguments: Mapping[str, Any], claims: ClaimsOf
    ) -> Invocation:
        """Submit one call of the tool ``name`` (synchronously: this fixes its place in the
        kernel's order); ``claims`` computes its claims at admission, None for a barrier."""
        if call_id in self.live:
            call_id = f"{call_id}#{next(self._numbers)}"  # another run's call of the same id
        invocation = Invocation(self.kernel, call_id)
        hold = _Hold(name, claims, invocation)
        call = ToolCall(call_id, name, arguments, read_first=True)  # a model's call
        self.live[call_id] = invocation
        with contextlib.suppress(KernelClosedError):  # no handle: the outcome says so
            # Made from inside the innermost of them, it runs inside that call's leases where
            # they cover it (an agent used as a tool, holding the workspace, lends it to its
            # agent's tools), as the kernel's own nested calls do.
            within = invocation.callers[-1].handle if invocation.callers else None
            invocation.handle = self.kernel.submit(call, tools=[hold], within=within)
        if invocation.deadlock is not None and invocation.handle is not None:
            invocation.handle.cancel()  # found blocked while it was being submitted
        if invocation.handle is None or invocation.handle.finished:
            self.live.pop(call_id, None)
            invocation.wake()  # refused at admission, or a before-hook answered at once
        task = asyncio.current_task()
        if task is not None:
            # The framework may cancel the task that awaits the invocation before it ever
            # starts (a timeout's task); then nothing else would end the kernel's call.
            task.add_done_callback(functools.partial(_abandon, invocation))
        return invocation


def _abandon(invocation: Invocation, _task: object) -> None:
    if not invocation.started:
        invocation.cancel()


def outlasting(run: Callable[[], Awaitable[T]]) -> asyncio.Task[T]:
    """``run()`` in a task of its own (with a copy of this task's context), which cancelling
    the task that awaits it (``await asyncio.shield(...)``) does not cancel: for a blocking
    tool, whose worker thread goes on whatever its framework's task does, so that what holds
    its leases can know when it has really ended."""
    worker = asyncio.ensure_future(run())
    worker.add_done_callback(_retrieved)  # its failure once nothing awaits it any more
    return worker


def _retrieved(worker: asyncio.Future[Any]) -> None:
    if not worker.cancelled():
        worker.exception()


def blocking(invocation: Invocation, run: Callable[[], Awaitable[T]]) -> Callable[[], Awaitable[T]]:
    """``run``, for a blocking tool (a plain ``def`` its framework runs in a worker thread):
    run in a task of its own (:func:`outlasting`), which a cancellation (the framework's, the
    tool's timeout, the kernel's) does not stop; the call holds its leases until it has
    returned, though the cancellation goes on at once. Give it to :func:`run_held` (within any
    timeout of the adapter's own)."""

    async def in_worker() -> T:
        worker = outlasting(run)
        invocation.workers.append(worker)
        return await asyncio.shield(worker)

    return in_worker


async def run_held(
    invocation: Invocation,
    run: Callable[[], Awaitable[Any]],
    failed: Callable[[Exception], Awaitable[Any]],
    *,
    scoped: bool = False,
) -> Any:
    """Wait for the leases, run the tool (``run``, in this task) holding them, and hand the
    kernel's own failures (denied, timed out waiting, closed...) to ``failed``: the tool's
    failure handling, which answers the model. A cancellation withdraws or cancels the
    kernel's call, and goes on once its leases are back; or at once, for a blocking tool still
    running (:func:`blocking`), whose call holds its leases until the tool has returned.

    ``scoped``: the kernel cancelling the call cancels a scope around ``run`` rather than this
    task, and the call is then answered by ``failed`` with the kernel's error, as one the
    kernel ended before it ran."""
    invocation.started = True
    invocation.task = asyncio.current_task()
    try:
        await invocation.ready
        if invocation.stopped and not scoped:  # by the kernel, before the tool could run
            raise asyncio.CancelledError
    except BaseException:
        invocation.cancel()  # withdrawn while waiting: it never held a lease
        await _unwound(invocation)
        raise
    if not invocation.granted:
        return await _unrun(invocation, failed)
    output: Any = _STOPPED
    try:
        with holding(invocation):
            if not scoped:
                output = await run()
            else:
                with anyio.CancelScope() as invocation.scope:
                    if not invocation.stopped:
                        output = await run()
    except asyncio.CancelledError:
        invocation.cancel()
        if not invocation.working:  # else the call holds its leases until the tool returns
            await _unwound(invocation)
        raise
    except BaseException as error:
        invocation.end(error)
        raise
    invocation.end()
    if output is _STOPPED:  # the kernel cancelled the call: it says why
        await _unwound(invocation)
        return await _unrun(invocation, failed)
    return output


_STOPPED: Any = object()


async def _unrun(invocation: Invocation, failed: Callable[[Exception], Awaitable[Any]]) -> Any:
    """The answer for a call the kernel ended without the tool's output."""
    try:
        return invocation.unrun_output()
    except Exception as error:
        return await failed(error)


async def _unwound(invocation: Invocation) -> None:
    """Wait until the kernel's call has finished, so its leases are back when a cancellation
    goes on (a second cancellation stops the wait)."""
    handle = invocation.handle
    if handle is not None and not handle.finished:
        await handle.wait_finished()

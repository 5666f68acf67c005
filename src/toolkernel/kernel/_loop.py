"""The running event loop, as the kernel's async layer needs it, looked up once per kernel.

The kernel runs on trio and on asyncio, written on anyio. The few things it does for every call
or batch are taken from the loop itself, resolved here once, when a kernel opens: spawning a
call's task, the cancel scope it runs in, the event a batch's caller waits on, the clock, a
schedule point. anyio's own versions find the running library anew on each use and wrap the
loop's objects; ``benchmarks/overhead.py`` measured anyio's ``TaskGroup.start_soon`` at about 4
times a native spawn, and its cancel scope on trio at 1.2 times trio's, which together made a
call 40% dearer on trio; on asyncio, making an ``anyio.CancelScope`` or an ``anyio.Event``
looks the library up each time. Everything else is plain anyio.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any

import anyio
import attrs
import sniffio

from .._errors import WrongLoopError

__all__ = ["Loop", "Spawn", "current", "running_here"]


Spawn = Callable[[Callable[..., Coroutine[Any, Any, Any]], Any, str], None]
"""``spawn(function, argument, name)`` starts ``function(argument)`` as a task of the kernel's."""


@attrs.frozen
class Loop:
    """What the async layer uses of the running event loop."""

    name: str
    """``"trio"`` or ``"asyncio"``."""
    clock: Callable[[], float]
    """The loop's clock (``trio.current_time``, ``loop.time``): the one deadlines are set on."""
    cancelled: type[BaseException]
    """The loop's cancellation exception (``trio.Cancelled``, ``asyncio.CancelledError``)."""
    CancelScope: Callable[[], Any]
    """Makes the cancel scope a call's tool, hooks and approver run in: trio's own on trio,
    anyio's on asyncio (both have ``cancel()``, ``deadline`` and ``cancelled_caught``)."""
    Event: Callable[[], Any]
    """Makes the event ``run`` and the handles wait on: trio's own on trio, anyio's on asyncio
    (both have ``set()``, ``is_set()`` and ``wait()``, which is always a checkpoint)."""
    tasks: Callable[[], AbstractAsyncContextManager[Spawn]]
    """Opens the kernel's tasks: a trio nursery, or an asyncio ``TaskGroup``; what the block
    raises alone comes out as itself (see :func:`_unwrapped`)."""
    checkpoint: Callable[[], Awaitable[None]]
    """A schedule point: ``trio.lowlevel.checkpoint``, or ``asyncio.sleep(0)``."""
    here: Callable[[], bool]
    """Whether the caller runs on this very loop (not in another thread, not on another loop)."""
    thread: threading.Thread
    """The thread the loop runs in."""

    def check_caller(self, doing: str, from_thread: str) -> None:
        """Raise :class:`WrongLoopError` unless the caller runs on this loop: ``doing`` says what
        it asked (``"kernel.run"``), ``from_thread`` how a worker thread asks it instead."""
        if self.here():
            return
        thread = threading.current_thread()
        library = _library_here()
        if library is None:
            where, fix = (
                f"thread {thread.name!r}, where no event loop runs",
                f"; from a worker thread, go back to the kernel's loop: {from_thread}",
            )
        else:
            other = "another " if library == self.name else "a "
            where, fix = f"{other}{library} event loop, in thread {thread.name!r}", ""
        raise WrongLoopError(
            f"{doing} was called from {where}, but this kernel runs on {self.name}, in thread "
            f"{self.thread.name!r}: a kernel works only on the event loop it was opened on{fix}"
        )

    def foreign(self, exc: Exception, tool: str) -> Exception:
        """``exc``, raised by ``tool``, or a :class:`WrongLoopError` saying what it means when
        it is the other loop's code failing for want of its loop: a trio function awaited on
        asyncio (asyncio's "bad yield", trio's "must be called from async context"), an asyncio
        one on trio (trio's "unrecognized yield message", asyncio's "no running event loop").

        Told by where it was raised, not by its words: in the other library's own code (the
        innermost frame of its traceback), with that library's loop not running anywhere in
        between (a ``trio.run`` in a worker thread is that tool's own business). Only on the
        failure path: nothing is looked at for a call that succeeds.
        """
        if not isinstance(exc, (RuntimeError, TypeError, AttributeError)):
            return exc
        other = "trio" if self.name == "asyncio" else "asyncio"
        frames = list(_frames(exc.__traceback__))
        if frames and _package(frames[-1]) == other:
            if any(_runs_loop(frame, other) for frame in frames):
                return exc
            entry = next(frame for frame in frames if _package(frame) == other)
            used = f"called {other}'s {entry.f_code.co_qualname}"
        elif other == "asyncio" and _no_running_asyncio_loop(exc):
            used = "used asyncio"  # its C functions leave no frame of asyncio's behind
        else:
            return exc
        wrong = WrongLoopError(
            f"tool {tool!r} {used}, but this kernel runs on {self.name}: "
            f"{other}'s async functions work only on {other}'s own event loop (it failed with "
            f"{type(exc).__name__}: {exc}). Write the tool with anyio, which runs on both, or "
            f"with {self.name}'s own API; or run the kernel under {other}"
        )
        wrong.__cause__ = exc
        return wrong

    def propagates(self, exc: BaseException) -> bool:
        """Whether an exception from a user's code must go on up (the loop's cancellation and
        KeyboardInterrupt); anything else, SystemExit included, is that call's failure."""
        fatal = (self.cancelled, KeyboardInterrupt)
        if isinstance(exc, fatal):
            return not _foreign_cancellation(exc)
        return isinstance(exc, BaseExceptionGroup) and exc.subgroup(fatal) is not None


def _foreign_cancellation(exc: BaseException) -> bool:
    """An asyncio ``CancelledError`` in a task nobody is cancelling: a future the user's code
    awaited was cancelled by its owner (a shared request, say). That code's failure, not the
    task's cancellation, which always counts in ``Task.cancelling()``. trio's ``Cancelled``
    comes only from a cancel scope."""
    if not isinstance(exc, asyncio.CancelledError):
        return False
    task = asyncio.current_task()
    return task is not None and task.cancelling() == 0


def current() -> Loop:
    """The loop this task runs on."""
    thread = threading.current_thread()
    if sniffio.current_async_library() == "trio":
        import trio

        clock = trio.lowlevel.current_clock()
        token = trio.lowlevel.current_trio_token()

        def on_trio() -> bool:
            try:
                return trio.lowlevel.current_trio_token() is token
            except RuntimeError:  # no trio run in this thread
                return False

        return Loop(
            "trio",
            clock.current_time,
            trio.Cancelled,
            trio.CancelScope,
            trio.Event,
            _trio_tasks,
            trio.lowlevel.checkpoint,
            on_trio,
            thread,
        )
    loop = asyncio.get_running_loop()

    def on_asyncio() -> bool:
        return asyncio._get_running_loop() is loop

    return Loop(
        "asyncio",
        loop.time,
        asyncio.CancelledError,
        # anyio's class for this loop: ``anyio.CancelScope()`` finds the running library anew
        # on every call to make one of these (a tenth of a call's cost on asyncio).
        type(anyio.CancelScope()),
        type(anyio.Event()),  # as the scope: ``anyio.Event()`` looks the library up each time
        _asyncio_tasks,
        _asyncio_checkpoint,
        on_asyncio,
        thread,
    )


def running_here() -> bool:
    """Whether an event loop (trio's or asyncio's) runs in this thread."""
    return _library_here() is not None


def _library_here() -> str | None:
    """The library whose event loop runs in this thread (``"trio"``, ``"asyncio"``), or None."""
    if asyncio._get_running_loop() is not None:
        return "asyncio"
    trio = sys.modules.get("trio")  # not imported: no trio loop runs anywhere
    if trio is not None and trio.lowlevel.in_trio_run():
        return "trio"
    return None


def _frames(tb: TracebackType | None) -> Any:
    """The frames of a traceback, outermost first."""
    while tb is not None:
        yield tb.tb_frame
        tb = tb.tb_next


def _package(frame: Any) -> str:
    """The top-level package of the module a frame runs the code of."""
    name = frame.f_globals.get("__name__")
    return name.partition(".")[0] if isinstance(name, str) else ""


# Where each library runs its event loop: a frame of one of these in a traceback means the loop
# was running (in a worker thread, say), so an error below it is no loop mix-up.
_LOOP_RUNNERS = {
    "trio": {("trio._core._run", "run"), ("trio._core._run", "start_guest_run")},
    "asyncio": {
        ("asyncio.runners", "run"),
        ("asyncio.base_events", "run_until_complete"),
        ("asyncio.base_events", "run_forever"),
    },
}


def _no_running_asyncio_loop(exc: Exception) -> bool:
    """``asyncio.get_running_loop()``'s error (asyncio's functions that need a loop raise it),
    where no asyncio loop runs: the one case told by its words, as it is raised in C."""
    return (
        type(exc) is RuntimeError
        and exc.args == ("no running event loop",)
        and asyncio._get_running_loop() is None
    )


def _runs_loop(frame: Any, library: str) -> bool:
    return (frame.f_globals.get("__name__"), frame.f_code.co_name) in _LOOP_RUNNERS[library]


async def _asyncio_checkpoint() -> None:
    await asyncio.sleep(0)


@asynccontextmanager
async def _unwrapped(tasks: AbstractAsyncContextManager[Spawn]) -> AsyncIterator[Spawn]:
    """``tasks``, but a lone exception of the block's comes out as itself, traceback kept.

    A nursery (strict exception groups) and a task group wrap what passes through them, so an
    ``except KeyError`` around ``open_kernel`` would never match the block's ``KeyError``. As
    trio's users do by hand: unwrap only when the group is exactly the block's one exception,
    with nothing from the kernel's own tasks (a group of several stays whole).
    """
    thrown: BaseException | None = None
    try:
        async with tasks as spawn:
            try:
                yield spawn
            except BaseException as exc:
                thrown = exc
                raise
    except BaseExceptionGroup as group:
        if thrown is None or not _wraps_only(group, thrown):
            raise
    if thrown is not None:
        raise thrown  # outside the handler: the group is not made its context


def _wraps_only(group: BaseExceptionGroup[Any], target: BaseException) -> bool:
    """Whether ``group`` is ``target`` wrapped in groups of one, one or more times."""
    inner: BaseException = group
    while isinstance(inner, BaseExceptionGroup) and not _same(inner, target):
        if len(inner.exceptions) != 1:
            return False
        inner = inner.exceptions[0]
    return _same(inner, target)


def _same(found: BaseException, target: BaseException) -> bool:
    """``found`` is ``target``, or a copy trio made of it: a cancel scope a group passes
    through splits it, which builds a new group of the same exceptions."""
    if found is target:
        return True
    if not isinstance(found, BaseExceptionGroup) or type(found) is not type(target):
        return False
    assert isinstance(target, BaseExceptionGroup)
    inner, wanted = found.exceptions, target.exceptions
    return (
        found.message == target.message
        and len(inner) == len(wanted)
        and all(_same(a, b) for a, b in zip(inner, wanted, strict=True))
    )


def _trio_tasks() -> AbstractAsyncContextManager[Spawn]:
    return _unwrapped(_trio_nursery())


def _asyncio_tasks() -> AbstractAsyncContextManager[Spawn]:
    return _unwrapped(_asyncio_task_group())


@asynccontextmanager
async def _trio_nursery() -> AsyncIterator[Spawn]:
    import trio

    async with trio.open_nursery() as nursery:

        def spawn(
            function: Callable[..., Coroutine[Any, Any, Any]], argument: Any, name: str
        ) -> None:
            nursery.start_soon(function, argument, name=name)

        yield spawn


@asynccontextmanager
async def _asyncio_task_group() -> AsyncIterator[Spawn]:
    async with asyncio.TaskGroup() as group:

        def spawn(
            function: Callable[..., Coroutine[Any, Any, Any]], argument: Any, name: str
        ) -> None:
            group.create_task(function(argument), name=name)

        yield spawn

"""Virtual time for asyncio: trio's ``MockClock(autojump_threshold=0)``, for asyncio tests.

:class:`VirtualClockEventLoop` is an asyncio event loop whose clock starts at 0 and moves only
when the loop has nothing to do: whenever it would sleep until its next timer (every task
waiting for a timeout, a sleep, a deadline), the clock jumps to that timer instead. So a test of
calls that "take" seconds runs in microseconds and its timings are exact, as on trio's autojump
clock. I/O still happens for real: the loop looks for ready I/O before it jumps.

Like trio's autojump clock, by itself it cannot see work in worker threads: while a thread runs
and every task waits, the clock jumps to the next timer. Tell it which threads to wait for with
``await hold_virtual_time_for_threads()`` (anyio's default worker threads, those ``ctx.fs`` and
``anyio.to_thread.run_sync`` use): then while any of them is at work, the loop waits for it
for real and the clock stands still. :func:`virtual_clock` makes trio's ``MockClock`` take the
same care, without being asked.

Nor can it see a child process at work (the Bash tool's command, an MCP server): waiting for
its output or its exit looks idle, and the clock would leap to the next deadline (the command's
timeout, a test's). After ``await real_time_for_processes()`` (which ``assert_serializable``
does), the clock moves at the real rate while this process has any child process, so a command
takes the time it really takes and a timeout fires when it really passes.

Use it with anyio's pytest plugin::

    @pytest.fixture
    def anyio_backend():
        return "asyncio", {"loop_factory": VirtualClockEventLoop}

or directly: ``asyncio.run(main(), loop_factory=VirtualClockEventLoop)`` (Python 3.12+), or
``asyncio.Runner(loop_factory=VirtualClockEventLoop)``.
"""

from __future__ import annotations

import asyncio
import math
import os
import selectors
import sys
import time
import weakref
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import trio.testing  # imported where it is used: trio is optional (the [trio] extra)

__all__ = [
    "VirtualClockEventLoop",
    "virtual_clock",
    "hold_virtual_time_for_threads",
    "real_time_for_processes",
    "wait_all_tasks_blocked",
]

_THREAD_POLL = 0.01
"""Seconds of real time the asyncio loop waits at a time for worker threads before it looks
again (a thread that finishes wakes it at once)."""


class _Limiter(Protocol):
    @property
    def borrowed_tokens(self) -> int: ...


class _JumpingSelector(selectors.DefaultSelector):
    """A selector that, asked to wait for ``timeout`` seconds with nothing ready, moves its
    loop's clock on by ``timeout`` instead of waiting."""

    loop: VirtualClockEventLoop
    _children_seen = False  # at the last wait: see ``select``

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        if timeout is None and self.loop.follows_processes and children_alive():
            timeout = math.inf  # no timer: wait for a child for real, the clock following
        if timeout is None or timeout <= 0:
            return super().select(timeout)
        ready: list[tuple[Any, int]] = super().select(0)
        if ready:
            return ready
        if self.loop.threads_at_work():  # wait for them, for real; the clock stands still
            return super().select(min(timeout, _THREAD_POLL))
        if self.loop.follows_processes and (children_alive() or self._children_seen):
            # A child process works: wait for real, and let the clock follow real time. Once
            # more after the last has gone: asyncio's watcher thread reaps a child before it
            # tells the loop, and a leap in between would pass every deadline.
            self._children_seen = not self._children_seen or children_alive()
            began = time.perf_counter()
            ready = super().select(min(timeout, _THREAD_POLL))
            self.loop.advance(min(time.perf_counter() - began, timeout))
            return ready
        if timeout == math.inf:
            return super().select(None)  # its child has gone meanwhile: nothing to jump to
        self.loop.advance(timeout)
        return ready


def children_alive() -> bool:
    """Whether this process has a child process (running, or exited and not yet reaped)."""
    waitid = getattr(os, "waitid", None)
    if waitid is None:  # not on this platform: no child is ever seen
        return False
    try:
        # WNOWAIT: only look. None: there are children, and none has exited.
        waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


class VirtualClockEventLoop(asyncio.SelectorEventLoop):
    """An asyncio event loop on a virtual clock that jumps to the next timer when idle."""

    def __init__(self) -> None:
        self._virtual_now = 0.0
        self._limiters: list[_Limiter] = []
        self.follows_processes = False  # see ``real_time_for_processes``
        selector = _JumpingSelector()
        selector.loop = self
        super().__init__(selector)

    def hold_for_threads(self, limiter: _Limiter) -> None:
        """Don't jump while ``limiter`` (an ``anyio.CapacityLimiter``) has tokens borrowed,
        that is, while threads started through it are at work."""
        if all(known is not limiter for known in self._limiters):
            self._limiters.append(limiter)

    def threads_at_work(self) -> bool:
        """True while a thread this loop holds time for is at work."""
        return any(limiter.borrowed_tokens for limiter in self._limiters)

    def time(self) -> float:
        """The virtual time, in seconds since the loop was made."""
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        """Move the clock on by ``seconds`` (the loop does this itself when idle)."""
        if seconds < 0:
            raise ValueError(f"time can't go backwards ({seconds} s)")
        self._virtual_now += seconds


def virtual_clock() -> trio.testing.MockClock:
    """trio's ``MockClock(autojump_threshold=0)``, which also stands still while trio's default
    worker threads are at work (``trio.to_thread``, ``anyio.to_thread`` and so ``ctx.fs`` use
    them): the run loop then waits for them for real instead of jumping.

    ::

        trio.run(main, clock=virtual_clock())

    It is a ``MockClock`` (trio's run loop jumps only that one), told before each jump whether
    to make it: it sets trio's (internal) ``clock_autojump_threshold`` as ``MockClock`` itself
    does. Without that hook it is a plain autojumping ``MockClock``.
    """
    import trio.testing
    import trio.to_thread

    clock = trio.testing.MockClock(autojump_threshold=0)
    plain = trio.testing.MockClock.deadline_to_sleep_time

    def deadline_to_sleep_time(deadline: float) -> float:
        # The run loop asks this when no task can run. While a thread works, turn autojump off
        # and wait (for real) a little for it; while a child process works (if asked to watch
        # them), the same, with the clock running at the real rate; else autojump again.
        runner = _trio_runner()
        busy = trio.to_thread.current_default_thread_limiter().borrowed_tokens > 0
        working = False
        if clock in _following:
            working = not busy and children_alive()
            rate = 1.0 if working else 0.0
            if clock.rate != rate:
                clock.rate = rate
        if runner is not None and runner.clock is clock:
            waits = busy or working
            runner.clock_autojump_threshold = math.inf if waits else clock.autojump_threshold
            if waits:
                return min(_THREAD_POLL, plain(clock, deadline))
        return plain(clock, deadline)

    clock.deadline_to_sleep_time = deadline_to_sleep_time  # type: ignore[method-assign]
    return clock


_following: weakref.WeakSet[trio.testing.MockClock] = weakref.WeakSet()
"""Clocks made by :func:`virtual_clock` that :func:`real_time_for_processes` was called under."""


def _trio_runner() -> Any:
    try:
        from trio._core._run import GLOBAL_RUN_CONTEXT

        runner = GLOBAL_RUN_CONTEXT.runner
    except (ImportError, AttributeError):
        return None
    return runner if hasattr(runner, "clock_autojump_threshold") else None


async def hold_virtual_time_for_threads() -> None:
    """Make the running virtual clock stand still while anyio's default worker threads work.

    On asyncio under :class:`VirtualClockEventLoop` it registers anyio's default thread limiter
    with the loop; on trio, a clock made by :func:`virtual_clock` does so by itself. So file
    I/O in worker threads (``ctx.fs``) takes no virtual time, and a deadline can't pass while a
    thread works. Does nothing under any other clock.
    """
    loop = _asyncio_loop()
    if isinstance(loop, VirtualClockEventLoop):
        import anyio.to_thread

        loop.hold_for_threads(anyio.to_thread.current_default_thread_limiter())


async def real_time_for_processes() -> None:
    """Make the running virtual clock move at the real rate while this process has a child
    process (a command the Bash tool runs, an MCP server), instead of leaping over the time it
    takes: under :class:`VirtualClockEventLoop` or a clock made by :func:`virtual_clock`. Does
    nothing under any other clock.

    Opt in, as :func:`assert_serializable` does: a child that lives through a whole test (an
    MCP server) would otherwise make every sleep of the test take real time.
    """
    loop = _asyncio_loop()
    if isinstance(loop, VirtualClockEventLoop):
        loop.follows_processes = True
        return
    clock = getattr(_trio_runner(), "clock", None)
    if clock is None:  # not on trio (which may not be installed)
        return
    import trio.testing

    # Only a clock made by ``virtual_clock``, which is told before each jump whether to make it.
    if isinstance(clock, trio.testing.MockClock) and "deadline_to_sleep_time" in vars(clock):
        _following.add(clock)


def _asyncio_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def wait_all_tasks_blocked() -> None:
    """Return once every other task is blocked: trio's ``wait_all_tasks_blocked``, on either loop.

    anyio's own, on asyncio, polls with ``sleep(0.1)``, which moves a virtual clock; this one
    only yields (``sleep(0)``) until no other task can run, so virtual time stands still.
    """
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_task()
        except RuntimeError:
            pass  # not on trio
        else:
            await trio.testing.wait_all_tasks_blocked()
            return
    loop = asyncio.get_running_loop()
    this = asyncio.current_task()
    while True:
        await asyncio.sleep(0)
        if getattr(loop, "_ready", None):  # callbacks (a task about to run) still queued
            continue
        if all(task is this or _blocked(task) for task in asyncio.all_tasks(loop)):
            return


def _blocked(task: asyncio.Task[Any]) -> bool:
    waiter = getattr(task, "_fut_waiter", None)
    return waiter is not None and not waiter.done()

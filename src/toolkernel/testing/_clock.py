"""Virtual time for asyncio: trio's ``MockClock(autojump_threshold=0)``, for asyncio tests.

:class:`VirtualClockEventLoop` is an asyncio event loop whose clock starts at 0 and moves only
when the loop has nothing to do: whenever it would sleep until its next timer (every task
waiting for a timeout, a sleep, a deadline), the clock jumps to that timer instead. So a test of
calls that "take" seconds runs in microseconds and its timings are exact, as on trio's autojump
clock. I/O still happens for real: the loop looks for ready I/O before it jumps.

Like trio's autojump clock, it cannot see work in worker threads: while a thread runs and every
task waits, the clock jumps to the next timer. Tests that do real file I/O in threads use the
real clock.

Use it with anyio's pytest plugin::

    @pytest.fixture
    def anyio_backend():
        return "asyncio", {"loop_factory": VirtualClockEventLoop}

or directly: ``asyncio.run(main(), loop_factory=VirtualClockEventLoop)`` (Python 3.12+), or
``asyncio.Runner(loop_factory=VirtualClockEventLoop)``.
"""

from __future__ import annotations

import asyncio
import selectors
import sys
from typing import Any

__all__ = ["VirtualClockEventLoop", "wait_all_tasks_blocked"]


class _JumpingSelector(selectors.DefaultSelector):
    """A selector that, asked to wait for ``timeout`` seconds with nothing ready, moves its
    loop's clock on by ``timeout`` instead of waiting."""

    loop: VirtualClockEventLoop

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        if timeout is None or timeout <= 0:
            return super().select(timeout)
        ready: list[tuple[Any, int]] = super().select(0)
        if not ready:
            self.loop.advance(timeout)
        return ready


class VirtualClockEventLoop(asyncio.SelectorEventLoop):
    """An asyncio event loop on a virtual clock that jumps to the next timer when idle."""

    def __init__(self) -> None:
        self._virtual_now = 0.0
        selector = _JumpingSelector()
        selector.loop = self
        super().__init__(selector)

    def time(self) -> float:
        """The virtual time, in seconds since the loop was made."""
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        """Move the clock on by ``seconds`` (the loop does this itself when idle)."""
        if seconds < 0:
            raise ValueError(f"time can't go backwards ({seconds} s)")
        self._virtual_now += seconds


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

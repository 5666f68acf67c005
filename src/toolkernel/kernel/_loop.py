"""The running event loop, as the kernel's async layer needs it, looked up once per kernel.

The kernel runs on trio and on asyncio through anyio. A few things it needs for every call are
resolved here once, when a kernel opens, rather than through anyio every time (anyio finds the
running library anew on each use): the loop's clock, its cancellation exception, and the cancel
scope a call runs in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anyio
import attrs
import sniffio

__all__ = ["Loop", "current"]


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
    """Makes the cancel scope a call's tool, hooks and approver run in."""

    def propagates(self, exc: BaseException) -> bool:
        """Whether an exception from a user's code must go on up (the loop's cancellation and
        KeyboardInterrupt); anything else, SystemExit included, is that call's failure."""
        fatal = (self.cancelled, KeyboardInterrupt)
        if isinstance(exc, fatal):
            return True
        return isinstance(exc, BaseExceptionGroup) and exc.subgroup(fatal) is not None


def current() -> Loop:
    """The loop this task runs on."""
    if sniffio.current_async_library() == "trio":
        import trio

        clock = trio.lowlevel.current_clock()
        return Loop("trio", clock.current_time, trio.Cancelled, anyio.CancelScope)
    loop = asyncio.get_running_loop()
    return Loop("asyncio", loop.time, asyncio.CancelledError, anyio.CancelScope)

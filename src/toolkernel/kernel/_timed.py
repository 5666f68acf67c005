"""The events of a streamed batch with a time limit (``Kernel.stream(calls, timeout=...)``).

The limit is kept by the reader's own waits, not by a task of its own: each wait for the next
event runs in a cancel scope with the batch's deadline, and when one reaches it, the batch's
unfinished calls are timed out (``Scheduler.time_out``), whose ``CallFinished`` events (TIMEOUT)
the reader then gets like any other. A reader that stops reading for a while times the batch
out at its next read. Receiving from a memory stream is cancellation-safe: no event is lost.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import anyio

from ._events import CallEvent

__all__ = ["TimedEvents"]


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

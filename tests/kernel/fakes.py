"""Fake tools for the kernel tests: they sleep on trio's (mock) clock and record what they did.

Every fake tool records, per call id, when it started and ended (trio time, and a global step
number so that two intervals touching at the same instant are still ordered), how many fake
calls were running at once, and whether it was cancelled. Tests assert on these records.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

import anyio
import attrs

import toolkernel as tk
from toolkernel.errors import BarrierToolWarning
from toolkernel.locks import Claim, claims_conflict

ANDROID = tk.device("android")


@attrs.define
class Span:
    """What one run of a fake tool did."""

    call_id: str
    tool: str
    start: float
    start_step: int
    claims: tuple[Claim, ...]
    end: float | None = None
    end_step: int | None = None
    cancelled: bool = False


@attrs.define
class Recorder:
    """Shared by all fake tools of one test."""

    spans: dict[str, Span] = attrs.field(factory=dict)
    order: list[str] = attrs.field(factory=list)  # call ids in the order they started
    running: int = 0
    max_running: int = 0
    step: int = 0

    def _next_step(self) -> int:
        self.step += 1
        return self.step

    @asynccontextmanager
    async def run(self, ctx: tk.ToolContext) -> AsyncIterator[Span]:
        span = Span(ctx.call_id, ctx.tool_name, anyio.current_time(), self._next_step(), ctx.claims)
        assert ctx.call_id not in self.spans, f"{ctx.call_id} ran twice"
        self.spans[ctx.call_id] = span
        self.order.append(ctx.call_id)
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            yield span
        except anyio.get_cancelled_exc_class():
            span.cancelled = True
            raise
        finally:
            self.running -= 1
            span.end = anyio.current_time()
            span.end_step = self._next_step()

    def interval(self, call_id: str) -> tuple[float, float]:
        span = self.spans[call_id]
        assert span.end is not None
        return span.start, span.end

    def overlap(self, a: str, b: str) -> bool:
        """True iff the two calls ran at the same time (by step order, not only by time)."""
        sa, sb = self.spans[a], self.spans[b]
        assert sa.end_step is not None and sb.end_step is not None
        return sa.start_step < sb.end_step and sb.start_step < sa.end_step

    def ran(self, call_id: str) -> bool:
        return call_id in self.spans


async def _work(rec: Recorder, ctx: tk.ToolContext, duration: float, fail: bool, out: str) -> str:
    async with rec.run(ctx):
        await anyio.sleep(duration)
        if fail:
            raise RuntimeError(f"{ctx.call_id} failed on purpose")
    return out


def make_tools(rec: Recorder) -> list[tk.Tool]:
    """read / edit (a path argument), tap (the android device), lane (one unit of the android
    pool), free (no claims), barrier (declares nothing) — all sleep ``duration`` seconds."""

    @tk.tool(reads=["path"])
    async def read(
        ctx: tk.ToolContext, path: str, duration: float = 1.0, fail: bool = False
    ) -> str:
        """Read a file (fake)."""
        return await _work(rec, ctx, duration, fail, f"read {path}")

    @tk.tool(writes=["path"])
    async def edit(
        ctx: tk.ToolContext, path: str, duration: float = 1.0, fail: bool = False
    ) -> str:
        """Edit a file (fake)."""
        return await _work(rec, ctx, duration, fail, f"edited {path}")

    @tk.tool(claims=lambda args: [tk.exclusive(ANDROID)])
    async def tap(ctx: tk.ToolContext, duration: float = 1.0) -> str:
        """Tap the phone (fake)."""
        return await _work(rec, ctx, duration, False, "tapped")

    @tk.tool(claims=lambda args: [tk.units(tk.pool("android"), 1)])
    async def lane(ctx: tk.ToolContext, duration: float = 1.0) -> str:
        """Use one lane of the android pool (fake)."""
        return await _work(rec, ctx, duration, False, "laned")

    @tk.tool(claims=lambda args: [])
    async def free(ctx: tk.ToolContext, duration: float = 1.0) -> str:
        """Needs nothing at all."""
        return await _work(rec, ctx, duration, False, "free")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BarrierToolWarning)  # a barrier is the point of it

        @tk.tool
        async def barrier(ctx: tk.ToolContext, duration: float = 1.0) -> str:
            """Declares nothing: exclusive on everything."""
            return await _work(rec, ctx, duration, False, "barrier")

    return [read, edit, tap, lane, free, barrier]


def read(call_id: str, path: str, duration: float = 1.0, **options: object) -> tk.ToolCall:
    return tk.ToolCall(call_id, "read", {"path": path, "duration": duration}, **options)  # type: ignore[arg-type]


def edit(call_id: str, path: str, duration: float = 1.0, **options: object) -> tk.ToolCall:
    return tk.ToolCall(call_id, "edit", {"path": path, "duration": duration}, **options)  # type: ignore[arg-type]


def by_id(results: Iterable[tk.ToolResult]) -> dict[str, tk.ToolResult]:
    return {r.call_id: r for r in results}


def assert_leases_returned(kernel: tk.Kernel) -> None:
    stats = kernel.lease_statistics()
    assert (stats.held, stats.waiting) == (0, 0), stats
    snap = kernel.snapshot()
    assert snap.running == snap.queued == snap.pending == (), snap


def conflicting(a: Iterable[Claim], b: Iterable[Claim]) -> bool:
    b = tuple(b)
    return any(claims_conflict(x, y) for x in a for y in b)

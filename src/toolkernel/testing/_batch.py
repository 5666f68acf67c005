"""``CallBatch``: calls to submit together, and when to cancel some of them."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import attrs

from ..kernel import Kernel, ToolCall, ToolResult

__all__ = ["CallBatch"]


def _calls(calls: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
    return tuple(calls)


def _cancellations(items: Sequence[tuple[str, float]]) -> tuple[tuple[str, float], ...]:
    return tuple((str(call_id), float(at)) for call_id, at in items)


@attrs.frozen
class CallBatch:
    """A batch of calls and the cancellations to make while it runs.

    ``cancellations`` holds ``(call id, seconds after the batch is submitted)``: :meth:`run`
    cancels each call at its time (on the loop's clock; under virtual time, exactly then).
    """

    calls: tuple[ToolCall, ...] = attrs.field(converter=_calls)
    cancellations: tuple[tuple[str, float], ...] = attrs.field(default=(), converter=_cancellations)

    async def run(self, kernel: Kernel) -> list[ToolResult]:
        """Run the batch through ``kernel``, cancelling as scheduled; one result per call."""
        if not self.cancellations:
            return await kernel.run(self.calls)
        results: list[ToolResult] = []

        async def cancel_at(call_id: str, at: float) -> None:
            await anyio.sleep(at)
            kernel.cancel(call_id)

        async with anyio.create_task_group() as tasks:
            for call_id, at in self.cancellations:
                tasks.start_soon(cancel_at, call_id, at)
            results = await kernel.run(self.calls)
            tasks.cancel_scope.cancel()  # cancellations due after the batch ended don't matter
        return results

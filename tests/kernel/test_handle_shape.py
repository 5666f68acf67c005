"""A handle's shape: what is known is a property, what waits or acts is a method; the old
``handle.result()`` spelling still works, with a DeprecationWarning."""

from __future__ import annotations

from pathlib import Path

import pytest

import toolkernel as tk


@tk.tool(claims=lambda args: [])
async def noop(ctx: tk.ToolContext) -> str:
    """Do nothing."""
    return "done"


async def test_result_is_a_property_once_finished_and_raises_before(tmp_path: Path) -> None:
    async with tk.open_kernel([noop], root=tmp_path) as kernel:
        handle = kernel.submit(tk.ToolCall("c1", "noop", {}))
        assert (handle.call_id, handle.finished) == ("c1", False)
        with pytest.raises(RuntimeError, match="call c1 has not finished"):
            _ = handle.result
        result = await handle.wait_finished()
    assert handle.finished and handle.result is result
    assert (result.status, result.output) == (tk.Status.OK, "done")


async def test_the_old_call_spelling_works_and_says_it_is_deprecated(tmp_path: Path) -> None:
    async with tk.open_kernel([noop], root=tmp_path) as kernel:
        handle = kernel.submit(tk.ToolCall("c1", "noop", {}))
        await handle.wait_finished()
    with pytest.deprecated_call(match=r"write handle.result, not handle.result\(\)"):
        assert handle.result() is handle.result

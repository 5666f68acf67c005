"""Tools given with a batch (``kernel.run(calls, tools=...)``): a kernel runs tools it was not
opened with, as adapters for other frameworks need, under the same leases as its own."""

from __future__ import annotations

import anyio
import pytest

import toolkernel as tk

from .fakes import Recorder, assert_leases_returned, edit, make_tools


def outside_tools(log: list[str]) -> list[tk.Tool]:
    @tk.tool(writes=["path"])
    async def append(ctx: tk.ToolContext, path: str) -> str:
        """Append to a file (fake)."""
        log.append(f"start {ctx.call_id}")
        await anyio.sleep(1)
        log.append(f"end {ctx.call_id}")
        return "ok"

    @tk.tool(writes=["path"])
    async def edit(ctx: tk.ToolContext, path: str, duration: float = 1.0) -> str:
        """Shadows the kernel's own edit for one batch."""
        return "outside edit"

    return [append, edit]


async def test_a_batch_runs_tools_the_kernel_was_not_opened_with(autojump_clock) -> None:
    rec, log = Recorder(), []
    extra = outside_tools(log)
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        results = await kernel.run(
            [
                tk.ToolCall("a1", "append", {"path": "f"}),
                tk.ToolCall("a2", "append", {"path": "f"}),
                tk.ToolCall("a3", "append", {"path": "g"}),
            ],
            tools=extra,
        )
        assert [r.status for r in results] == [tk.Status.OK] * 3
        # one file: in emission order, one after the other; another file alongside
        assert [(r.started_at, r.finished_at) for r in results] == [(0, 1), (1, 2), (0, 1)]
        # the tools are the batch's alone: the kernel does not keep them
        assert "append" not in kernel.tools
        (later,) = await kernel.run([tk.ToolCall("a4", "append", {"path": "f"})])
        assert later.status is tk.Status.ERROR and "no tool named 'append'" in (later.error or "")
        assert_leases_returned(kernel)


async def test_batch_tools_share_leases_with_the_kernels_own(autojump_clock) -> None:
    rec, log = Recorder(), []
    (append, _) = outside_tools(log)
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        handles = kernel.submit_batch([edit("k1", "f", 2)])
        handle = kernel.submit(tk.ToolCall("a1", "append", {"path": "f"}), tools=[append])
        result = await handle.wait_finished()
        assert (await handles[0].wait_finished()).finished_at == 2
        assert result.started_at == 2  # waited for the kernel's own edit of the same file


async def test_a_batch_tool_is_found_before_the_kernels_own_of_that_name(autojump_clock) -> None:
    rec, log = Recorder(), []
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        (shadowed,) = await kernel.run([edit("e1", "f")], tools=outside_tools(log))
        (own,) = await kernel.run([edit("e2", "f")])
    assert shadowed.output == "outside edit"
    assert own.output != "outside edit" and rec.ran("e2") and not rec.ran("e1")


async def test_bad_batch_tools_are_refused_and_nothing_is_submitted(autojump_clock) -> None:
    rec, log = Recorder(), []
    tools = outside_tools(log)
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        with pytest.raises(ValueError, match="two tools are named 'append'"):
            await kernel.run([edit("e1", "f")], tools=[tools[0], tools[0]])
        with pytest.raises(TypeError, match="expected a tool"):
            kernel.submit(edit("e2", "f"), tools=[print])  # type: ignore[list-item]
        assert kernel.snapshot().queued == () and not rec.ran("e1") and not rec.ran("e2")


async def test_a_nested_call_finds_the_tools_its_parents_batch_was_given(autojump_clock) -> None:
    @tk.tool(claims=lambda args: [])
    async def helper(ctx: tk.ToolContext) -> str:
        return "helped"

    @tk.tool(claims=lambda args: [])
    async def outer(ctx: tk.ToolContext) -> str:
        inner = await ctx.call("helper")
        return f"{inner.status.value}: {inner.output or inner.error}"

    async with tk.open_kernel(tools=make_tools(Recorder())) as kernel:
        (result,) = await kernel.run([tk.ToolCall("o", "outer", {})], tools=[outer, helper])
        assert result.output == "ok: helped"
        assert_leases_returned(kernel)

"""A running tool that learns it must hold more (``HoldMore``): the call goes back in line, in
its place, holding nothing while it waits; its tool runs again once it holds its claims and the
new ones, and finds what its last run left in ``ctx.resumed``. On the mock clock."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import toolkernel as tk
from toolkernel.kernel import HoldMore

DEADLINE = 1000  # mock seconds: a hang jumps here at once and fails the test


def tools(log: list[tuple[str, float, Any]]) -> list[tk.Tool]:
    @tk.tool(claims=lambda args: [tk.exclusive(tk.path(args["first"]))])
    async def grow(ctx: tk.ToolContext, first: str, then: str, times: int = 1) -> str:
        """Holds ``first``; learns it also needs ``then`` (``times`` times), and finishes."""
        log.append((ctx.call_id, anyio.current_time(), ctx.resumed))
        step = ctx.resumed or 0
        await anyio.sleep(1)
        if step < times:
            raise HoldMore([tk.exclusive(tk.path(then))], state=step + 1)
        return f"held {sorted(str(c.resource) for c in ctx.claims)}"

    @tk.tool(claims=lambda args: [tk.exclusive(tk.path(args["path"]))])
    async def edit(ctx: tk.ToolContext, path: str, seconds: float = 1.0) -> str:
        """Holds ``path`` for ``seconds``."""
        log.append((ctx.call_id, anyio.current_time(), None))
        await anyio.sleep(seconds)
        return "edited"

    @tk.tool(claims=lambda args: [])
    async def nests(ctx: tk.ToolContext) -> str:
        """Calls ``grow`` from inside: a nested call can't ask to hold more."""
        result = await ctx.call("grow", first="n", then="m")
        return f"{result.status.value}: {result.error}"

    return [grow, edit, nests]


async def test_the_tool_runs_again_holding_more_with_what_its_last_run_left(
    autojump_clock: Any,
) -> None:
    log: list[tuple[str, float, Any]] = []
    async with tk.open_kernel(tools(log)) as kernel:
        with anyio.fail_after(DEADLINE):
            (result,) = await kernel.run([tk.ToolCall("g", "grow", {"first": "a", "then": "b"})])
    assert result.status is tk.Status.OK, result.error
    assert result.output == "held ['a', 'b']"
    assert [(call, state) for call, _, state in log] == [("g", None), ("g", 1)]


async def test_it_waits_behind_an_earlier_call_on_what_it_needs_but_ahead_of_later_ones(
    autojump_clock: Any,
) -> None:
    log: list[tuple[str, float, Any]] = []
    async with tk.open_kernel(tools(log)) as kernel:
        with anyio.fail_after(DEADLINE):
            earlier, grow, later = await kernel.run(
                [
                    tk.ToolCall("e1", "edit", {"path": "b", "seconds": 3}),
                    tk.ToolCall("g", "grow", {"first": "a", "then": "b"}),
                    # Conflicts with nothing grow first claimed: it may start at once, but
                    # once grow asks for b, grow keeps its place ahead of it.
                    tk.ToolCall("e2", "edit", {"path": "b", "seconds": 1}),
                ]
            )
    assert [r.status for r in (earlier, grow, later)] == [tk.Status.OK] * 3
    runs = {}
    for call, at, _ in log:
        runs.setdefault(call, []).append(at)
    assert runs["g"] == [0, 3]  # again once e1 let go of b, at 3
    assert runs["e2"] == [4]  # after grow (which ran 3 to 4), as emitted
    assert grow.finished_at == 4


async def test_a_call_cancelled_while_it_waits_to_hold_more_runs_no_more(
    autojump_clock: Any,
) -> None:
    log: list[tuple[str, float, Any]] = []
    async with tk.open_kernel(tools(log)) as kernel:
        with anyio.fail_after(DEADLINE):
            blocker = kernel.submit(tk.ToolCall("e1", "edit", {"path": "b", "seconds": 10}))
            grow = kernel.submit(tk.ToolCall("g", "grow", {"first": "a", "then": "b"}))
            await anyio.sleep(2)  # grow ran once, and waits for b
            assert sorted(call for call, _, _ in log) == ["e1", "g"]
            grow.cancel()
            result = await grow.wait_finished()
            await blocker.wait_finished()
    assert result.status is tk.Status.CANCELLED
    assert sorted(call for call, _, _ in log) == ["e1", "g"]  # grow never ran again
    assert kernel.lease_statistics().held == 0


async def test_asking_again_and_again_is_bounded(autojump_clock: Any) -> None:
    log: list[tuple[str, float, Any]] = []
    async with tk.open_kernel(tools(log)) as kernel:
        with anyio.fail_after(DEADLINE):
            (result,) = await kernel.run(
                [tk.ToolCall("g", "grow", {"first": "a", "then": "b", "times": 10})]
            )
    assert result.status is tk.Status.ERROR
    assert "asked to hold more than it claimed" in (result.error or "")
    assert len(log) == 4  # MAX_REQUEUES runs again, then it fails


@pytest.mark.parametrize("more", [tk.path("x"), "x", [42]])
async def test_asking_for_what_is_not_a_list_of_claims_fails_the_call(
    autojump_clock: Any, more: Any
) -> None:
    @tk.tool(claims=lambda args: [])
    async def confused(ctx: tk.ToolContext) -> str:
        """Asks for nonsense."""
        raise HoldMore(more)

    async with tk.open_kernel([confused]) as kernel:
        with anyio.fail_after(DEADLINE):
            (result,) = await kernel.run([tk.ToolCall("c", "confused", {})])
    assert result.status is tk.Status.ERROR
    assert result.error_type in ("InvalidClaimError", "InvalidCallError")


async def test_a_nested_call_that_asks_to_hold_more_fails_saying_so(
    autojump_clock: Any,
) -> None:
    log: list[tuple[str, float, Any]] = []
    async with tk.open_kernel(tools(log)) as kernel:
        with anyio.fail_after(DEADLINE):
            (result,) = await kernel.run([tk.ToolCall("n", "nests", {})])
    assert result.status is tk.Status.OK
    assert "grow asked to hold more than its call claimed" in str(result.output)


def claimless(log: list[tuple[str, float, Any]]) -> tk.Tool:
    @tk.tool(claims=lambda args: [])
    async def late(ctx: tk.ToolContext, then: str) -> str:
        """Claims nothing; learns, after a second, that it needs ``then`` too."""
        log.append((ctx.call_id, anyio.current_time(), ctx.resumed))
        await anyio.sleep(1)
        if ctx.resumed is None:
            raise HoldMore([tk.exclusive(tk.path(then))], state="again")
        return f"held {sorted(str(c.resource) for c in ctx.claims)}"

    return late


@pytest.mark.parametrize("max_concurrency", [None, 1, 4])
async def test_a_call_that_claims_nothing_may_ask_to_hold_more(
    autojump_clock: Any, max_concurrency: int | None
) -> None:
    log: list[tuple[str, float, Any]] = []
    async with tk.open_kernel([claimless(log)], max_concurrency=max_concurrency) as kernel:
        with anyio.fail_after(DEADLINE):
            (result,) = await kernel.run([tk.ToolCall("c", "late", {"then": "b"})])
    assert result.status is tk.Status.OK, result.error
    assert result.output == "held ['b']"
    assert [(call, at, state) for call, at, state in log] == [("c", 0, None), ("c", 1, "again")]
    assert kernel.lease_statistics().held == 0


async def test_a_call_that_claims_nothing_keeps_its_place_when_it_asks_for_more(
    autojump_clock: Any,
) -> None:
    log: list[tuple[str, float, Any]] = []
    async with tk.open_kernel([*tools(log), claimless(log)]) as kernel:
        with anyio.fail_after(DEADLINE):
            earlier, late, later = await kernel.run(
                [
                    tk.ToolCall("e1", "edit", {"path": "b", "seconds": 3}),
                    tk.ToolCall("c", "late", {"then": "b"}),
                    # Waits behind e1; once c asks for b, c is ahead of it, as emitted.
                    tk.ToolCall("e2", "edit", {"path": "b", "seconds": 1}),
                ]
            )
    assert [r.status for r in (earlier, late, later)] == [tk.Status.OK] * 3
    runs: dict[str, list[float]] = {}
    for call, at, _ in log:
        runs.setdefault(call, []).append(at)
    assert runs == {"e1": [0], "c": [0, 3], "e2": [4]}


async def test_a_tools_except_exception_does_not_swallow_it(autojump_clock: Any) -> None:
    """A signal to the kernel, not an error: it passes a tool's ``except Exception``."""

    @tk.tool(claims=lambda args: [tk.exclusive(tk.path("a"))])
    async def careful(ctx: tk.ToolContext) -> str:
        """Asks to hold more from inside a catch-all, as a helper deep in a tool might."""
        if ctx.resumed:
            return f"resumed holding {sorted(str(c.resource) for c in ctx.claims)}"
        try:
            raise HoldMore([tk.exclusive(tk.path("b"))], state=True)
        except Exception:
            return "swallowed"

    async with tk.open_kernel([careful]) as kernel:
        with anyio.fail_after(DEADLINE):
            (result,) = await kernel.run([tk.ToolCall("c", "careful", {})])
    assert result.status is tk.Status.OK, result.error
    assert result.output == "resumed holding ['a', 'b']"

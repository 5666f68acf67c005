"""``kernel.run(calls, timeout=...)``: a bounded batch still answers every call.

Calls that finished in time keep their results; the others end TIMEOUT, saying where they were
(running, or waiting behind whom), and their leases return.
"""

from __future__ import annotations

import math

import anyio
import pytest

import toolkernel as tk

from .fakes import Recorder, assert_leases_returned, by_id, edit, make_tools, read


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


async def test_finished_calls_keep_their_results_and_the_others_time_out(
    autojump_clock, rec
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        results = await kernel.run(
            [
                edit("c1", "a", 1),  # done at 1
                edit("c2", "a", 5),  # runs from 1, cut at 3
                read("c3", "b", 10),  # runs from 0, cut at 3
                edit("c4", "a", 1),  # waits behind c2, never runs
                read("c5", "b", 2),  # done at 2
            ],
            timeout=3,
        )
        assert anyio.current_time() == 3
        assert_leases_returned(kernel)
    got = by_id(results)
    assert [r.call_id for r in results] == ["c1", "c2", "c3", "c4", "c5"]
    assert (got["c1"].status, got["c1"].output) == (tk.Status.OK, "edited a")
    assert (got["c5"].status, got["c5"].finished_at) == (tk.Status.OK, 2)
    for call_id in ("c2", "c3", "c4"):
        assert got[call_id].status is tk.Status.TIMEOUT
        assert got[call_id].finished_at == 3
        assert got[call_id].error_type == "CallTimeoutError"
    assert got["c2"].error == (
        "timed out: the batch's limit of 3 s ran out after it had run for 2 s; it was stopped "
        "unfinished. Try a smaller piece of work, or a longer limit"
    )
    assert "after it had run for 3 s" in (got["c3"].error or "")
    assert got["c4"].started_at is None
    assert got["c4"].error == (
        "timed out: the batch's limit of 3 s ran out while it waited for its leases behind "
        "c2 (edit) on a; it was not run. Try it again on its own, or with a longer limit"
    )
    assert rec.spans["c2"].cancelled and rec.spans["c3"].cancelled
    assert not rec.ran("c4")


async def test_a_batch_that_finishes_in_time_is_not_touched(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        results = await kernel.run([edit("c1", "a", 1), edit("c2", "a", 1)], timeout=5)
        assert anyio.current_time() == 2  # it returns when the batch is done, not at 5
    assert [r.status for r in results] == [tk.Status.OK, tk.Status.OK]


async def test_a_lone_call_is_bounded_too(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        (slow,) = await kernel.run([edit("c1", "a", 10)], timeout=2)
        (quick,) = await kernel.run([edit("c2", "a", 1)], timeout=2)
        assert_leases_returned(kernel)
    assert (slow.status, slow.finished_at) == (tk.Status.TIMEOUT, 2)
    assert (quick.status, quick.finished_at) == (tk.Status.OK, 3)


async def test_a_timeout_of_zero_runs_nothing_and_keeps_admission_errors(
    autojump_clock, rec
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        results = await kernel.run(
            [edit("c1", "a"), tk.ToolCall("c2", "nope", {}), read("c3", "b")], timeout=0
        )
        assert anyio.current_time() == 0
        assert_leases_returned(kernel)
    first, unknown, third = results
    assert first.status is third.status is tk.Status.TIMEOUT
    assert "ran out while it waited" in (first.error or "")
    assert (unknown.status, unknown.error_type) == (tk.Status.ERROR, "UnknownToolError")
    assert rec.spans == {}


async def test_an_infinite_timeout_is_no_limit(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        (result,) = await kernel.run([edit("c1", "a", 1000)], timeout=math.inf)
    assert result.ok


@pytest.mark.parametrize(
    ("limit", "error"),
    [(-1, ValueError), (math.nan, ValueError), (-math.inf, ValueError), ("5", TypeError)],
)
async def test_a_bad_timeout_is_refused_before_anything_runs(rec, limit, error) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        with pytest.raises(error, match="timeout must be"):
            await kernel.run([edit("c1", "a", 0)], timeout=limit)
        assert kernel.snapshot().pending == kernel.snapshot().queued == ()
    assert rec.spans == {}


async def test_dependents_of_a_call_cut_short_time_out_too(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        first, second = await kernel.run(
            [edit("c1", "a", 10), read("c2", "b", 1, after=("c1",))], timeout=4
        )
        assert_leases_returned(kernel)
    assert first.status is second.status is tk.Status.TIMEOUT
    assert "ran out while it waited to start" in (second.error or "")


async def test_a_call_cancelled_before_the_limit_stays_cancelled(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        results: list[tk.ToolResult] = []

        async def run() -> None:
            results.extend(await kernel.run([edit("c1", "a", 10), read("c2", "b", 10)], timeout=5))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(run)
            await anyio.sleep(1)
            kernel.cancel("c1")
    cancelled, timed_out = results
    assert (cancelled.status, cancelled.finished_at) == (tk.Status.CANCELLED, 1)
    assert (timed_out.status, timed_out.finished_at) == (tk.Status.TIMEOUT, 5)


async def test_nested_calls_are_cut_short_with_their_parent(autojump_clock, rec) -> None:
    tools = make_tools(rec)

    @tk.tool(writes=["path"])
    async def outer(ctx: tk.ToolContext, path: str) -> str:
        inner = await ctx.call("edit", path=path, duration=10)
        return f"inner {inner.status.value}"

    async with tk.open_kernel(tools=[*tools, outer]) as kernel:
        finished: list[tk.ToolResult] = []
        kernel.add_listener(
            lambda e: finished.append(e.result) if isinstance(e, tk.kernel.CallFinished) else None
        )
        (result,) = await kernel.run([tk.ToolCall("o1", "outer", {"path": "a"})], timeout=2)
        assert_leases_returned(kernel)
        (after,) = await kernel.run([edit("c2", "a", 1)])  # the path is free again
    assert (result.status, result.finished_at) == (tk.Status.TIMEOUT, 2)
    (span,) = [s for s in rec.spans.values() if s.tool == "edit" and s.call_id != "c2"]
    assert span.cancelled and span.end == 2
    nested = [r for r in finished if r.name == "edit" and r.call_id != "c2"]
    assert nested and all(r.status is tk.Status.CANCELLED for r in nested)
    assert after.ok and after.started_at == 2


async def test_a_tool_may_bound_a_batch_it_runs_itself(autojump_clock, rec) -> None:
    tools = make_tools(rec)

    opened: list[tk.Kernel] = []

    @tk.tool(claims=lambda args: [])
    async def planner(ctx: tk.ToolContext) -> str:
        inner = await opened[0].run([edit("i1", "a", 1), edit("i2", "b", 10)], timeout=3)
        return " ".join(r.status.value for r in inner)

    async with tk.open_kernel(tools=[*tools, planner]) as kernel:
        opened.append(kernel)
        (result,) = await kernel.run([tk.ToolCall("p1", "planner", {})])
        assert_leases_returned(kernel)
    assert (result.status, result.output, result.finished_at) == (tk.Status.OK, "ok timeout", 3)


async def test_a_caller_cancelled_meanwhile_cancels_the_calls(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        finished: list[tk.ToolResult] = []
        kernel.add_listener(
            lambda e: finished.append(e.result) if isinstance(e, tk.kernel.CallFinished) else None
        )
        with anyio.move_on_after(2) as scope:
            await kernel.run([edit("c1", "a", 1), edit("c2", "a", 10)], timeout=5)
        assert scope.cancelled_caught
        assert anyio.current_time() == 2
        assert_leases_returned(kernel)
    got = by_id(finished)
    assert got["c1"].ok
    assert got["c2"].status is tk.Status.CANCELLED
    assert got["c2"].error == "cancelled: the caller of run() was cancelled"


async def test_a_streamed_batch_times_out_with_its_events(autojump_clock, rec) -> None:
    events: list[tk.CallEvent] = []
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        calls = [edit("c1", "a", 1), edit("c2", "a", 5), read("c3", "b", 10)]
        async with kernel.stream(calls, timeout=3) as stream:
            async for event in stream:
                events.append(event)
        assert anyio.current_time() == 3
        assert_leases_returned(kernel)
    finished = {e.call_id: e.result for e in events if isinstance(e, tk.kernel.CallFinished)}
    assert finished["c1"].ok and finished["c1"].finished_at == 1
    assert finished["c2"].status is finished["c3"].status is tk.Status.TIMEOUT
    assert "the batch's limit of 3 s ran out after it had run for 2 s" in (
        finished["c2"].error or ""
    )


async def test_a_streamed_batch_with_a_timeout_of_zero_starts_nothing(autojump_clock, rec) -> None:
    calls = [edit("c1", "a"), read("c2", "b")]
    async with (
        tk.open_kernel(tools=make_tools(rec)) as kernel,
        kernel.stream(calls, timeout=0) as s,
    ):
        finished = [e.result async for e in s if isinstance(e, tk.kernel.CallFinished)]
    assert [r.status for r in finished] == [tk.Status.TIMEOUT, tk.Status.TIMEOUT]
    assert rec.spans == {}


async def test_a_streamed_batch_refuses_a_bad_timeout(rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        with pytest.raises(ValueError, match="timeout must be"):
            async with kernel.stream([edit("c1", "a")], timeout=math.nan):
                pass
        assert kernel.snapshot().pending == kernel.snapshot().queued == ()

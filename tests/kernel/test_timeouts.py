"""Separate limits on waiting for leases and on running: per kernel, per tool, per call."""

from __future__ import annotations

import anyio
import pytest

import toolkernel as tk

from .fakes import Recorder, assert_leases_returned, by_id, edit, make_tools, read


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


def impatient_tools(rec: Recorder, *, wait: float | None = None, run: float | None = None):
    """The fake tools plus ``quick_edit``, which has its own default timeouts."""

    @tk.tool(writes=["path"], wait_timeout=wait, run_timeout=run)
    async def quick_edit(ctx: tk.ToolContext, path: str, duration: float = 1.0) -> str:
        async with rec.run(ctx):
            await anyio.sleep(duration)
        return f"edited {path}"

    return [*make_tools(rec), quick_edit]


def quick(call_id: str, path: str, duration: float = 1.0, **options) -> tk.ToolCall:
    return tk.ToolCall(call_id, "quick_edit", {"path": path, "duration": duration}, **options)


async def test_a_tool_wait_timeout_gives_timeout_and_a_readable_message(
    autojump_clock, rec
) -> None:
    async with tk.open_kernel(tools=impatient_tools(rec, wait=2)) as kernel:
        holder = kernel.submit(edit("c1", "a.txt", 10))
        (result,) = await kernel.run([quick("c2", "a.txt")])
        assert kernel.lease_statistics().waiting == 0
        assert kernel.snapshot().queued == ()
        await holder.wait_finished()
        assert_leases_returned(kernel)
    assert result.status is tk.Status.TIMEOUT
    assert (result.queued_at, result.started_at, result.finished_at) == (0, None, 2)
    assert result.error == (
        "timed out after waiting 2 s for its leases behind c1 (edit) on a.txt; try again later"
    )
    assert not rec.ran("c2")


async def test_a_call_wait_timeout_overrides_the_tool_default(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=impatient_tools(rec, wait=2)) as kernel:
        kernel.submit(edit("c1", "a", 10))
        shorter, longer, unlimited_tool = await kernel.run(
            [
                quick("c2", "a", wait_timeout=1),
                quick("c3", "a", wait_timeout=20),
                edit("c4", "a", 1, wait_timeout=5),
            ]
        )
    assert (shorter.status, shorter.finished_at) == (tk.Status.TIMEOUT, 1)
    assert "waiting 1 s" in (shorter.error or "")
    assert (longer.status, longer.started_at, longer.finished_at) == (tk.Status.OK, 10, 11)
    assert (unlimited_tool.status, unlimited_tool.finished_at) == (tk.Status.TIMEOUT, 5)


async def test_a_kernel_wait_timeout_is_the_default_of_every_tool(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec), wait_timeout=3) as kernel:
        first, second = await kernel.run([edit("c1", "a", 10), edit("c2", "a", 1)])
    assert first.ok  # the limit is on waiting, not on running
    assert (second.status, second.finished_at) == (tk.Status.TIMEOUT, 3)


async def test_a_timed_out_waiter_leaves_the_queue_clean(autojump_clock, rec) -> None:
    # c1 reads a; c2 wants to write a and waits; c3 (another batch) reads a and must queue
    # behind c2 (no reader barging past a waiting writer). When c2 times out, c3 goes at once.
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        h1 = kernel.submit(read("c1", "a", 10))
        h2 = kernel.submit(edit("c2", "a", 1, wait_timeout=2))
        h3 = kernel.submit(read("c3", "a", 1))
        await anyio.sleep(1)
        assert kernel.lease_statistics().waiting == 2
        snap = kernel.snapshot()
        assert {i.call_id: i.waits_for for i in snap.queued} == {"c2": ("c1",), "c3": ("c2",)}
        results = by_id([await h.wait_finished() for h in (h1, h2, h3)])
        assert_leases_returned(kernel)
    assert results["c2"].status is tk.Status.TIMEOUT
    assert (results["c3"].started_at, results["c3"].finished_at) == (2, 3)


async def test_a_run_timeout_gives_timeout_and_releases_the_lease(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        slow, after = await kernel.run(
            [edit("c1", "a", 100, run_timeout=2), edit("c2", "a", 1, run_timeout=2)]
        )
        assert_leases_returned(kernel)
    assert slow.status is tk.Status.TIMEOUT
    assert (slow.started_at, slow.finished_at) == (0, 2)
    assert slow.error == (
        "timed out after running for 2 s; try a smaller piece of work or a longer timeout"
    )
    assert rec.spans["c1"].cancelled
    # The run timeout counts from the start, not from admission: c2 waited 2 s, ran 1 s.
    assert (after.status, after.started_at, after.finished_at) == (tk.Status.OK, 2, 3)


async def test_run_timeouts_per_tool_and_per_kernel(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=impatient_tools(rec, run=1.5), run_timeout=4) as kernel:
        by_tool, by_kernel, by_call, short_enough = await kernel.run(
            [
                quick("c1", "a", 10),
                edit("c2", "b", 10),
                quick("c3", "c", 10, run_timeout=0.5),
                edit("c4", "d", 3),
            ]
        )
    assert (by_tool.status, by_tool.finished_at) == (tk.Status.TIMEOUT, 1.5)
    assert "running for 1.5 s" in (by_tool.error or "")
    assert (by_kernel.status, by_kernel.finished_at) == (tk.Status.TIMEOUT, 4)
    assert (by_call.status, by_call.finished_at) == (tk.Status.TIMEOUT, 0.5)
    assert short_enough.ok


def test_timeouts_must_be_non_negative_numbers() -> None:
    with pytest.raises(ValueError, match="wait_timeout must be a non-negative number"):
        tk.ToolCall("c1", "edit", {}, wait_timeout=-1)
    with pytest.raises(TypeError, match="run_timeout must be a non-negative number"):
        tk.ToolCall("c1", "edit", {}, run_timeout="3")  # type: ignore[arg-type]


@pytest.mark.parametrize("limit_from", ["kernel", "call"])
async def test_a_run_timeout_expiring_in_an_after_hook_times_the_call_out(
    autojump_clock, rec, limit_from
) -> None:
    # The run limit bounds the tool and its after-hooks together: a hook that never returns
    # can't keep the call (and run()) waiting forever.
    async def stuck(call: tk.ToolCall, result: tk.ToolResult) -> None:
        await anyio.sleep_forever()

    kernel_limit = 5.0 if limit_from == "kernel" else None
    call_limit = 5.0 if limit_from == "call" else None
    async with tk.open_kernel(
        tools=make_tools(rec), after_hooks=[stuck], run_timeout=kernel_limit
    ) as kernel:
        with anyio.fail_after(100):
            (result,) = await kernel.run([edit("c1", "a", 1, run_timeout=call_limit)])
        assert_leases_returned(kernel)
    assert (result.status, result.started_at, result.finished_at) == (tk.Status.TIMEOUT, 0, 5)
    assert result.error_type == "RunTimeoutError"
    assert not rec.spans["c1"].cancelled  # the tool itself finished in time

"""Priorities between batches; what ``snapshot()`` and ``statistics()`` report."""

from __future__ import annotations

import anyio
import pytest

import toolkernel as tk
from toolkernel.kernel import CallState

from .fakes import Recorder, assert_leases_returned, by_id, edit, make_tools, read


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


# -- priorities -----------------------------------------------------------------------------------


async def test_a_higher_priority_call_overtakes_a_waiting_call_of_another_batch(
    autojump_clock, rec
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        holder = kernel.submit(edit("holder", "a", 5))
        low = kernel.submit(edit("low", "a", 1))
        high = kernel.submit(edit("high", "a", 1, priority=10))
        results = by_id([await h.wait_finished() for h in (holder, low, high)])
    assert rec.order == ["holder", "high", "low"]
    assert (results["high"].started_at, results["low"].started_at) == (5, 6)


async def test_a_higher_priority_never_overtakes_an_earlier_call_of_its_own_batch(
    autojump_clock, rec
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        holder = kernel.submit(edit("holder", "a", 5))
        other = kernel.submit(edit("other", "a", 1, priority=5))
        mine = kernel.submit_batch(
            [edit("first", "a", 1, priority=0), edit("urgent", "a", 1, priority=10)]
        )
        for handle in (holder, other, *mine):
            await handle.wait_finished()
    # "urgent" may not pass "first" (same batch), so it can't pass "other" either.
    assert rec.order == ["holder", "other", "first", "urgent"]


async def test_a_high_priority_call_does_not_pass_an_unrelated_lower_one(
    autojump_clock, rec
) -> None:
    # Priorities only matter between conflicting waiters; nothing else is delayed.
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        kernel.submit(edit("holder", "a", 5))
        low = kernel.submit(edit("low", "b", 1))
        high = kernel.submit(edit("high", "a", 1, priority=10))
        assert (await low.wait_finished()).started_at == 0
        assert (await high.wait_finished()).started_at == 5


# -- snapshot -------------------------------------------------------------------------------------


async def test_the_snapshot_names_what_runs_and_what_each_waiter_waits_behind(
    autojump_clock, rec
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        handles = kernel.submit_batch(
            [
                read("r1", "a", 4),
                read("r2", "a/b", 4),
                edit("w1", "a", 1),  # behind both readers
                read("r3", "a/b/c", 1),  # behind the waiting writer: no barging
                tk.ToolCall("t1", "tap", {"duration": 1}),
                read("d1", "z", 1, after=("w1",)),
            ]
        )
        await anyio.sleep(0.5)
        snap = kernel.snapshot()
        assert [i.call_id for i in snap.running] == ["r1", "r2", "t1"]
        assert {i.call_id: i.waits_for for i in snap.queued} == {
            "w1": ("r1", "r2"),
            "r3": ("w1",),
        }
        assert {i.call_id: i.waits_for for i in snap.pending} == {"d1": ("w1",)}
        w1 = next(i for i in snap.queued if i.call_id == "w1")
        assert (w1.name, w1.state, w1.since, w1.parent) == ("edit", CallState.QUEUED, 0, None)
        assert [str(c) for c in w1.claims] == ["exclusive a"]
        # The snapshot is a value: equal to another taken at the same moment.
        assert kernel.snapshot() == snap
        for handle in handles:
            await handle.wait_finished()
        assert_leases_returned(kernel)


async def test_a_blocked_event_names_the_calls_and_resources_it_waits_behind(
    autojump_clock, rec
) -> None:
    events: list[tk.CallEvent] = []
    async with tk.open_kernel(tools=make_tools(rec), max_concurrency=1) as kernel:
        kernel.add_listener(events.append)
        await kernel.run(
            [
                edit("e1", "src/a.py", 1),
                edit("e2", "src/a.py", 1),
                tk.ToolCall("t1", "tap", {"duration": 1}),
            ]
        )
    blocked = {
        e.call_id: (e.waits_for, e.resources)
        for e in events
        if isinstance(e, tk.kernel.CallBlocked)
    }
    assert blocked["e2"][0] == ("e1",)
    assert blocked["e2"][1][0] == "src/a.py"
    # t1 waits for nothing but the concurrency slot.
    assert "one of 1 concurrency slots" in blocked["t1"][1]


async def test_a_blocked_event_names_only_the_resources_in_conflict(autojump_clock) -> None:
    @tk.tool(claims=lambda a: [tk.reads("repo"), tk.writes(a["path"]), tk.units(tk.pool("net"))])
    async def commit(ctx: tk.ToolContext, path: str) -> None:
        """Hold the repository shared, a path alone and a unit of the network for a second."""
        await anyio.sleep(1)

    events: list[tk.CallEvent] = []
    async with tk.open_kernel([commit], pools={"net": 1}) as kernel:
        kernel.add_listener(events.append)
        await kernel.run(
            [tk.ToolCall("c1", "commit", {"path": "a"}), tk.ToolCall("c2", "commit", {"path": "b"})]
        )
        await kernel.run(
            [tk.ToolCall("c3", "commit", {"path": "a"}), tk.ToolCall("c4", "commit", {"path": "a"})]
        )
    blocked = {e.call_id: e.resources for e in events if isinstance(e, tk.kernel.CallBlocked)}
    # Both share "repo", which is never what anyone waits on; the pool's one unit is.
    assert blocked == {"c2": ("pool:net",), "c4": ("a", "pool:net")}


# -- statistics -----------------------------------------------------------------------------------


async def test_statistics_count_calls_errors_and_time_percentiles_per_tool(
    autojump_clock, rec
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        handles = kernel.submit_batch(
            [
                edit("e1", "a", 1),
                edit("e2", "a", 2),
                edit("e3", "a", 3),
                tk.ToolCall("e4", "edit", {"path": "a", "duration": 4, "fail": True}),
                read("r1", "b", 10),
                tk.ToolCall("x", "edit", {"path": 1}),
            ]
        )
        await anyio.sleep(0.5)
        during = kernel.statistics()
        assert (during.running, during.queued, during.pending, during.finished) == (2, 3, 0, 1)
        for handle in handles:
            await handle.wait_finished()
        stats = kernel.statistics()
    assert (stats.running, stats.queued, stats.pending, stats.finished) == (0, 0, 0, 6)
    tools = {t.name: t for t in stats.tools}
    assert sorted(tools) == ["edit", "read"]
    edit_stats, read_stats = tools["edit"], tools["read"]
    assert (edit_stats.count, edit_stats.errors) == (5, 2)
    # Runs: 1, 2, 3, 4 (the admission error never ran). Waits: 0, 1, 3, 6 and 0.
    assert (edit_stats.run_p50, edit_stats.run_p90, edit_stats.run_p99) == (2, 4, 4)
    assert (edit_stats.wait_p50, edit_stats.wait_p90, edit_stats.wait_p99) == (1, 6, 6)
    assert (read_stats.count, read_stats.errors, read_stats.run_p50) == (1, 0, 10)

"""Which calls of a batch overlap and which run one after another; concurrency limits and lanes."""

from __future__ import annotations

import anyio
import pytest

import toolkernel as tk
from toolkernel.testing import wait_all_tasks_blocked

from .fakes import Recorder, assert_leases_returned, by_id, edit, make_tools, read


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


async def test_read_then_edit_of_one_file_runs_the_read_first(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        results = await kernel.run([read("c1", "a.txt", 1), edit("c2", "a.txt", 1)])
        assert [r.status for r in results] == [tk.Status.OK, tk.Status.OK]
        assert rec.interval("c1") == (0, 1)
        assert rec.interval("c2") == (1, 2)
        assert not rec.overlap("c1", "c2")
        assert_leases_returned(kernel)


async def test_edit_then_read_of_one_file_runs_the_edit_first(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        await kernel.run([edit("c1", "a.txt", 2), read("c2", "a.txt", 1)])
        assert rec.order == ["c1", "c2"]
        assert rec.interval("c2") == (2, 3)


async def test_edits_of_one_file_run_one_after_another_in_emission_order(
    autojump_clock, rec
) -> None:
    # Durations decrease so that any reordering or overlap shows in the times.
    calls = [edit(f"c{i}", "src/a.py", 4 - i) for i in range(4)]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        results = await kernel.run(calls)
    assert rec.order == ["c0", "c1", "c2", "c3"]
    assert [rec.interval(f"c{i}") for i in range(4)] == [(0, 4), (4, 7), (7, 9), (9, 10)]
    assert [r.call_id for r in results] == ["c0", "c1", "c2", "c3"]


async def test_spellings_of_one_path_are_one_resource(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        await kernel.run([edit("c1", "src/a.py", 1), edit("c2", "./src//a.py", 1)])
    assert rec.interval("c2") == (1, 2)


async def test_reads_of_one_file_overlap(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        await kernel.run([read(f"c{i}", "a.txt", 1) for i in range(3)])
        assert autojump_clock.current_time() == 1
    assert {rec.interval(f"c{i}") for i in range(3)} == {(0, 1)}
    assert rec.max_running == 3


async def test_read_of_a_and_edit_of_b_overlap(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        await kernel.run([read("c1", "a", 1), edit("c2", "b", 1)])
    assert rec.overlap("c1", "c2")
    assert rec.interval("c2") == (0, 1)


async def test_a_directory_edit_excludes_edits_inside_it_but_not_beside_it(
    autojump_clock, rec
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        await kernel.run([edit("dir", "a", 1), edit("inside", "a/b/c", 1), edit("beside", "ab", 1)])
    assert rec.interval("inside") == (1, 2)
    assert rec.interval("beside") == (0, 1)


async def test_three_calls_on_different_files_take_the_time_of_one(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        start = autojump_clock.current_time()
        results = await kernel.run(
            [edit("c1", "a.py", 0.1), edit("c2", "b.py", 0.1), read("c3", "c.py", 0.1)]
        )
        elapsed = autojump_clock.current_time() - start
    assert elapsed == pytest.approx(0.1)
    assert all(r.ok for r in results)
    assert rec.max_running == 3


@pytest.mark.parametrize("limit", [1, 2, 3])
async def test_max_concurrency_is_never_exceeded(autojump_clock, rec, limit) -> None:
    calls = [edit(f"c{i}", f"f{i}", 1) for i in range(7)]
    async with tk.open_kernel(tools=make_tools(rec), max_concurrency=limit) as kernel:
        results = await kernel.run(calls)
        assert_leases_returned(kernel)
    assert all(r.ok for r in results)
    assert rec.max_running == limit
    # The slots are used fully: 7 one-second calls in ceil(7 / limit) seconds.
    assert max(r.finished_at for r in results) == -(-7 // limit)


async def test_an_exclusive_device_serializes_its_calls_while_others_overlap(
    autojump_clock, rec
) -> None:
    calls = [
        tk.ToolCall("t1", "tap", {"duration": 1}),
        tk.ToolCall("t2", "tap", {"duration": 1}),
        tk.ToolCall("t3", "tap", {"duration": 1}),
        edit("e1", "a", 3),
        read("r1", "b", 2),
    ]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        await kernel.run(calls)
    assert [rec.interval(t) for t in ("t1", "t2", "t3")] == [(0, 1), (1, 2), (2, 3)]
    assert rec.interval("e1") == (0, 3)
    assert rec.interval("r1") == (0, 2)
    for tap in ("t1", "t2", "t3"):
        assert rec.overlap(tap, "e1")


async def test_a_pool_of_capacity_one_serializes_its_calls_while_others_overlap(
    autojump_clock, rec
) -> None:
    calls = [tk.ToolCall(f"l{i}", "lane", {"duration": 1}) for i in range(3)]
    calls.append(edit("e1", "a", 3))
    async with tk.open_kernel(tools=make_tools(rec), pools={"android": 1}) as kernel:
        await kernel.run(calls)
        stats = kernel.lease_statistics()
        assert stats.pool_units_held == (("android", 0),)
    assert [rec.interval(f"l{i}") for i in range(3)] == [(0, 1), (1, 2), (2, 3)]
    assert rec.interval("e1") == (0, 3)


async def test_a_pool_of_capacity_two_runs_two_at_a_time(autojump_clock, rec) -> None:
    calls = [tk.ToolCall(f"l{i}", "lane", {"duration": 1}) for i in range(5)]
    async with tk.open_kernel(tools=make_tools(rec), pools={"android": 2}) as kernel:
        await kernel.run(calls)
    assert rec.max_running == 2
    assert sorted(rec.interval(f"l{i}")[0] for i in range(5)) == [0, 0, 1, 1, 2]


async def test_a_tool_that_declares_nothing_is_a_barrier(autojump_clock, rec) -> None:
    calls = [
        read("before", "a", 1),
        tk.ToolCall("wall", "barrier", {"duration": 1}),
        tk.ToolCall("phone", "tap", {"duration": 1}),
        tk.ToolCall("nothing", "free", {"duration": 1}),
    ]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        await kernel.run(calls)
    assert rec.interval("before") == (0, 1)
    assert rec.interval("wall") == (1, 2)
    assert rec.interval("phone") == (2, 3)
    # claims=[] needs nothing at all, so not even the barrier holds it back.
    assert rec.interval("nothing") == (0, 1)


async def test_results_come_in_call_order_whatever_the_finishing_order(autojump_clock, rec) -> None:
    calls = [edit("slow", "a", 3), edit("fast", "b", 1), read("mid", "c", 2)]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        results = await kernel.run(calls)
    assert [r.call_id for r in results] == ["slow", "fast", "mid"]
    assert [r.finished_at for r in results] == [3, 1, 2]
    assert [r.output for r in results] == ["edited a", "edited b", "read c"]


async def test_an_empty_batch_returns_no_results(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        assert await kernel.run([]) == []


async def test_batches_from_different_tasks_share_the_lease_table(autojump_clock, rec) -> None:
    results: dict[str, tk.ToolResult] = {}
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:

        async def run(calls: list[tk.ToolCall]) -> None:
            results.update(by_id(await kernel.run(calls)))

        async with anyio.create_task_group() as nursery:
            nursery.start_soon(run, [edit("x1", "a", 2)])
            await wait_all_tasks_blocked()
            nursery.start_soon(run, [read("y1", "a", 1), read("y2", "b", 1)])
    assert rec.interval("y1") == (2, 3)
    assert rec.interval("y2") == (0, 1)
    assert all(r.ok for r in results.values())


async def test_with_a_workspace_every_spelling_of_a_file_is_one_resource(
    autojump_clock, rec, tmp_path
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("x = 1\n")
    async with tk.open_kernel(tools=make_tools(rec), root=tmp_path) as kernel:
        results = await kernel.run(
            [
                read("r1", "src/a.py", 1),
                edit("e1", "./src//a.py", 1),
                edit("e2", "src/../src/a.py", 1),
                read("r2", "src/b.py", 1),
                edit("bad", "../elsewhere.py", 1),
            ]
        )
        assert_leases_returned(kernel)
    r1, e1, e2, r2, bad = results
    assert [(r.started_at, r.finished_at) for r in (r1, e1, e2, r2)] == [
        (0, 1),
        (1, 2),
        (2, 3),
        (0, 1),
    ]
    assert bad.status is tk.Status.ERROR and "PathEscapeError" in (bad.error or "")

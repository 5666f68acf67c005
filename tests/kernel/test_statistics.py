"""``Kernel.statistics()``: errors by type, peak concurrency, and lease contention per resource,
kept in bounded memory; a call that never waits adds no contention."""

from __future__ import annotations

import anyio
import pytest

import toolkernel as tk
from toolkernel.kernel._observe import (
    MAX_ERROR_TYPES,
    OTHER_ERRORS,
    OTHER_RESOURCES,
    ContentionTally,
    ToolTally,
)

from .fakes import Recorder, edit, make_tools, read


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


async def test_errors_are_counted_by_type(autojump_clock: object, rec: Recorder) -> None:
    async with tk.open_kernel(tools=make_tools(rec), run_timeout=5) as kernel:
        await kernel.run(
            [
                tk.ToolCall("e1", "edit", {"path": "a", "fail": True}),
                tk.ToolCall("e2", "edit", {"path": "b", "fail": True}),
                tk.ToolCall("e3", "edit", {"path": "c", "duration": 10}),  # runs out of time
                tk.ToolCall("e4", "edit", {"path": 1}),  # bad arguments
                tk.ToolCall("x", "no-such-tool", {}),
                edit("e5", "d"),
            ]
        )
        stats = kernel.statistics()
    tools = {t.name: t for t in stats.tools}
    assert tools["edit"].errors == 4
    assert tools["edit"].errors_by_type == (
        ("RuntimeError", 2),
        ("InvalidArgumentsError", 1),
        ("RunTimeoutError", 1),
    )
    assert tools["(unknown tool)"].errors_by_type == (("UnknownToolError", 1),)


def test_error_types_beyond_the_limit_share_a_bucket() -> None:
    tally = ToolTally("t")
    for n in range(MAX_ERROR_TYPES + 5):
        tally.add(tk.ToolResult("c", "t", tk.Status.ERROR, error_type=f"Error{n}"))
    frozen = tally.freeze()
    assert len(frozen.errors_by_type) == MAX_ERROR_TYPES + 1
    assert dict(frozen.errors_by_type)[OTHER_ERRORS] == 5


async def test_peak_concurrency_is_the_most_calls_running_at_once(
    autojump_clock: object, rec: Recorder
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        await kernel.run([read(f"r{i}", "a") for i in range(4)] + [edit("e1", "a")])
        await kernel.run([edit("e2", "b"), edit("e3", "b")])
        stats = kernel.statistics()
    assert stats.peak_running == 4 == rec.max_running


async def test_contention_names_the_hot_paths_and_how_long_calls_waited_on_each(
    autojump_clock: object, rec: Recorder
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        await kernel.run(
            [
                edit("e1", "src/hot.py", 2),
                edit("e2", "src/hot.py", 1),  # waits 2 s
                read("r1", "src/hot.py", 1),  # waits 3 s
                edit("e3", "src/warm.py", 1),
                read("r2", "src/warm.py", 1),  # waits 1 s
                read("r3", "docs", 5),  # never waits
            ]
        )
        stats = kernel.statistics()
    assert [(c.resource, c.waits, c.total_wait, c.max_wait) for c in stats.contention] == [
        ("src/hot.py", 2, 5.0, 3.0),
        ("src/warm.py", 1, 1.0, 1.0),
    ]
    assert stats.contention[0].mean_wait == 2.5


@pytest.mark.parametrize("max_concurrency", [None, 2])
async def test_contention_is_the_same_whether_anyone_listens(
    autojump_clock: object, max_concurrency: int | None
) -> None:
    # Without a listener, a call waiting with one claim is not asked behind whom it waits.
    batch = [
        edit("e1", "src", 2),
        edit("e2", "src/hot.py", 1),
        read("r1", "src/hot.py", 1),
        edit("e3", "src/warm.py", 1),
        read("r2", "src", 1),
        read("r3", "docs", 1),
        edit("e4", "docs/a.md", 1),
    ]
    seen = []
    for listening in (False, True):
        tools = make_tools(Recorder())
        async with tk.open_kernel(tools=tools, max_concurrency=max_concurrency) as kernel:
            if listening:
                kernel.add_listener(lambda event: None)
            results = await kernel.run(batch)
            assert all(result.ok for result in results)
            seen.append(kernel.statistics().contention)
    assert seen[0] == seen[1]
    assert {c.resource for c in seen[0]} >= {"src/hot.py", "src/warm.py", "docs/a.md"}


async def test_waiting_for_a_slot_counts_as_contention_for_slots(
    autojump_clock: object, rec: Recorder
) -> None:
    async with tk.open_kernel(tools=make_tools(rec), max_concurrency=1) as kernel:
        await kernel.run([read("r1", "a", 2), read("r2", "b", 1)])
        stats = kernel.statistics()
    assert [(c.resource, c.waits, c.total_wait) for c in stats.contention] == [
        ("one of 1 concurrency slots", 1, 2.0)
    ]


async def test_a_call_cancelled_while_waiting_counts_its_wait(
    autojump_clock: object, rec: Recorder
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        handles = kernel.submit_batch([edit("e1", "a", 5), edit("e2", "a", 1)])
        await anyio.sleep(1.5)
        handles[1].cancel()
        await handles[0].wait_finished()
        stats = kernel.statistics()
    assert [(c.resource, c.waits, c.total_wait) for c in stats.contention] == [("a", 1, 1.5)]


async def test_calls_that_never_wait_leave_no_contention(
    autojump_clock: object, rec: Recorder
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        await kernel.run([edit(f"e{i}", f"f{i}") for i in range(50)])
        stats = kernel.statistics()
    assert stats.contention == ()
    assert stats.peak_running == 50


def test_contention_stays_bounded_and_keeps_the_hottest() -> None:
    tally = ContentionTally(limit=3)
    tally.add(["hot"], 10.0)
    tally.add(["warm"], 5.0)
    for n in range(100):
        tally.add([f"cold{n}"], 0.1)
    frozen = tally.freeze()
    assert len(frozen) <= 4
    assert {"hot", "warm"} <= {c.resource for c in frozen}
    other = next(c for c in frozen if c.resource == OTHER_RESOURCES)
    assert other.waits == 99 and other.total_wait == pytest.approx(9.9)

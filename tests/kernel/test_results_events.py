"""Every call gets its own result, one failure touches nobody else, and the events come in order."""

from __future__ import annotations

import anyio
import pytest

import toolkernel as tk
from toolkernel.testing import wait_all_tasks_blocked

from .fakes import Recorder, assert_leases_returned, by_id, edit, make_tools, read


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


def failing(call_id: str, path: str, duration: float) -> tk.ToolCall:
    return tk.ToolCall(call_id, "edit", {"path": path, "duration": duration, "fail": True})


async def test_one_raising_call_gives_one_error_and_two_ok_results(autojump_clock, rec) -> None:
    calls = [edit("c1", "a", 1), failing("c2", "b", 2), read("c3", "c", 3)]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        c1, c2, c3 = await kernel.run(calls)
        assert_leases_returned(kernel)
    assert (c1.status, c2.status, c3.status) == (tk.Status.OK, tk.Status.ERROR, tk.Status.OK)
    assert c1.output == "edited a" and c3.output == "read c"
    assert c2.output is None
    assert c2.error == "RuntimeError: c2 failed on purpose"
    # Each result carries its own timing.
    assert (c1.queued_at, c1.started_at, c1.finished_at) == (0, 0, 1)
    assert (c2.queued_at, c2.started_at, c2.finished_at) == (0, 0, 2)
    assert (c3.queued_at, c3.started_at, c3.finished_at) == (0, 0, 3)
    assert (c1.wait_time, c1.run_time) == (0, 1)
    assert c2.text() == c2.error and c3.text() == "read c"


async def test_a_failure_releases_its_lease_to_the_next_call(autojump_clock, rec) -> None:
    calls = [failing("c1", "a", 1), edit("c2", "a", 1)]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        c1, c2 = await kernel.run(calls)
    assert c1.status is tk.Status.ERROR
    assert c2.ok and (c2.queued_at, c2.started_at, c2.finished_at) == (0, 1, 2)
    assert c2.wait_time == 1


async def test_tool_error_messages_are_passed_through_without_a_type_name(autojump_clock) -> None:
    @tk.tool(claims=lambda args: [])
    async def refuse(ctx: tk.ToolContext) -> None:
        raise tk.ToolError("the file is binary; use read_bytes instead")

    async with tk.open_kernel(tools=[refuse]) as kernel:
        (result,) = await kernel.run([tk.ToolCall("c1", "refuse")])
    assert result.status is tk.Status.ERROR
    assert result.error == "the file is binary; use read_bytes instead"


async def test_every_call_queued_comes_before_the_first_call_finished(autojump_clock, rec) -> None:
    events: list[tk.CallEvent] = []
    calls = [
        edit("c1", "a", 0),
        tk.ToolCall("bad", "no_such_tool", {}),  # finishes at admission
        failing("c3", "b", 0),
        read("c4", "a", 1),
        read("c5", "c", 2),
    ]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        kernel.add_listener(events.append)
        await kernel.run(calls)
    kinds = [(type(e).__name__, e.call_id) for e in events]
    queued = [i for i, e in enumerate(events) if isinstance(e, tk.kernel.CallQueued)]
    finished = [i for i, e in enumerate(events) if isinstance(e, tk.kernel.CallFinished)]
    assert len(queued) == len(finished) == 5, kinds
    assert max(queued) < min(finished), kinds
    # Every call's own events are in lifecycle order.
    for call in calls:
        mine = [type(e).__name__ for e in events if e.call_id == call.id]
        assert mine[0] == "CallQueued" and mine[-1] == "CallFinished", (call.id, mine)
    assert [type(e).__name__ for e in events if e.call_id == "c4"] == [
        "CallQueued",
        "CallBlocked",
        "CallStarted",
        "CallFinished",
    ]


@pytest.mark.parametrize("how", ["its own call", "a later call", "cancel_all", "a new batch"])
@pytest.mark.parametrize("entry", ["run", "stream"])
async def test_a_listener_cancelling_calls_as_they_are_queued_keeps_every_queued_first(
    autojump_clock, rec, how, entry
) -> None:
    events: list[tk.CallEvent] = []
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        inner: list[tk.CallHandle] = []

        def listener(event: tk.CallEvent) -> None:
            events.append(event)
            if not isinstance(event, tk.kernel.CallQueued) or event.call_id != "c1":
                return
            if how == "its own call":
                kernel.cancel("c1")
            elif how == "a later call":
                kernel.cancel("c3")
            elif how == "cancel_all":
                kernel.cancel_all()
            else:  # a batch submitted from the callback, which cancels the outer batch's c1
                inner.append(kernel.submit(tk.ToolCall("x1", "nope")))
                kernel.cancel("c1")

        kernel.add_listener(listener)
        calls = [edit("c1", "a"), edit("c2", "a"), read("c3", "b")]
        if entry == "run":
            results = by_id(await kernel.run(calls))
        else:
            async with kernel.stream(calls) as stream:
                finished = [e.result async for e in stream if isinstance(e, tk.kernel.CallFinished)]
            results = by_id(finished)
        assert_leases_returned(kernel)
    mine = [e for e in events if e.call_id in ("c1", "c2", "c3")]
    queued = [i for i, e in enumerate(mine) if isinstance(e, tk.kernel.CallQueued)]
    done = [i for i, e in enumerate(mine) if isinstance(e, tk.kernel.CallFinished)]
    assert len(queued) == len(done) == 3 and max(queued) < min(done), mine
    cancelled = {"its own call": {"c1"}, "a later call": {"c3"}, "a new batch": {"c1"}}.get(
        how, {"c1", "c2", "c3"}
    )
    assert {i for i, r in results.items() if r.status is tk.Status.CANCELLED} == cancelled
    assert not set(rec.order) & cancelled


async def test_stream_yields_the_batch_events_in_order_and_ends(autojump_clock, rec) -> None:
    calls = [edit("c1", "a", 1), failing("c2", "b", 0), read("c3", "a", 1)]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        # Another batch's events must not leak into this stream.
        kernel.submit(edit("other", "z", 5))
        async with kernel.stream(calls) as events:
            seen = [event async for event in events]
        assert anyio.current_time() == 2
    assert {e.call_id for e in seen} == {"c1", "c2", "c3"}
    first_finished = next(i for i, e in enumerate(seen) if isinstance(e, tk.kernel.CallFinished))
    assert sum(isinstance(e, tk.kernel.CallQueued) for e in seen[:first_finished]) == 3
    results = by_id(e.result for e in seen if isinstance(e, tk.kernel.CallFinished))
    assert results["c2"].status is tk.Status.ERROR
    assert results["c3"].started_at == 1
    blocked = [e for e in seen if isinstance(e, tk.kernel.CallBlocked)]
    assert [(e.call_id, e.waits_for, e.resources) for e in blocked] == [("c3", ("c1",), ("a",))]
    started = [e.call_id for e in seen if isinstance(e, tk.kernel.CallStarted)]
    assert sorted(started[:2]) == ["c1", "c2"] and started[2] == "c3"


async def test_a_stream_sees_only_its_own_batch_even_when_ids_repeat(autojump_clock) -> None:
    @tk.tool(writes=["path"])
    async def hold(ctx: tk.ToolContext, path: str, seconds: float) -> str:
        await anyio.sleep(seconds)
        return path

    async with tk.open_kernel(tools=[hold]) as kernel:
        # Models reuse ids across turns: a running "c1" of another batch must not leak in,
        # nor end this stream early when it finishes.
        other = kernel.submit(tk.ToolCall("c1", "hold", {"path": "z", "seconds": 1}))
        async with kernel.stream(
            [tk.ToolCall("c1", "hold", {"path": "a", "seconds": 3})]
        ) as events:
            seen = [event async for event in events]
        assert (await other.wait_finished()).finished_at == 1
    finished = [e for e in seen if isinstance(e, tk.kernel.CallFinished)]
    assert len(finished) == 1 and finished[0].result.output == "a"
    assert [type(e) for e in seen] == [
        tk.kernel.CallQueued,
        tk.kernel.CallStarted,
        tk.kernel.CallFinished,
    ]


async def test_leaving_a_stream_early_cancels_what_still_runs(autojump_clock, rec) -> None:
    calls = [edit("c1", "a", 1), edit("c2", "b", 10), edit("c3", "b", 1)]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        handles_seen: list[tk.kernel.CallFinished] = []
        kernel.add_listener(
            lambda e: handles_seen.append(e) if isinstance(e, tk.kernel.CallFinished) else None
        )
        async with kernel.stream(calls) as events:
            async for event in events:
                if isinstance(event, tk.kernel.CallFinished):
                    break
        await wait_all_tasks_blocked()
        assert anyio.current_time() == 1
        results = by_id(e.result for e in handles_seen)
        assert results["c1"].ok
        assert results["c2"].status is tk.Status.CANCELLED
        assert results["c3"].status is tk.Status.CANCELLED
        assert results["c3"].started_at is None
        assert_leases_returned(kernel)


async def test_progress_is_emitted_as_events(autojump_clock) -> None:
    @tk.tool(claims=lambda args: [])
    async def count(ctx: tk.ToolContext, n: int) -> int:
        for i in range(n):
            await anyio.sleep(1)
            ctx.progress(f"{i + 1} of {n}", data=i + 1)
        return n

    events: list[tk.CallEvent] = []
    async with tk.open_kernel(tools=[count]) as kernel:
        kernel.add_listener(events.append)
        await kernel.run([tk.ToolCall("c1", "count", {"n": 3})])
    progress = [
        (e.time, e.message, e.data) for e in events if isinstance(e, tk.kernel.CallProgress)
    ]
    assert progress == [(1, "1 of 3", 1), (2, "2 of 3", 2), (3, "3 of 3", 3)]


@pytest.mark.parametrize("error", [ValueError("listener bug"), SystemExit(2)])
async def test_a_listener_that_raises_is_dropped_and_breaks_nothing(
    autojump_clock, rec, error
) -> None:
    seen: list[tk.CallEvent] = []

    def broken(event: tk.CallEvent) -> None:
        raise error

    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        kernel.add_listener(broken)
        remove = kernel.add_listener(seen.append)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("toolkernel.kernel._kernel._log.exception", lambda *a, **k: None)
            (result,) = await kernel.run([edit("c1", "a", 1)])
        assert result.ok
        assert len([e for e in seen if isinstance(e, tk.kernel.CallFinished)]) == 1
        remove()
        await kernel.run([edit("c2", "a", 1)])
        assert all(e.call_id == "c1" for e in seen)


async def test_submit_returns_a_handle_to_wait_on(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        handle = kernel.submit(edit("c1", "a", 2))
        assert handle.call_id == "c1" and not handle.finished
        with pytest.raises(RuntimeError, match="c1 has not finished"):
            handle.result  # noqa: B018 - reading it raises
        result = await handle.wait_finished()
        assert handle.finished and handle.result is result
        assert (result.status, result.finished_at) == (tk.Status.OK, 2)


async def test_a_closed_kernel_refuses_new_calls(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        pass
    with pytest.raises(tk.KernelClosedError, match="closed"):
        kernel.submit(edit("c1", "a"))


def test_a_result_reads_as_text_the_model_can_use_whatever_the_tool_returned() -> None:
    import dataclasses
    import enum

    import attrs
    import pydantic

    class Colour(enum.Enum):
        RED = "red"

    @attrs.frozen
    class Point:
        x: int

    @dataclasses.dataclass
    class Span:
        start: int

    class Model(pydantic.BaseModel):
        path: str

    def text(output: object) -> str:
        return tk.ToolResult("c1", "t", tk.Status.OK, output=output).text()

    assert text("plain") == "plain" and text(None) == ""
    assert text(b"caf\xc3\xa9 \xff") == "café \ufffd"  # bytes as UTF-8, invalid bytes replaced
    assert text({"tags": {"b", "a"}, "raw": b"ok"}) == '{"tags": ["a", "b"], "raw": "ok"}'
    assert text([Colour.RED, Point(1), Span(2), Model(path="a")]) == (
        '["red", {"x": 1}, {"start": 2}, {"path": "a"}]'
    )
    assert text({"name": "naïve"}) == '{"name": "naïve"}'  # not \u-escaped
    cyclic: list[object] = []
    cyclic.append(cyclic)
    assert text(cyclic) == "[[...]]"

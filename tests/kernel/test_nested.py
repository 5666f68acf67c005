"""Nested calls (``ctx.call``): inside the parent's lease group, or acquired outside it, with a
deadlock detector and a depth limit. Each test has a deadline on the mock clock, so a hang fails
instead of blocking the suite."""

from __future__ import annotations

import anyio
import pytest

import toolkernel as tk
from toolkernel.testing import wait_all_tasks_blocked

from .fakes import Recorder, assert_leases_returned, by_id, edit, make_tools, read

DEADLINE = 1000  # mock seconds: a hang jumps here at once and fails the test


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


def nesting_tools(rec: Recorder) -> list[tk.Tool]:
    @tk.tool(writes=["path"])
    async def refactor(
        ctx: tk.ToolContext, path: str, children: list[str], pause: float = 0.0
    ) -> list[str]:
        """Edit ``children`` (paths) with nested edits started together in a nursery."""
        out: dict[int, tk.ToolResult] = {}
        async with rec.run(ctx):
            await anyio.sleep(pause)

            async def child(i: int, child_path: str) -> None:
                out[i] = await ctx.call("edit", path=child_path, duration=1.0)

            async with anyio.create_task_group() as nursery:
                for i, child_path in enumerate(children):
                    nursery.start_soon(child, i, child_path)
        return [f"{out[i].status.value}: {out[i].output or out[i].error}" for i in sorted(out)]

    @tk.tool(claims=lambda args: [tk.exclusive(tk.path(args["path"]))])
    async def dive(ctx: tk.ToolContext, path: str, level: int = 0) -> str:
        """Calls itself one level deeper until that fails."""
        async with rec.run(ctx):
            result = await ctx.call("dive", path=path, level=level + 1)
        if result.ok:
            return str(result.output)
        return f"level {level + 1}: {result.error}"

    return [*make_tools(rec), refactor, dive]


def refactor(call_id: str, path: str, children: list[str], pause: float = 0.0) -> tk.ToolCall:
    return tk.ToolCall(call_id, "refactor", {"path": path, "children": children, "pause": pause})


async def test_a_child_covered_by_its_parent_runs_inside_the_parent_lease(
    autojump_clock, rec
) -> None:
    with anyio.fail_after(DEADLINE):
        async with tk.open_kernel(tools=nesting_tools(rec)) as kernel:
            parent, outsider = await kernel.run(
                [refactor("p1", "pkg", ["pkg/a.py"]), read("r1", "pkg/a.py", 1)]
            )
            assert_leases_returned(kernel)
    assert parent.ok and parent.output == ["ok: edited pkg/a.py"]
    assert outsider.ok
    # The child ran at once, although the parent holds pkg exclusively...
    assert rec.interval("p1.1") == (0, 1)
    # ...and the top-level reader of the same file waited for the whole parent.
    assert rec.interval("r1") == (1, 2)


async def test_two_children_on_one_covered_file_still_exclude_each_other(
    autojump_clock, rec
) -> None:
    with anyio.fail_after(DEADLINE):
        async with tk.open_kernel(tools=nesting_tools(rec)) as kernel:
            (same,) = await kernel.run([refactor("p1", "pkg", ["pkg/a.py", "pkg/a.py"])])
            (different,) = await kernel.run([refactor("p2", "pkg", ["pkg/a.py", "pkg/b.py"])])
            assert_leases_returned(kernel)
    assert same.output == ["ok: edited pkg/a.py", "ok: edited pkg/a.py"]
    assert different.output == ["ok: edited pkg/a.py", "ok: edited pkg/b.py"]
    assert not rec.overlap("p1.1", "p1.2")
    assert sorted([rec.interval("p1.1"), rec.interval("p1.2")]) == [(0, 1), (1, 2)]
    assert rec.interval("p1") == (0, 2)
    # Siblings on different files overlap.
    assert rec.overlap("p2.1", "p2.2")
    assert rec.interval("p2") == (2, 3)


async def test_a_child_outside_its_parent_lease_waits_for_it_normally(autojump_clock, rec) -> None:
    with anyio.fail_after(DEADLINE):
        async with tk.open_kernel(tools=nesting_tools(rec)) as kernel:
            results = by_id(
                await kernel.run([edit("holder", "other", 3), refactor("p1", "pkg", ["other"])])
            )
    assert results["p1"].output == ["ok: edited other"]
    assert rec.interval("p1.1") == (3, 4)
    assert rec.interval("p1") == (0, 4)


async def test_children_waiting_for_each_other_parents_give_a_deadlock_error(
    autojump_clock, rec
) -> None:
    # p1 holds a and wants b through a child; p2 holds b and wants a through a child.
    with anyio.fail_after(DEADLINE):
        async with tk.open_kernel(tools=nesting_tools(rec)) as kernel:
            p1, p2 = await kernel.run(
                [refactor("p1", "a", ["b"], pause=1), refactor("p2", "b", ["a"], pause=1)]
            )
            assert_leases_returned(kernel)
    outputs = sorted([p1.output[0], p2.output[0]])
    assert outputs[0] == "error: " + outputs[0].removeprefix("error: ")
    assert outputs[1].startswith("ok: edited")
    message = outputs[0]
    assert "DeadlockError" in message and "deadlock" in message
    assert "p1" in message and "p2" in message
    assert "declare the resources on the outer call" in message
    # The child that was not refused ran once the other parent finished.
    loser = "p1" if p1.output[0].startswith("error") else "p2"
    winner = "p2" if loser == "p1" else "p1"
    assert not rec.ran(f"{loser}.1")
    assert rec.interval(f"{loser}") == (0, 1)
    assert rec.interval(f"{winner}.1") == (1, 2)


async def test_a_child_that_declares_nothing_inside_a_declared_parent_is_a_deadlock(
    autojump_clock, rec
) -> None:
    @tk.tool(writes=["path"])
    async def wrapper(ctx: tk.ToolContext, path: str) -> str | None:
        result = await ctx.call("barrier", duration=1.0)
        return result.error

    with anyio.fail_after(DEADLINE):
        async with tk.open_kernel(tools=[*make_tools(rec), wrapper]) as kernel:
            (result,) = await kernel.run([tk.ToolCall("w1", "wrapper", {"path": "a"})])
            assert_leases_returned(kernel)
    assert result.ok and "DeadlockError" in str(result.output)


async def test_nesting_deeper_than_max_depth_is_an_error(autojump_clock, rec) -> None:
    with anyio.fail_after(DEADLINE):
        async with tk.open_kernel(tools=nesting_tools(rec), max_depth=3) as kernel:
            (result,) = await kernel.run([tk.ToolCall("d", "dive", {"path": "a"})])
            assert_leases_returned(kernel)
    assert result.ok
    assert result.output == (
        "level 4: NestingDepthError: calls nested more than 3 deep; d.1.1.1 (dive) can't call dive"
    )
    assert sorted(rec.spans) == ["d", "d.1", "d.1.1", "d.1.1.1"]


async def test_nested_results_are_events_with_their_parent_in_the_snapshot(
    autojump_clock, rec
) -> None:
    events: list[tk.CallEvent] = []
    with anyio.fail_after(DEADLINE):
        async with tk.open_kernel(tools=nesting_tools(rec)) as kernel:
            kernel.add_listener(events.append)
            handle = kernel.submit(refactor("p1", "pkg", ["pkg/a", "pkg/a"]))
            await anyio.sleep(0.5)
            snap = kernel.snapshot()
            await handle.wait_finished()
    running = {i.call_id: i.parent for i in snap.running}
    queued = {i.call_id: (i.parent, i.waits_for) for i in snap.queued}
    assert running.pop("p1") is None
    ((first_child, parent),) = running.items()
    assert parent == "p1"
    assert list(queued.values()) == [("p1", (first_child,))]
    finished = [e.call_id for e in events if isinstance(e, tk.kernel.CallFinished)]
    assert sorted(finished[:2]) == ["p1.1", "p1.2"] and finished[2] == "p1"


async def test_cancelling_a_parent_cancels_its_children(autojump_clock, rec) -> None:
    events: list[tk.CallEvent] = []
    with anyio.fail_after(DEADLINE):
        async with tk.open_kernel(tools=nesting_tools(rec)) as kernel:
            kernel.add_listener(events.append)
            handle = kernel.submit(refactor("p1", "pkg", ["pkg/a", "pkg/a"]))
            await anyio.sleep(0.5)
            handle.cancel()
            result = await handle.wait_finished()
            await wait_all_tasks_blocked()
            assert_leases_returned(kernel)
            (after,) = await kernel.run([edit("next", "pkg/a", 1)])
    assert result.status is tk.Status.CANCELLED
    children = by_id(e.result for e in events if isinstance(e, tk.kernel.CallFinished))
    assert children["p1.1"].status is children["p1.2"].status is tk.Status.CANCELLED
    assert (after.started_at, after.finished_at) == (0.5, 1.5)


async def test_a_nested_call_with_bad_arguments_is_an_error_result(autojump_clock, rec) -> None:
    @tk.tool(claims=lambda args: [])
    async def sloppy(ctx: tk.ToolContext) -> list[str | None]:
        unknown = await ctx.call("no_such_tool")
        wrong = await ctx.call("edit", path=7)
        return [unknown.error, wrong.error]

    async with tk.open_kernel(tools=[*make_tools(rec), sloppy]) as kernel:
        (result,) = await kernel.run([tk.ToolCall("s", "sloppy")])
    assert result.ok
    unknown, wrong = result.output
    assert unknown.startswith("UnknownToolError: there is no tool named 'no_such_tool'")
    assert wrong == "InvalidArgumentsError: edit argument 'path' must be string, not integer (7)"


async def test_a_parent_holding_a_whole_pool_lends_its_units_to_its_children(
    autojump_clock, rec
) -> None:
    @tk.tool(claims=lambda args: [tk.exclusive(tk.pool("android"))])
    async def fleet(ctx: tk.ToolContext, n: int) -> list[str]:
        out: list[str] = []
        async with anyio.create_task_group() as nursery:
            for _ in range(n):

                async def one() -> None:
                    result = await ctx.call("lane", duration=1.0)
                    out.append(result.output if result.ok else str(result.error))

                nursery.start_soon(one)
        return out

    with anyio.fail_after(DEADLINE):
        async with tk.open_kernel(tools=[*make_tools(rec), fleet], pools={"android": 2}) as kernel:
            first, outsider = await kernel.run(
                [tk.ToolCall("f", "fleet", {"n": 3}), tk.ToolCall("l", "lane", {"duration": 1})]
            )
            assert_leases_returned(kernel)
    assert first.output == ["laned"] * 3
    assert outsider.ok
    # Two lanes at a time inside the parent; the top-level lane waits for the whole fleet.
    assert sorted(rec.interval(f"f.{i}") for i in (1, 2, 3)) == [(0, 1), (0, 1), (1, 2)]
    assert rec.interval("l") == (2, 3)


async def test_a_parent_run_timeout_cancels_its_running_child(autojump_clock, rec) -> None:
    events: list[tk.CallEvent] = []
    with anyio.fail_after(DEADLINE):
        async with tk.open_kernel(tools=nesting_tools(rec)) as kernel:
            kernel.add_listener(events.append)
            (parent,) = await kernel.run(
                [
                    tk.ToolCall(
                        "p1",
                        "refactor",
                        {"path": "pkg", "children": ["pkg/a"], "pause": 0.5},
                        run_timeout=1,
                    )
                ]
            )
            assert_leases_returned(kernel)
    assert (parent.status, parent.finished_at) == (tk.Status.TIMEOUT, 1)
    child = next(
        e.result for e in events if isinstance(e, tk.kernel.CallFinished) and e.call_id == "p1.1"
    )
    assert (child.status, child.started_at, child.finished_at) == (tk.Status.CANCELLED, 0.5, 1)
    assert rec.spans["p1.1"].cancelled


async def test_a_child_waiting_outside_its_parent_times_out(autojump_clock, rec) -> None:
    @tk.tool(writes=["path"])
    async def borrow(ctx: tk.ToolContext, path: str, other: str) -> str | None:
        result = await ctx.call("edit", path=other, duration=1.0)
        return result.error

    with anyio.fail_after(DEADLINE):
        async with tk.open_kernel(tools=[*make_tools(rec), borrow], wait_timeout=2) as kernel:
            holder = kernel.submit(edit("holder", "b", 10))
            (result,) = await kernel.run([tk.ToolCall("p", "borrow", {"path": "a", "other": "b"})])
            assert kernel.lease_statistics().waiting == 0
            await holder.wait_finished()
            assert_leases_returned(kernel)
    assert result.ok and result.finished_at == 2
    assert result.output == (
        "timed out after waiting 2 s for its leases behind holder (edit) on b; try again later"
    )


@pytest.mark.parametrize("where", ["inside", "outside"])
async def test_a_child_still_in_flight_when_its_parent_returns_ends_before_the_parent_leases(
    autojump_clock, rec, where
) -> None:
    # The parent starts a nested call from a background task and returns without awaiting it:
    # the child must not go on running (or waiting) inside leases that have gone.
    children: list[tk.ToolResult] = []

    async with anyio.create_task_group() as background:

        @tk.tool(writes=["path"])
        async def spawner(ctx: tk.ToolContext, path: str) -> str:
            async def child() -> None:
                target = path if where == "inside" else "elsewhere"
                children.append(await ctx.call("edit", path=target, duration=5))

            background.start_soon(child)
            await anyio.sleep(1)
            return "returned"

        async with tk.open_kernel(tools=[*make_tools(rec), spawner]) as kernel:
            blocker = kernel.submit(edit("blocker", "elsewhere", 3))  # the outside child waits
            parent, after = await kernel.run(
                [tk.ToolCall("p", "spawner", {"path": "a"}), edit("c2", "a", 1)]
            )
            await blocker.wait_finished()
            await wait_all_tasks_blocked()
            assert_leases_returned(kernel)
    (child,) = children
    assert parent.ok and after.ok
    assert (child.status, child.finished_at) == (tk.Status.CANCELLED, 1)
    assert child.error is not None and "its parent call p (spawner) ended first" in child.error
    assert after.started_at == 1
    if where == "inside":
        assert rec.spans["p.1"].cancelled and rec.spans["p.1"].end == 1
    else:
        assert not rec.ran("p.1")


@pytest.mark.parametrize("limit", [None, 1])
async def test_calls_a_tool_runs_on_its_own_kernel_run_inside_its_leases_when_they_cover_them(
    autojump_clock, rec, limit
) -> None:
    # As an agent used as a tool runs its own tools: the calls its leases cover run inside them,
    # in its slot, excluding each other in emission order; the others run as usual.
    kernels: list[tk.Kernel] = []

    @tk.tool(writes=["path"])
    async def again(ctx: tk.ToolContext, path: str) -> list[str]:
        results = await kernels[0].run(
            [edit("inner", path, 1), edit("twice", path, 1), edit("free", "other", 1)]
        )
        return [f"{r.status.value} at {r.started_at}" for r in results]

    async with tk.open_kernel(tools=[*make_tools(rec), again], max_concurrency=limit) as kernel:
        kernels.append(kernel)
        with anyio.fail_after(100):
            (outer,) = await kernel.run([tk.ToolCall("o", "again", {"path": "a"})])
        assert_leases_returned(kernel)
    assert outer.output == ["ok at 0.0", "ok at 1.0", "ok at 0.0"]


@pytest.mark.parametrize("limit", [None, 1])
async def test_a_tool_running_calls_its_leases_do_not_cover_gets_a_deadlock_error_not_a_hang(
    autojump_clock, rec, limit
) -> None:
    # A tool awaiting kernel.run of a call that waits behind the tool's own lease would wait
    # forever; the wait-for graph sees the tool's wait, so the inner call fails at once. A call
    # that needs nothing the tool holds runs, even with a single concurrency slot (the tool's).
    kernels: list[tk.Kernel] = []

    @tk.tool(reads=["path"])
    async def again(ctx: tk.ToolContext, path: str) -> list[str]:
        blocked, free = await kernels[0].run([edit("inner", path, 1), edit("free", "other", 1)])
        return [blocked.status.value, blocked.error or "", free.status.value]

    async with tk.open_kernel(tools=[*make_tools(rec), again], max_concurrency=limit) as kernel:
        kernels.append(kernel)
        with anyio.fail_after(100):
            (outer,) = await kernel.run([tk.ToolCall("o", "again", {"path": "a"})])
        assert_leases_returned(kernel)
    status, error, free = outer.output
    assert (status, free) == ("error", "ok")
    assert error.startswith(
        "DeadlockError: waiting for its leases would deadlock: inner (edit) -> o (again) -> inner"
    )
    assert not rec.ran("inner") and rec.ran("free")


async def test_a_call_started_from_a_tool_task_is_not_taken_for_that_tools_own_calls(
    autojump_clock, rec
) -> None:
    # x is granted when p's nested call releases b, in p's task, so its task starts there; the
    # run() its after-hook makes is not p's own, so it waits for p's lease on a (no deadlock).
    kernels: list[tk.Kernel] = []
    inner: list[tk.ToolResult] = []

    @tk.tool(writes=["path"])
    async def outer(ctx: tk.ToolContext, path: str) -> str:
        await ctx.call("edit", path="b", duration=2)
        await anyio.sleep(8)
        return "done"

    async def after(call: tk.ToolCall, result: tk.ToolResult) -> None:
        if call.id == "x":
            inner.extend(await kernels[0].run([edit("inner", "a", 1)]))

    async with tk.open_kernel(tools=[*make_tools(rec), outer], after_hooks=[after]) as kernel:
        kernels.append(kernel)
        parent = kernel.submit(tk.ToolCall("p", "outer", {"path": "a"}))
        await anyio.sleep(1)
        x = kernel.submit(edit("x", "b", 1))
        assert (await parent.wait_finished()).ok
        assert (await x.wait_finished()).ok
        assert_leases_returned(kernel)
    (result,) = inner
    assert (result.status, result.started_at) == (tk.Status.OK, 10), result


@pytest.mark.parametrize("how", ["nested", "awaited batch"])
@pytest.mark.parametrize("limit", [1, 2])
async def test_a_call_waiting_for_a_slot_with_leases_an_awaited_call_needs_runs_in_its_slot(
    autojump_clock, rec, how, limit
) -> None:
    # q is granted b at admission and waits for the slot p holds. At t=1 p's tool awaits a
    # call on b: that call waits for q's lease, q for p's slot. q runs in p's slot instead of
    # never (with two slots, the other held by a long call that would free it only at t=20).
    kernels: list[tk.Kernel] = []

    @tk.tool(writes=["path"])
    async def outer(ctx: tk.ToolContext, path: str) -> str:
        await anyio.sleep(1)
        if how == "nested":
            inner = await ctx.call("edit", path="b", duration=1)
        else:
            (inner,) = await kernels[0].run([edit("inner", "b", 1)])
        return f"{inner.status.value} at {inner.started_at}"

    calls = [tk.ToolCall("p", "outer", {"path": "a"}), edit("q", "b", 1)]
    if limit == 2:
        calls.insert(0, tk.ToolCall("long", "free", {"duration": 20}))
    async with tk.open_kernel(tools=[*make_tools(rec), outer], max_concurrency=limit) as kernel:
        kernels.append(kernel)
        with anyio.fail_after(DEADLINE):
            results = by_id(await kernel.run(calls))
        assert_leases_returned(kernel)
        assert (results["q"].status, results["q"].started_at) == (tk.Status.OK, 1)
        assert (results["p"].output, results["p"].finished_at) == ("ok at 2.0", 3)
        # The lent slot went back with p alone: the next batch gets every slot at once.
        later = await kernel.run([edit(f"e{i}", f"f{i}") for i in range(limit + 1)])
    starts = [r.started_at for r in later]
    assert starts[:limit] == [starts[0]] * limit and starts[limit] == starts[0] + 1


async def test_a_tool_awaiting_the_handle_of_a_call_behind_its_own_lease_gets_a_deadlock_error(
    autojump_clock, rec
) -> None:
    # As with kernel.run: the wait closes a cycle (inner waits for o's lease, o for inner), so
    # inner fails at once. A handle it submits and doesn't await just runs after it.
    kernels: list[tk.Kernel] = []
    later: list[tk.CallHandle] = []

    @tk.tool(writes=["path"])
    async def again(ctx: tk.ToolContext, path: str) -> str:
        later.append(kernels[0].submit(edit("after", path, 1)))
        inner = await kernels[0].submit(edit("inner", path, 1)).wait_finished()
        return inner.error or ""

    async with tk.open_kernel(tools=[*make_tools(rec), again]) as kernel:
        kernels.append(kernel)
        with anyio.fail_after(100):
            (outer,) = await kernel.run([tk.ToolCall("o", "again", {"path": "a"})])
            (after,) = later
            assert (await after.wait_finished()).ok
        assert_leases_returned(kernel)
    assert outer.output.startswith(
        "DeadlockError: waiting for its leases would deadlock: "
        "inner (edit) -> after (edit) -> o (again) -> inner (edit)"
    )
    assert not rec.ran("inner") and rec.ran("after")


@pytest.mark.parametrize("limit", [None, 1])
async def test_a_tool_awaiting_a_handle_runs_it_in_its_own_slot_and_cancelling_it_leaves_it(
    autojump_clock, rec, limit
) -> None:
    # With one slot, held by o, the call whose handle o's tool awaits runs in that slot (it
    # would wait for ever). Cancelling o while it waits doesn't cancel that call: it was
    # submitted on its own, and o only watched it.
    kernels: list[tk.Kernel] = []
    handles: list[tk.CallHandle] = []

    @tk.tool(writes=["path"])
    async def watch(ctx: tk.ToolContext, path: str) -> str:
        handles.append(kernels[0].submit(edit(f"other{len(handles)}", "b", 5)))
        return (await handles[-1].wait_finished()).status.value

    async with tk.open_kernel(tools=[*make_tools(rec), watch], max_concurrency=limit) as kernel:
        kernels.append(kernel)
        with anyio.fail_after(100):
            (outer,) = await kernel.run([tk.ToolCall("o", "watch", {"path": "a"})])
            assert (outer.status, outer.output, outer.finished_at) == (tk.Status.OK, "ok", 5)
            o = kernel.submit(tk.ToolCall("o2", "watch", {"path": "a"}))
            await anyio.sleep(1)
            o.cancel()
            assert (await o.wait_finished()).status is tk.Status.CANCELLED
            other = await handles[1].wait_finished()
        assert_leases_returned(kernel)
    assert (other.status, other.finished_at - other.started_at) == (tk.Status.OK, 5)

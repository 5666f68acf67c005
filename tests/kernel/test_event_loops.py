"""The kernel on each event loop with that loop's own code: asyncio tools awaiting asyncio,
trio tools awaiting trio, and each loop's own cancellation crossing into the kernel's calls.

The suite runs on both loops through anyio's plugin; these tests start the loops themselves, the
way an application does (``asyncio.run``, ``trio.run``), and use each loop's native API.
"""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import pytest
import trio

import toolkernel as tk
from toolkernel.testing import VirtualClockEventLoop
from toolkernel.tools import builtin_tools


def run_asyncio(main: Any) -> Any:
    """Run ``main()`` on an asyncio loop on virtual time."""
    with asyncio.Runner(loop_factory=VirtualClockEventLoop) as runner:
        return runner.run(main())


# -- asyncio ------------------------------------------------------------------------------------


@tk.tool(writes=["path"])
async def asyncio_edit(ctx: tk.ToolContext, path: str, seconds: float) -> str:
    """An asyncio tool: it sleeps with asyncio, and waits on an asyncio.Event."""
    done = asyncio.Event()
    asyncio.get_running_loop().call_later(seconds, done.set)
    await done.wait()
    return f"edited {path} at {asyncio.get_running_loop().time():g}"


def test_asyncio_tools_run_on_asyncio_with_the_ordering_guarantees() -> None:
    async def main() -> list[tk.ToolResult]:
        async with tk.open_kernel([asyncio_edit]) as kernel:
            return await kernel.run(
                [
                    tk.ToolCall("a", "asyncio_edit", {"path": "x", "seconds": 2}),
                    tk.ToolCall("b", "asyncio_edit", {"path": "x", "seconds": 1}),
                    tk.ToolCall("c", "asyncio_edit", {"path": "y", "seconds": 1}),
                ]
            )

    a, b, c = run_asyncio(main)
    assert (a.output, b.output, c.output) == ("edited x at 2", "edited x at 3", "edited y at 1")


def test_cancelling_the_asyncio_task_awaiting_run_cancels_its_calls() -> None:
    async def main() -> tuple[list[tk.ToolResult], Any]:
        async with tk.open_kernel([asyncio_edit]) as kernel:
            calls = [
                tk.ToolCall("a", "asyncio_edit", {"path": "x", "seconds": 10}),
                tk.ToolCall("b", "asyncio_edit", {"path": "x", "seconds": 10}),
            ]
            handles: list[tk.CallHandle] = []
            task = asyncio.create_task(kernel.run(calls))
            await asyncio.sleep(1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The calls are finished, and their leases are back: a new call runs at once.
            handles.append(
                kernel.submit(tk.ToolCall("c", "asyncio_edit", {"path": "x", "seconds": 1}))
            )
            result = await handles[0].wait_finished()
            snapshot = kernel.snapshot()
        return [result], snapshot

    (result,), snapshot = run_asyncio(main)
    assert result.output == "edited x at 2"
    assert snapshot.running == snapshot.queued == ()


@tk.tool(claims=lambda args: [])
async def await_shared(ctx: tk.ToolContext, seconds: float) -> str:
    """Awaits a future its owner cancels after ``seconds`` (a shared request given up)."""
    shared = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(seconds, shared.cancel)
    return str(await shared)


def test_a_cancelled_error_the_tool_meets_fails_its_call_alone_wherever_it_runs() -> None:
    # Nobody cancels the call's task: the CancelledError is the tool's failure. The same on a
    # lone call (run in the caller's task), in a batch and through a handle; the caller goes on.
    async def main() -> list[tk.ToolResult]:
        async with tk.open_kernel([await_shared, asyncio_edit]) as kernel:
            (lone,) = await kernel.run([tk.ToolCall("lone", "await_shared", {"seconds": 1})])
            batch = await kernel.run(
                [
                    tk.ToolCall("a", "await_shared", {"seconds": 1}),
                    tk.ToolCall("b", "asyncio_edit", {"path": "x", "seconds": 2}),
                ]
            )
            handle = kernel.submit(tk.ToolCall("h", "await_shared", {"seconds": 1}))
            return [lone, *batch, await handle.wait_finished()]

    lone, a, b, h = run_asyncio(main)
    for result in (lone, a, h):
        assert (result.status, result.error_type) == (tk.Status.ERROR, "CancelledError")
    assert b.status is tk.Status.OK


def test_asyncio_timeout_around_run_behaves_like_move_on_after() -> None:
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with tk.open_kernel([asyncio_edit]) as kernel:
            try:
                async with asyncio.timeout(3):
                    await kernel.run(
                        [
                            tk.ToolCall("slow", "asyncio_edit", {"path": "x", "seconds": 10}),
                            tk.ToolCall("next", "asyncio_edit", {"path": "x", "seconds": 1}),
                        ]
                    )
            except TimeoutError:
                seen["timed out at"] = asyncio.get_running_loop().time()
            seen["stats"] = kernel.statistics()
            seen["leases"] = kernel.lease_statistics()

    run_asyncio(main)
    assert seen["timed out at"] == 3
    assert (seen["leases"].held, seen["leases"].waiting) == (0, 0)
    counted = {t.name: (t.count, t.errors) for t in seen["stats"].tools}
    assert counted == {"asyncio_edit": (2, 2)}  # both finished, both CANCELLED


def test_asyncio_streams_hooks_nested_calls_and_after() -> None:
    async def before(call: tk.ToolCall) -> None:
        await asyncio.sleep(0.5)

    async def approver(call: tk.ToolCall, reason: str) -> bool:
        await asyncio.sleep(1)
        return call.id != "refused"

    def policy(call: tk.ToolCall) -> tk.Permission:
        return tk.Permission.ASK if call.id in ("asked", "refused") else tk.Permission.ALLOW

    @tk.tool(writes=["path"])
    async def outer(ctx: tk.ToolContext, path: str) -> str:
        inner = await ctx.call("asyncio_edit", path=path, seconds=1)
        return f"outer: {inner.output}"

    async def main() -> list[Any]:
        async with tk.open_kernel(
            [asyncio_edit, outer], before_hooks=[before], policy=policy, approver=approver
        ) as kernel:
            events: list[Any] = []
            async with kernel.stream(
                [
                    tk.ToolCall("asked", "asyncio_edit", {"path": "x", "seconds": 1}),
                    tk.ToolCall("refused", "asyncio_edit", {"path": "y", "seconds": 1}),
                    tk.ToolCall("nest", "outer", {"path": "z"}, after=["asked"]),
                ]
            ) as stream:
                async for event in stream:
                    events.append(event)
            return events

    events = run_asyncio(main)
    finished = {e.call_id: e.result for e in events if isinstance(e, tk.kernel.CallFinished)}
    assert finished["asked"].output == "edited x at 2.5"
    assert finished["refused"].status is tk.Status.DENIED
    assert finished["nest"].output == "outer: edited z at 4.5"  # its nested call had a hook too


# -- trio ---------------------------------------------------------------------------------------


@tk.tool(writes=["path"])
async def trio_edit(ctx: tk.ToolContext, path: str, seconds: float) -> str:
    """A trio tool: it sleeps with trio and uses a trio nursery."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.sleep, seconds)
    return f"edited {path} at {trio.current_time():g}"


def test_trio_tools_and_trio_cancellation() -> None:
    async def main() -> tuple[list[tk.ToolResult], tk.ToolResult]:
        async with tk.open_kernel([trio_edit]) as kernel:
            results = await kernel.run(
                [
                    tk.ToolCall("a", "trio_edit", {"path": "x", "seconds": 2}),
                    tk.ToolCall("b", "trio_edit", {"path": "x", "seconds": 1}),
                ]
            )
            with trio.move_on_after(1):
                await kernel.run([tk.ToolCall("c", "trio_edit", {"path": "x", "seconds": 5})])
            leases = kernel.lease_statistics()  # run() returned only once its call unwound
            assert (leases.held, leases.waiting) == (0, 0)
            (after,) = await kernel.run(
                [tk.ToolCall("d", "trio_edit", {"path": "x", "seconds": 1})]
            )
            return results, after

    (a, b), after = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert (a.output, b.output) == ("edited x at 2", "edited x at 3")
    assert after.output == "edited x at 5"  # c was cancelled at 4 and gave its lease back


# -- the same program on both -------------------------------------------------------------------


def same_batch() -> list[tk.ToolCall]:
    return [
        tk.ToolCall("r1", "Read", {"file_path": "a.txt"}),
        tk.ToolCall("e1", "Edit", {"file_path": "a.txt", "old_string": "one", "new_string": "1"}),
        tk.ToolCall("g1", "Grep", {"pattern": "two|1", "output_mode": "content"}),
        tk.ToolCall("e2", "Edit", {"file_path": "b.txt", "old_string": "two", "new_string": "2"}),
        tk.ToolCall("r2", "Read", {"file_path": "a.txt"}),
        tk.ToolCall("bad", "Edit", {"file_path": "a.txt", "old_string": "nope", "new_string": ""}),
    ]


def outcome(results: list[tk.ToolResult]) -> list[tuple[str, tk.Status, Any]]:
    return [(r.call_id, r.status, r.output if r.ok else r.error) for r in results]


def test_an_asyncio_program_and_a_trio_program_end_alike(tmp_path: pathlib.Path) -> None:
    roots = {}
    for loop in ("asyncio", "trio"):
        root = roots[loop] = tmp_path / loop
        root.mkdir()
        (root / "a.txt").write_text("one\n")
        (root / "b.txt").write_text("two\n")

    async def main(root: pathlib.Path) -> list[tk.ToolResult]:
        async with tk.open_kernel(builtin_tools(), root=root) as kernel:
            return await kernel.run(same_batch())

    on_asyncio = asyncio.run(main(roots["asyncio"]))
    on_trio = trio.run(main, roots["trio"])
    assert outcome(on_asyncio) == outcome(on_trio)
    assert [r.status for r in on_trio] == [tk.Status.OK] * 5 + [tk.Status.ERROR]
    assert on_trio[4].output == "     1\t1"  # the Read after the Edit saw it
    for loop in ("asyncio", "trio"):
        assert (roots[loop] / "a.txt").read_text() == "1\n"
        assert (roots[loop] / "b.txt").read_text() == "2\n"

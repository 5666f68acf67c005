"""A call's task runs on the calls its end starts (``Kernel._run_chain``).

When a call finishes, the first call its release or finish starts (the next in line for its
file, or for its slot) runs in the same task after a schedule point, instead of in a task of
its own: a deep queue on one file spawns one task, not one per call. What must hold meanwhile:
other tasks run between two calls, a call cancelled before its turn never runs, and a kernel
closing at that schedule point leaves no call unfinished or holding a lease.
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import sniffio

import toolkernel as tk


def current_task() -> object:
    if sniffio.current_async_library() == "trio":
        import trio.lowlevel

        return trio.lowlevel.current_task()
    import asyncio

    return asyncio.current_task()


def tool_recording(ran: list[tuple[str, object]], *, after_hooks: bool = False) -> tk.Tool:
    @tk.tool(name="touch", claims=lambda a: [tk.writes("f")])
    async def touch(ctx: tk.ToolContext) -> None:
        """Note the call and its task; never a schedule point."""
        ran.append((ctx.call_id, current_task()))

    return touch


def calls(count: int) -> list[tk.ToolCall]:
    return [tk.ToolCall(f"c{i}", "touch", {}) for i in range(count)]


async def test_a_deep_queue_on_one_file_runs_in_one_task(anyio_backend: object) -> None:
    ran: list[tuple[str, object]] = []
    async with tk.open_kernel([tool_recording(ran)]) as kernel:
        handles = kernel.submit_batch(calls(50))
        await handles[-1].wait_finished()
    assert [h.result.status for h in handles] == [tk.Status.OK] * 50
    assert [call_id for call_id, _ in ran] == [f"c{i}" for i in range(50)]
    assert len({id(task) for _, task in ran}) == 1


async def test_with_after_hooks_each_call_has_a_task_of_its_own(anyio_backend: object) -> None:
    # Its after-hooks are awaited between its release and its finish: the next call can't wait
    # for them, so it is not carried.
    ran: list[tuple[str, object]] = []
    seen: list[str] = []
    async with tk.open_kernel(
        [tool_recording(ran)], after_hooks=[lambda call, result: seen.append(call.id)]
    ) as kernel:
        handles = kernel.submit_batch(calls(5))
        await handles[-1].wait_finished()
    assert seen == [f"c{i}" for i in range(5)]
    assert len({id(task) for _, task in ran}) == 5


async def test_other_tasks_run_between_two_carried_calls(anyio_backend: object) -> None:
    ticks = 0
    ticks_at_start: list[int] = []

    @tk.tool(name="busy", claims=lambda a: [tk.writes("f")])
    async def busy(ctx: tk.ToolContext) -> None:
        """Never a schedule point."""
        ticks_at_start.append(ticks)

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as group, tk.open_kernel([busy]) as kernel:
        group.start_soon(ticker)
        handles = kernel.submit_batch([tk.ToolCall(f"b{i}", "busy", {}) for i in range(20)])
        await handles[-1].wait_finished()
        group.cancel_scope.cancel()
    assert len(ticks_at_start) == 20
    # Each call starts a scheduling round after the one before; the ticker runs once a round
    # (before or after the call: trio mixes the order), so at least in the 18 rounds between.
    assert ticks_at_start[-1] - ticks_at_start[0] >= 18, ticks_at_start


async def test_a_call_cancelled_before_its_turn_never_runs(anyio_backend: object) -> None:
    ran: list[tuple[str, object]] = []
    async with tk.open_kernel([tool_recording(ran)]) as kernel:

        def on_event(event: tk.CallEvent) -> None:
            # c0's finish: c1 holds its lease already, kept for c0's task to run next.
            if isinstance(event, tk.kernel.CallFinished) and event.call_id == "c0":
                kernel.cancel("c1")

        kernel.add_listener(on_event)
        handles = kernel.submit_batch(calls(3))
        await handles[-1].wait_finished()
    statuses = [h.result.status for h in handles]
    assert statuses == [tk.Status.OK, tk.Status.CANCELLED, tk.Status.OK]
    assert [call_id for call_id, _ in ran] == ["c0", "c2"]


async def test_a_kernel_closing_between_two_carried_calls_finishes_the_next(
    anyio_backend: object,
) -> None:
    ran: list[tuple[str, object]] = []
    with anyio.CancelScope() as outer:
        async with tk.open_kernel([tool_recording(ran)]) as kernel:

            def on_event(event: tk.CallEvent) -> None:
                if isinstance(event, tk.kernel.CallFinished) and event.call_id == "c0":
                    outer.cancel()  # the kernel closes at the schedule point before c1

            kernel.add_listener(on_event)
            handles = kernel.submit_batch(calls(3))
            await anyio.sleep_forever()
    assert [call_id for call_id, _ in ran] == ["c0"]
    statuses = [h.result.status for h in handles]
    assert statuses == [tk.Status.OK, tk.Status.CANCELLED, tk.Status.CANCELLED]
    assert kernel.lease_statistics().held == 0

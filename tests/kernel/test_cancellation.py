"""Cancelling a call, a batch or the whole kernel: results for everyone, and every lease returns."""

from __future__ import annotations

import anyio
import pytest

import toolkernel as tk
from toolkernel.testing import wait_all_tasks_blocked

from .fakes import Recorder, assert_leases_returned, by_id, edit, make_tools, read


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.mark.parametrize("how", ["handle", "kernel"])
async def test_cancelling_a_running_call_hands_its_lease_to_the_next(
    autojump_clock, rec, how
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        running = kernel.submit(edit("c1", "a", 10))
        waiting = kernel.submit(edit("c2", "a", 1))
        await anyio.sleep(1)
        assert kernel.lease_statistics().held == 1
        assert kernel.lease_statistics().waiting == 1
        if how == "handle":
            running.cancel()
        else:
            kernel.cancel("c1", "no-such-call")  # unknown ids are ignored
        first = await running.wait_finished()
        assert first.status is tk.Status.CANCELLED
        assert (first.started_at, first.finished_at) == (0, 1)
        assert first.error == "cancelled"
        assert rec.spans["c1"].cancelled and rec.spans["c1"].end == 1
        second = await waiting.wait_finished()
        assert (second.status, second.started_at, second.finished_at) == (tk.Status.OK, 1, 2)
        assert_leases_returned(kernel)


async def test_cancelling_a_queued_call_withdraws_it_and_keeps_the_line(
    autojump_clock, rec
) -> None:
    events: list[tk.CallEvent] = []
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        kernel.add_listener(events.append)
        handles = kernel.submit_batch(
            [edit("c1", "a", 3), edit("c2", "a", 1), read("c3", "a", 1), read("c4", "b", 5)]
        )
        await anyio.sleep(1)
        assert kernel.lease_statistics().waiting == 2
        handles[1].cancel()
        # Withdrawn at once, synchronously: nothing of it is left in the table.
        assert handles[1].finished
        assert kernel.lease_statistics().waiting == 1
        results = by_id([await h.wait_finished() for h in handles])
        assert_leases_returned(kernel)
    c2 = results["c2"]
    assert (c2.status, c2.started_at, c2.finished_at) == (tk.Status.CANCELLED, None, 1)
    assert not rec.ran("c2")
    # c3 was behind c2; now it is behind c1 only.
    assert (results["c3"].started_at, results["c3"].finished_at) == (3, 4)
    assert results["c1"].ok and results["c4"].ok
    assert [type(e).__name__ for e in events if e.call_id == "c2"] == [
        "CallQueued",
        "CallBlocked",
        "CallFinished",
    ]


async def test_cancelling_a_finished_call_changes_nothing(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        handle = kernel.submit(edit("c1", "a", 1))
        result = await handle.wait_finished()
        handle.cancel()
        kernel.cancel("c1")
        assert handle.result is result and result.ok


async def test_cancelling_the_scope_around_run_cancels_the_whole_batch(autojump_clock, rec) -> None:
    finished: dict[str, tk.ToolResult] = {}
    calls = [
        edit("done", "x", 1),
        edit("running", "a", 10),
        edit("queued", "a", 1),
        read("after", "b", 1, after=("running",)),
    ]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        kernel.add_listener(
            lambda e: (
                finished.update({e.call_id: e.result})
                if isinstance(e, tk.kernel.CallFinished)
                else None
            )
        )
        with anyio.move_on_after(2) as scope:
            await kernel.run(calls)
        assert scope.cancelled_caught
        await wait_all_tasks_blocked()
        assert anyio.current_time() == 2
        assert_leases_returned(kernel)
        assert set(finished) == {c.id for c in calls}
        assert finished["done"].ok
        assert finished["running"].status is tk.Status.CANCELLED
        assert finished["running"].started_at == 0
        assert finished["queued"].status is tk.Status.CANCELLED
        assert finished["queued"].started_at is None
        # The dependent was either cancelled or skipped; it never ran.
        assert finished["after"].status in (tk.Status.CANCELLED, tk.Status.SKIPPED)
        assert not rec.ran("queued") and not rec.ran("after")
        # The next call on the file gets the lease at once.
        (next_call,) = await kernel.run([edit("next", "a", 1)])
        assert (next_call.started_at, next_call.finished_at) == (2, 3)


async def test_cancelling_one_batch_leaves_another_batch_alone(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:

        async def cancelled_batch() -> None:
            with anyio.move_on_after(1):
                await kernel.run([edit("c1", "a", 10)])

        async with anyio.create_task_group() as nursery:
            nursery.start_soon(cancelled_batch)
            await wait_all_tasks_blocked()
            other = kernel.submit_batch([edit("o1", "b", 3), edit("o2", "a", 1)])
        results = [await h.wait_finished() for h in other]
    assert [r.status for r in results] == [tk.Status.OK, tk.Status.OK]
    # o2 waited behind c1 (same file) and got it the moment c1 was cancelled.
    assert (results[1].started_at, results[1].finished_at) == (1, 2)


async def test_closing_the_kernel_mid_batch_cancels_and_returns_every_result(
    autojump_clock, rec
) -> None:
    calls = [
        edit("done", "x", 1),
        edit("running", "a", 10),
        edit("queued", "a", 1),
        tk.ToolCall("barrier", "barrier", {"duration": 1}),
        read("dependent", "y", 1, after=("queued",)),
    ]
    results: list[tk.ToolResult] = []

    async def run_batch(kernel: tk.Kernel) -> None:
        results.extend(await kernel.run(calls))

    async with anyio.create_task_group() as nursery:
        async with tk.open_kernel(tools=make_tools(rec)) as kernel:
            nursery.start_soon(run_batch, kernel)
            await anyio.sleep(2)
        # Leaving the block waited for every call to finish.
        assert anyio.current_time() == 2
        assert_leases_returned(kernel)
        assert kernel.statistics().finished == len(calls)
    got = by_id(results)
    assert [r.call_id for r in results] == [c.id for c in calls]
    assert got["done"].ok
    assert got["running"].status is tk.Status.CANCELLED
    assert got["running"].finished_at == 2
    assert rec.spans["running"].cancelled
    for call_id in ("queued", "barrier"):
        assert got[call_id].status is tk.Status.CANCELLED
        assert got[call_id].started_at is None
    assert got["dependent"].status in (tk.Status.CANCELLED, tk.Status.SKIPPED)


async def test_closing_the_kernel_with_a_pending_approval_cancels_it(autojump_clock, rec) -> None:
    async def approver(call: tk.ToolCall, reason: str) -> bool:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    def policy(call: tk.ToolCall) -> tk.Permission:
        return tk.Permission.ASK

    async with tk.open_kernel(
        tools=make_tools(rec), policy=policy, approver=approver, approval_timeout=None
    ) as kernel:
        handle = kernel.submit(edit("c1", "a", 1))
        await anyio.sleep(5)
    assert handle.result.status is tk.Status.CANCELLED
    assert anyio.current_time() == 5


async def test_a_call_cancelled_between_its_grant_and_its_start_never_runs(
    autojump_clock, rec
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        handle = kernel.submit(edit("c1", "a", 1))  # granted now; its task has not started
        handle.cancel()
        result = await handle.wait_finished()
        assert_leases_returned(kernel)
    assert result.status is tk.Status.CANCELLED
    assert not rec.ran("c1")


async def test_a_listener_may_cancel_a_call_when_it_blocks(autojump_clock, rec) -> None:
    # Cancelling from inside the CallBlocked event re-enters the kernel while it is issuing the
    # batch's requests; the scan must survive it.
    async def approver(call: tk.ToolCall, reason: str) -> bool:
        await anyio.sleep(1)
        return True

    def policy(call: tk.ToolCall) -> tk.Permission:
        return tk.Permission.ASK if call.id == "c1" else tk.Permission.ALLOW

    async with tk.open_kernel(tools=make_tools(rec), policy=policy, approver=approver) as kernel:

        def cancel_on_block(event: tk.CallEvent) -> None:
            if isinstance(event, tk.kernel.CallBlocked) and event.call_id == "c2":
                kernel.cancel("c2")

        kernel.add_listener(cancel_on_block)
        results = await kernel.run(
            [edit("c1", "a", 1), edit("c2", "a", 1), edit("c3", "a", 1), edit("c4", "b", 1)]
        )
        assert_leases_returned(kernel)
    assert [r.status for r in results] == [
        tk.Status.OK,
        tk.Status.CANCELLED,
        tk.Status.OK,
        tk.Status.OK,
    ]
    assert [(r.started_at, r.finished_at) for r in results] == [(1, 2), (None, 1), (2, 3), (0, 1)]


async def test_cancelling_a_call_while_its_approver_waits_cancels_the_question(
    autojump_clock, rec
) -> None:
    asked = anyio.Event()
    approver_cancelled: list[bool] = []

    async def approver(call: tk.ToolCall, reason: str) -> bool:
        asked.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            approver_cancelled.append(True)
            raise
        raise AssertionError("unreachable")

    def policy(call: tk.ToolCall) -> tk.Permission:
        return tk.Permission.ASK if call.id == "c1" else tk.Permission.ALLOW

    async with tk.open_kernel(tools=make_tools(rec), policy=policy, approver=approver) as kernel:
        handles = kernel.submit_batch([edit("c1", "a", 1), read("c2", "a", 1)])
        await asked.wait()
        await anyio.sleep(2)
        assert handles[1].finished is False  # held back behind the undecided c1
        kernel.cancel("c1")
        c1, c2 = [await h.wait_finished() for h in handles]
        assert_leases_returned(kernel)
    assert approver_cancelled == [True]
    assert (c1.status, c1.started_at, c1.finished_at) == (tk.Status.CANCELLED, None, 2)
    # The call held back behind it goes as soon as it is gone.
    assert (c2.status, c2.started_at) == (tk.Status.OK, 2)


@pytest.mark.parametrize("how", ["submits a call", "cancels a call"])
async def test_a_call_started_while_a_lone_call_is_admitted_is_not_run_by_its_caller(
    autojump_clock, rec, how
) -> None:
    # run() of one call runs it in the caller's task; a listener submitting another call, or
    # freeing the leases another waits for, during that admission must not hand that call
    # to the caller's task too, where cancelling the caller would cancel it.
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        others: list[tk.CallHandle] = []
        if how == "cancels a call":
            # other waits only behind blocker, which waits behind holder: withdrawing blocker
            # grants other at once.
            kernel.submit(edit("holder", "z/sub", 10))
            blocker = kernel.submit(edit("blocker", "z", 1))
            others.append(kernel.submit(read("other", "z/other", 5)))
            await anyio.sleep(1)

        def listener(event: tk.CallEvent) -> None:
            if isinstance(event, tk.kernel.CallQueued) and event.call_id == "c1":
                if how == "submits a call":
                    others.append(kernel.submit(edit("other", "z", 5)))
                else:
                    blocker.cancel()

        kernel.add_listener(listener)
        with anyio.move_on_after(2):
            await kernel.run([edit("c1", "a", 10)])
        (other,) = others
        result = await other.wait_finished()
        kernel.cancel_all()
    assert result.ok, result
    assert not rec.spans["other"].cancelled


@pytest.mark.parametrize("batch", ["lone", "with a follower"])
async def test_a_call_cancelled_by_a_listener_of_its_call_started_never_runs(
    autojump_clock, rec, batch
) -> None:
    # Cancelled between its start and its tool: its leases return at once, so its tool must
    # not run after all (it would run beside the next call on its file).
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:

        def listener(event: tk.CallEvent) -> None:
            if isinstance(event, tk.kernel.CallStarted) and event.call_id == "c1":
                kernel.cancel("c1")

        kernel.add_listener(listener)
        calls = [edit("c1", "a", 1), edit("c2", "a", 1)]
        results = await kernel.run(calls[:1] if batch == "lone" else calls)
        assert_leases_returned(kernel)
    assert results[0].status is tk.Status.CANCELLED
    assert not rec.ran("c1")
    assert all(r.ok for r in results[1:]) and rec.max_running <= 1


@tk.tool(writes=["path"])
async def slow_write(ctx: tk.ToolContext, path: str, seconds: float) -> str:
    await anyio.sleep(seconds)
    return f"wrote {path}"


async def test_cancelling_an_id_two_batches_share_cancels_the_call_of_each(autojump_clock) -> None:
    # Two agents' "c1": either may end first; cancel("c1") reaches whichever are unfinished.
    def call(path: str, seconds: float) -> tk.ToolCall:
        return tk.ToolCall("c1", "slow_write", {"path": path, "seconds": seconds})

    async with tk.open_kernel(tools=[slow_write]) as kernel:
        first = kernel.submit(call("a", 10))
        second = kernel.submit(call("b", 10))
        short = kernel.submit(call("c", 1))
        await anyio.sleep(2)  # the newest ended first
        assert (await short.wait_finished()).ok
        kernel.cancel("c1")
        results = [await h.wait_finished() for h in (first, second)]
        assert [(r.status, r.finished_at) for r in results] == [(tk.Status.CANCELLED, 2)] * 2
        assert_leases_returned(kernel)
        kernel.cancel("c1")  # nothing left with that id: ignored

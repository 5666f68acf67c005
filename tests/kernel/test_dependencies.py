"""``after=``: wait for other calls to finish; skip if they failed; cycles refused at admission."""

from __future__ import annotations

import anyio
import pytest

import toolkernel as tk

from .fakes import Recorder, assert_leases_returned, by_id, edit, make_tools, read


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


def failing(call_id: str, path: str, duration: float = 1.0, **options) -> tk.ToolCall:
    return tk.ToolCall(
        call_id, "edit", {"path": path, "duration": duration, "fail": True}, **options
    )


async def test_a_dependent_waits_for_its_dependency_to_finish(autojump_clock, rec) -> None:
    # Different files: only after= keeps them apart.
    calls = [edit("c1", "a", 2), read("c2", "b", 1, after=("c1",)), read("c3", "c", 1)]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        handles = kernel.submit_batch(calls)
        await kernel.run([])  # a checkpoint
        snap = kernel.snapshot()
        assert {i.call_id: i.waits_for for i in snap.pending} == {"c2": ("c1",)}
        results = by_id([await h.wait_finished() for h in handles])
    assert rec.interval("c2") == (2, 3)
    assert rec.interval("c3") == (0, 1)
    assert results["c2"].queued_at == 0 and results["c2"].wait_time == 2


async def test_after_accepts_one_id_as_a_string_and_several_ids(autojump_clock, rec) -> None:
    calls = [
        edit("c1", "a", 1),
        edit("c2", "b", 3),
        read("c3", "c", 1, after="c1"),
        read("c4", "d", 1, after=("c1", "c2")),
    ]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        await kernel.run(calls)
    assert rec.interval("c3") == (1, 2)
    assert rec.interval("c4") == (3, 4)


async def test_a_dependent_of_a_failed_call_is_skipped_with_the_reason(autojump_clock, rec) -> None:
    calls = [
        failing("c1", "a", 2),
        read("c2", "b", 1, after=("c1",)),
        read("c3", "c", 1, after=("c2",)),  # transitively
        read("c4", "d", 1),
    ]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        c1, c2, c3, c4 = await kernel.run(calls)
        assert_leases_returned(kernel)
    assert c1.status is tk.Status.ERROR
    assert (c2.status, c2.started_at, c2.finished_at) == (tk.Status.SKIPPED, None, 2)
    assert c2.error == (
        "skipped: it had to run after c1 (edit), which ended error: "
        "RuntimeError: c1 failed on purpose"
    )
    assert c3.status is tk.Status.SKIPPED
    assert c3.error is not None and c3.error.startswith("skipped: it had to run after c2 (read)")
    assert not rec.ran("c2") and not rec.ran("c3")
    assert c4.ok


@pytest.mark.parametrize("head", ["fails running", "fails admission"])
async def test_a_long_chain_behind_a_failed_call_is_skipped_whole(
    autojump_clock, rec, head
) -> None:
    # Skipping walks the chain in a loop: 2,000 links are far past Python's recursion limit.
    first = failing("c0", "a") if head == "fails running" else tk.ToolCall("c0", "nope")
    calls = [first, *(read(f"c{i}", f"f{i}", 1, after=(f"c{i - 1}",)) for i in range(1, 2000))]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        results = await kernel.run(calls)
        assert_leases_returned(kernel)
    assert results[0].status is tk.Status.ERROR
    assert {r.status for r in results[1:]} == {tk.Status.SKIPPED}
    # Each names its own dependency and the failure at the head of the chain, not every link.
    reason = "c0 (edit) ended error: RuntimeError: c0 failed on purpose"
    if head == "fails admission":
        reason = "c0 (nope) ended error: UnknownToolError: there is no tool named 'nope'"
    assert results[2].error is not None and results[2].error.startswith(
        f"skipped: it had to run after c1 (read), which was skipped because {reason}"
    )
    assert results[-1].error == results[2].error.replace("c1 (read)", "c1998 (read)")
    assert rec.order == (["c0"] if head == "fails running" else [])


async def test_a_dependency_that_failed_at_admission_skips_its_dependents(
    autojump_clock, rec
) -> None:
    calls = [tk.ToolCall("c1", "nope"), read("c2", "b", 1, after=("c1",))]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        c1, c2 = await kernel.run(calls)
    assert c1.status is tk.Status.ERROR
    assert c2.status is tk.Status.SKIPPED
    assert "c1 (nope)" in (c2.error or "")


async def test_a_dependency_from_an_earlier_batch_counts(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        running = kernel.submit(edit("c1", "a", 3))
        (waiter,) = await kernel.run([read("c2", "b", 1, after=("c1",))])
        assert running.result.ok
        (late,) = await kernel.run([read("c3", "b", 1, after=("c1",))])  # finished already
        failed = kernel.submit(failing("c4", "z", 0))
        await failed.wait_finished()
        (skipped,) = await kernel.run([read("c5", "b", 1, after=("c4",))])
    assert (waiter.started_at, waiter.finished_at) == (3, 4)
    assert (late.started_at, late.finished_at) == (4, 5)
    assert skipped.status is tk.Status.SKIPPED


async def test_a_dependency_cycle_is_refused_with_an_error_for_each_call_in_it(
    autojump_clock, rec
) -> None:
    calls = [
        read("c1", "a", 1, after=("c2",)),
        read("c2", "b", 1, after=("c1",)),
        read("c3", "c", 1),
        read("c4", "d", 1, after=("c5",)),
        read("c5", "e", 1, after=("c6",)),
        read("c6", "f", 1, after=("c4",)),
    ]
    events: list[tk.CallEvent] = []
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        kernel.add_listener(events.append)
        results = by_id(await kernel.run(calls))
        assert_leases_returned(kernel)
    for call_id in ("c1", "c2"):
        assert results[call_id].status is tk.Status.ERROR
        assert results[call_id].error == (
            "DependencyCycleError: calls wait for each other through after=: c1 -> c2 -> c1"
        )
    for call_id in ("c4", "c5", "c6"):
        assert results[call_id].status is tk.Status.ERROR
        assert results[call_id].error == (
            "DependencyCycleError: calls wait for each other through after=: c4 -> c5 -> c6 -> c4"
        )
        assert results[call_id].finished_at == 0
    assert results["c3"].ok
    assert sorted(rec.spans) == ["c3"]
    # Refused at admission: finished before anything started.
    first_start = next(i for i, e in enumerate(events) if isinstance(e, tk.kernel.CallStarted))
    refused = {e.call_id for e in events[:first_start] if isinstance(e, tk.kernel.CallFinished)}
    assert refused == {"c1", "c2", "c4", "c5", "c6"}


async def test_a_call_depending_on_a_cycle_is_skipped(autojump_clock, rec) -> None:
    calls = [
        read("c1", "a", 1, after=("c2",)),
        read("c2", "b", 1, after=("c1",)),
        read("c3", "c", 1, after=("c1",)),
    ]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        c1, c2, c3 = await kernel.run(calls)
    assert c1.status is c2.status is tk.Status.ERROR
    assert c3.status is tk.Status.SKIPPED


async def test_an_unknown_or_self_dependency_is_an_error(autojump_clock, rec) -> None:
    calls = [
        read("c1", "a", 1, after=("nope",)),
        read("c2", "b", 1, after=("c2",)),
        read("c3", "c", 1),
    ]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        c1, c2, c3 = await kernel.run(calls)
    assert c1.status is tk.Status.ERROR
    assert c1.error is not None
    assert c1.error.startswith(
        "InvalidCallError: it must run after 'nope', which is not a known call"
    )
    assert c2.status is tk.Status.ERROR
    assert "'c2'" in (c2.error or "")
    assert c3.ok and not rec.ran("c1") and not rec.ran("c2")


async def test_a_later_call_may_be_a_dependency_of_an_earlier_one(autojump_clock, rec) -> None:
    # Emission order would run c1 first (same file); after= reverses it, without a deadlock.
    calls = [edit("c1", "a", 1, after=("c2",)), edit("c2", "a", 1)]
    with anyio.fail_after(100):
        async with tk.open_kernel(tools=make_tools(rec)) as kernel:
            c1, c2 = await kernel.run(calls)
            assert_leases_returned(kernel)
    assert (c2.started_at, c1.started_at) == (0, 1)


async def test_after_and_emission_order_never_wait_for_each_other_in_a_ring(
    autojump_clock, rec
) -> None:
    # z waits for x (after=); y conflicts with the earlier z; x conflicts with the earlier y.
    calls = [
        edit("z", "a", 1, after=("x",)),
        tk.ToolCall("y", "barrier", {"duration": 1}),
        edit("x", "b", 1),
        read("w", "a", 1),  # behind z by emission order, and z can't move before x
    ]
    with anyio.fail_after(100):
        async with tk.open_kernel(tools=make_tools(rec)) as kernel:
            results = by_id(await kernel.run(calls))
            assert_leases_returned(kernel)
    assert all(r.ok for r in results.values())
    assert rec.order == ["y", "x", "z", "w"]
    assert rec.interval("w") == (3, 4)

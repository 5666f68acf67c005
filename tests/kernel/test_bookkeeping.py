"""Bookkeeping the kernel keeps lean for speed, and the behaviour it must keep while doing so.

Finished calls are remembered by id (for ``after=``) without their records; ``run`` waits on one
event per batch; a handle's event is made only when someone waits; claims that are already
canonical are not keyed again.
"""

from __future__ import annotations

import anyio

import toolkernel as tk
from toolkernel.locks import Claim, Mode, Path


@tk.tool(claims=lambda a: [tk.writes(a["path"])])
async def step(ctx: tk.ToolContext, path: str, duration: float = 0.0, fail: bool = False) -> str:
    """Sleep, then succeed or fail."""
    await anyio.sleep(duration)
    if fail:
        raise tk.ToolError(f"{ctx.call_id} failed")
    return ctx.call_id


def call(call_id: str, path: str, duration: float = 0.0, *, fail: bool = False, **options):
    arguments = {"path": path, "duration": duration, "fail": fail}
    return tk.ToolCall(call_id, "step", arguments, **options)


async def test_after_follows_the_newest_call_with_that_id(autojump_clock) -> None:
    async with tk.open_kernel(tools=[step]) as kernel:
        (old,) = await kernel.run([call("c1", "a", fail=True)])
        (new,) = await kernel.run([call("c1", "b")])
        (after,) = await kernel.run([call("c2", "c", after="c1")])
    assert (old.status, new.status) == (tk.Status.ERROR, tk.Status.OK)
    assert after.ok  # the failed c1 was replaced by the one that succeeded


async def test_an_older_call_finishing_later_does_not_replace_the_newer_one(autojump_clock) -> None:
    async with tk.open_kernel(tools=[step]) as kernel:
        old = kernel.submit(call("c1", "a", 5, fail=True))  # finishes (failing) at t=5
        (new,) = await kernel.run([call("c1", "b", 1)])  # same id, finishes at t=1
        await old.wait_finished()
        (after,) = await kernel.run([call("c2", "c", after="c1")])
        assert not old.result.ok and new.ok
        assert after.ok, after.error


async def test_after_a_failed_call_of_an_earlier_batch_names_it(autojump_clock) -> None:
    async with tk.open_kernel(tools=[step]) as kernel:
        await kernel.run([call("c1", "a", fail=True)])
        (skipped,) = await kernel.run([call("c2", "b", after="c1")])
    assert skipped.status is tk.Status.SKIPPED
    assert skipped.error is not None
    assert skipped.error.startswith("skipped: it had to run after c1 (step), which ended error")


async def test_cancelling_a_finished_call_by_id_changes_nothing(autojump_clock) -> None:
    async with tk.open_kernel(tools=[step]) as kernel:
        (done,) = await kernel.run([call("c1", "a")])
        kernel.cancel("c1")
        assert kernel.statistics().finished == 1
    assert done.ok


async def test_cancelling_by_an_id_that_is_not_a_string_says_so_and_cancels_nothing(
    autojump_clock,
) -> None:
    import pytest

    async with tk.open_kernel(tools=[step]) as kernel:
        handle = kernel.submit(call("c1", "a", 1.0))
        with pytest.raises(TypeError, match="call ids are strings, not list"):
            kernel.cancel("c1", ["c1"])  # type: ignore[arg-type]
        assert (await handle.wait_finished()).ok


async def test_waiting_on_a_finished_call_is_a_checkpoint(autojump_clock) -> None:
    async with tk.open_kernel(tools=[step]) as kernel:
        handle = kernel.submit(call("c1", "a"))
        first = await handle.wait_finished()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await handle.wait_finished()  # already finished: still a checkpoint, so cancelled
        assert scope.cancelled_caught
        assert await handle.wait_finished() is first is handle.result


async def test_a_batch_that_all_fails_at_admission_is_still_a_checkpoint(autojump_clock) -> None:
    async with tk.open_kernel(tools=[step]) as kernel:
        with anyio.CancelScope() as scope:
            scope.cancel()
            await kernel.run([tk.ToolCall("c1", "nope")])
        assert scope.cancelled_caught
        (result,) = await kernel.run([tk.ToolCall("c2", "nope")])
    assert result.status is tk.Status.ERROR


async def test_many_waiters_on_one_call_and_its_batch_all_wake(autojump_clock) -> None:
    results = []
    async with tk.open_kernel(tools=[step]) as kernel:
        handles = kernel.submit_batch([call("c1", "a", 2), call("c2", "a", 1)])

        async def wait(handle: tk.CallHandle) -> None:
            results.append(await handle.wait_finished())

        async with anyio.create_task_group() as nursery:
            for handle in [*handles, *handles]:
                nursery.start_soon(wait, handle)
    assert sorted(r.call_id for r in results) == ["c1", "c1", "c2", "c2"]
    assert anyio.current_time() == 3  # c2 waited for c1 (same file, emission order)


@tk.tool(claims=lambda a: [Claim(Path(tuple(a["parts"])), Mode.EXCLUSIVE)])
async def raw_parts(ctx: tk.ToolContext, parts: list[str]) -> tuple[Claim, ...]:
    """Claim a path built by hand from raw parts."""
    return ctx.claims


async def test_a_path_built_by_hand_is_still_keyed_lexically() -> None:
    async with tk.open_kernel(tools=[raw_parts]) as kernel:
        (spelled,) = await kernel.run([tk.ToolCall("c1", "raw_parts", {"parts": ["a/b", ".."]})])
        (plain,) = await kernel.run([tk.ToolCall("c2", "raw_parts", {"parts": ["a", "b"]})])
    assert spelled.output == (tk.writes("a"),)
    assert plain.output == (tk.writes("a/b"),)


async def test_a_big_batch_is_admitted_with_the_collector_paused_and_restored(
    autojump_clock,
) -> None:
    import gc

    seen: list[bool] = []

    def claims(a: dict[str, object]) -> list[tk.Claim]:
        seen.append(gc.isenabled())
        if a["path"] == "boom":
            raise ValueError("claims failed")
        return [tk.writes(str(a["path"]))]

    @tk.tool(claims=claims)
    async def noted(ctx: tk.ToolContext, path: str) -> str:
        """Say which call this was."""
        return ctx.call_id

    assert gc.isenabled()
    async with tk.open_kernel([noted]) as kernel:
        small = await kernel.run([tk.ToolCall("s", "noted", {"path": "a"})])
        assert small[0].ok and seen == [True]  # a small batch leaves the collector alone
        seen.clear()
        big = [tk.ToolCall(f"c{i}", "noted", {"path": f"f{i % 50}"}) for i in range(1_500)]
        big.append(tk.ToolCall("bad", "noted", {"path": "boom"}))
        results = await kernel.run(big)
    assert set(seen[:1_501]) == {False}  # every call was admitted with it paused
    assert gc.isenabled()  # and it is running again, though one call's claims raised
    assert sum(r.ok for r in results) == 1_500 and not results[-1].ok


@tk.tool(claims=lambda a: [tk.writes(f"{a['stem']}{i}") for i in range(a["count"])])
async def many(ctx: tk.ToolContext, stem: str, count: int) -> None:
    """Hold ``count`` files."""


async def test_calls_on_one_file_share_claims_but_long_claim_sets_are_not_kept(
    tmp_path, autojump_clock
) -> None:
    from toolkernel.kernel import _admission

    release = anyio.Event()

    @tk.tool(writes=["path"])
    async def hold(ctx: tk.ToolContext, path: str) -> None:
        await release.wait()

    async with tk.open_kernel(tools=[hold, many], root=tmp_path) as kernel:
        holder = kernel.submit(tk.ToolCall("h", "hold", {"path": "f0"}))
        waiting = kernel.submit_batch(
            [tk.ToolCall(f"w{i}", "many", {"stem": "f", "count": 1}) for i in range(3)]
        )
        # Queued on one file: one claims object, one log of what was keyed, for all of them.
        snapshot = kernel.snapshot()
        assert len({id(q.claims) for q in snapshot.queued}) == 1
        long_stem = "x" * 200
        (long,) = await kernel.run([tk.ToolCall("long", "many", {"stem": long_stem, "count": 50})])
        release.set()
        await holder.wait_finished()
        for handle in waiting:
            assert (await handle.wait_finished()).ok
    assert long.ok
    kept = [*_admission._RECENT_CLAIMS, *_admission._RECENT_KEYED]
    assert all(len(items) <= _admission._INTERNED_LONGEST for items in kept)
    assert not any(long_stem in str(items) for items in kept)

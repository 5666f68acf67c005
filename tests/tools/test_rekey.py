"""A call whose path changes meaning between admission and grant goes back in line."""

import os
from pathlib import Path

import anyio
import trio

import toolkernel as tk


def _holder(name: str) -> tk.Tool:
    async def hold(ctx: tk.ToolContext, path: str, seconds: float) -> str:
        start = anyio.current_time()
        await anyio.sleep(seconds)
        spans.append((ctx.call_id, start, anyio.current_time()))
        return path

    return tk.tool(writes=["path"], name=name)(hold)


spans: list[tuple[str, float, float]] = []


async def test_call_requeues_when_a_symlink_is_retargeted(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    spans.clear()
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    os.symlink("a.txt", tmp_path / "link")
    hold = _holder("Hold")
    async with tk.open_kernel([hold], root=tmp_path) as kernel:
        handles = kernel.submit_batch(
            [
                tk.ToolCall("c1", "Hold", {"path": "a.txt", "seconds": 2}),
                tk.ToolCall("c2", "Hold", {"path": "b.txt", "seconds": 5}),
                tk.ToolCall("c3", "Hold", {"path": "link", "seconds": 1}),  # admitted as a.txt
            ]
        )
        await anyio.sleep(1)
        os.unlink(tmp_path / "link")
        os.symlink("b.txt", tmp_path / "link")  # now `link` means b.txt, held by c2
        results = [await h.wait_finished() for h in handles]
    assert [r.status for r in results] == [tk.Status.OK] * 3
    starts = {call_id: (start, end) for call_id, start, end in spans}
    # Without the re-check c3 would start at 2 and write b.txt while c2 holds it.
    assert starts["c3"][0] == starts["c2"][1] == 5
    assert results[2].started_at is not None and results[2].started_at - results[2].queued_at == 5


async def test_unchanged_keys_run_at_grant(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    spans.clear()
    (tmp_path / "a.txt").write_text("a")
    os.symlink("a.txt", tmp_path / "link")
    hold = _holder("Hold")
    async with tk.open_kernel([hold], root=tmp_path) as kernel:
        results = await kernel.run(
            [
                tk.ToolCall("c1", "Hold", {"path": "a.txt", "seconds": 2}),
                tk.ToolCall("c2", "Hold", {"path": "link", "seconds": 1}),
            ]
        )
    assert results[1].started_at == 2


async def test_keys_are_looked_at_again_after_a_wait_for_a_slot(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # c2 is granted as it is admitted (nobody holds a.txt) but waits for the one slot: by the
    # time it runs, `link` means b.txt, and it must run holding b.txt, not a.txt.
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    os.symlink("a.txt", tmp_path / "link")
    held: dict[str, tuple[str, ...]] = {}

    @tk.tool(writes=["path"], name="Hold")
    async def hold(ctx: tk.ToolContext, path: str, seconds: float) -> None:
        held[ctx.call_id] = tuple(str(claim.resource) for claim in ctx.claims)
        await anyio.sleep(seconds)

    async with tk.open_kernel([hold], root=tmp_path, max_concurrency=1) as kernel:
        handles = kernel.submit_batch(
            [
                tk.ToolCall("c1", "Hold", {"path": "other.txt", "seconds": 2}),
                tk.ToolCall("c2", "Hold", {"path": "link", "seconds": 1}),
            ]
        )
        await anyio.sleep(1)
        assert "a.txt" in str(kernel.snapshot().queued[0].claims[0].resource)
        os.unlink(tmp_path / "link")
        os.symlink("b.txt", tmp_path / "link")
        results = [await h.wait_finished() for h in handles]
    assert [r.status for r in results] == [tk.Status.OK] * 2
    assert len(held["c2"]) == 1 and held["c2"][0].endswith("b.txt")

"""A call whose path changes meaning between admission and grant goes back in line."""

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import trio

import toolkernel as tk
from toolkernel.kernel import KeyFunction
from toolkernel.locks import Path as LeaseKey
from toolkernel.tools import Workspace


def _holder(name: str) -> tk.Tool:
    async def hold(ctx: tk.ToolContext, path: str, seconds: float) -> str:
        start = anyio.current_time()
        await anyio.sleep(seconds)
        spans.append((ctx.call_id, start, anyio.current_time()))
        return path

    return tk.tool(writes=["path"], name=name)(hold)


spans: list[tuple[str, float, float]] = []


def _a_b_and_a_link_to_a(root: Path) -> None:
    """Files a.txt and b.txt, and ``link`` meaning a.txt (until a test retargets it)."""
    (root / "a.txt").write_text("a")
    (root / "b.txt").write_text("b")
    os.symlink("a.txt", root / "link")


async def test_call_requeues_when_a_symlink_is_retargeted(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    spans.clear()
    _a_b_and_a_link_to_a(tmp_path)
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


async def test_a_path_retargeted_during_a_wait_for_a_slot_is_never_written_unheld(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # c2 is granted as it is admitted (nobody holds a.txt) and waits for the one slot, holding
    # a.txt; meanwhile `link` comes to mean b.txt. It runs on the keys it holds, and its write
    # through `link` is refused rather than landing in b.txt, which it does not hold.
    _a_b_and_a_link_to_a(tmp_path)

    @tk.tool(writes=["path"], name="Put")
    async def put(ctx: tk.ToolContext, path: str, seconds: float) -> None:
        await anyio.sleep(seconds)
        assert ctx.fs is not None
        await ctx.fs.write_text(path, "new")

    async with tk.open_kernel([put], root=tmp_path, max_concurrency=1) as kernel:
        handles = kernel.submit_batch(
            [
                tk.ToolCall("c1", "Put", {"path": "other.txt", "seconds": 2}),
                tk.ToolCall("c2", "Put", {"path": "link", "seconds": 0}),
            ]
        )
        await anyio.sleep(1)
        (waiting,) = kernel.snapshot().queued
        assert str(waiting.claims[0].resource).endswith("a.txt")
        os.unlink(tmp_path / "link")
        os.symlink("b.txt", tmp_path / "link")
        results = [await h.wait_finished() for h in handles]
    assert results[0].ok
    assert not results[1].ok, results[1]
    assert (tmp_path / "a.txt").read_text() == "a"
    assert (tmp_path / "b.txt").read_text() == "b"


async def test_a_claims_function_is_asked_once_and_its_paths_keyed_again_after_a_wait(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # A tool declared with claims= has claims that follow its keys alone: after waiting, the
    # call's paths are keyed again (a retargeted link still sends it back in line), but the
    # claims function is not asked again.
    spans.clear()
    _a_b_and_a_link_to_a(tmp_path)
    asked: list[str] = []

    def claims(arguments: dict[str, object]) -> list[tk.Claim]:
        asked.append(str(arguments["path"]))
        return [tk.writes(str(arguments["path"]))]

    async def declared(ctx: tk.ToolContext, path: str, seconds: float) -> str:
        start = anyio.current_time()
        await anyio.sleep(seconds)
        spans.append((ctx.call_id, start, anyio.current_time()))
        return path

    tool = tk.tool(claims=claims, name="Declared")(declared)
    assert tool.claims_follow_keys
    async with tk.open_kernel([_holder("Hold"), tool], root=tmp_path) as kernel:
        handles = kernel.submit_batch(
            [
                tk.ToolCall("c1", "Hold", {"path": "a.txt", "seconds": 2}),
                tk.ToolCall("c2", "Hold", {"path": "b.txt", "seconds": 5}),
                tk.ToolCall("c3", "Declared", {"path": "link", "seconds": 1}),  # as a.txt
                tk.ToolCall("c4", "Declared", {"path": "a.txt", "seconds": 1}),  # after c3
            ]
        )
        await anyio.sleep(1)
        os.unlink(tmp_path / "link")
        os.symlink("b.txt", tmp_path / "link")  # now `link` means b.txt, held by c2
        results = [await h.wait_finished() for h in handles]
    assert [r.status for r in results] == [tk.Status.OK] * 4
    starts = {call_id: start for call_id, start, _ in spans}
    assert starts["c3"] == 5  # keyed again: it waited for c2, which holds b.txt
    assert starts["c4"] == 2  # its key stood: it ran when c1 let a.txt go
    # Asked at admission for each call, and once more for c3 when its key had changed.
    assert asked == ["link", "a.txt", "link"]


async def test_a_tool_with_claims_of_its_own_is_asked_again_after_a_wait(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # A tool overriding claims() may read the project to decide them (as the Bash tool does):
    # a call of it that waited has its claims computed again before it runs.
    asked = 0

    class Counted(tk.Tool):
        name = "Counted"

        def claims(self, arguments: Mapping[str, Any], key: KeyFunction) -> list[tk.Claim]:
            nonlocal asked
            asked += 1
            return [tk.writes(key("a.txt"))]

        async def run(self, ctx: tk.ToolContext) -> None:
            pass

    assert not Counted().claims_follow_keys
    async with tk.open_kernel([_holder("Hold"), Counted()], root=tmp_path) as kernel:
        results = await kernel.run(
            [
                tk.ToolCall("c1", "Hold", {"path": "a.txt", "seconds": 1}),
                tk.ToolCall("c2", "Counted", {}),
            ]
        )
    assert [r.status for r in results] == [tk.Status.OK] * 2
    assert asked == 2


class _CountingWorkspace(Workspace):
    """A workspace that counts what it is asked to key."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.asked: list[object] = []

    def key(self, p: str | os.PathLike[str]) -> LeaseKey:
        self.asked.append(p)
        return super().key(p)


async def test_a_batch_keys_each_spelling_once(tmp_path: Path) -> None:
    # A batch is admitted at one moment: a deep queue on one file looks the file up once, and
    # a spelling the workspace refuses is refused to every call that names it.
    workspace = _CountingWorkspace(tmp_path)
    hold = _holder("Hold")
    async with tk.open_kernel([hold], root=workspace) as kernel:
        calls = [tk.ToolCall(f"c{i}", "Hold", {"path": "f.txt", "seconds": 0}) for i in range(5)]
        calls += [tk.ToolCall("other", "Hold", {"path": "g.txt", "seconds": 0})]
        calls += [tk.ToolCall(f"out{i}", "Hold", {"path": "../x", "seconds": 0}) for i in (1, 2)]
        handles = kernel.submit_batch(calls)
        assert workspace.asked == ["f.txt", "g.txt", "../x", "../x"]
        results = [await h.wait_finished() for h in handles]
    assert [r.status for r in results[:6]] == [tk.Status.OK] * 6
    assert [r.error_type for r in results[6:]] == ["PathEscapeError"] * 2
    # Each call that waited looked again before it ran (the four behind c0 on f.txt).
    assert workspace.asked[4:] == ["f.txt"] * 4

"""Every change a call makes visible goes through its grant's fence when leases are shared:
``ctx.fs`` (writes, parents, deletes, moves) and the Bash tool's commit land while the grant is
held, and a call whose grant was lost changes nothing. Without ``leases=``, no fence at all."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

import toolkernel as tk
from toolkernel import sandbox
from toolkernel.leases import Chmod, MakeDirectory, open_leases
from toolkernel.leases._fencing import check_covered
from toolkernel.locks import reads, writes
from toolkernel.tools import FileAccess, Workspace, builtin_tools

from .service_harness import Service, running_service


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One service for the module; each test works in a directory of its own below its root."""
    with running_service(tmp_path_factory.mktemp("ws")) as running:
        yield running


@pytest.fixture
def here(service: Service, request: pytest.FixtureRequest) -> str:
    """A fresh directory under the service's root for this test (a relative path)."""
    name = "t" + "".join(c if c.isalnum() else "-" for c in request.node.name)[-60:]
    (service.root / name).mkdir()
    return name


@tk.tool(claims=lambda a: [tk.writes(a["path"])])
async def fenced(ctx: tk.ToolContext, path: str) -> str:
    """Report whether ``ctx.fs`` has a fence, and write through it."""
    fs = ctx.fs
    assert fs is not None
    await fs.write_text(path, "written\n", parents=True)
    return "fence" if fs.fence is not None else "direct"


async def test_writes_and_edits_through_ctx_fs_land_making_parents(
    service: Service, here: str
) -> None:
    root = service.root
    (root / here / "a.txt").write_text("one\n")
    calls = [
        tk.ToolCall("w", "Write", {"file_path": f"{here}/new/deep/w.txt", "content": "w\n"}),
        tk.ToolCall("r", "Read", {"file_path": f"{here}/a.txt"}),
        tk.ToolCall(
            "e", "Edit", {"file_path": f"{here}/a.txt", "old_string": "one", "new_string": "two"}
        ),
        tk.ToolCall("f", "fenced", {"path": f"{here}/made/by/tool.txt"}),
    ]
    async with tk.open_kernel([*builtin_tools(), fenced], root=root, leases=service.url) as k:
        results = await k.run(calls)
        assert [r.status for r in results] == [tk.Status.OK] * 4, results
        assert results[3].output == "fence"
    assert (root / here / "new" / "deep" / "w.txt").read_text() == "w\n"
    assert (root / here / "a.txt").read_text() == "two\n"
    assert (root / here / "made" / "by" / "tool.txt").read_text() == "written\n"


async def test_moves_mkdir_and_deletes_through_a_fence_land(service: Service, here: str) -> None:
    root = service.root
    (root / here / "old" / "sub").mkdir(parents=True)
    (root / here / "old" / "sub" / "f.txt").write_text("x\n")
    (root / here / "a.txt").write_text("one\n")

    @tk.tool(
        claims=lambda a: [
            tk.writes(f"{here}/old"),
            tk.writes(f"{here}/a.txt"),
            tk.writes(f"{here}/moved/a.txt"),
            tk.writes(f"{here}/empty"),
        ]
    )
    async def tidy(ctx: tk.ToolContext) -> None:
        """Move a file (making its parent), make a directory, delete a tree."""
        assert ctx.fs.fence is not None
        await ctx.fs.move(f"{here}/a.txt", f"{here}/moved/a.txt", parents=True)
        await ctx.fs.mkdir(f"{here}/empty")
        await ctx.fs.delete(f"{here}/old")

    async with tk.open_kernel([tidy], root=root, leases=service.url) as k:
        [result] = await k.run([tk.ToolCall("t", "tidy", {})])
    assert result.status is tk.Status.OK, result
    assert sorted(os.listdir(root / here)) == ["empty", "moved"]
    assert (root / here / "moved" / "a.txt").read_text() == "one\n"


async def test_a_nested_call_writes_inside_its_parents_grant_and_outside_through_its_own(
    service: Service, here: str
) -> None:
    root = service.root

    @tk.tool(claims=lambda a: [tk.writes(f"{here}/inner.txt"), tk.writes(f"{here}/outer.txt")])
    async def child(ctx: tk.ToolContext) -> None:
        """Write one file its parent holds, and one it took itself."""
        assert type(ctx.fs.fence).__name__ == "CoveringFence"  # two grants: its own, its parent's
        await ctx.fs.write_text(f"{here}/inner.txt", "inner\n")
        await ctx.fs.write_text(f"{here}/outer.txt", "outer\n")

    @tk.tool(claims=lambda a: [tk.writes(f"{here}/inner.txt")])
    async def parent(ctx: tk.ToolContext) -> None:
        """Run ``child``."""
        result = await ctx.call("child")
        assert result.status is tk.Status.OK, result

    async with tk.open_kernel([parent, child], root=root, leases=service.url) as k:
        [result] = await k.run([tk.ToolCall("p", "parent", {})])
    assert result.status is tk.Status.OK, result
    assert (root / here / "inner.txt").read_text() == "inner\n"
    assert (root / here / "outer.txt").read_text() == "outer\n"


async def test_a_fenced_write_outside_the_grant_is_refused_and_changes_nothing(
    service: Service, here: str
) -> None:
    root = service.root
    (root / here / "b.txt").write_text("b\n")
    async with open_leases(service.url, root) as backend:
        assert backend is not None
        grant = await backend.acquire([writes(f"{here}/a.txt")])
        try:
            with Workspace(root) as workspace:
                # Claims wider than the grant: only the fence can tell.
                fs = FileAccess(
                    workspace,
                    [writes(f"{here}/a.txt"), writes(f"{here}/b.txt")],
                    fence=backend.fence(grant),
                )
                await fs.write_text(f"{here}/a.txt", "a\n")
                with pytest.raises(PermissionError, match="does not hold it exclusively"):
                    await fs.write_text(f"{here}/b.txt", "late\n")
                with pytest.raises(PermissionError):
                    await fs.delete(f"{here}/b.txt")
        finally:
            backend.release(grant)
    assert (root / here / "a.txt").read_text() == "a\n"
    assert (root / here / "b.txt").read_text() == "b\n"
    assert sorted(os.listdir(root / here)) == ["a.txt", "b.txt"]  # no leftover


async def test_a_call_whose_grant_was_lost_is_fenced_out_and_the_file_untouched(
    tmp_path: Path,
) -> None:
    (tmp_path / "x.txt").write_text("before\n")
    started, cut_off = anyio.Event(), anyio.Event()

    @tk.tool(claims=lambda a: [tk.writes("x.txt")])
    async def late(ctx: tk.ToolContext) -> None:
        """Write ``x.txt`` once the service is gone (its leases with it)."""
        started.set()
        await cut_off.wait()
        await ctx.fs.write_text("x.txt", "late\n")

    with running_service(tmp_path) as service, anyio.fail_after(20):
        async with tk.open_kernel([late], root=tmp_path, leases=service.url) as k:
            handle = k.submit(tk.ToolCall("l", "late", {}))
            await started.wait()
            service.stop(signal.SIGKILL)
            cut_off.set()
            result = await handle.wait_finished()
    assert result.status is tk.Status.ERROR, result
    assert result.error_type == "FencedOutError"
    assert (tmp_path / "x.txt").read_text() == "before\n"
    assert sorted(os.listdir(tmp_path)) == ["x.txt"]  # no temporary left


@pytest.mark.skipif(
    sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}"
)
async def test_a_bash_commands_changes_are_committed_through_the_fence(
    service: Service, here: str
) -> None:
    root = service.root
    (root / here / "gone").mkdir()
    (root / here / "gone" / "f.txt").write_text("x\n")
    command = f"cd {here} && echo hi > out.txt && mkdir -p d/e && echo e > d/e/f && rm -r gone"
    async with tk.open_kernel(builtin_tools(bash=True), root=root, leases=service.url) as k:
        [result] = await k.run([tk.ToolCall("b", "Bash", {"command": command})])
    assert result.status is tk.Status.OK, result
    assert (root / here / "out.txt").read_text() == "hi\n"
    assert (root / here / "d" / "e" / "f").read_text() == "e\n"
    assert sorted(os.listdir(root / here)) == ["d", "out.txt"]


async def test_without_shared_leases_changes_are_made_directly(tmp_path: Path) -> None:
    seen = []

    @tk.tool(claims=lambda a: [tk.writes("a.txt")])
    async def look(ctx: tk.ToolContext) -> None:
        """Note how ``ctx.fs`` makes its changes."""
        seen.append(ctx.fs.fence)
        await ctx.fs.write_text("a.txt", "a\n")

    async with tk.open_kernel([look], root=tmp_path) as k:
        [result] = await k.run([tk.ToolCall("l", "look", {})])
    assert result.status is tk.Status.OK
    assert seen == [None]
    assert (tmp_path / "a.txt").read_text() == "a\n"


def test_making_a_directory_on_the_way_to_a_held_path_is_covered_and_nothing_more() -> None:
    held = [writes("a/b/c.txt")]
    check_covered(held, MakeDirectory(("a",)))
    check_covered(held, MakeDirectory(("a", "b")))
    for op in (Chmod(("a",), 0o755), MakeDirectory(("x",)), MakeDirectory(("a", "b", "d"))):
        with pytest.raises(PermissionError):
            check_covered(held, op)
    with pytest.raises(PermissionError):
        check_covered([reads("a/b/c.txt")], MakeDirectory(("a",)))


@pytest.mark.skipif(
    sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}"
)
async def test_a_command_that_ran_ahead_commits_through_the_fence_of_its_grant(
    service: Service, here: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The second command runs ahead of its grant (before the first commits); its shared
    # leases are taken at its grant, and its commit goes through their fence.
    fences = []
    commit = sandbox.Overlay.commit

    def noted(overlay: sandbox.Overlay, changes: object, *, fence: object = None) -> None:
        fences.append(fence)
        commit(overlay, changes, fence=fence)  # type: ignore[arg-type]

    monkeypatch.setattr(sandbox.Overlay, "commit", noted)
    root = service.root
    tools = builtin_tools(bash=True)
    calls = [
        tk.ToolCall(f"b{i}", "Bash", {"command": f"cd {here} && echo {i} >> log"}) for i in (1, 2)
    ]
    async with tk.open_kernel(tools, root=root, leases=service.url) as k:
        results = await k.run(calls)
        ran_ahead = k.statistics().ran_ahead
    assert [r.status for r in results] == [tk.Status.OK] * 2, results
    assert (root / here / "log").read_text() == "1\n2\n"
    assert ran_ahead == 1
    assert len(fences) == 2 and None not in fences

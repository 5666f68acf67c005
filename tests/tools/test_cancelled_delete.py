"""A Delete of a directory tree is whole or nothing: the tree is there with every file, or gone.

The tree is first moved aside (renamed to a hidden name in its parent); a cancellation or a run
timeout before that changes nothing (the call says CANCELLED or TIMEOUT), and one after it lets
the removal finish and the call says OK: its result tells the truth about the tree. A tree
moved aside and left by a crash (or by a call that ended mid-removal) is hidden from the
listings and removed by the next Delete of a directory beside it.

Real I/O in worker threads, so the real clock; where the cancellation must land mid-removal, a
hook on the system calls cancels the call from the worker thread at a chosen removal.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import re
from collections.abc import AsyncIterator, Callable

import anyio
import anyio.from_thread
import pytest

import toolkernel as tk
from toolkernel._errors import CallEndedError, PathChangedError
from toolkernel.kernel import CallFinished
from toolkernel.locks import EVERYTHING, exclusive, writes
from toolkernel.tools import FileAccess, FileAccessed, Workspace, _fileops, _fs, builtin_tools

FILES = 2000
"""Files in the tree deleted: 20 directories of 10 directories of 10 files."""
DIRECTORIES = 20 + 20 * 10 + 1
"""Directories in it, its top included: as many ``rmdir`` as a whole removal makes."""
MOVED_ASIDE = re.compile(r"\..*\.toolkernel-deleted-[0-9a-f]{12}", re.DOTALL)


@pytest.fixture
async def kernel(tmp_path: pathlib.Path) -> AsyncIterator[tk.Kernel]:
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as k:
        yield k


def make_tree(top: pathlib.Path, width: int = 20) -> frozenset[str]:
    """Make the tree of :data:`FILES` files at ``top`` (``width`` of its 20 directories only:
    a tenth of it for 2); return every path in it, relative."""
    made: set[str] = set()
    for outer in range(width):
        for inner in range(10):
            directory = top / f"d{outer:02}" / f"e{inner}"
            directory.mkdir(parents=True)
            for number in range(10):
                (directory / f"f{number}.txt").write_text(f"{outer} {inner} {number}\n")
    for path in top.rglob("*"):
        made.add(path.relative_to(top).as_posix())
    assert len([name for name in made if name.endswith(".txt")]) == FILES * width // 20
    return frozenset(made)


def moved_aside(directory: pathlib.Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if MOVED_ASIDE.fullmatch(name))


def whole_or_gone(top: pathlib.Path, made: frozenset[str]) -> str:
    """``"whole"`` or ``"gone"``; fails if the tree is half there or something is left aside."""
    assert moved_aside(top.parent) == [], "a moved-aside tree was left behind"
    if not top.exists():
        return "gone"
    found = frozenset(path.relative_to(top).as_posix() for path in top.rglob("*"))
    assert found == made, f"half a tree: {len(made - found)} of {len(made)} paths gone"
    return "whole"


def hook(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    at: int = 0,
    then: Callable[[], object] = lambda: None,
) -> list[int]:
    """Count the calls of ``os.<name>`` made relative to a directory (``unlink``, ``rmdir``);
    the ``at``-th one, once it returned, runs ``then`` in the event loop's thread. Returns the
    running count (in a list)."""
    real = getattr(os, name)
    made = [0]

    def counted(path: str, *, dir_fd: int | None = None) -> None:
        real(path, dir_fd=dir_fd)
        if dir_fd is not None:
            made[0] += 1
            if made[0] == at:
                anyio.from_thread.run_sync(then)

    monkeypatch.setattr(os, name, counted)
    return made


# -- cancelled or timed out mid-removal ----------------------------------------------------------


@pytest.mark.parametrize(
    ("removal", "count"),
    [("unlink", 1), ("unlink", FILES // 2), ("unlink", FILES), ("rmdir", DIRECTORIES - 1)],
)
async def test_a_delete_cancelled_mid_removal_says_ok_and_the_tree_is_gone(
    kernel: tk.Kernel,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    removal: str,
    count: int,
) -> None:
    # Past its commit point (the move aside) the Delete has happened: its result says so.
    made = make_tree(tmp_path / "tree")
    (tmp_path / "kept.txt").write_text("kept\n")
    unlinks = hook(monkeypatch, "unlink")
    removals = hook(monkeypatch, removal, at=count, then=lambda: kernel.cancel("c1"))
    (result,) = await kernel.run([tk.ToolCall("c1", "Delete", {"path": "tree"})])
    assert result.status is tk.Status.OK, result
    assert result.output == "deleted tree"
    assert removals[0] >= count, "the cancellation did not land mid-removal"
    assert whole_or_gone(tmp_path / "tree", made) == "gone"
    assert unlinks[0] == FILES, "the removal stopped part-way"
    assert sorted(os.listdir(tmp_path)) == ["kept.txt"]


@pytest.mark.parametrize("how", ["by id", "its handle", "the batch", "all", "closing"])
async def test_however_it_is_cancelled_past_its_commit_point_a_delete_says_ok(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    made = make_tree(tmp_path / "tree", width=4)
    landed = anyio.Event()
    finished: list[tk.ToolResult] = []
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        kernel.add_listener(
            lambda event: finished.append(event.result) if isinstance(event, CallFinished) else None
        )
        call = tk.ToolCall("c1", "Delete", {"path": "tree"})
        handles: list[tk.CallHandle] = []
        batch = anyio.CancelScope()

        def cancel() -> None:
            landed.set()
            if how == "by id":
                kernel.cancel("c1")
            elif how == "its handle":
                handles[0].cancel()
            elif how == "the batch":
                batch.cancel()  # the caller of run() is cancelled: so is its batch
            elif how == "all":
                kernel.cancel_all()

        hook(monkeypatch, "unlink", at=FILES // 10, then=cancel)
        if how == "the batch":
            with batch:
                await kernel.run([call, tk.ToolCall("c2", "Bash", {"command": "sleep 10"})])
        else:
            handles.append(kernel.submit(call))
            if how == "closing":
                await landed.wait()  # then the kernel closes, the Delete mid-removal
            else:
                await handles[0].wait_finished()
    assert landed.is_set()
    (result,) = [r for r in finished if r.call_id == "c1"]
    assert result.status is tk.Status.OK, result
    assert whole_or_gone(tmp_path / "tree", made) == "gone"


async def test_a_delete_cancelled_before_it_moves_the_tree_aside_changes_nothing(
    tmp_path: pathlib.Path,
) -> None:
    root = tmp_path / "root"
    made = make_tree(root / "tree")
    with Workspace(root) as workspace, anyio.CancelScope() as scope:

        def cancel_when_checked(access: FileAccessed) -> None:
            anyio.from_thread.run_sync(scope.cancel)

        fs = FileAccess(workspace, [writes("tree")], observer=cancel_when_checked)
        await fs.delete("tree")
    assert scope.cancelled_caught
    assert whole_or_gone(root / "tree", made) == "whole"


async def test_a_delete_that_times_out_leaves_the_tree_whole_or_gone(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    # Wherever the run limit lands (before the move aside, during the removal, after it), the
    # tree is whole or gone once the call has returned, and nothing is left aside.
    outcomes: list[tuple[tk.Status, str]] = []
    for number, limit in enumerate((0.0, 0.002, 0.02, 0.2)):
        top = tmp_path / f"tree{number}"
        made = make_tree(top)
        call = tk.ToolCall("c1", "Delete", {"path": top.name}, run_timeout=limit)
        (result,) = await kernel.run([call])
        assert result.status in (tk.Status.OK, tk.Status.TIMEOUT), result
        outcome = whole_or_gone(top, made)
        # The result tells the truth about the tree: deleted says OK, whole says TIMEOUT.
        assert outcome == ("gone" if result.status is tk.Status.OK else "whole"), result
        outcomes.append((result.status, outcome))
    assert outcomes[0] == (tk.Status.TIMEOUT, "whole"), "a limit of 0 must stop it before"


# -- a tree moved aside and left there ---------------------------------------------------------


async def test_a_delete_whose_call_ends_mid_removal_leaves_the_tree_gone_and_hidden(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A tool's task outliving its call must not write once the call ended, so the removal stops
    # there: the tree is gone from its name, its remains wait aside for the next Delete.
    root = tmp_path / "root"
    make_tree(root / "tree", width=2)
    (root / "other").mkdir()
    with Workspace(root) as workspace:
        fs = FileAccess(workspace, [exclusive(EVERYTHING)], call_id="c1")
        unlinks = hook(monkeypatch, "unlink")
        real_exit = _fs._Gate.__exit__

        def exit_then_end_the_call(self: _fs._Gate, *exc_info: object) -> None:
            real_exit(self, *exc_info)
            if unlinks[0] == 10:
                fs.close()  # after the gate let go of the lock close takes

        monkeypatch.setattr(_fs._Gate, "__exit__", exit_then_end_the_call)
        with pytest.raises(CallEndedError, match=re.escape("can't delete 'tree'")):
            await fs.delete("tree")
        monkeypatch.undo()
        assert unlinks[0] == 10
        assert not (root / "tree").exists()
        (left,) = moved_aside(root)
        assert left.startswith(".tree.")
        fresh = FileAccess(workspace, [exclusive(EVERYTHING)], call_id="c2")
        assert await fresh.listdir(".") == ["other"]
        assert [entry.name for entry in await fresh.list_entries(".")] == ["other"]
        assert await fresh.walk(".") == []
        await fresh.delete("other")
    assert os.listdir(root) == []


async def test_a_tree_left_aside_by_a_crash_is_hidden_and_swept_by_the_next_delete_beside_it(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    left = tmp_path / ".old.toolkernel-deleted-0123456789ab"
    (left / "sub").mkdir(parents=True)
    (left / "sub" / "deleted.txt").write_text("needle\n")
    (tmp_path / "a.txt").write_text("needle\n")
    (tmp_path / "d" / "x").mkdir(parents=True)
    listing = await kernel.run(
        [
            tk.ToolCall("l", "ListDir", {"path": "."}),
            tk.ToolCall("g", "Glob", {"pattern": "**/*"}),
            tk.ToolCall("s", "Grep", {"pattern": "needle"}),
        ]
    )
    assert [result.output for result in listing] == ["a.txt\nd/", "a.txt", "a.txt"]
    (deleted,) = await kernel.run([tk.ToolCall("c1", "Delete", {"path": "a.txt"})])
    assert deleted.status is tk.Status.OK and left.exists(), "a file's Delete is one unlink"
    (deleted,) = await kernel.run([tk.ToolCall("c2", "Delete", {"path": "d"})])
    assert deleted.status is tk.Status.OK, deleted
    assert os.listdir(tmp_path) == []


async def test_a_tree_being_removed_by_another_delete_is_not_swept(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    # A Delete (in this process or another) holds a lock on the tree it moved aside while it
    # removes it; a Delete beside it leaves that one alone.
    left = tmp_path / ".busy.toolkernel-deleted-0123456789ab"
    (left / "sub").mkdir(parents=True)
    (tmp_path / "d").mkdir()
    fd = os.open(left, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        (deleted,) = await kernel.run([tk.ToolCall("c1", "Delete", {"path": "d"})])
        assert deleted.status is tk.Status.OK, deleted
        assert (left / "sub").is_dir()
    finally:
        os.close(fd)
    assert os.listdir(tmp_path) == [left.name]


async def test_a_delete_that_fails_mid_removal_puts_what_is_left_back_under_its_name(
    kernel: tk.Kernel, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A failure is not a cancellation: the call reports it, and what it could not remove is
    # where the model looks for it, not hidden aside.
    make_tree(tmp_path / "tree", width=2)
    real = os.unlink
    unlinks = [0]

    def unlink(path: str, *, dir_fd: int | None = None) -> None:
        unlinks[0] += 1
        if unlinks[0] == 100:
            raise PermissionError(13, "Permission denied", path)
        real(path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", unlink)
    (result,) = await kernel.run([tk.ToolCall("c1", "Delete", {"path": "tree"})])
    assert result.status is tk.Status.ERROR and "Permission denied" in (result.error or "")
    left = [path for path in (tmp_path / "tree").rglob("*") if path.is_file()]
    assert len(left) == FILES // 10 - 99
    assert moved_aside(tmp_path) == []


async def test_a_tree_swapped_just_before_it_is_moved_aside_is_put_back_and_nothing_deleted(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another process renames the tree away and puts a link to a directory outside in its
    # place between the Delete's open of the tree and its rename: the link is moved aside,
    # found to be another file than the tree opened, and put back; nothing is deleted.
    root, outside = tmp_path / "root", tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (outside / "keep" / "precious.txt").write_text("precious\n")
    made = make_tree(root / "tree", width=2)
    real = _fileops.rename_no_replace

    def swap_then_rename(source_fd: int, source: str, target_fd: int, target: str) -> None:
        if source == "tree":
            os.rename(root / "tree", root / "elsewhere")
            os.symlink(outside, root / "tree")
        real(source_fd, source, target_fd, target)

    monkeypatch.setattr(_fileops, "rename_no_replace", swap_then_rename)
    with Workspace(root) as workspace:
        fs = FileAccess(workspace, [writes("tree")])
        with pytest.raises(PathChangedError, match="another directory now"):
            await fs.delete("tree")
    assert (root / "tree").is_symlink()
    assert (outside / "keep" / "precious.txt").read_text() == "precious\n"
    assert whole_or_gone(root / "elsewhere", made) == "whole"

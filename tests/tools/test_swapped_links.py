"""A directory swapped for a symbolic link between the check and the I/O is refused, not followed.

The swap is made deterministic by a seam: the workspace's resolution is wrapped so that, right
after it resolved the path under test (the check), a directory on that path is renamed away and a
link to a directory outside the root put in its place (what a hostile process would do). The I/O
that follows must notice the link and touch nothing. Each test runs twice: with ``openat2`` where
the kernel has it, and with the component walk that is used everywhere else.
"""

from __future__ import annotations

import os
import pathlib
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import anyio.to_thread
import pytest

from toolkernel import _beneath
from toolkernel._errors import PathChangedError, PathEscapeError
from toolkernel.locks import EVERYTHING, exclusive
from toolkernel.tools import FileAccess, Workspace


@pytest.fixture(params=["openat2", "walk"])
def resolution(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "walk":
        monkeypatch.setattr(_beneath, "openat2", None)
    elif _beneath.openat2 is None:
        pytest.skip("this kernel has no openat2")
    return str(request.param)


@pytest.fixture
def outside(tmp_path: pathlib.Path) -> pathlib.Path:
    directory = tmp_path / "outside"
    (directory / "tree").mkdir(parents=True)
    (directory / "a.txt").write_text("secret")
    (directory / "tree" / "t.txt").write_text("outside tree")
    return directory


@pytest.fixture
def ws(tmp_path: pathlib.Path, resolution: str) -> Iterator[Workspace]:
    root = tmp_path / "root"
    (root / "src" / "tree").mkdir(parents=True)
    (root / "src" / "a.txt").write_text("inside")
    (root / "src" / "tree" / "t.txt").write_text("inside tree")
    with Workspace(root, fold_case=False, unicode_form="none") as workspace:
        yield workspace


def swap_after_check(
    monkeypatch: pytest.MonkeyPatch,
    ws: Workspace,
    spelling: str,
    swap: Callable[[], None],
) -> list[bool]:
    """Run ``swap`` right after the workspace resolved ``spelling``; returns [swapped?]."""
    swapped = [False]
    for name in ("_locate_parts", "locate"):
        original = getattr(Workspace, name, None)
        if original is None:
            continue

        def resolve_then_swap(
            self: Workspace, p: Any, _original: Any = original, **kwargs: Any
        ) -> Any:
            result = _original(self, p, **kwargs)
            if p == spelling and not swapped[0]:
                swapped[0] = True
                swap()
            return result

        monkeypatch.setattr(Workspace, name, resolve_then_swap)
    return swapped


def link_instead(ws: Workspace, relative: str, target: pathlib.Path) -> Callable[[], None]:
    """Rename ``relative`` away and put a link to ``target`` in its place."""

    def swap() -> None:
        here = ws.root / relative
        here.rename(here.with_name(here.name + ".moved"))
        here.symlink_to(target)

    return swap


def snapshot(directory: pathlib.Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): p.read_text() if p.is_file() else "/"
        for p in sorted(directory.rglob("*"))
    }


async def test_read_refuses_a_directory_swapped_for_a_link(
    ws: Workspace, outside: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs = FileAccess(ws, [exclusive(EVERYTHING)])
    swapped = swap_after_check(monkeypatch, ws, "src/a.txt", link_instead(ws, "src", outside))
    with pytest.raises(PathChangedError) as info:
        await fs.read_text("src/a.txt")
    assert swapped[0]
    message = str(info.value)
    assert message.startswith("can't read 'src/a.txt': 'src' is a symbolic link now")
    assert "nothing was touched" in message


async def test_read_refuses_a_file_swapped_for_a_link(
    ws: Workspace, outside: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs = FileAccess(ws, [exclusive(EVERYTHING)])
    swap_after_check(monkeypatch, ws, "src/a.txt", link_instead(ws, "src/a.txt", outside / "a.txt"))
    with pytest.raises(PathChangedError, match=re.escape("'src/a.txt' is a symbolic link now")):
        await fs.read_bytes("src/a.txt")


async def test_write_refuses_a_directory_swapped_for_a_link(
    ws: Workspace, outside: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(outside)
    fs = FileAccess(ws, [exclusive(EVERYTHING)])
    swap_after_check(monkeypatch, ws, "src/a.txt", link_instead(ws, "src", outside))
    with pytest.raises(PathChangedError, match=re.escape("can't write 'src/a.txt'")):
        await fs.write_text("src/a.txt", "overwritten")
    assert snapshot(outside) == before


async def test_write_with_parents_refuses_a_directory_swapped_for_a_link(
    ws: Workspace, outside: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(outside)
    fs = FileAccess(ws, [exclusive(EVERYTHING)])
    swap_after_check(monkeypatch, ws, "src/new/deep.txt", link_instead(ws, "src", outside))
    with pytest.raises(PathChangedError):
        await fs.write_text("src/new/deep.txt", "planted", parents=True)
    assert snapshot(outside) == before


async def test_write_refuses_a_file_swapped_for_a_link(
    ws: Workspace, outside: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(outside)
    fs = FileAccess(ws, [exclusive(EVERYTHING)])
    swap_after_check(monkeypatch, ws, "src/a.txt", link_instead(ws, "src/a.txt", outside / "a.txt"))
    with pytest.raises(PathChangedError):
        await fs.write_text("src/a.txt", "overwritten")
    assert snapshot(outside) == before
    assert (ws.root / "src" / "a.txt").is_symlink()


async def test_delete_refuses_a_directory_swapped_for_a_link(
    ws: Workspace, outside: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(outside)
    fs = FileAccess(ws, [exclusive(EVERYTHING)])
    swap_after_check(monkeypatch, ws, "src/a.txt", link_instead(ws, "src", outside))
    with pytest.raises(PathChangedError, match=re.escape("can't delete 'src/a.txt'")):
        await fs.delete("src/a.txt")
    assert snapshot(outside) == before


async def test_deleting_a_tree_swapped_for_a_link_deletes_nothing_outside(
    ws: Workspace, outside: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(outside)
    fs = FileAccess(ws, [exclusive(EVERYTHING)])
    swap_after_check(monkeypatch, ws, "src/tree", link_instead(ws, "src/tree", outside / "tree"))
    with pytest.raises(PathChangedError):
        await fs.delete("src/tree")
    assert snapshot(outside) == before


async def test_move_refuses_a_directory_swapped_for_a_link(
    ws: Workspace, outside: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(outside)
    fs = FileAccess(ws, [exclusive(EVERYTHING)])
    swap_after_check(monkeypatch, ws, "src/a.txt", link_instead(ws, "src", outside))
    with pytest.raises(PathChangedError, match=re.escape("can't move 'src/a.txt'")):
        await fs.move("src/a.txt", "stolen.txt")
    assert snapshot(outside) == before
    assert not (ws.root / "stolen.txt").exists()


async def test_move_refuses_a_destination_directory_swapped_for_a_link(
    ws: Workspace, outside: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(outside)
    fs = FileAccess(ws, [exclusive(EVERYTHING)])
    (ws.root / "dst").mkdir()
    swap_after_check(monkeypatch, ws, "dst/a.txt", link_instead(ws, "dst", outside))
    with pytest.raises(PathChangedError):
        await fs.move("src/tree", "dst/a.txt")
    assert snapshot(outside) == before


async def test_mkdir_refuses_a_directory_swapped_for_a_link(
    ws: Workspace, outside: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(outside)
    fs = FileAccess(ws, [exclusive(EVERYTHING)])
    swap_after_check(monkeypatch, ws, "src/new/deeper", link_instead(ws, "src", outside))
    with pytest.raises(PathChangedError, match="can't create 'src/new/deeper'"):
        await fs.mkdir("src/new/deeper")
    assert snapshot(outside) == before


@pytest.mark.parametrize(
    "operation", ["listdir", "list_entries", "walk", "stat", "exists", "is_file", "is_dir"]
)
async def test_looking_refuses_a_directory_swapped_for_a_link(
    ws: Workspace, outside: pathlib.Path, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    fs = FileAccess(ws, [exclusive(EVERYTHING)])
    spelling = "src/tree" if operation in ("listdir", "list_entries", "walk") else "src/a.txt"
    swap_after_check(monkeypatch, ws, spelling, link_instead(ws, "src", outside))
    with pytest.raises(PathChangedError):
        await getattr(fs, operation)(spelling)


async def test_no_read_through_a_directory_flipping_to_a_link_ever_leaves_the_root(
    ws: Workspace, outside: pathlib.Path
) -> None:
    """A real race: another thread flips ``src`` between the directory and a link outside."""
    fs = FileAccess(ws, [exclusive(EVERYTHING)])
    here, moved = ws.root / "src", ws.root / "src.real"
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            here.rename(moved)
            here.symlink_to(outside)
            here.unlink()
            moved.rename(here)

    flipper = threading.Thread(target=flip)
    flipper.start()
    seen: set[str] = set()
    try:
        for _ in range(300):
            try:
                seen.add(await fs.read_text("src/a.txt"))
                await fs.write_text("src/a.txt", "inside")
            except (OSError, PathEscapeError):  # missing, escaping or changed mid-flip: all fine
                pass
    finally:
        stop.set()
        await anyio.to_thread.run_sync(flipper.join)
    assert "secret" not in seen
    assert (outside / "a.txt").read_text() == "secret"
    assert sorted(os.listdir(outside)) == ["a.txt", "tree"]

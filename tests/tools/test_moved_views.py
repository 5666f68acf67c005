"""An agent's own Move carries its view of the file (or of the files below a directory) to the
new path: a file it read and moved can be edited there without reading it again."""

from __future__ import annotations

import pathlib

import toolkernel as tk
from toolkernel.tools import FileView, StaleRule, builtin_tools
from toolkernel.tools._views import FileVersion


def call(id: str, name: str, /, **arguments: object) -> tk.ToolCall:
    return tk.ToolCall(id, name, arguments, read_first=True)


async def run(root: pathlib.Path, *calls: tk.ToolCall) -> list[tk.ToolResult]:
    async with tk.open_kernel(builtin_tools(), root=root) as kernel:
        return await kernel.run(list(calls))


async def test_a_file_read_then_moved_can_be_edited_at_its_new_path(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    results = await run(
        tmp_path,
        call("1", "Read", file_path="a.txt"),
        call("2", "Move", source="a.txt", destination="b.txt"),
        call("3", "Edit", file_path="b.txt", old_string="hello", new_string="bye"),
        call("4", "Edit", file_path="b.txt", old_string="bye", new_string="hi"),
    )
    assert [r.status.name for r in results] == ["OK"] * 4, [r.error for r in results]
    assert (tmp_path / "b.txt").read_text() == "hi\n"


async def test_files_read_then_moved_with_their_directory_can_be_edited(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "sub" / "a.txt").write_text("hello\n")
    results = await run(
        tmp_path,
        call("1", "Read", file_path="d/sub/a.txt"),
        call("2", "Move", source="d", destination="lib/e"),
        call("3", "Edit", file_path="lib/e/sub/a.txt", old_string="hello", new_string="bye"),
    )
    assert [r.status.name for r in results] == ["OK"] * 3, [r.error for r in results]


async def test_a_file_changed_before_the_move_is_stale_at_its_new_path(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        (read,) = await kernel.run([call("1", "Read", file_path="a.txt")])
        # A person, between the calls.
        (tmp_path / "a.txt").write_text("hello\nmore\n")
        moved, edited = await kernel.run(
            [
                call("2", "Move", source="a.txt", destination="b.txt"),
                call("3", "Edit", file_path="b.txt", old_string="hello", new_string="bye"),
            ]
        )
    assert read.ok and moved.ok
    assert not edited.ok and f"rule: {StaleRule.CHANGED.value}" in (edited.error or "")


def version(inode: int, ctime: int = 0) -> FileVersion:
    return FileVersion(1, inode, 10, 100, ctime)


def test_a_view_follows_a_move() -> None:
    view = FileView()
    view.saw(("a.txt",), version(1))
    view.saw(("other.txt",), version(2))
    view.moved(("a.txt",), ("b.txt",), version(1), version(1, ctime=5), directory=False)
    assert view.version(("a.txt",)) is None
    assert view.version(("b.txt",)) == version(1, ctime=5)
    # Seen as another version: that stays what was seen (it reads as changed, not unread).
    view.moved(("b.txt",), ("c.txt",), version(9), version(9, ctime=6), directory=False)
    assert view.version(("c.txt",)) == version(1, ctime=5)
    # What was seen at the destination was replaced.
    view.moved(("nothing.txt",), ("other.txt",), version(3), version(3), directory=False)
    assert view.version(("other.txt",)) is None
    assert len(view) == 1


def test_a_view_follows_a_directory_move() -> None:
    view = FileView()
    view.saw(("d", "a.txt"), version(1))
    view.saw(("d", "sub", "b.txt"), version(2))
    view.saw(("dd", "c.txt"), version(3))  # a sibling whose name begins alike
    view.saw(("e", "old.txt"), version(4))
    view.moved(("d",), ("e",), version(7), version(7), directory=True)
    assert view.version(("e", "a.txt")) == version(1)
    assert view.version(("e", "sub", "b.txt")) == version(2)
    assert view.version(("dd", "c.txt")) == version(3)
    assert view.version(("e", "old.txt")) is None
    assert view.version(("d", "a.txt")) is None

"""Every spelling of one file is one resource: calls that alias must serialize, others overlap.

The tools here only sleep for one second of trio's mock clock and record when they ran, so the
schedule the kernel chose can be read off exactly: serialized calls start one second apart,
overlapping ones start together. Some of them borrow the claims of the real built-in tools, so
what is checked is what those tools declare.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import attrs
import pytest
import trio

import toolkernel as tk
from toolkernel.locks import Claim
from toolkernel.tools import builtin_tools


@attrs.define
class Recorder:
    """When each call started and ended, on trio's clock."""

    spans: dict[str, tuple[float, float]] = attrs.field(factory=dict)

    async def work(self, ctx: tk.ToolContext) -> str:
        start = anyio.current_time()
        await anyio.sleep(1)
        self.spans[ctx.call_id] = (start, anyio.current_time())
        return "done"

    def start(self, call_id: str) -> float:
        return self.spans[call_id][0]

    def serialized(self, first: str, second: str) -> bool:
        return self.spans[second][0] >= self.spans[first][1]

    def overlapped(self, a: str, b: str) -> bool:
        (a0, a1), (b0, b1) = self.spans[a], self.spans[b]
        return a0 < b1 and b0 < a1


class Mirror(tk.Tool):
    """A stand-in for a built-in tool: the same arguments and claims; it only sleeps."""

    def __init__(self, original: tk.Tool, recorder: Recorder) -> None:
        self.original = original
        self.recorder = recorder
        super().__init__(name=original.name)

    async def run(self, ctx: tk.ToolContext, **arguments: Any) -> str:  # type: ignore[override]
        return await self.recorder.work(ctx)

    def parse_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return self.original.parse_arguments(arguments)

    def claims(self, arguments: Mapping[str, Any], key: Any) -> Sequence[Claim] | None:
        return self.original.claims(arguments, key)


def make_tools(recorder: Recorder) -> list[tk.Tool]:
    @tk.tool(writes=["path"])
    async def touch(ctx: tk.ToolContext, path: str) -> str:
        """Write a file (fake)."""
        return await recorder.work(ctx)

    @tk.tool(reads=["path"])
    async def look(ctx: tk.ToolContext, path: str) -> str:
        """Read a file (fake)."""
        return await recorder.work(ctx)

    mirrors = [Mirror(t, recorder) for t in builtin_tools() if t.name != "TodoWrite"]
    return [touch, look, *mirrors]


@pytest.fixture
def root(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_text("f\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "d1").mkdir()
    (tmp_path / "d1" / "x").write_text("x\n")
    return tmp_path


async def run(root: pathlib.Path, calls: list[tk.ToolCall]) -> Recorder:
    recorder = Recorder()
    async with tk.open_kernel(make_tools(recorder), root=root) as kernel:
        results = await kernel.run(calls)
    for result in results:
        assert result.status is tk.Status.OK, result.error
    return recorder


def touch(call_id: str, path: str) -> tk.ToolCall:
    return tk.ToolCall(call_id, "touch", {"path": path})


ABSOLUTE = "<absolute>"


@pytest.mark.parametrize(
    "spelling",
    [
        "./a/../a/f",
        "a//f",
        "a/f/",
        "./a/./f",
        "a/../a/../a/f",
        ABSOLUTE,
    ],
)
async def test_spellings_of_one_file_serialize(
    root: pathlib.Path, spelling: str, autojump_clock: trio.abc.Clock
) -> None:
    if spelling == ABSOLUTE:
        spelling = str(root / "a" / "f")
    recorder = await run(root, [touch("plain", "a/f"), touch("other", spelling)])
    assert recorder.serialized("plain", "other")
    assert recorder.start("other") == 1


async def test_different_files_overlap(root: pathlib.Path, autojump_clock: trio.abc.Clock) -> None:
    recorder = await run(root, [touch("f", "a/f"), touch("g", "a/g")])
    assert recorder.overlapped("f", "g")


async def test_a_symlink_and_its_target_conflict(
    root: pathlib.Path, autojump_clock: trio.abc.Clock
) -> None:
    os.symlink("a/f", root / "file-link")
    os.symlink("a", root / "dir-link")
    recorder = await run(
        root,
        [touch("target", "a/f"), touch("file-link", "file-link"), touch("dir-link", "dir-link/f")],
    )
    assert [recorder.start(c) for c in ("target", "file-link", "dir-link")] == [0, 1, 2]


async def test_dot_dot_after_a_symlink_climbs_out_of_its_target(
    root: pathlib.Path, autojump_clock: trio.abc.Clock
) -> None:
    (root / "d1" / "d2").mkdir()
    os.symlink("d1/d2", root / "deep-link")
    # Physically, deep-link/../x is d1/x (like `cd -P`), not ./x.
    recorder = await run(root, [touch("real", "d1/x"), touch("via-link", "deep-link/../x")])
    assert recorder.serialized("real", "via-link")


async def test_a_glob_over_a_directory_conflicts_with_creating_a_file_in_it(
    root: pathlib.Path, autojump_clock: trio.abc.Clock
) -> None:
    recorder = await run(
        root,
        [
            tk.ToolCall("glob", "Glob", {"pattern": "**/*.py", "path": "src"}),
            tk.ToolCall("create", "Write", {"file_path": "src/new.py", "content": ""}),
            tk.ToolCall("glob-again", "Glob", {"pattern": "*.py", "path": "./src/"}),
            tk.ToolCall("other", "Glob", {"pattern": "*", "path": "docs"}),
        ],
    )
    assert recorder.serialized("glob", "create")
    assert recorder.serialized("create", "glob-again")
    assert recorder.start("other") == 0  # a Glob elsewhere is not held up


async def test_grep_and_listdir_over_the_root_conflict_with_any_write(
    root: pathlib.Path, autojump_clock: trio.abc.Clock
) -> None:
    recorder = await run(
        root,
        [
            tk.ToolCall("grep", "Grep", {"pattern": "x"}),
            tk.ToolCall("ls", "ListDir", {}),
            tk.ToolCall("create", "Write", {"file_path": "docs/deep/new.md", "content": ""}),
        ],
    )
    assert recorder.overlapped("grep", "ls")
    assert recorder.start("create") == 1


async def test_moving_a_directory_conflicts_with_work_inside_source_and_destination(
    root: pathlib.Path, autojump_clock: trio.abc.Clock
) -> None:
    recorder = await run(
        root,
        [
            tk.ToolCall("move", "Move", {"source": "d1", "destination": "d2"}),
            touch("in-source", "d1/x"),
            touch("in-destination", "d2/y"),
            touch("elsewhere", "d3/z"),
        ],
    )
    assert recorder.serialized("move", "in-source")
    assert recorder.serialized("move", "in-destination")
    assert recorder.overlapped("in-source", "in-destination")
    assert recorder.start("elsewhere") == 0


async def test_a_move_waits_for_work_already_inside_either_end(
    root: pathlib.Path, autojump_clock: trio.abc.Clock
) -> None:
    recorder = await run(
        root,
        [
            tk.ToolCall("read", "Read", {"file_path": "d1/x"}),
            touch("write", "d2/y"),
            tk.ToolCall("move", "Move", {"source": "./d1/", "destination": "d2"}),
        ],
    )
    assert recorder.overlapped("read", "write")
    assert recorder.serialized("read", "move")
    assert recorder.serialized("write", "move")


async def test_read_of_one_file_and_edit_of_another_overlap(
    root: pathlib.Path, autojump_clock: trio.abc.Clock
) -> None:
    edit = {"file_path": "b", "old_string": "x", "new_string": "y"}
    recorder = await run(
        root,
        [
            tk.ToolCall("read-a", "Read", {"file_path": "a"}),
            tk.ToolCall("edit-b", "Edit", edit),
            tk.ToolCall("read-b", "Read", {"file_path": "b"}),
        ],
    )
    assert recorder.overlapped("read-a", "edit-b")
    assert recorder.serialized("edit-b", "read-b")


async def test_reads_of_one_file_share_it(
    root: pathlib.Path, autojump_clock: trio.abc.Clock
) -> None:
    recorder = await run(
        root,
        [
            tk.ToolCall("r1", "Read", {"file_path": "a/f"}),
            tk.ToolCall("r2", "Read", {"file_path": "./a//f"}),
            tk.ToolCall("l1", "look", {"path": "a"}),
        ],
    )
    assert {recorder.start(c) for c in ("r1", "r2", "l1")} == {0}

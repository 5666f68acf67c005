"""``FakeTool``: it takes the time it is told, fails when told, declares what it is told."""

from __future__ import annotations

import pathlib

import pytest

import toolkernel as tk
from toolkernel.testing import FakeTool, FakeToolError, tree_of


def test_claims_follow_the_declaration() -> None:
    def claims_of(tool: FakeTool, **arguments: object) -> object:
        return tool.claims(tool.parse_arguments(arguments), tk.path)

    assert claims_of(FakeTool("r", reads=True), paths=["a", "b/c"]) == [
        tk.reads("a"),
        tk.reads("b/c"),
    ]
    assert claims_of(FakeTool("w", writes=True), paths=["a"]) == [tk.writes("a")]
    assert claims_of(FakeTool("rw", reads=True, writes=True), paths=["a"]) == [tk.writes("a")]
    phone = tk.exclusive(tk.device("phone"))
    assert claims_of(FakeTool("tap", claims=[phone])) == [phone]
    assert claims_of(FakeTool("dyn", claims=lambda args: [tk.units(tk.pool("net"), 2)])) == [
        tk.units(tk.pool("net"), 2)
    ]
    assert claims_of(FakeTool("sync")) is None  # declares nothing: a barrier
    assert FakeTool("sync").declares_nothing and not FakeTool("r", reads=True).declares_nothing


async def test_durations_and_failures_are_as_scripted(autojump_clock: object) -> None:
    edit = FakeTool("edit", writes=True, duration=2)
    async with tk.open_kernel([edit]) as kernel:
        default, short, at_start, at_end = await kernel.run(
            [
                tk.ToolCall("c1", "edit", {"paths": ["a"]}),
                tk.ToolCall("c2", "edit", {"paths": ["b"], "duration": 0.5}),
                tk.ToolCall("c3", "edit", {"paths": ["c"], "fail": "start"}),
                tk.ToolCall("c4", "edit", {"paths": ["d"], "fail": "end"}),
            ]
        )
    assert default.run_time == 2 and short.run_time == 0.5
    assert (at_start.status, at_start.run_time, at_start.error_type) == (
        tk.Status.ERROR,
        0,
        "FakeToolError",
    )
    assert at_end.run_time == 2 and at_end.error == "edit call c4 failed at its end, as scripted"
    assert isinstance(at_end.exception, FakeToolError)


async def test_with_a_workspace_it_reads_and_appends_its_call_id(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.txt").write_text("first\n")
    read, edit = FakeTool("read", reads=True, duration=0), FakeTool("edit", writes=True, duration=0)
    async with tk.open_kernel([read, edit], root=tmp_path) as kernel:
        results = await kernel.run(
            [
                tk.ToolCall("c1", "edit", {"paths": ["a.txt", "sub/b.txt"]}),
                tk.ToolCall("c2", "read", {"paths": ["./a.txt", "missing"]}),
                tk.ToolCall("c3", "edit", {"paths": ["a.txt"], "fail": "end"}),
            ]
        )
    assert [r.output for r in results] == [
        {"a.txt": "first\n", "sub/b.txt": None},
        {"./a.txt": "first\nc1\n", "missing": None},
        None,
    ]
    assert (tmp_path / "a.txt").read_text() == "first\nc1\n"  # c3 failed before writing
    assert (tmp_path / "sub" / "b.txt").read_text() == "c1\n"


async def test_touch_files_false_leaves_the_workspace_alone(tmp_path: pathlib.Path) -> None:
    edit = FakeTool("edit", writes=True, duration=0, touch_files=False)
    async with tk.open_kernel([edit], root=tmp_path) as kernel:
        (result,) = await kernel.run([tk.ToolCall("c1", "edit", {"paths": ["a.txt"]})])
    assert result.ok and result.output is None
    assert tree_of(tmp_path) == {}


def test_bad_scripts_are_refused_like_any_bad_arguments() -> None:
    tool = FakeTool("edit", writes=True)
    with pytest.raises(tk.errors.InvalidArgumentsError):
        tool.parse_arguments({"fail": "middle"})

"""MCP tools are ordered against the kernel's own file tools, in emission order, by default:
against a real server (``tests/mcp/server.py`` over stdio) whose ``write_file`` and
``read_file`` say nothing but their names and ``readOnlyHint``.

Real processes, so the real clock; order and overlap are read from the calls' intervals.
"""

from __future__ import annotations

import pathlib
import sys
from typing import Any

import anyio
import pytest

import toolkernel as tk
from toolkernel.mcp import stdio_tools
from toolkernel.mcp._presets import PRESETS
from toolkernel.tools import builtin_tools

from .test_git_server import IDENTITY, make_repository
from .test_stdio_server import SERVER, before, overlap

# How the server is opened: its defaults (its root and working directory are the kernel's,
# so its path arguments are inferred), or told no roots (every call of it a barrier).


@pytest.fixture
def anyio_backend() -> str:
    """asyncio only, the loop most agents run: each test starts real servers, and the MCP
    layer runs on anyio alike on both loops (test_stdio_server.py runs on both)."""
    return "asyncio"


BEFORE_TO_AFTER = {"old_string": "before", "new_string": "after"}
OPENINGS = [
    pytest.param({}, id="inferred"),
    pytest.param({"roots": ()}, id="barrier"),
]


@pytest.mark.parametrize("opening", OPENINGS)
async def test_a_read_emitted_after_an_mcp_write_reads_what_it_wrote(
    tmp_path: pathlib.Path, opening: dict[str, Any]
) -> None:
    async with (
        stdio_tools(SERVER, cwd=tmp_path, **opening) as tools,
        tk.open_kernel([*builtin_tools(), *tools], root=tmp_path) as kernel,
    ):
        write, mcp_write, read = await kernel.run(
            [
                tk.ToolCall("w", "Write", {"file_path": "g.txt", "content": "old\n"}),
                tk.ToolCall(
                    "m", "write_file", {"path": "g.txt", "content": "new\n", "seconds": 0.2}
                ),
                tk.ToolCall("r", "Read", {"file_path": "g.txt"}),
            ]
        )
    assert [x.status for x in (write, mcp_write, read)] == [tk.Status.OK] * 3
    assert before(write, mcp_write) and before(mcp_write, read)
    assert "new" in read.text() and "old" not in read.text()


@pytest.mark.parametrize("opening", OPENINGS)
async def test_an_mcp_read_emitted_after_an_edit_reads_the_edit(
    tmp_path: pathlib.Path, opening: dict[str, Any]
) -> None:
    (tmp_path / "g.txt").write_text("before\n")
    async with (
        stdio_tools(SERVER, cwd=tmp_path, **opening) as tools,
        tk.open_kernel([*builtin_tools(), *tools], root=tmp_path) as kernel,
    ):
        edit, mcp_read = await kernel.run(
            [
                tk.ToolCall(
                    "e",
                    "Edit",
                    {"file_path": "g.txt", "old_string": "before", "new_string": "after"},
                ),
                tk.ToolCall("m", "read_file", {"path": "g.txt"}),
            ]
        )
    assert edit.status is tk.Status.OK and mcp_read.status is tk.Status.OK
    assert mcp_read.text() == "after\n"


async def test_inferred_claims_let_one_servers_writes_of_different_files_overlap(
    tmp_path: pathlib.Path,
) -> None:
    async with (
        stdio_tools(SERVER, cwd=tmp_path) as tools,
        tk.open_kernel([*builtin_tools(), *tools], root=tmp_path) as kernel,
    ):
        a, b, a_again, read_b = await kernel.run(
            [
                tk.ToolCall("a", "write_file", {"path": "a.txt", "content": "A", "seconds": 0.3}),
                tk.ToolCall("b", "write_file", {"path": "b.txt", "content": "B", "seconds": 0.3}),
                tk.ToolCall("a2", "write_file", {"path": "a.txt", "content": "AA"}),
                tk.ToolCall("rb", "Read", {"file_path": "b.txt"}),
            ]
        )
    assert all(x.status is tk.Status.OK for x in (a, b, a_again, read_b))
    assert overlap(a, b)
    assert before(a, a_again) and before(b, read_b)
    assert (tmp_path / "a.txt").read_text() == "AA"


async def test_a_serial_server_takes_one_call_at_a_time(tmp_path: pathlib.Path) -> None:
    async with (
        stdio_tools(SERVER, cwd=tmp_path, serial=True) as tools,
        tk.open_kernel([*builtin_tools(), *tools], root=tmp_path) as kernel,
    ):
        a, b, other = await kernel.run(
            [
                tk.ToolCall("a", "write_file", {"path": "a.txt", "content": "A", "seconds": 0.2}),
                tk.ToolCall("b", "write_file", {"path": "b.txt", "content": "B", "seconds": 0.2}),
                tk.ToolCall("c", "Write", {"file_path": "c.txt", "content": "C"}),
            ]
        )
    assert before(a, b)
    assert overlap(a, other)  # the server's lane only: the kernel's own tools go on


async def test_a_tool_that_says_nothing_waits_for_the_calls_before_it_and_holds_back_those_after(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "b.txt").write_text("b\n")
    async with (
        stdio_tools(SERVER, cwd=tmp_path) as tools,
        tk.open_kernel([*builtin_tools(), *tools], root=tmp_path) as kernel,
    ):
        write, barrier, read = await kernel.run(
            [
                tk.ToolCall("w", "Write", {"file_path": "a.txt", "content": "a\n"}),
                tk.ToolCall("k", "write", {"key": "k", "value": "v", "seconds": 0.2}),
                tk.ToolCall("r", "Read", {"file_path": "b.txt"}),
            ]
        )
    assert before(write, barrier) and before(barrier, read)


async def test_the_server_is_told_the_kernels_workspace_as_its_root(tmp_path: pathlib.Path) -> None:
    async with stdio_tools(SERVER, cwd=tmp_path) as tools, tk.open_kernel(tools) as kernel:
        (told,) = await kernel.run([tk.ToolCall("r", "roots", {})])
    assert told.text() == tmp_path.as_uri()
    elsewhere = tmp_path / "docs"
    elsewhere.mkdir()
    async with (
        stdio_tools(SERVER, cwd=tmp_path, roots=[elsewhere, tmp_path]) as tools,
        tk.open_kernel(tools) as kernel,
    ):
        (told,) = await kernel.run([tk.ToolCall("r", "roots", {})])
    assert told.text().splitlines() == [elsewhere.as_uri(), tmp_path.as_uri()]
    async with stdio_tools(SERVER, roots=()) as tools, tk.open_kernel(tools) as kernel:
        (told,) = await kernel.run([tk.ToolCall("r", "roots", {})])
    assert told.status is tk.Status.ERROR  # the capability is not declared


async def test_the_git_servers_preset_orders_its_calls_against_edits_of_the_repository(
    tmp_path: pathlib.Path,
) -> None:
    repo = make_repository(tmp_path)
    command = [sys.executable, "-m", "mcp_server_git"]
    at = {"repo_path": "repo"}
    async with (
        stdio_tools(command, cwd=tmp_path, env=IDENTITY) as tools,
        tk.open_kernel([*builtin_tools(), *tools], root=tmp_path) as kernel,
    ):
        # Every tool the published server lists takes its preset's entry.
        assert {t.remote_name: t.effects for t in tools} == dict(PRESETS["git"].tools)
        status, diff, edit, add, commit, other = await kernel.run(
            [
                tk.ToolCall("s", "git_status", at),
                tk.ToolCall("d", "git_diff_unstaged", at),
                tk.ToolCall(
                    "e",
                    "Edit",
                    {"file_path": "repo/notes.txt", "old_string": "first", "new_string": "one"},
                ),
                tk.ToolCall("a", "git_add", {**at, "files": ["notes.txt"]}),
                tk.ToolCall("c", "git_commit", {**at, "message": "renamed"}),
                tk.ToolCall("o", "Write", {"file_path": "elsewhere.txt", "content": "x"}),
            ]
        )
    assert all(x.status is tk.Status.OK for x in (status, diff, edit, add, commit, other))
    assert overlap(status, diff) and before(diff, edit) and before(edit, add)
    assert before(add, commit)
    assert overlap(status, other)  # outside the repository: not held back
    shown = await anyio.run_process(["git", "-C", str(repo), "show", "HEAD:notes.txt"])
    assert shown.stdout == b"one\n"

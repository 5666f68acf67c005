"""A published MCP server through the kernel: ``mcp-server-git`` (a test dependency), started by
the test over stdio on a temporary repository it makes with ``git``.

Its read-only tools (``git_status``, ``git_diff_unstaged``, ``git_log``) say
``readOnlyHint: true``; ``git_add``, ``git_commit`` and ``git_checkout`` say false. Real
processes, so the real clock; order and overlap are read from the calls' intervals.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import toolkernel as tk
from toolkernel.mcp import stdio_tools

from .test_stdio_server import before, overlap

IDENTITY = {"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com"}
IDENTITY |= {"GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com"}


def make_repository(root: pathlib.Path) -> pathlib.Path:
    repo = root / "repo"
    repo.mkdir()
    (repo / "notes.txt").write_text("first\n")
    for command in (["init", "-q"], ["add", "notes.txt"], ["commit", "-q", "-m", "first"]):
        subprocess.run(["git", "-C", str(repo), *command], check=True, env=os.environ | IDENTITY)
    return repo


async def test_git_reads_overlap_writes_serialize_and_errors_are_results(
    tmp_path: pathlib.Path,
) -> None:
    repo = make_repository(tmp_path)
    (repo / "notes.txt").write_text("first\nsecond\n")
    command = [sys.executable, "-m", "mcp_server_git", "--repository", str(repo)]
    at = {"repo_path": str(repo)}
    async with stdio_tools(command, env=IDENTITY) as tools, tk.open_kernel(tools) as kernel:
        assert {t.name: t.read_only_hint for t in tools if t.name in ("git_log", "git_add")} == {
            "git_log": True,
            "git_add": False,
        }
        status, diff, add, commit, log, checkout, no_files = await kernel.run(
            [
                tk.ToolCall("s", "git_status", at),
                tk.ToolCall("d", "git_diff_unstaged", at),
                tk.ToolCall("a", "git_add", {**at, "files": ["notes.txt"]}),
                tk.ToolCall("c", "git_commit", {**at, "message": "second line"}),
                tk.ToolCall("l", "git_log", {**at, "max_count": 5}),
                tk.ToolCall("x", "git_checkout", {**at, "branch_name": "no-such-branch"}),
                tk.ToolCall("n", "git_add", {**at, "files": []}),
            ]
        )
    for result in (status, diff, add, commit, log):
        assert result.status is tk.Status.OK, result.error
    assert "notes.txt" in status.output and "+second" in diff.output
    assert overlap(status, diff)  # both read-only: a shared lease on the server
    assert before(diff, add) and before(add, commit) and before(commit, log)
    assert "second line" in log.output and "first" in log.output
    assert checkout.status is tk.Status.ERROR and checkout.error_type == "MCPToolError"
    assert "no-such-branch" in (checkout.error or "")
    assert no_files.error_type == "InvalidArgumentsError"  # minItems, checked before the server
    assert "git_add argument 'files'" in (no_files.error or "")

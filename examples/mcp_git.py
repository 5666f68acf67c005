# What to watch: an MCP server's tools through the kernel, beside the built-in file tools.
#
# mcp-server-git (the reference MCP server for git, from PyPI) runs over stdio on a scratch
# repository. Left alone, the kernel's preset for it decides its claims: git_status, git_log and
# the diffs read the repository (repo_path) and git_add and git_commit write all of it, so an
# Edit of a file in it is ordered against them. This example declares finer claims instead, one
# function for every tool of the server, as you would for a server with no preset: git reads
# the whole workspace, and its writes go to .git. Now, in the batch below, as a model might
# emit it:
#
# - git_status and git_log run together (both read);
# - the Edit of notes.txt waits for them (it writes a file they read), and git_diff_unstaged,
#   emitted after the Edit, waits for it, so it shows the edit;
# - git_add and git_commit take .git one after the other, in the order emitted.
#
# The live lines show each call start (▶) and end (■), and what it waited for; the chart at the
# end has a row per call: dots while it waited for its leases, hashes while it ran.
#
# Needs toolkernel[mcp] and mcp-server-git (the dev set-up installs both). Runs under asyncio;
# pass --trio for trio. Run: .venv/bin/python examples/mcp_git.py

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

import anyio

import toolkernel as tk
from toolkernel.mcp import MCPTool, stdio_tools
from toolkernel.tools import builtin_tools
from toolkernel.trace import Timeline

IDENTITY = {
    "GIT_AUTHOR_NAME": "Example",
    "GIT_AUTHOR_EMAIL": "example@example.com",
    "GIT_COMMITTER_NAME": "Example",
    "GIT_COMMITTER_EMAIL": "example@example.com",
}


def git_claims(tool: MCPTool, arguments: Mapping[str, Any]) -> list[tk.Claim]:
    """Every git tool reads the working tree; the ones that change something write .git."""
    if tool.read_only_hint:
        return [tk.reads(".")]
    return [tk.reads("."), tk.writes(".git")]


def scratch_repository(root: str) -> None:
    with open(os.path.join(root, "notes.txt"), "w") as notes:
        notes.write("first line\n")
    for command in (["init", "-q"], ["add", "notes.txt"], ["commit", "-q", "-m", "first"]):
        subprocess.run(["git", "-C", root, *command], check=True, env=os.environ | IDENTITY)


async def main() -> None:
    with tempfile.TemporaryDirectory() as repo:
        scratch_repository(repo)
        server = [sys.executable, "-m", "mcp_server_git", "--repository", repo]
        at = {"repo_path": repo}
        async with stdio_tools(server, claims=git_claims, env=IDENTITY) as git_tools:
            print(f"{len(git_tools)} tools from the MCP server {git_tools[0].server!r}")
            timeline = Timeline()
            async with tk.open_kernel([*builtin_tools(), *git_tools], root=repo) as kernel:
                kernel.add_listener(timeline)
                results = await kernel.run(
                    [
                        tk.ToolCall("c1", "git_status", at),
                        tk.ToolCall("c2", "git_log", {**at, "max_count": 3}),
                        tk.ToolCall(
                            "c3",
                            "Edit",
                            {
                                "file_path": "notes.txt",
                                "old_string": "first line",
                                "new_string": "first line, edited",
                            },
                        ),
                        tk.ToolCall("c4", "git_diff_unstaged", at),
                        tk.ToolCall("c5", "git_add", {**at, "files": ["notes.txt"]}),
                        tk.ToolCall("c6", "git_commit", {**at, "message": "Edit the notes"}),
                        tk.ToolCall("c7", "git_log", {**at, "max_count": 3}),
                    ]
                )
        print()
        print(timeline.chart())
        print()
        for result in results:
            assert result.ok, result.error
        diff, log = results[3].output, results[6].output
        print("the diff saw the edit:", "+first line, edited" in diff)
        print("the last log has the commit:", "Edit the notes" in log)
        assert "+first line, edited" in diff and "Edit the notes" in log


if __name__ == "__main__":
    anyio.run(main, backend="trio" if "--trio" in sys.argv else "asyncio")

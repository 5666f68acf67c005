"""The MCP reference servers published on npm (filesystem, memory), through the kernel beside
its own file tools: their presets are found by the names they give themselves, the filesystem
server takes the kernel's workspace as its root, and its calls keep emission order with
``Write``/``Edit``/``Read`` of the same files.

The servers are installed once from the npm registry into ``.venv/mcp-servers`` (pinned
versions); the tests are skipped where there is no ``npm``.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import shutil
import subprocess
from collections.abc import Iterator

import pytest

import toolkernel as tk
from toolkernel.mcp import stdio_tools
from toolkernel.mcp._presets import PRESETS
from toolkernel.tools import builtin_tools

from .test_stdio_server import before, overlap

PACKAGES = ["@modelcontextprotocol/server-filesystem@2026.8.31"]
PACKAGES += ["@modelcontextprotocol/server-memory@2026.8.31"]
NEW_TO_EDITED = {"old_string": "new", "new_string": "edited"}
PLACE = pathlib.Path(__file__).resolve().parents[2] / ".venv" / "mcp-servers"


@pytest.fixture(scope="session")
def node_bin() -> Iterator[pathlib.Path]:
    """The directory of the installed servers' programs."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("needs npm, to install the reference MCP servers")
    stamp, failed = PLACE / "installed", PLACE / "failed"
    # Test processes running side by side install once, and give up together: the id of this
    # test run (pytest-xdist's, shared by its workers) marks an install that failed in it.
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", str(os.getpid()))
    PLACE.mkdir(parents=True, exist_ok=True)
    with open(PLACE / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if failed.exists() and failed.read_text().startswith(run + "\n"):
            pytest.skip(failed.read_text().split("\n", 1)[1])
        if not stamp.exists() or stamp.read_text() != " ".join(PACKAGES):
            quiet = ["--silent", "--no-audit", "--no-fund"]
            try:
                subprocess.run(
                    [npm, "install", *quiet, "--prefix", str(PLACE), *PACKAGES],
                    check=True,
                    timeout=120,  # a few seconds where the npm registry can be reached
                )
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
                why = f"npm could not install the reference MCP servers from its registry ({exc})"
                failed.write_text(f"{run}\n{why}")
                pytest.skip(why)
            stamp.write_text(" ".join(PACKAGES))
    yield PLACE / "node_modules" / ".bin"


@pytest.fixture
def anyio_backend() -> str:
    """asyncio only: each test starts real servers (test_stdio_server.py runs both loops)."""
    return "asyncio"


async def test_the_filesystem_server_works_in_the_kernels_workspace_in_emission_order(
    node_bin: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    # Started on another directory: the roots the kernel's side gives it replace it.
    command = [str(node_bin / "mcp-server-filesystem"), str(tmp_path)]
    async with (
        stdio_tools(command, cwd=workspace) as tools,
        tk.open_kernel([*builtin_tools(), *tools], root=workspace) as kernel,
    ):
        assert {t.remote_name: t.effects for t in tools} == dict(PRESETS["filesystem"].tools)
        results = await kernel.run(
            [
                tk.ToolCall("w", "Write", {"file_path": "g.txt", "content": "old\n"}),
                tk.ToolCall("m", "write_file", {"path": "g.txt", "content": "new\n"}),
                tk.ToolCall("r", "Read", {"file_path": "g.txt"}),
                tk.ToolCall("e", "Edit", {"file_path": "g.txt", **NEW_TO_EDITED}),
                tk.ToolCall("m2", "read_text_file", {"path": "g.txt"}),
                tk.ToolCall("o", "write_file", {"path": "other.txt", "content": "o\n"}),
                tk.ToolCall("l", "list_allowed_directories", {}),
            ]
        )
    write, mcp_write, read, edit, mcp_read, other, allowed = results
    assert all(x.status is tk.Status.OK for x in results), [x.error for x in results]
    assert before(write, mcp_write) and before(mcp_write, read) and before(read, edit)
    assert before(edit, mcp_read)
    assert "new" in read.text() and mcp_read.text() == "edited\n"
    assert overlap(write, other)  # another file: not held back
    assert str(workspace) in allowed.text() and str(tmp_path) + "\n" not in allowed.text()
    assert set(os.listdir(workspace)) == {"g.txt", "other.txt"}


async def test_the_memory_servers_changes_hold_its_graph_and_reads_share_it(
    node_bin: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    memory = {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
    entity = {"name": "kernel", "entityType": "project", "observations": ["leases"]}
    async with (
        stdio_tools([str(node_bin / "mcp-server-memory")], env=memory) as tools,
        tk.open_kernel([*builtin_tools(), *tools], root=tmp_path) as kernel,
    ):
        assert {t.remote_name: t.effects for t in tools} == dict(PRESETS["memory"].tools)
        create, search, read_graph, file_write = await kernel.run(
            [
                tk.ToolCall("c", "create_entities", {"entities": [entity]}),
                tk.ToolCall("s", "search_nodes", {"query": "kernel"}),
                tk.ToolCall("g", "read_graph", {}),
                tk.ToolCall("w", "Write", {"file_path": "notes.txt", "content": "n\n"}),
            ]
        )
    assert all(x.status is tk.Status.OK for x in (create, search, read_graph, file_write))
    assert before(create, search) and before(create, read_graph)
    assert "leases" in search.text() and "leases" in read_graph.text()
    assert overlap(create, file_write)  # it touches no file of the workspace

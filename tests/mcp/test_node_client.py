"""MCP file servers driven by a client on the official TypeScript SDK (``node/workload.mjs``,
``node/client.mjs``): several sessions at once, each its own agent, appending lines to shared
files by read-modify-write (Read the file, Edit its last line into that line and a new one).

- The reference filesystem server (npm ``@modelcontextprotocol/server-filesystem``), one process
  per session: it writes each file whole (a rename), but nothing orders one session's edit
  against another's read, so it may lose edits. Its losses are reported, not asserted.
- ``python -m toolkernel mcp`` (the tests named ``test_toolkernel_...``): one process per
  session over stdio, and several sessions on one or more servers over streamable HTTP, all on
  one root. Every edit reported successful must be in its file, right after the line its
  session read last (so in each session's order), with no line torn or added, and the only
  refusals must be stale views (an Edit of a file another session changed since this one read
  it), each retried after a fresh Read. Also: its tools and annotations, ``cat -n`` reads, a
  stale view refused across two processes, ``Batch``, and the HTTP bearer token.

Real processes, so the real clock; the Node packages are installed once into
``.venv/mcp-node`` (``node_packages.py``), and the tests are skipped where there is no ``npm``.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import secrets
from collections.abc import Sequence
from contextlib import AbstractContextManager, ExitStack
from typing import Any

import anyio
import pytest

from .mcp_http import SERVER, serving_http
from .node_packages import CLIENT, WORKLOAD, Tally, seed, tally
from .node_packages import node_modules as node_modules  # the fixture, for the tests below

SESSIONS, EDITS = 4, 10


@pytest.fixture
def anyio_backend() -> str:
    """asyncio only: each test starts real servers and a Node client."""
    return "asyncio"


@pytest.fixture(scope="session")
def toolkernel_mcp() -> list[str]:
    """The toolkernel MCP server's command."""
    return SERVER


@pytest.fixture
def root(tmp_path: pathlib.Path) -> pathlib.Path:
    directory = (tmp_path / "root").resolve()
    directory.mkdir()
    return directory


async def node(script: pathlib.Path, spec: dict[str, Any], modules: pathlib.Path) -> Any:
    """Run ``script`` on ``spec``; its JSON answer (``{"fatal": ...}`` included)."""
    env = {**os.environ, "TOOLKERNEL_MCP_NODE_MODULES": str(modules)}
    with anyio.fail_after(180):
        done = await anyio.run_process(
            ["node", str(script)], input=json.dumps(spec).encode(), env=env, check=False
        )
    lines = done.stdout.decode().strip().splitlines()
    assert lines, f"{script.name} printed nothing; stderr: {done.stderr.decode()[-2000:]}"
    return json.loads(lines[-1])


async def workload(
    servers: Sequence[dict[str, Any]],
    files: Sequence[str],
    dialect: str,
    modules: pathlib.Path,
    *,
    sessions: int = SESSIONS,
    edits: int = EDITS,
) -> dict[str, Any]:
    spec = {
        "servers": list(servers),
        "sessions": sessions,
        "edits": edits,
        "files": list(files),
        "dialect": dialect,
    }
    summary: dict[str, Any] = await node(WORKLOAD, spec, modules)
    assert "fatal" not in summary, summary["fatal"]
    assert summary["attempted"] == sessions * edits
    return summary


def assert_every_edit_landed(summary: dict[str, Any], files: Sequence[str]) -> Tally:
    """What toolkernel's server must do: every edit made (refused only as stale and retried),
    each in its file right after the line its session read last, none torn, none made up."""
    assert summary["errors"] == [], summary["errors"]
    assert summary["refusals"]["other"] == 0, summary["other_refusals"]
    assert summary["gave_up"] == 0
    assert summary["succeeded"] == summary["attempted"]
    found = tally(files, summary["landed"])
    assert found.lost == () and found.added == () and found.torn == (), found
    assert found.out_of_order == () and found.misplaced == (), found
    return found


# The reference server.


@pytest.mark.parametrize("file_count", [1, 2])
async def test_the_reference_server_writes_files_whole_and_its_lost_edits_are_counted(
    node_modules: pathlib.Path,
    root: pathlib.Path,
    file_count: int,
    record_property: Any,
) -> None:
    files = seed(root, file_count)
    server = {"command": [str(node_modules / ".bin" / "mcp-server-filesystem"), str(root)]}
    summary = await workload([server], files, "reference", node_modules)
    found = tally(files, summary["landed"])
    lost = len(found.lost)
    record_property("lost_edits", lost)
    print(
        f"reference server, {file_count} file(s): {lost} of {found.reported} reported edits "
        f"lost, {len(found.misplaced)} put after another line than the one their session read"
    )
    # What is true of it: a session's calls all answer, and each write replaces a file whole (a
    # rename), so no file is torn and no line appears that no edit reported. Edits may be lost.
    assert summary["errors"] == [], summary["errors"]
    assert found.torn == () and found.added == (), found


async def test_the_node_client_lists_and_calls_the_reference_servers_tools(
    node_modules: pathlib.Path, root: pathlib.Path
) -> None:
    (file,) = seed(root, 1)
    server = {"command": [str(node_modules / ".bin" / "mcp-server-filesystem"), str(root)]}
    answer = await node(
        CLIENT,
        {"server": server, "tool": "read_text_file", "arguments": {"path": file}},
        node_modules,
    )
    names = {tool["name"] for tool in answer["tools"]}
    assert {"read_text_file", "edit_file", "write_file"} <= names
    assert answer["result"] == {
        "isError": False,
        "text": "header f0.txt\n",
        "content": [{"type": "text", "text": "header f0.txt\n"}],
        "structuredContent": {"content": "header f0.txt\n"},
    }


# toolkernel's server.


def http_server(command: list[str], root: pathlib.Path, token: str) -> AbstractContextManager[str]:
    """The server on ``root`` over HTTP on a free loopback port, with ``token``; its URL."""
    assert command == SERVER, command
    return serving_http(root, token)


def stdio(command: list[str], root: pathlib.Path) -> dict[str, Any]:
    return {"command": [*command, "--root", str(root)]}


@pytest.mark.parametrize("file_count", [1, 2])
async def test_toolkernel_server_over_stdio_a_process_a_session_loses_no_edit(
    toolkernel_mcp: list[str], node_modules: pathlib.Path, root: pathlib.Path, file_count: int
) -> None:
    files = seed(root, file_count)
    summary = await workload([stdio(toolkernel_mcp, root)], files, "toolkernel", node_modules)
    assert_every_edit_landed(summary, files)


@pytest.mark.parametrize("servers", [1, 2])
async def test_toolkernel_server_over_http_sessions_on_one_root_lose_no_edit(
    toolkernel_mcp: list[str], node_modules: pathlib.Path, root: pathlib.Path, servers: int
) -> None:
    files = seed(root, 2)
    token = secrets.token_urlsafe(16)
    with ExitStack() as stack:
        urls = [
            stack.enter_context(http_server(toolkernel_mcp, root, token)) for _ in range(servers)
        ]
        summary = await workload(
            [{"url": url, "token": token} for url in urls], files, "toolkernel", node_modules
        )
    assert_every_edit_landed(summary, files)


async def test_toolkernel_servers_over_http_and_stdio_on_one_root_share_their_leases(
    toolkernel_mcp: list[str], node_modules: pathlib.Path, root: pathlib.Path
) -> None:
    (file,) = seed(root, 1)
    token = secrets.token_urlsafe(16)
    with http_server(toolkernel_mcp, root, token) as url:
        servers = [{"url": url, "token": token}, stdio(toolkernel_mcp, root)]
        summary = await workload(servers, [file], "toolkernel", node_modules, sessions=6)
    assert_every_edit_landed(summary, [file])


async def test_toolkernel_server_lists_its_tools_and_reads_cat_n_lines(
    toolkernel_mcp: list[str], node_modules: pathlib.Path, root: pathlib.Path
) -> None:
    (file,) = seed(root, 1)
    answer = await node(
        CLIENT,
        {"server": stdio(toolkernel_mcp, root), "tool": "Read", "arguments": {"file_path": file}},
        node_modules,
    )
    assert "fatal" not in answer, answer
    tools = {tool["name"]: tool for tool in answer["tools"]}
    assert {"Read", "Write", "Edit", "Batch"} <= set(tools)
    assert (tools["Read"].get("annotations") or {}).get("readOnlyHint") is True
    assert not (tools["Edit"].get("annotations") or {}).get("readOnlyHint")
    assert answer["result"]["isError"] is False
    assert answer["result"]["text"].startswith("     1\theader f0.txt")


async def test_toolkernel_server_refuses_an_edit_from_a_stale_view_until_it_is_read_again(
    toolkernel_mcp: list[str], node_modules: pathlib.Path, root: pathlib.Path
) -> None:
    (file,) = seed(root, 1)
    first = {"old_string": "header f0.txt\n", "new_string": "header f0.txt\none\n"}
    second = {"old_string": "header f0.txt\n", "new_string": "header f0.txt\ntwo\n"}
    calls = [
        (0, "Read", {"file_path": file}),
        (1, "Read", {"file_path": file}),
        (1, "Edit", {"file_path": file, **first}),
        (0, "Edit", {"file_path": file, **second}),  # session 0 saw the file before that
        (0, "Read", {"file_path": file}),
        (0, "Edit", {"file_path": file, **second}),
    ]
    spec = {
        "mode": "calls",
        "servers": [stdio(toolkernel_mcp, root)],  # two processes: one a session
        "sessions": 2,
        "calls": [{"session": s, "tool": t, "arguments": a} for s, t, a in calls],
    }
    answer = await node(WORKLOAD, spec, node_modules)
    assert "fatal" not in answer, answer
    results = answer["results"]
    assert [r.get("isError") for r in results] == [False, False, False, True, False, False]
    assert re.search(r"read it again", results[3]["text"], re.IGNORECASE), results[3]["text"]
    assert await anyio.Path(file).read_text() == "header f0.txt\ntwo\none\n"


async def test_toolkernel_server_runs_a_batch_of_calls(
    toolkernel_mcp: list[str], node_modules: pathlib.Path, root: pathlib.Path
) -> None:
    batch = [
        {"tool": "Write", "arguments": {"file_path": str(root / "a.txt"), "content": "alpha\n"}},
        {"tool": "Write", "arguments": {"file_path": str(root / "b.txt"), "content": "beta\n"}},
        {"tool": "Read", "arguments": {"file_path": str(root / "a.txt")}},
    ]
    answer = await node(
        CLIENT,
        {"server": stdio(toolkernel_mcp, root), "tool": "Batch", "arguments": {"calls": batch}},
        node_modules,
    )
    assert "fatal" not in answer, answer
    assert answer["result"]["isError"] is False, answer["result"]
    assert "alpha" in answer["result"]["text"]  # the Read, after the Write of its file
    assert await anyio.Path(root / "a.txt").read_text() == "alpha\n"
    assert await anyio.Path(root / "b.txt").read_text() == "beta\n"


@pytest.mark.parametrize("token", [None, "wrong"])
async def test_toolkernel_server_over_http_turns_away_a_client_without_its_token(
    toolkernel_mcp: list[str], node_modules: pathlib.Path, root: pathlib.Path, token: str | None
) -> None:
    with http_server(toolkernel_mcp, root, secrets.token_urlsafe(16)) as url:
        server = {"url": url} if token is None else {"url": url, "token": token}
        answer = await node(CLIENT, {"server": server}, node_modules)
    assert "fatal" in answer, answer

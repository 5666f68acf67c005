"""MCP tools over streamable HTTP: ``tests/mcp/server.py --http`` (the SDK's ``MCPServer`` on
uvicorn), started by each test on a free loopback port, reached with ``http_tools``.

Real processes, so the real clock; order and overlap are read from the calls' intervals.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
from collections.abc import Iterator

import anyio
import pytest

import toolkernel as tk
from toolkernel.mcp import MCPTool, http_tools
from toolkernel.tools import builtin_tools

from .test_stdio_server import before, overlap, tick

SERVER = [sys.executable, str(pathlib.Path(__file__).with_name("server.py")), "--http"]


@pytest.fixture
def anyio_backend() -> str:
    """asyncio only, the loop most agents run: the HTTP transport runs on anyio alike on both
    loops, and each test starts a real server."""
    return "asyncio"


@pytest.fixture
def server(tmp_path: pathlib.Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The server's URL and process, working in ``tmp_path``; stopped after the test."""
    process = subprocess.Popen(SERVER, cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield url, process
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


async def test_calls_over_http_keep_emission_order_and_read_only_calls_overlap(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = server
    async with http_tools(url) as tools, tk.open_kernel(tools) as kernel:
        by_name = {t.name: t for t in tools}
        assert isinstance(by_name["read"], MCPTool) and by_name["read"].server == "test-store"
        r1, r2, w1, w2, r3 = await kernel.run(
            [
                tk.ToolCall("r1", "read", {"key": "k", "seconds": 0.3}),
                tk.ToolCall("r2", "read", {"key": "k", "seconds": 0.3}),
                tk.ToolCall("w1", "write", {"key": "k", "value": "one", "seconds": 0.1}),
                tk.ToolCall("w2", "write", {"key": "k", "value": "two", "seconds": 0.1}),
                tk.ToolCall("r3", "read", {"key": "k"}),
            ]
        )
    assert [r.status for r in (r1, r2, w1, w2, r3)] == [tk.Status.OK] * 5
    assert overlap(r1, r2)
    assert before(r2, w1) and before(w1, w2) and before(w2, r3)
    assert r3.text() == "two"


async def test_a_server_over_http_is_told_roots_only_when_given_and_keys_absolute_paths(
    server: tuple[str, subprocess.Popen[str]], tmp_path: pathlib.Path
) -> None:
    url, _ = server
    async with http_tools(url) as tools, tk.open_kernel(tools) as kernel:
        (told,) = await kernel.run([tk.ToolCall("r", "roots", {})])
    assert told.status is tk.Status.ERROR  # no roots: the capability is not declared
    async with (
        http_tools(url, roots=[tmp_path]) as tools,
        tk.open_kernel([*builtin_tools(), *tools], root=tmp_path) as kernel,
    ):
        write = {t.name: t for t in tools}["write_file"]
        absolute = str(tmp_path / "a.txt")
        with tk.Workspace(tmp_path) as workspace:
            assert set(write.claims({"path": absolute, "content": ""}, workspace.key) or ()) == {
                tk.shared(write.device),
                tk.writes("a.txt"),
            }
            # Its working directory is unknown: a relative path is a barrier.
            assert tk.exclusive(tk.path(".")) in (
                write.claims({"path": "a.txt", "content": ""}, workspace.key) or ()
            )
        new = {"path": absolute, "content": "new", "seconds": 0.2}
        told, mcp_write, read = await kernel.run(
            [
                tk.ToolCall("t", "roots", {}),
                tk.ToolCall("m", "write_file", new),
                tk.ToolCall("r", "Read", {"file_path": "a.txt"}),
            ]
        )
    assert told.text() == tmp_path.as_uri()
    assert before(mcp_write, read) and "new" in read.text()


async def test_headers_go_with_every_request(server: tuple[str, subprocess.Popen[str]]) -> None:
    url, _ = server
    headers = {"Authorization": "Bearer s3cret"}
    async with http_tools(url, headers=headers) as tools, tk.open_kernel(tools) as kernel:
        (sent,) = await kernel.run([tk.ToolCall("h", "header", {"name": "Authorization"})])
    assert sent.text() == "Bearer s3cret"


async def test_a_server_killed_mid_call_fails_only_its_calls_and_the_kernel_goes_on(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, process = server
    async with (
        http_tools(url) as tools,
        tk.open_kernel([*tools, tick]) as kernel,
        anyio.create_task_group() as task_group,
    ):

        async def kill_soon() -> None:
            await anyio.sleep(0.3)
            process.kill()

        task_group.start_soon(kill_soon)
        stalled, ticked = await kernel.run(
            [
                tk.ToolCall("s", "stall", {"seconds": 30}),
                tk.ToolCall("t", "tick", {"seconds": 0.6}),
            ]
        )
        (later,) = await kernel.run([tk.ToolCall("l", "read", {"key": "k"})])
        (ticked_again,) = await kernel.run([tk.ToolCall("t2", "tick", {})])
    assert stalled.status is tk.Status.ERROR and stalled.error_type == "MCPServerGoneError"
    assert "while the call ran" in (stalled.error or "")
    assert ticked.status is tk.Status.OK and ticked_again.status is tk.Status.OK
    assert later.error_type == "MCPServerGoneError" and "earlier" in (later.error or "")


async def test_a_server_that_cannot_be_reached_or_a_bad_url_is_a_clear_error(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, process = server
    process.kill()
    process.wait()
    with pytest.raises(tk.errors.MCPServerGoneError, match="could not be reached"):
        async with http_tools(url):
            pass
    with pytest.raises(ValueError, match="http:// or https:// URL"):
        async with http_tools("127.0.0.1:8000/mcp"):
            pass
    with pytest.raises(TypeError):
        async with http_tools(8000):  # type: ignore[arg-type]
            pass

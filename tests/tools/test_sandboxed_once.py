"""A command with effects beyond the sandbox never runs twice: when a path it changed was
changed underneath it, its run is thrown away and its result says what happened, instead of
running it again (its POST sent twice). A command whose effects stay in the sandbox runs again,
as before.

A real HTTP server on loopback counts the requests; another writer, outside the kernel,
rewrites the file the command writes once the request has arrived. Real processes, so the real
clock.
"""

from __future__ import annotations

import http.server
import os
import pathlib
import shutil
import threading
from collections.abc import Iterator

import anyio
import pytest

import toolkernel as tk
from toolkernel import sandbox
from toolkernel.tools import builtin_tools

pytestmark = [
    pytest.mark.skipif(
        sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}"
    ),
    pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Counter(http.server.BaseHTTPRequestHandler):
    arrived: threading.Event
    methods: list[str]

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._answer()

    def _answer(self) -> None:
        type(self).methods.append(self.command)
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")
        type(self).arrived.set()

    def log_message(self, *arguments: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[Counter]]]:
    handler = type("Handler", (Counter,), {"arrived": threading.Event(), "methods": []})
    listening = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=listening.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listening.server_address[1]}/", handler
    finally:
        listening.shutdown()
        listening.server_close()


async def run_while_another_writes(
    root: pathlib.Path, command: str, handler: type[Counter]
) -> tk.ToolResult:
    """Run ``command``; once its request arrives, another writer rewrites g.txt."""

    def other_writer() -> None:
        assert handler.arrived.wait(30)
        replacement = root / "g.txt.new"
        replacement.write_text("theirs\n")
        replacement.replace(root / "g.txt")

    async with tk.open_kernel(builtin_tools(bash=True), root=root) as kernel:
        writer = threading.Thread(target=other_writer)
        writer.start()
        try:
            (result,) = await kernel.run([tk.ToolCall("b", "Bash", {"command": command})])
        finally:
            await anyio.to_thread.run_sync(writer.join)
    return result


async def test_a_command_that_posts_is_not_run_again_and_says_what_happened(
    tmp_path: pathlib.Path, server: tuple[str, type[Counter]]
) -> None:
    url, handler = server
    (tmp_path / "g.txt").write_text("before\n")
    command = f"curl -s -X POST -d x=1 {url}; sleep 0.5; echo done > g.txt; echo ran"
    result = await run_while_another_writes(tmp_path, command, handler)
    assert handler.methods == ["POST"]  # once
    assert result.status is tk.Status.ERROR
    error = result.error or ""
    assert "g.txt changed while the command ran" in error
    assert "nothing it changed in the workspace was kept (it had changed g.txt)" in error
    assert "it was not run again, since what it does reaches beyond the workspace" in error
    assert "its run (it succeeded) happened once" in error
    assert error.endswith("ok\nran")  # its output
    assert (tmp_path / "g.txt").read_text() == "theirs\n"  # the other writer's, whole


async def test_a_command_whose_effects_are_not_known_is_not_run_again(
    tmp_path: pathlib.Path, server: tuple[str, type[Counter]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A program the project's own rules say runs code they can't see: it might do anything.
    url, handler = server
    programs = tmp_path / "programs"
    programs.mkdir()
    (programs / "deploy").write_text(f"#!/bin/sh\ncurl -s {url}\n")
    (programs / "deploy").chmod(0o755)
    monkeypatch.setenv("PATH", f"{programs}{os.pathsep}{os.environ['PATH']}")
    root = tmp_path / "root"
    (root / ".toolkernel").mkdir(parents=True)
    (root / ".toolkernel" / "shell.toml").write_text(
        '[deploy]\nunknown-effects = "it runs the deployment script"\n'
    )
    (root / "g.txt").write_text("before\n")
    result = await run_while_another_writes(root, "deploy; sleep 0.5; echo done > g.txt", handler)
    assert handler.methods == ["GET"]  # once
    assert result.status is tk.Status.ERROR
    error = result.error or ""
    assert "is not known whole, and may reach beyond the workspace" in error
    assert "it runs the deployment script" in error
    assert (root / "g.txt").read_text() == "theirs\n"


async def test_a_command_that_only_fetches_runs_again(
    tmp_path: pathlib.Path, server: tuple[str, type[Counter]]
) -> None:
    url, handler = server
    (tmp_path / "g.txt").write_text("before\n")
    command = f"curl -s {url}; sleep 0.5; echo done > g.txt"
    result = await run_while_another_writes(tmp_path, command, handler)
    assert result.status is tk.Status.OK, result.error
    assert handler.methods == ["GET", "GET"]  # run again, holding the whole workspace
    assert "g.txt changed while the command ran" in result.text()
    assert (tmp_path / "g.txt").read_text() == "done\n"

"""``python -m toolkernel mcp`` through the official Python SDK's client, over stdio and HTTP,
and through raw frames where a client misbehaves: the tools and their annotations, one view per
session, edits of several sessions and server processes that all land, Batch, cancellation,
progress, clear errors, and the HTTP guard (bearer token, Origin)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import select
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from mcp import Client, ClientSession, StdioServerParameters
from toolkernel.errors import LeaseServiceError
from toolkernel.leases import find_service
from toolkernel.leases._start import find_or_start_service
from toolkernel.mcp._serving import ANNOTATIONS, BATCH, MAX_BATCH

from .mcp_http import serving_http

TOKEN = "test-token-of-this-suite"
READ_ONLY = {"Read", "Glob", "Grep", "ListDir"}


@pytest.fixture
def anyio_backend() -> str:
    """asyncio only: every test starts real server processes."""
    return "asyncio"


def _command(root: pathlib.Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "toolkernel", "mcp", "--root", str(root), *options]


@asynccontextmanager
async def stdio_session(root: pathlib.Path, *options: str) -> AsyncIterator[ClientSession]:
    """A session with a server process of its own on ``root``."""
    command = _command(root, *options)
    parameters = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def http_server(root: pathlib.Path, *options: str) -> AbstractContextManager[str]:
    """A server on ``root`` over HTTP, requiring :data:`TOKEN`; yields its URL."""
    return serving_http(root, TOKEN, *options)


@asynccontextmanager
async def http_session(url: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=60) as client,
        streamable_http_client(url, http_client=client) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        yield session


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


async def call(session: ClientSession, name: str, **arguments: Any) -> tuple[bool, str]:
    result = await session.call_tool(name, arguments)
    return not result.is_error, text(result)


async def test_it_lists_the_built_in_tools_with_truthful_annotations_and_a_batch_tool(
    tmp_path: pathlib.Path,
) -> None:
    async with stdio_session(tmp_path, "--leases", "none") as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(listed) == {*ANNOTATIONS, BATCH}
    for name, tool in listed.items():
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is (name in READ_ONLY), name
        assert tool.description, name
    assert listed["Bash"].annotations.open_world_hint is True
    assert listed["Write"].annotations.destructive_hint is True
    assert listed["Read"].input_schema["required"] == ["file_path"]
    items = listed[BATCH].input_schema["properties"]["calls"]
    assert items["maxItems"] == MAX_BATCH
    assert set(items["items"]["properties"]["tool"]["enum"]) == set(ANNOTATIONS)


async def test_each_session_is_one_agent_for_the_stale_view_rule(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    async with stdio_session(tmp_path) as first, stdio_session(tmp_path) as second:
        ok, said = await call(first, "Edit", file_path="a.txt", old_string="one", new_string="1")
        assert not ok and "Read it first" in said  # never read in this session
        assert (await call(first, "Read", file_path="a.txt"))[0]
        assert (await call(second, "Read", file_path="a.txt"))[0]
        assert (await call(first, "Edit", file_path="a.txt", old_string="one", new_string="1"))[0]
        # The second session read the file before the first changed it: refused, read again.
        ok, said = await call(second, "Edit", file_path="a.txt", old_string="1", new_string="2")
        assert not ok and re.search("read it again", said, re.IGNORECASE), said
        assert (await call(second, "Read", file_path="a.txt"))[1] == "     1\t1"
        assert (await call(second, "Edit", file_path="a.txt", old_string="1", new_string="2"))[0]
    assert (tmp_path / "a.txt").read_text() == "2\n"


async def test_a_client_of_the_sessionless_protocol_is_one_agent_over_stdio(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    command = _command(tmp_path, "--leases", "none", "--no-bash")
    parameters = StdioServerParameters(command=command[0], args=command[1:])
    async with Client(parameters) as client:  # mode="auto": 2026-07-28, no initialize
        assert not (await client.call_tool("Read", {"file_path": "a.txt"})).is_error
        edit = {"file_path": "a.txt", "old_string": "one", "new_string": "two"}
        result = await client.call_tool("Edit", edit)
        assert not result.is_error, text(result)
    assert (tmp_path / "a.txt").read_text() == "two\n"


@pytest.mark.parametrize("key", ["toolkernel/agent", "threadId"])
async def test_a_subagent_named_in_meta_keeps_a_view_of_its_own(
    tmp_path: pathlib.Path, key: str
) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    helper: Any = {key: "helper"}
    async with stdio_session(tmp_path, "--leases", "none") as session:
        await session.call_tool("Read", {"file_path": "a.txt"})  # the parent read it
        edit = {"file_path": "a.txt", "old_string": "one", "new_string": "two"}
        result = await session.call_tool("Edit", edit, meta=helper)
        assert result.is_error and "Read it first" in text(result)
        await session.call_tool("Read", {"file_path": "a.txt"}, meta=helper)
        result = await session.call_tool("Edit", edit, meta=helper)
        assert not result.is_error, text(result)


async def append_lines(session: ClientSession, name: str, lines: int) -> int:
    """Append ``lines`` lines to shared.txt by Read, then Edit of the last line; returns how
    many stale-view refusals it met (each followed by a fresh Read)."""
    refused = 0
    for n in range(lines):
        while True:
            ok, shown = await call(session, "Read", file_path="shared.txt")
            assert ok, shown
            last = shown.splitlines()[-1].split("\t", 1)[1]
            ok, said = await call(
                session,
                "Edit",
                file_path="shared.txt",
                old_string=last,
                new_string=f"{last}\n{name}-{n}",
            )
            if ok:
                break
            assert "read it again" in said.lower(), said  # the only refusal allowed
            refused += 1
    return refused


def assert_all_landed(path: pathlib.Path, names: list[str], lines: int) -> None:
    found = path.read_text().splitlines()
    expected = {f"{name}-{n}" for name in names for n in range(lines)}
    assert set(found[1:]) == expected and len(found) == 1 + len(expected), found
    for name in names:  # each session's lines in its own order
        own = [line for line in found if line.startswith(f"{name}-")]
        assert own == [f"{name}-{n}" for n in range(lines)]


async def test_edits_of_several_server_processes_on_one_root_all_land(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "shared.txt").write_text("start\n")
    names = ["p1", "p2", "p3"]
    async with (
        stdio_session(tmp_path) as s1,
        stdio_session(tmp_path) as s2,
        stdio_session(tmp_path) as s3,
        anyio.create_task_group() as tasks,
    ):
        assert find_service(tmp_path) is not None  # started by the first, found by the others
        for name, session in zip(names, (s1, s2, s3), strict=True):
            tasks.start_soon(append_lines, session, name, 6)
    assert_all_landed(tmp_path / "shared.txt", names, 6)


async def test_edits_of_several_http_sessions_on_one_server_all_land(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "shared.txt").write_text("start\n")
    names = ["h1", "h2", "h3", "h4"]
    with http_server(tmp_path, "--leases", "none") as url:
        async with anyio.create_task_group() as tasks:
            for name in names:

                async def one(name: str = name) -> None:
                    async with http_session(url) as session:
                        await append_lines(session, name, 5)

                tasks.start_soon(one)
    assert_all_landed(tmp_path / "shared.txt", names, 5)


async def test_a_batch_runs_its_calls_through_the_kernel_and_answers_in_order(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "b.txt").write_text("beta\n")
    calls = [
        {"tool": "Read", "arguments": {"file_path": "a.txt"}},
        {"tool": "Read", "arguments": {"file_path": "b.txt"}},
        {
            "tool": "Edit",
            "arguments": {"file_path": "a.txt", "old_string": "alpha", "new_string": "A"},
        },
        {
            "tool": "Edit",
            "arguments": {"file_path": "b.txt", "old_string": "beta", "new_string": "B"},
        },
        {"tool": "Read", "arguments": {"file_path": "a.txt"}},  # after the edit of a.txt
        {"tool": "Bash", "arguments": {"command": "cat a.txt b.txt > both.txt"}},
        {
            "tool": "Edit",
            "arguments": {"file_path": "gone.txt", "old_string": "x", "new_string": "y"},
        },
    ]
    async with stdio_session(tmp_path, "--leases", "none") as session:
        result = await session.call_tool(BATCH, {"calls": calls})
    assert not result.is_error  # one call failed, the others went through
    parts = re.split(r"^\[(\d+)\] ", text(result), flags=re.MULTILINE)[1:]
    numbers, bodies = parts[0::2], parts[1::2]
    assert numbers == [str(n) for n in range(1, 8)]
    assert bodies[0].startswith("Read: ok") and "alpha" in bodies[0]
    assert bodies[4].startswith("Read: ok") and "A" in bodies[4] and "alpha" not in bodies[4]
    assert bodies[6].startswith("Edit: error")
    assert (tmp_path / "both.txt").read_text() == "A\nB\n"


async def test_a_batch_written_as_json_text_is_read(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    calls = [
        {"tool": "Read", "arguments": json.dumps({"file_path": "a.txt"})},
        {"tool": "Read", "arguments": "{not json"},
    ]
    async with stdio_session(tmp_path, "--leases", "none", "--no-bash") as session:
        result = await session.call_tool(BATCH, {"calls": json.dumps(calls)})
    assert not result.is_error
    first, second = re.split(r"^\[2\] ", text(result), flags=re.MULTILINE)
    assert first.startswith("[1] Read: ok") and "alpha" in first
    assert second.startswith("Read: error"), second


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({}, "at least one call"),
        ({"calls": "[{'tool': 'Read'}]"}, "not a JSON list"),
        ({"calls": "[]"}, "at least one call"),
        ({"calls": [{"arguments": {}}]}, "call 1 has no tool name"),
        ({"calls": [{"tool": BATCH, "arguments": {"calls": []}}]}, "is a Batch"),
        ({"calls": [{"tool": "Read", "arguments": 7}]}, "not an object"),
        ({"calls": [{"tool": "Read", "arguments": {}}] * (MAX_BATCH + 1)}, "at most"),
        ({"calls": "[" * 100_000 + "]" * 100_000}, "not a JSON list"),  # past json's recursion
    ],
)
async def test_a_malformed_batch_is_an_error_result_saying_what_to_send(
    tmp_path: pathlib.Path, arguments: dict[str, Any], said: str
) -> None:
    async with stdio_session(tmp_path, "--leases", "none", "--no-bash") as session:
        result = await session.call_tool(BATCH, arguments)
        assert result.is_error and said in text(result), text(result)
        assert (await call(session, "ListDir"))[0]  # and it goes on serving


async def test_failures_are_error_results_and_the_server_goes_on(tmp_path: pathlib.Path) -> None:
    async with stdio_session(tmp_path, "--leases", "none", "--no-bash") as session:
        ok, said = await call(session, "Nope")
        assert not ok and "no tool named 'Nope'" in said and said.endswith(", and Batch")
        ok, said = await call(session, "Read")
        assert not ok and "file_path" in said
        ok, said = await call(session, "Read", file_path="../outside.txt")
        assert not ok and "outside" in said
        ok, said = await call(session, "Read", file_path="missing.txt")
        assert not ok and "does not exist" in said
        assert (await call(session, "Write", file_path="new.txt", content="x\n"))[0]


async def test_progress_says_when_a_call_starts_and_how_much_of_a_batch_is_done(
    tmp_path: pathlib.Path,
) -> None:
    heard: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        heard.append(message or "")

    calls = [{"tool": "ListDir", "arguments": {}}, {"tool": "Glob", "arguments": {"pattern": "*"}}]
    async with stdio_session(tmp_path, "--leases", "none", "--no-bash") as session:
        await session.call_tool(BATCH, {"calls": calls}, progress_callback=progress)
        await session.call_tool("ListDir", {}, progress_callback=progress)
    assert "1 of 2 calls done" in heard and "2 of 2 calls done" in heard, heard
    assert "ListDir started" in heard and "Glob started" in heard


async def test_a_cancelled_call_gives_its_leases_back_and_commits_nothing(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "a.txt").write_text("old\n")
    async with stdio_session(tmp_path, "--leases", "none") as session:
        with anyio.move_on_after(2):  # cancelling the request sends notifications/cancelled
            await session.call_tool("Bash", {"command": "echo new > a.txt; sleep 60"})
        # Its lease on a.txt is back: a Read of it runs, and sees the old content whole.
        with anyio.fail_after(20):
            ok, shown = await call(session, "Read", file_path="a.txt")
        assert ok and shown == "     1\told"


def write_bytes(path: bytes, data: bytes) -> None:
    with open(path, "wb") as file:
        file.write(data)


class RawServer:
    """A server process spoken to in raw JSON-RPC lines, for what a real client never sends."""

    def __init__(self, root: pathlib.Path, *options: str) -> None:
        self.process = subprocess.Popen(
            _command(root, *options),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.next = 100
        self._read = b""

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next += 1
        frame = {"jsonrpc": "2.0", "id": self.next, "method": method, "params": params}
        self.send(json.dumps(frame).encode() + b"\n")
        return self.answer(self.next)

    def answer(self, number: int) -> dict[str, Any]:
        """The answer to request ``number`` (those to others, and notifications, passed by)."""
        while True:
            answer = self.frame()
            if answer.get("id") == number:
                return dict(answer)

    def frame(self, timeout: float = 30.0) -> dict[str, Any]:
        """The next line the server writes, read within ``timeout`` (a server that never
        answers fails the test, not hangs it)."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._read:
            left = deadline - time.monotonic()
            assert left > 0 and select.select([fd], [], [], left)[0], "no answer in time"
            chunk = os.read(fd, 1 << 20)
            assert chunk, "the server closed its stdout"
            self._read += chunk
        line, _, self._read = self._read.partition(b"\n")
        return dict(json.loads(line))

    def start_command(self, command: str) -> None:
        """Call Bash with ``command`` (request 1) and return once it has started, holding its
        leases (its progress says so)."""
        params = {
            "name": "Bash",
            "arguments": {"command": command},
            "_meta": {"progressToken": "p"},
        }
        frame = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        self.send(json.dumps(frame).encode() + b"\n")
        self.wait_for_progress("Bash started")

    def wait_for_progress(self, message: str) -> None:
        while True:
            frame = self.frame()
            progress = frame.get("method") == "notifications/progress"
            if progress and frame["params"].get("message") == message:
                return

    def initialize(self) -> None:
        client = {"name": "raw", "version": "0"}
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
        assert "result" in self.request("initialize", params)
        self.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


async def test_malformed_and_oversized_frames_harm_nobody(tmp_path: pathlib.Path) -> None:
    server = RawServer(tmp_path, "--leases", "none", "--no-bash")
    try:
        server.initialize()
        server.send(b"this is not json\n")
        server.send(b'{"jsonrpc": "2.0", "id": 5, "method": 12}\n')
        server.send(b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": 7}\n')
        server.send(b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {}}\n')
        huge = "x" * (16 * 1024 * 1024)
        server.send(json.dumps({"jsonrpc": "2.0", "id": 8, "method": huge}).encode() + b"\n")
        # Past what the server reads: read through, not kept, and answered with an error.
        frame = {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"x": "z" * (65 << 20)},
        }
        server.send(json.dumps(frame).encode() + b"\n")
        answer = server.answer(9)
        assert "longer than the server reads" in answer["error"]["message"]
        args = {"file_path": "a.txt", "content": "y" * 1_000_000}
        answer = server.request("tools/call", {"name": "Write", "arguments": args})
        assert answer["result"]["isError"] is False
        listed = server.request("tools/list", {})
        assert len(listed["result"]["tools"]) == len(ANNOTATIONS)  # no Bash, and Batch
    finally:
        server.close()
    assert (tmp_path / "a.txt").stat().st_size == 1_000_000


@pytest.mark.parametrize(
    ("line", "code", "said"),
    [
        (b'{"jsonrpc": "2.0", "id": 50, "method": "tools/list"', -32700, "Parse error"),
        (b'[{"jsonrpc": "2.0", "id": 51, "method": "ping"}]', -32600, "batches"),
        (b'{"id": 52, "method": "ping"}', -32600, "JSON-RPC 2.0"),
        (
            b'{"jsonrpc": "2.0", "id": 53, "method": "x", "p": ' + b"[" * 5000 + b"]" * 5000 + b"}",
            -32700,
            "Parse error",
        ),
        (b'{"jsonrpc": "2.0", "id": 54, "method": "ping", "p": "\\udc80"}', -32700, "surrogate"),
        (
            b'{"jsonrpc": "2.0", "id": 55, "method": "tools/call", "params": {"name": "Write", '
            b'"arguments": {"file_path": "b\xff.txt", "content": "caf\xe9"}}}',
            -32700,
            "not UTF-8",
        ),
    ],
)
async def test_a_line_that_is_not_a_json_rpc_message_is_answered_and_nothing_runs(
    tmp_path: pathlib.Path, line: bytes, code: int, said: str
) -> None:
    """Answered as the HTTP transport answers the same bytes, not dropped unanswered (its
    sender would wait for ever); bytes that are not UTF-8 are not read as U+FFFD."""
    server = RawServer(tmp_path, "--leases", "none", "--no-bash")
    try:
        server.initialize()
        server.send(b"\n")  # a blank line: nothing to answer
        server.send(line + b"\n")
        number = json.loads(re.search(rb'"id": (\d+)', line).group(1))  # type: ignore[union-attr]
        error = server.answer(number)["error"]
        assert error["code"] == code and said in error["message"], error
        assert "result" in server.request("ping", {})  # and it goes on serving
    finally:
        server.close()
    assert os.listdir(tmp_path) == []


async def test_names_that_are_not_utf8_are_listed_and_the_server_goes_on(
    tmp_path: pathlib.Path,
) -> None:
    """Python reads them with lone surrogates, which JSON's UTF-8 can't carry: the SDK's writer
    refused the whole answer, and over stdio that ended the server."""
    write_bytes(os.path.join(bytes(tmp_path), b"bad\xff.txt"), b"needle\n")
    async with stdio_session(tmp_path, "--leases", "none", "--no-bash") as session:
        for name, arguments in [
            ("Glob", {"pattern": "*"}),
            ("ListDir", {"path": "."}),
            ("Grep", {"pattern": "needle"}),
            ("Grep", {"pattern": "needle", "output_mode": "content"}),
        ]:
            ok, said = await call(session, name, **arguments)
            assert ok and "bad\N{REPLACEMENT CHARACTER}.txt" in said, said
        assert (await call(session, "Write", file_path="ok.txt", content="x\n"))[0]


async def test_a_server_whose_client_dies_mid_call_ends_and_its_leases_return(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "a.txt").write_text("old\n")
    server = RawServer(tmp_path)  # leases from the root's lease service
    try:
        server.initialize()
        server.start_command("echo new > a.txt; sleep 60")  # it runs, holding a.txt
        assert server.process.stdin is not None
        server.process.stdin.close()  # the client is gone
        assert server.process.wait(timeout=30) is not None
    finally:
        server.close()
    async with stdio_session(tmp_path) as session:
        with anyio.fail_after(20):
            assert await call(session, "Read", file_path="a.txt") == (True, "     1\told")


async def test_a_killed_server_releases_its_leases_at_once(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.txt").write_text("old\n")
    server = RawServer(tmp_path)
    try:
        server.initialize()
        server.start_command("sleep 60 > a.txt")  # it holds a.txt in the root's lease service
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
    finally:
        server.close()
    async with stdio_session(tmp_path) as session:
        with anyio.fail_after(20):  # not the command's 60 s, nor a TTL: at once
            assert await call(session, "Read", file_path="a.txt") == (True, "     1\told")


def _running(marker: str) -> list[int]:
    """The processes whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if marker.encode() in cmdline.read().replace(b"\0", b" "):
                        found.append(int(entry))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_a_stopped_server_leaves_no_command_running(
    tmp_path: pathlib.Path, how: signal.Signals
) -> None:
    marker = f"sleep 3{os.getpid() % 1000}.{how.value}"  # this test's command, and no other's
    server = RawServer(tmp_path, "--leases", "none")
    try:
        server.initialize()
        server.start_command(marker)
        deadline = time.monotonic() + 20
        while not any(_comm(pid) == "sleep" for pid in _running(marker)):
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
        server.process.send_signal(how)
        code = server.process.wait(timeout=30)
        assert code == (0 if how != signal.SIGKILL else -signal.SIGKILL)
        deadline = time.monotonic() + 20  # a killed server's command dies with it, at once
        while _running(marker):
            assert time.monotonic() < deadline, f"still running: {_running(marker)}"
            time.sleep(0.05)
    finally:
        server.close()


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as comm:
            return comm.read().strip()
    except OSError:
        return ""


async def test_http_refuses_requests_without_the_token_from_another_origin_or_oversized(
    tmp_path: pathlib.Path,
) -> None:
    with http_server(tmp_path, "--leases", "none", "--no-bash") as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        async with httpx.AsyncClient(timeout=30) as client:
            refused = await client.post(url, json={})
            assert refused.status_code == 401 and "Authorization: Bearer" in refused.text
            assert refused.headers["www-authenticate"].startswith("Bearer")
            wrong = await client.post(url, json={}, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401 and "wrong bearer token" in wrong.text
            page = {"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"}
            rebinding = await client.post(url, json={}, headers=page)
            assert rebinding.status_code == 403 and "--allow-origin" in rebinding.text
            named = {"Authorization": f"Bearer {TOKEN}", "Host": "rebound.example:80"}
            rebinding = await client.post(url, json={}, headers=named)
            assert rebinding.status_code == 421 and "not this machine's loopback" in rebinding.text
            local_page = {"Authorization": f"Bearer {TOKEN}", "Origin": "https://localhost:3000"}
            assert (await client.post(url, json={}, headers=local_page)).status_code != 403
            headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
            oversized = await client.post(url, content=b" " * (5 << 20), headers=headers)
            assert oversized.status_code == 413
        async with http_session(url) as session:  # the token, and no Origin: served
            assert (await call(session, "ListDir"))[0]


async def test_served_on_a_network_address_any_host_is_answered_with_the_token(
    tmp_path: pathlib.Path,
) -> None:
    with http_server(tmp_path, "--leases", "none", "--no-bash", "--http", "0.0.0.0:0") as url:
        port = urllib.parse.urlsplit(url).port
        local = f"http://127.0.0.1:{port}/mcp"
        async with httpx.AsyncClient(timeout=30) as client:
            named = {"Host": f"build-box.internal:{port}"}
            assert (await client.post(local, json={}, headers=named)).status_code == 401
        async with http_session(local) as session:
            assert (await call(session, "ListDir"))[0]


async def test_a_thousand_sessions_leave_the_server_serving_the_others(
    tmp_path: pathlib.Path,
) -> None:
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
    }
    client = {"name": "many", "version": "0"}
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client},
    }
    with http_server(tmp_path, "--leases", "none", "--no-bash") as url:
        async with httpx.AsyncClient(headers=headers, timeout=60) as raw:
            limit = anyio.Semaphore(50)
            opened: list[str] = []

            async def open_one() -> None:
                async with limit:
                    answer = await raw.post(url, json=hello)
                    opened.append(answer.headers.get("mcp-session-id", ""))

            async with anyio.create_task_group() as tasks:
                for _ in range(1000):
                    tasks.start_soon(open_one)
            assert len(set(opened) - {""}) == 1000
        async with http_session(url) as session:
            assert (await call(session, "Write", file_path="a.txt", content="x\n"))[0]


def test_servers_started_at_once_on_a_root_start_and_find_one_lease_service(
    tmp_path: pathlib.Path,
) -> None:
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        found = set(pool.map(lambda _: find_or_start_service(tmp_path, idle_exit=1.0), range(4)))
    assert len(found) == 1
    # With no client connected, the service ends by itself.
    deadline = time.monotonic() + 20
    while find_service(tmp_path) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert find_service(tmp_path) is None
    # One of them started it; the others waited for it rather than start their own (each of
    # which would have said, by now, that one already runs).
    log = pathlib.Path(found.pop().removeprefix("unix:") + ".log")
    assert "already running" not in log.read_text()


def test_a_service_that_cant_serve_the_root_is_said_at_once_not_waited_for(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service that exits saying why (a root it may not open) was started again and again
    for a minute, and the MCP server answered nothing meanwhile. Here the service is one that
    says so in its log, as ``serve`` does, and exits."""
    from toolkernel.leases import _start

    def refusing(command: list[str], log: str, deadline: float) -> Any:
        with open(log, "a") as said:
            said.write(f"serve: [Errno 13] Permission denied: {str(tmp_path)!r}\n")
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(_start, "_launch", refusing)
    began = time.monotonic()
    with pytest.raises(LeaseServiceError, match=r"could be started \(\[Errno 13\] Permission"):
        find_or_start_service(tmp_path)
    assert time.monotonic() - began < 5


def test_a_second_service_on_one_socket_is_refused_while_the_first_serves(
    tmp_path: pathlib.Path,
) -> None:
    command = [sys.executable, "-m", "toolkernel", "serve", "--root", str(tmp_path)]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout is not None
        path = first.stdout.readline().strip()
        second = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert second.returncode == 1 and "already running" in second.stderr
        assert find_service(tmp_path) == f"unix:{path}"
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(timeout=30)
        if first.stdout is not None:
            first.stdout.close()

"""MCP tools through the kernel, against a real server: ``tests/mcp/server.py`` (the SDK's
``MCPServer``), started by each test as a subprocess over stdio with ``stdio_tools``.

Real processes, so the real clock; overlap and order are read from the calls' intervals (when the
kernel started and finished each), never from durations.
"""

from __future__ import annotations

import os
import pathlib
import signal
import sys

import anyio
import pytest

import toolkernel as tk
from toolkernel.kernel import CallProgress, CallStarted
from toolkernel.mcp import MCPTool, stdio_tools

SERVER = [sys.executable, str(pathlib.Path(__file__).with_name("server.py"))]


def overlap(a: tk.ToolResult, b: tk.ToolResult) -> bool:
    assert a.started_at is not None and b.started_at is not None
    return a.started_at < b.finished_at and b.started_at < a.finished_at


def before(a: tk.ToolResult, b: tk.ToolResult) -> bool:
    assert b.started_at is not None
    return a.finished_at <= b.started_at


@tk.tool(claims=lambda args: [])
async def tick(ctx: tk.ToolContext, seconds: float = 0.0) -> str:
    """A tool of the application's own, beside the server's."""
    await anyio.sleep(seconds)
    return "ticked"


async def test_read_only_calls_overlap_and_writes_serialize_in_emission_order() -> None:
    async with stdio_tools(SERVER) as tools, tk.open_kernel(tools) as kernel:
        by_name = {t.name: t for t in tools}
        assert {"read", "write", "refuse", "stall", "crash"} <= set(by_name)
        read, write = by_name["read"], by_name["write"]
        assert isinstance(read, MCPTool) and isinstance(read, tk.Tool)
        assert read.server == "test-store" and read.device == tk.device("mcp:test-store")
        assert read.description == "Read a key of the store."
        assert read.read_only_hint and not write.read_only_hint
        assert read.parameters_schema()["required"] == ["key"]
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
    assert before(r1, w1) and before(r2, w1) and before(w1, w2) and before(w2, r3)
    assert (w1.output, w2.output, r3.output) == ("k = one", "k = two", "two")


async def test_a_server_error_is_an_error_result_and_bad_arguments_never_reach_it() -> None:
    async with stdio_tools(SERVER) as tools, tk.open_kernel(tools) as kernel:
        refused, missing, wrong, unknown = await kernel.run(
            [
                tk.ToolCall("c1", "refuse", {"reason": "the disk is full"}),
                tk.ToolCall("c2", "write", {"key": "k"}),
                tk.ToolCall("c3", "read", '{"key": "k", "seconds": "soon"}'),
                tk.ToolCall("c4", "raed", {}),
            ]
        )
    assert refused.status is tk.Status.ERROR
    assert refused.error_type == "MCPToolError"
    assert refused.error == "Error executing tool refuse: the disk is full"  # the server's text
    assert missing.error_type == "InvalidArgumentsError" and missing.started_at is None
    assert "write is missing required argument 'value'" in (missing.error or "")
    assert "read argument 'seconds' must be number, not string ('soon')" in (wrong.error or "")
    assert unknown.error_type == "UnknownToolError"


async def test_structured_text_image_and_progress_become_outputs_and_events() -> None:
    events: list[object] = []
    async with (
        stdio_tools(SERVER) as tools,
        tk.open_kernel(tools) as kernel,
        kernel.stream(
            [
                tk.ToolCall("c1", "count", {"text": "two words"}),
                tk.ToolCall("c2", "picture", {}),
                tk.ToolCall("c3", "steps", {"count": 3}),
            ]
        ) as stream,
    ):
        async for event in stream:
            events.append(event)
    results = {e.call_id: e.result for e in events if isinstance(e, tk.kernel.CallFinished)}
    assert results["c1"].output.structured == {"words": 2, "characters": 9}
    assert results["c2"].output == tk.Content(
        [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]
    )
    assert results["c3"].output == "done"
    progress = [e.message for e in events if isinstance(e, CallProgress)]
    assert progress == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]


async def test_a_server_killed_mid_call_fails_only_its_calls() -> None:
    async with stdio_tools(SERVER) as tools, tk.open_kernel([*tools, tick]) as kernel:
        (found,) = await kernel.run([tk.ToolCall("p", "pid", {})])
        pid = int(found.output)
        calls = [
            tk.ToolCall("stall", "stall", {}),
            tk.ToolCall("write", "write", {"key": "k", "value": "v"}),  # waits behind stall
            tk.ToolCall("tick", "tick", {"seconds": 0.2}),
        ]
        results = {}
        async with kernel.stream(calls) as events:
            async for event in events:
                if isinstance(event, CallStarted) and event.call_id == "stall":
                    os.kill(pid, signal.SIGKILL)
                if isinstance(event, tk.kernel.CallFinished):
                    results[event.call_id] = event.result
        stall, write, ticked = results["stall"], results["write"], results["tick"]
        assert stall.status is tk.Status.ERROR and stall.error_type == "MCPServerGoneError"
        assert "'test-store' has gone away while the call ran" in (stall.error or "")
        assert write.status is tk.Status.ERROR and write.error_type == "MCPServerGoneError"
        assert ticked.status is tk.Status.OK
        # Later calls of its tools fail at once, with the same clear error; the kernel goes on.
        later, again = await kernel.run(
            [tk.ToolCall("r", "read", {"key": "k"}), tk.ToolCall("t", "tick", {})]
        )
        assert later.error_type == "MCPServerGoneError"
        assert "has gone away earlier" in (later.error or "")
        assert "can run until it is started again" in (later.error or "")
        assert again.status is tk.Status.OK


async def test_a_server_that_exits_is_quoted_from_its_stderr() -> None:
    async with stdio_tools(SERVER) as tools, tk.open_kernel([*tools, tick]) as kernel:
        crashed, ticked = await kernel.run(
            [
                tk.ToolCall("c1", "crash", {"message": "out of memory, giving up"}),
                tk.ToolCall("c2", "tick", {}),
            ]
        )
    assert crashed.error_type == "MCPServerGoneError"
    assert "the last it wrote on stderr: out of memory, giving up" in (crashed.error or "")
    assert ticked.status is tk.Status.OK


async def test_finer_claims_from_arguments_let_writes_of_different_files_overlap(
    tmp_path: pathlib.Path,
) -> None:
    def by_key(arguments: object) -> list[tk.Claim]:
        assert isinstance(arguments, dict)
        return [tk.exclusive(tk.device(f"key:{arguments['key']}"))]

    async with (
        stdio_tools(
            SERVER,
            cwd=tmp_path,
            reads={"read_file": ["path"]},
            writes={"write_file": ["path"]},
            claims={"write": by_key},
            prefix="store_",
        ) as tools,
        tk.open_kernel(tools, root=tmp_path) as kernel,
    ):
        names = {t.name for t in tools}
        assert {"store_write_file", "store_read_file"} <= names
        a, b, a_again, read_a, k1, k2, barrier = await kernel.run(
            [
                tk.ToolCall(
                    "a", "store_write_file", {"path": "a.txt", "content": "A", "seconds": 0.3}
                ),
                tk.ToolCall(
                    "b", "store_write_file", {"path": "b.txt", "content": "B", "seconds": 0.3}
                ),
                tk.ToolCall("a2", "store_write_file", {"path": "a.txt", "content": "AA"}),
                tk.ToolCall("ra", "store_read_file", {"path": str(tmp_path / "a.txt")}),
                tk.ToolCall("k1", "store_write", {"key": "x", "value": "1", "seconds": 0.3}),
                tk.ToolCall("k2", "store_write", {"key": "y", "value": "2", "seconds": 0.3}),
                tk.ToolCall("all", "store_refuse", {"reason": "declares nothing"}),
            ]
        )
    assert all(r.status is tk.Status.OK for r in (a, b, a_again, read_a, k1, k2))
    assert overlap(a, b) and before(a, a_again) and before(a_again, read_a)
    assert read_a.output == "AA" and (tmp_path / "b.txt").read_text() == "B"
    assert overlap(k1, k2)
    # A tool with no finer claims holds the server alone: it waits for every call before it.
    assert all(before(r, barrier) for r in (a, b, a_again, read_a, k1, k2))


def test_claims_must_name_the_servers_tools() -> None:
    async def start() -> None:
        async with stdio_tools(SERVER, writes={"write_files": ["path"]}):
            pass

    # A check of the listing, the same on any loop: run once.
    with pytest.raises(tk.ToolDeclarationError, match="has no tool by that name; its tools are"):
        anyio.run(start)


async def test_what_the_block_raises_comes_out_as_it_was_and_the_server_stops() -> None:
    with pytest.raises(LookupError, match="not in the store") as raised:
        async with stdio_tools(SERVER) as tools:
            async with tk.open_kernel(tools) as kernel:
                (found,) = await kernel.run([tk.ToolCall("p", "pid", {})])
            raise LookupError("not in the store")
    assert not isinstance(raised.value, BaseExceptionGroup)  # no group of the SDK's around it
    with pytest.raises(ProcessLookupError):
        os.kill(int(found.output), 0)  # stopped (and reaped) when the block was left


async def test_a_server_that_exits_at_once_or_a_command_in_one_string_is_an_error() -> None:
    exits = [sys.executable, "-c", "import sys; sys.exit('no configuration file')"]
    with pytest.raises(tk.errors.MCPServerGoneError, match="exited before it answered") as raised:
        async with stdio_tools(exits):
            pass
    assert "the last it wrote on stderr: no configuration file" in str(raised.value)
    with pytest.raises(TypeError, match=r"not one string .*shlex.split"):
        async with stdio_tools("mcp-server-git --repository ."):  # type: ignore[arg-type]
            pass


async def test_a_command_that_is_not_on_path_is_named_as_not_found(tmp_path: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError) as raised:
        async with stdio_tools(["no-such-mcp-server"], env={"PATH": str(tmp_path)}):
            pass
    message = str(raised.value)
    assert "the MCP server's command 'no-such-mcp-server' was not found" in message
    assert f"no program of that name on PATH ({tmp_path})" in message
    assert "exited before it answered" not in message
    missing = tmp_path / "server"
    with pytest.raises(FileNotFoundError, match="there is no such file"):
        async with stdio_tools([str(missing)]):
            pass

#!/usr/bin/env python3
"""Drive a real agent CLI (Claude Code, Codex, Gemini CLI or opencode) end to end against
toolkernel's MCP server, with a scripted model on loopback instead of the vendor's API, and show
what happened.

What it shows:

* how the agent is set up to use the MCP server (the commands and config files it writes, in a
  temporary HOME / CODEX_HOME, never the real user's);
* that the agent runs several MCP tool calls that the model emitted in ONE turn (three edits and
  a Read, then one Batch call), and whether the client ran them at the same time: every MCP
  message is logged with a timestamp by a small stdio relay between the agent and the server,
  and the relay holds each tools/call answer back ``--hold`` seconds, so a client that waits for
  one answer before sending the next call shows up as calls ``--hold`` apart;
* what the client sends: ``initialize`` (clientInfo, capabilities), ``_meta`` on tools/call, one
  server process per session or not, and with ``--subagent`` whether a subagent's calls can be
  told from its parent's;
* which tool results the scripted model got back, and the files the tree holds afterwards.

The scripted model speaks the Anthropic Messages API (``POST /v1/messages``, streaming SSE, plus
``count_tokens``) for Claude Code and for opencode (its Anthropic provider, given a ``baseURL``),
the OpenAI Responses API (``POST /v1/responses``, streaming) for Codex, and the Gemini API
(``:streamGenerateContent?alt=sse``, ``:generateContent``, ``:countTokens``) for Gemini CLI. It
reads the tool list from each request and takes the names the agent gave the MCP tools from there
(Claude Code ``mcp__toolkernel__Edit``, Codex ``Edit`` in the namespace ``mcp__toolkernel``,
Gemini CLI ``mcp_toolkernel_Edit``, opencode ``toolkernel_Edit``). Which conversation a request
belongs to (the main agent, a subagent, or a side request such as a title or a router's
classifier) it tells from a marker in the prompt; which step, from the call ids it issued.

Run it with the project's virtualenv (the CLIs come from npm, here in /work/agents)::

    .venv/bin/python scripts/drive-agent.py claude            # a fresh temporary tree
    .venv/bin/python scripts/drive-agent.py codex --root /tmp/tree --subagent
    .venv/bin/python scripts/drive-agent.py claude --http     # streamable HTTP, bearer token
    .venv/bin/python scripts/drive-agent.py gemini --stand-in # the stand-in server
    .venv/bin/python scripts/drive-agent.py opencode --server-command 'python srv.py {root}'

It prints the agent's version and the set-up commands with their output, the agent's own event
stream, every request the scripted model got (which tool results came back) and what it answered,
the MCP traffic per server process or HTTP session (initialize, each tools/call with its `_meta`,
when it was sent and answered, how many were in flight at once), and the tree's files afterwards.
Logs stay in the work directory (``--work``, default a temporary one): mcp.jsonl (every MCP
message), model-requests.jsonl (every model request, headers and body), agent-stdout.txt.

The MCP server is ``python -m toolkernel mcp --root DIR`` when that command exists, else a
stand-in served by this script (``drive-agent.py stand-in --root DIR``: toolkernel's built-in
tools and a Batch tool through one kernel, over the official MCP SDK, logging every request it
gets). ``--server-command`` names any other; ``{root}`` in it becomes the tree. The sample files
(app.py, config.ini, README.txt) are written into the tree first; an existing file of those
names stops the run. The agent binaries are looked up on PATH, then in
/work/agents/node_modules/.bin (``--agent-bin`` names one); install them with
``npm install --prefix /work/agents @anthropic-ai/claude-code @openai/codex @google/gemini-cli
opencode-ai``. The agents' HOME (and CODEX_HOME, XDG dirs) is inside the work directory.

Two internal subcommands, started by the agent through its MCP config: ``stand-in`` (the
stand-in server) and ``relay --log FILE -- COMMAND...`` (the logging stdio relay).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SERVER_NAME = "toolkernel"
MAIN_MARK = "[drive-agent:main]"
SUB_MARK = "[drive-agent:subagent]"
NPM_BIN = Path("/work/agents/node_modules/.bin")
TOKEN_ENV = "TOOLKERNEL_MCP_TOKEN"

SEED = {
    "app.py": "greeting = 'hello'\n\n\ndef main():\n    print(greeting)\n",
    "config.ini": "[app]\ndebug = false\nlevel = info\n",
    "README.txt": "A tiny project for drive-agent.py.\nThe scripted model edits it over MCP.\n",
}

# The scripted model's plan, one list of calls a turn, each list emitted in ONE reply: reads of
# three files and a new file (the server's kernel lets a session edit only a file it has read),
# then three writes, then one Batch call (when the server has Batch), then a closing text.
# With --subagent the main agent also spawns a subagent in its first turn.
MAIN_STEPS = [
    [
        ("Read", {"file_path": "app.py"}),
        ("Read", {"file_path": "config.ini"}),
        ("Read", {"file_path": "README.txt"}),
        ("Write", {"file_path": "notes/todo.md", "content": "# TODO\n- written over MCP\n"}),
    ],
    [
        (
            "Edit",
            {
                "file_path": "app.py",
                "old_string": "greeting = 'hello'",
                "new_string": "greeting = 'hello, world'",
            },
        ),
        (
            "Edit",
            {
                "file_path": "config.ini",
                "old_string": "debug = false",
                "new_string": "debug = true",
            },
        ),
        ("Write", {"file_path": "notes/done.md", "content": "app.py and config.ini edited\n"}),
    ],
    [
        (
            "Batch",
            {
                "calls": [
                    {
                        "tool": "Write",
                        "arguments": {"file_path": "notes/batch.txt", "content": "from Batch\n"},
                    },
                    {
                        "tool": "Edit",
                        "arguments": {
                            "file_path": "README.txt",
                            "old_string": "A tiny project",
                            "new_string": "A tiny project (edited in a Batch)",
                        },
                    },
                    {"tool": "Read", "arguments": {"file_path": "app.py"}},
                    {"tool": "Glob", "arguments": {"pattern": "**/*"}},
                ]
            },
        ),
    ],
]
SUB_STEPS = [
    [("Read", {"file_path": "config.ini"}), ("ListDir", {"path": "."})],
    [("Write", {"file_path": "notes/from-subagent.txt", "content": "written by the subagent\n"})],
]


# --------------------------------------------------------------------------------------------
# The relay: a stdio MCP server wrapped so that every message is logged


def cmd_relay(args: argparse.Namespace) -> int:
    """Run the server command, pass stdin/stdout through line by line (stdio MCP is one JSON-RPC
    message a line), log each message with the time, and hold tools/call answers back."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    log = open(args.log, "a", buffering=1)  # noqa: SIM115 - open for the relay's lifetime
    log_lock, out_lock = threading.Lock(), threading.Lock()
    calls: set[Any] = set()
    out = sys.stdout.buffer

    def record(direction: str, line: bytes, **extra: Any) -> Any:
        try:
            message = json.loads(line)
        except ValueError:
            message = {"unparsed": line.decode("utf-8", "replace")}
        entry = {
            "t": time.time(),
            "relay_pid": os.getpid(),
            "server_pid": child.pid,
            "dir": direction,
            "msg": message,
            **extra,
        }
        with log_lock:
            log.write(json.dumps(entry) + "\n")
        return message

    def forward(line: bytes, ident: Any) -> None:
        with out_lock:
            out.write(line)
            out.flush()
        record("forwarded", b"{}", id=ident)

    def client_to_server() -> None:
        for line in sys.stdin.buffer:
            message = record("c2s", line)
            if isinstance(message, dict) and message.get("method") == "tools/call":
                calls.add(message.get("id"))
            try:
                child.stdin.write(line)
                child.stdin.flush()
            except BrokenPipeError:
                break
        with contextlib.suppress(OSError):
            child.stdin.close()

    def server_to_client() -> None:
        for line in child.stdout:
            message = record("s2c", line)
            answer = isinstance(message, dict) and "method" not in message
            if answer and message.get("id") in calls and args.hold > 0:
                calls.discard(message.get("id"))
                threading.Timer(args.hold, forward, (line, message.get("id"))).start()
            else:
                with out_lock:
                    out.write(line)
                    out.flush()

    def stop(signum: int, frame: Any) -> None:
        child.terminate()

    signal.signal(signal.SIGTERM, stop)
    threading.Thread(target=client_to_server, daemon=True).start()
    reader = threading.Thread(target=server_to_client, daemon=True)
    reader.start()
    code = child.wait()
    reader.join(timeout=args.hold + 5)
    time.sleep(args.hold)
    return code


@contextlib.contextmanager
def http_relay(upstream: str, log_path: Path, hold: float) -> Iterator[str]:
    """The relay for streamable HTTP: a loopback reverse proxy in front of the server's /mcp that
    logs every JSON-RPC message both ways (grouped by Mcp-Session-Id) and holds tools/call answers
    back ``hold`` seconds. Yields its own /mcp URL."""
    import http.client
    from urllib.parse import urlsplit

    target = urlsplit(upstream)
    log = open(log_path, "a", buffering=1)  # noqa: SIM115 - closed below
    lock = threading.Lock()
    sessions: dict[str, int] = {}

    def record(
        direction: str, session: str | None, message: Any, t: float | None = None, **extra: Any
    ) -> None:
        with lock:
            number = sessions.setdefault(session or "-", len(sessions) + 1)
            log.write(
                json.dumps(
                    {
                        "t": t or time.time(),
                        "relay_pid": f"HTTP session {number}",
                        "server_pid": session,
                        "dir": direction,
                        "msg": message,
                        **extra,
                    }
                )
                + "\n"
            )

    class Relay(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def relay(self) -> None:
            arrived = time.time()
            size = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(size) if size else b""
            skip = {"host", "content-length", "connection", "accept-encoding"}
            headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
            upstream_conn = http.client.HTTPConnection(target.hostname, target.port, timeout=900)
            upstream_conn.request(self.command, target.path, body or None, headers)
            response = upstream_conn.getresponse()
            session = self.headers.get("mcp-session-id") or response.getheader("mcp-session-id")
            message = None
            with contextlib.suppress(ValueError):
                message = json.loads(body) if body else None
            if message is not None:
                seen = {
                    k: ("Bearer ..." if k.lower() == "authorization" else v)
                    for k, v in self.headers.items()
                    if k.lower() not in skip
                }
                record("c2s", session, message, t=arrived, headers=seen)
            call = (
                message.get("id")
                if isinstance(message, dict) and message.get("method") == "tools/call"
                else None
            )
            self.send_response(response.status)
            for key, value in response.getheaders():
                if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                    self.send_header(key, value)
            length = response.getheader("content-length")
            if length is not None:
                data = response.read()
                with contextlib.suppress(ValueError):
                    record("s2c", session, json.loads(data))
                if call is not None and hold:
                    time.sleep(hold)
                    record("forwarded", session, {}, id=call)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            with contextlib.suppress(OSError):
                for line in iter(response.readline, b""):
                    if line.startswith(b"data:"):
                        with contextlib.suppress(ValueError):
                            sent = json.loads(line[5:])
                            record("s2c", session, sent)
                            if (
                                call is not None
                                and hold
                                and isinstance(sent, dict)
                                and sent.get("id") == call
                                and "method" not in sent
                            ):
                                time.sleep(hold)
                                record("forwarded", session, {}, id=call)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            upstream_conn.close()

        do_POST = do_GET = do_DELETE = relay

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Relay)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}{target.path}"
    finally:
        httpd.shutdown()
        log.close()


# --------------------------------------------------------------------------------------------
# The stand-in MCP server: toolkernel's built-in tools and a Batch tool, over the official SDK

READ_ONLY = {"Read", "Glob", "Grep", "ListDir"}
DESTRUCTIVE = {"Write", "Edit", "MultiEdit", "Move", "Delete", "Bash"}
BATCH_SCHEMA = {
    "type": "object",
    "properties": {
        "calls": {
            "type": "array",
            "description": "The calls to run at once, each a tool name and its arguments.",
            "items": {
                "type": "object",
                "properties": {"tool": {"type": "string"}, "arguments": {"type": "object"}},
                "required": ["tool"],
            },
        }
    },
    "required": ["calls"],
}


def cmd_stand_in(args: argparse.Namespace) -> int:
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    import toolkernel as tk
    from toolkernel.formats import anthropic as anthropic_format
    from toolkernel.tools import builtin_tools

    try:
        tools = builtin_tools(bash=True)
    except Exception:  # the shell extra missing: serve the file tools
        tools = builtin_tools()
    log = open(args.log, "a", buffering=1) if args.log else None  # noqa: SIM115
    kernels: list[Any] = []

    def write_log(entry: dict[str, Any]) -> None:
        if log is not None:
            log.write(json.dumps({"pid": os.getpid(), **entry}, default=str) + "\n")

    async def logged(ctx: Any, call_next: Any) -> Any:
        """Middleware: every request and notification, as it arrived (raw params, `_meta` and
        all), then when it was answered."""
        start = time.time()
        headers = getattr(getattr(ctx, "request", None), "headers", None)
        write_log(
            {
                "t": start,
                "event": "received",
                "method": ctx.method,
                "id": ctx.request_id,
                "params": ctx.params,
                "headers": dict(headers) if headers else None,
            }
        )
        try:
            result = await call_next(ctx)
        except BaseException as error:
            write_log(
                {
                    "t": time.time(),
                    "event": "failed",
                    "method": ctx.method,
                    "id": ctx.request_id,
                    "error": repr(error),
                }
            )
            raise
        write_log(
            {
                "t": time.time(),
                "event": "answered",
                "method": ctx.method,
                "id": ctx.request_id,
                "started": start,
            }
        )
        return result

    schemas = anthropic_format.tools(tools)

    async def list_tools(ctx: Any, params: Any) -> Any:
        listed = [
            types.Tool(
                name=schema["name"],
                description=schema["description"],
                input_schema=schema["input_schema"],
                annotations=types.ToolAnnotations(
                    read_only_hint=schema["name"] in READ_ONLY,
                    destructive_hint=schema["name"] in DESTRUCTIVE,
                ),
            )
            for schema in schemas
        ]
        listed.append(
            types.Tool(
                name="Batch",
                description="Run a list of tool calls at once through the kernel "
                "(independent calls run together, conflicting ones in order).",
                input_schema=BATCH_SCHEMA,
                annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True),
            )
        )
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: Any) -> Any:
        kernel = kernels[0]
        arguments = dict(params.arguments or {})
        if args.delay:
            await anyio.sleep(args.delay)
        if params.name == "Batch":
            calls = [
                tk.ToolCall(f"b{n}", c.get("tool", ""), c.get("arguments") or {})
                for n, c in enumerate(arguments.get("calls") or [])
            ]
            results = await kernel.run(calls, timeout=120)
            text = "\n\n".join(
                f"[{n}] {r.name}: {r.status.name}\n{r.text()}" for n, r in enumerate(results)
            )
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)],
                is_error=not all(r.ok for r in results),
            )
        [result] = await kernel.run(
            [tk.ToolCall(str(ctx.request_id), params.name, arguments)], timeout=120
        )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result.text())], is_error=not result.ok
        )

    server = Server(
        "toolkernel-stand-in", version="0", on_list_tools=list_tools, on_call_tool=call_tool
    )
    server.middleware.append(logged)

    async def main() -> None:
        async with tk.open_kernel(tools, root=args.root) as kernel:
            kernels.append(kernel)
            if args.http:
                await serve_http(server, args.http)
            else:
                async with stdio_server() as (read, write):
                    await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
    return 0


async def serve_http(server: Any, where: str) -> None:
    """Streamable HTTP at /mcp on loopback; a bearer token from TOOLKERNEL_MCP_TOKEN when set.
    Prints the URL as the first line on stdout once it listens."""
    import uvicorn

    host, _, port = where.rpartition(":")
    token = os.environ.get(TOKEN_ENV)
    app = server.streamable_http_app(host=host)

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and token:
            given = dict(scope["headers"]).get(b"authorization", b"").decode()
            if given != f"Bearer {token}":
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"text/plain")],
                    }
                )
                await send({"type": "http.response.body", "body": b"bad or missing token"})
                return
        await app(scope, receive, send)

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port or 0)))
    sock.listen(128)
    print(f"http://{host}:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(guarded, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


# --------------------------------------------------------------------------------------------
# The scripted model server


class Script:
    """Decides each reply from the request alone (which conversation, which step), and keeps a
    record of the requests for the report."""

    def __init__(self, subagent: bool) -> None:
        self.subagent = subagent
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.dump: Any = None

    def note(
        self,
        entry: dict[str, Any],
        raw: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        with self.lock:
            self.requests.append(entry)
            if self.dump is not None:
                self.dump.write(json.dumps({**entry, "headers": headers, "raw": raw}) + "\n")
                self.dump.flush()


def step_of(ids: list[str]) -> int:
    steps = [int(m.group(1)) for i in ids if (m := re.search(r"_s(\d+)_", i))]
    return max(steps, default=0) + 1


def who(texts: list[str]) -> str:
    for text in texts:
        if SUB_MARK in text:
            return "subagent"
        if MAIN_MARK in text:
            return "main"
    return "side"


def find_tool(names: dict[str, str | None], tool: str) -> tuple[str, str | None] | None:
    """The name (and namespace, for Codex's namespaced tools) under which the agent offers the MCP
    server's ``tool``: Claude Code ``mcp__toolkernel__Edit``, Codex ``Edit`` in namespace
    ``mcp__toolkernel``, Gemini CLI ``mcp_toolkernel_Edit``."""
    exact = {
        f"mcp__{SERVER_NAME}__{tool}",
        f"mcp_{SERVER_NAME}_{tool}",
        f"{SERVER_NAME}__{tool}",
        f"{SERVER_NAME}_{tool}",
    }
    for name, namespace in names.items():
        if name in exact or (namespace and SERVER_NAME in namespace and name == tool):
            return name, namespace
    return None


def plan(
    role: str,
    step: int,
    names: dict[str, str | None],
    agent_tool: str | None,
    subagent: bool,
    agent: str,
    spawned: str | None,
) -> list[tuple[str, Any, str | None]]:
    """The calls of this step: (name, arguments, namespace). Empty: end the turn."""
    calls: list[tuple[str, Any, str | None]] = []

    def add(tool: str, arguments: Any) -> None:
        found = find_tool(names, tool)
        if found:
            calls.append((found[0], arguments, found[1]))

    steps = SUB_STEPS if role == "subagent" else MAIN_STEPS
    for tool, arguments in steps[step - 1] if step <= len(steps) else []:
        add(tool, arguments)
    if role == "subagent" and step == len(steps) + 1 and "complete_task" in names:
        # a Gemini CLI subagent ends only by calling complete_task
        calls.append(("complete_task", {"result": {"response": "subagent done"}}, None))
    if role == "main" and step == 1 and subagent and agent_tool:
        task = f"{SUB_MARK} Read config.ini, then write notes/from-subagent.txt over MCP."
        if agent == "claude":
            calls.append(
                (
                    agent_tool,
                    {
                        "description": "MCP from a subagent",
                        "prompt": task,
                        "subagent_type": "general-purpose",
                    },
                    None,
                )
            )
        elif agent == "opencode":
            calls.append(
                (
                    agent_tool,
                    {
                        "description": "MCP from a subagent",
                        "prompt": task,
                        "subagent_type": "general",
                    },
                    None,
                )
            )
        elif agent == "gemini":
            calls.append((agent_tool, {"agent_name": "generalist", "prompt": task}, None))
        else:
            calls.append(("spawn_agent", {"message": task}, agent_tool))
    if role == "main" and step == 2 and spawned and agent == "codex" and agent_tool:
        calls.append(("wait_agent", {"targets": [spawned], "timeout_ms": 60000}, agent_tool))
    return calls


def make_handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def body(self) -> dict[str, Any]:
            size = int(self.headers.get("content-length") or 0)
            data = self.rfile.read(size) if size else b""
            try:
                return json.loads(data or b"{}")
            except ValueError:
                return {}

        def send_json(self, status: int, value: Any) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def send_sse(self, events: list[tuple[str, Any]]) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            for name, data in events:
                self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
            self.close_connection = True

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path.endswith("/models"):
                self.send_json(200, {"object": "list", "data": [], "models": []})
            else:
                self.send_json(404, {"error": {"message": f"no {path} here"}})

        def do_POST(self) -> None:
            path = self.path.split("?")[0]
            body = self.body()
            headers = {k.lower(): v for k, v in self.headers.items()}
            if path.endswith("/messages/count_tokens"):
                script.note({"api": "count_tokens", "path": self.path})
                self.send_json(200, {"input_tokens": 1000})
            elif path.endswith("/messages"):
                self.anthropic(body, headers)
            elif path.endswith("/responses"):
                self.openai_responses(body, headers)
            elif ":countTokens" in path:
                script.note({"api": "countTokens", "path": self.path})
                self.send_json(200, {"totalTokens": 1000})
            elif "enerateContent" in path:
                self.gemini(body, headers, stream=":streamGenerateContent" in path)
            else:
                script.note({"api": "unknown", "path": self.path})
                self.send_json(404, {"error": {"message": f"no {path} here"}})

        # Anthropic Messages -----------------------------------------------------------------
        def anthropic(self, body: dict[str, Any], headers: dict[str, str]) -> None:
            messages = body.get("messages") or []
            texts, ids, results = [], [], []
            for message in messages:
                content = message.get("content")
                blocks = (
                    [{"type": "text", "text": content}]
                    if isinstance(content, str)
                    else content or []
                )
                for block in blocks:
                    if message.get("role") == "user" and block.get("type") == "text":
                        texts.append(block.get("text", ""))
                    elif block.get("type") == "tool_use":
                        ids.append(block.get("id", ""))
                    elif block.get("type") == "tool_result":
                        results.append(anthropic_result(block))
            names = {t["name"]: None for t in body.get("tools") or [] if "name" in t}
            role, step = who(texts), step_of(ids)
            agent_tool = next((n for n in ("Agent", "Task", "task") if n in names), None)
            agent = "opencode" if "opencode" in headers.get("user-agent", "") else "claude"
            calls = (
                plan(role, step, names, agent_tool, script.subagent, agent, None)
                if role != "side"
                else []
            )
            prefix = {"main": "m", "subagent": "a"}.get(role, "x")
            blocks: list[dict[str, Any]] = []
            for n, (name, arguments, _) in enumerate(calls):
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": f"toolu_{prefix}_s{step}_{n}_{secrets.token_hex(4)}",
                        "name": name,
                        "input": arguments,
                    }
                )
            if not blocks:
                blocks.append({"type": "text", "text": closing(role, results)})
            script.note(
                {
                    "api": "anthropic",
                    "role": role,
                    "step": step,
                    "model": body.get("model"),
                    "stream": body.get("stream"),
                    "session": headers.get("x-claude-code-session-id"),
                    "mcp_tools": sorted(n for n in names if SERVER_NAME in n),
                    "deferred": sorted(
                        t["name"] for t in body.get("tools") or [] if t.get("defer_loading")
                    ),
                    "results": results if role != "side" else [],
                    "sent": [
                        (b.get("name"), b.get("input")) for b in blocks if b["type"] == "tool_use"
                    ],
                },
                body,
                headers,
            )
            stop = "tool_use" if blocks[0]["type"] == "tool_use" else "end_turn"
            model = body.get("model", "scripted")
            if body.get("stream"):
                self.send_sse(anthropic_events(blocks, stop, model))
            else:
                self.send_json(
                    200,
                    {
                        "id": "msg_" + uuid.uuid4().hex,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": blocks,
                        "stop_reason": stop,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 100, "output_tokens": 20},
                    },
                )

        # OpenAI Responses -------------------------------------------------------------------
        def openai_responses(self, body: dict[str, Any], headers: dict[str, str]) -> None:
            items = body.get("input") or []
            if isinstance(items, str):
                items = [{"type": "message", "role": "user", "content": items}]
            texts, ids, results, spawned = [], [], [], None
            calls_by_id: dict[str, str] = {}
            for item in items:
                kind = item.get("type", "message")
                if kind == "message" and item.get("role") == "user":
                    content = item.get("content")
                    if isinstance(content, str):
                        texts.append(content)
                    else:
                        texts.extend(c.get("text", "") for c in content or [])
                elif kind == "function_call":
                    ids.append(item.get("call_id", ""))
                    calls_by_id[item.get("call_id", "")] = item.get("name", "")
                elif kind == "function_call_output":
                    output = item.get("output")
                    text = (
                        output
                        if isinstance(output, str)
                        else "\n".join(
                            part.get("text", "") for part in output or [] if isinstance(part, dict)
                        )
                    )
                    name = calls_by_id.get(item.get("call_id", ""), "?")
                    results.append({"id": item.get("call_id"), "tool": name, "text": text[:2000]})
                    if name == "spawn_agent":
                        found = re.search(r'"(?:agent_id|id|target)"\s*:\s*"([^"]+)"', text)
                        spawned = found.group(1) if found else text.strip()
            names: dict[str, str | None] = {}
            for tool in body.get("tools") or []:
                if tool.get("type") == "namespace":
                    for inner in tool.get("tools") or []:
                        names[inner.get("name", "")] = tool.get("name")
                elif "name" in tool:
                    names[tool["name"]] = None
            role, step = who(texts), step_of(ids)
            agent_tool = names.get("spawn_agent")
            calls = (
                plan(role, step, names, agent_tool, script.subagent, "codex", spawned)
                if role != "side"
                else []
            )
            prefix = {"main": "m", "subagent": "a"}.get(role, "x")
            out: list[dict[str, Any]] = []
            for n, (name, arguments, namespace) in enumerate(calls):
                item = {
                    "type": "function_call",
                    "id": f"fc_{secrets.token_hex(6)}",
                    "call_id": f"call_{prefix}_s{step}_{n}_{secrets.token_hex(4)}",
                    "name": name,
                    "arguments": json.dumps(arguments),
                    "status": "completed",
                }
                if namespace:
                    item["namespace"] = namespace
                out.append(item)
            if not out:
                out.append(
                    {
                        "type": "message",
                        "id": f"msg_{secrets.token_hex(6)}",
                        "role": "assistant",
                        "status": "completed",
                        "content": [
                            {
                                "type": "output_text",
                                "annotations": [],
                                "text": closing(role, results),
                            }
                        ],
                    }
                )
            meta = headers.get("x-codex-turn-metadata")
            script.note(
                {
                    "api": "responses",
                    "role": role,
                    "step": step,
                    "model": body.get("model"),
                    "parallel_tool_calls": body.get("parallel_tool_calls"),
                    "agent_name": json.loads(meta).get("agent_name") if meta else None,
                    "session": headers.get("session-id"),
                    "mcp_tools": sorted(
                        (f"{ns}/{n}" if ns else n)
                        for n, ns in names.items()
                        if SERVER_NAME in (ns or n)
                    ),
                    "results": results if role != "side" else [],
                    "sent": [
                        (i.get("namespace"), i.get("name"), json.loads(i["arguments"]))
                        for i in out
                        if i["type"] == "function_call"
                    ],
                },
                body,
                headers,
            )
            self.send_sse(responses_events(out, body.get("model", "scripted")))

        # Gemini generateContent ----------------------------------------------------------------
        def gemini(self, body: dict[str, Any], headers: dict[str, str], stream: bool) -> None:
            texts, results, model_turns = [], [], 0
            for content in body.get("contents") or []:
                parts = content.get("parts") or []
                if content.get("role") == "model" and any("functionCall" in p for p in parts):
                    model_turns += 1
                for part in parts:
                    if content.get("role") == "user" and "text" in part:
                        texts.append(part["text"])
                    if "functionResponse" in part:
                        answer = part["functionResponse"]
                        results.append(
                            {
                                "id": answer.get("id"),
                                "tool": answer.get("name"),
                                "text": json.dumps(answer.get("response"))[:2000],
                            }
                        )
            names = {
                f["name"]: None
                for t in body.get("tools") or []
                for f in t.get("functionDeclarations") or []
                if "name" in f
            }
            schema = (body.get("generationConfig") or {}).get("responseJsonSchema")
            # a request for JSON (the model router's classifier, say) is a side request
            role, step = ("side" if schema else who(texts)), model_turns + 1
            agent_tool = "invoke_agent" if "invoke_agent" in names else None
            calls = (
                plan(role, step, names, agent_tool, script.subagent, "gemini", None)
                if role != "side"
                else []
            )
            prefix = {"main": "m", "subagent": "a"}.get(role, "x")
            parts_out: list[dict[str, Any]] = [
                {
                    "functionCall": {
                        "name": name,
                        "args": arguments,
                        "id": f"call_{prefix}_s{step}_{n}_{secrets.token_hex(4)}",
                    }
                }
                for n, (name, arguments, _) in enumerate(calls)
            ]
            if not parts_out:
                text = (
                    json.dumps(example_of(schema))
                    if schema and role == "side"
                    else closing(role, results)
                )
                parts_out.append({"text": text})
            script.note(
                {
                    "api": "gemini",
                    "role": role,
                    "step": step,
                    "path": self.path,
                    "mcp_tools": sorted(n for n in names if SERVER_NAME in n),
                    "results": results if role != "side" else [],
                    "sent": [
                        (p["functionCall"]["name"], p["functionCall"]["args"])
                        for p in parts_out
                        if "functionCall" in p
                    ],
                },
                body,
                headers,
            )
            answer = {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": parts_out},
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": 100,
                    "candidatesTokenCount": 20,
                    "totalTokenCount": 120,
                },
                "modelVersion": "scripted",
            }
            if not stream:
                self.send_json(200, answer)
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(f"data: {json.dumps(answer)}\r\n\r\n".encode())
            self.wfile.flush()
            self.close_connection = True

    return Handler


def example_of(schema: dict[str, Any]) -> Any:
    """A minimal value of a JSON schema, for the agent's side requests that want JSON."""
    kind = str(schema.get("type", "object")).lower()
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        return {key: example_of(value) for key, value in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    return {"string": "drive-agent", "integer": 50, "number": 50, "boolean": False}.get(kind)


def anthropic_result(block: dict[str, Any]) -> dict[str, Any]:
    content = block.get("content")
    if isinstance(content, list):
        content = "\n".join(c.get("text", "") for c in content if isinstance(c, dict))
    return {
        "id": block.get("tool_use_id"),
        "is_error": bool(block.get("is_error")),
        "text": (content or "")[:2000],
    }


def closing(role: str, results: list[dict[str, Any]]) -> str:
    if role == "side":
        return "drive-agent"
    return f"Done ({role}): {len(results)} tool results received in this conversation."


def anthropic_events(blocks: list[dict[str, Any]], stop: str, model: str) -> list[tuple[str, Any]]:
    usage = {
        "input_tokens": 100,
        "output_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    events: list[tuple[str, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_" + uuid.uuid4().hex,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
        )
    ]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 20},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def responses_events(items: list[dict[str, Any]], model: str) -> list[tuple[str, Any]]:
    response = {
        "id": "resp_" + uuid.uuid4().hex,
        "object": "response",
        "created_at": int(time.time()),
        "model": model,
        "status": "in_progress",
        "output": [],
    }
    events: list[tuple[str, Any]] = [
        ("response.created", {"type": "response.created", "response": response})
    ]
    for index, item in enumerate(items):
        if item["type"] == "function_call":
            added = {**item, "arguments": "", "status": "in_progress"}
        else:
            added = {**item, "content": [], "status": "in_progress"}
        events.append(
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": index, "item": added},
            )
        )
        if item["type"] == "function_call":
            events.append(
                (
                    "response.function_call_arguments.delta",
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "delta": item["arguments"],
                    },
                )
            )
        else:
            text = item["content"][0]["text"]
            events.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": text,
                    },
                )
            )
        events.append(
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": index, "item": item},
            )
        )
    done = {
        **response,
        "status": "completed",
        "output": items,
        "usage": {
            "input_tokens": 100,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 120,
        },
    }
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    return events


@contextlib.contextmanager
def model_server(script: Script) -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(script))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


# --------------------------------------------------------------------------------------------
# Setting the agents up


def find_agent(name: str, given: str | None) -> str:
    if given:
        return given
    found = shutil.which(name) or (str(NPM_BIN / name) if (NPM_BIN / name).exists() else None)
    if not found:
        sys.exit(
            f"drive-agent: no {name} on PATH nor in {NPM_BIN}; npm install it or pass --agent-bin"
        )
    return found


def real_server_exists() -> bool:
    probe = subprocess.run(
        [sys.executable, "-m", "toolkernel", "mcp", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return probe.returncode == 0


def server_command(args: argparse.Namespace, root: Path, work: Path) -> tuple[list[str], str]:
    if args.server_command:
        return [
            part.replace("{root}", str(root)) for part in shlex.split(args.server_command)
        ], "given by --server-command"
    if not args.stand_in and real_server_exists():
        return [
            sys.executable,
            "-m",
            "toolkernel",
            "mcp",
            "--root",
            str(root),
        ], "the real server (python -m toolkernel mcp)"
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "stand-in",
        "--root",
        str(root),
        "--log",
        str(work / "stand-in.jsonl"),
    ], "the stand-in (drive-agent.py stand-in)"


def run(
    command: list[str], env: dict[str, str], cwd: Path, timeout: float = 120, show: bool = True
) -> subprocess.CompletedProcess[str]:
    if show:
        shown = shlex.join(command)
        if env.get(TOKEN_ENV):
            shown = shown.replace(env[TOKEN_ENV], "$" + TOKEN_ENV)
        print("$ " + shown)
    done = subprocess.run(
        command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    if show:
        for line in (done.stdout + done.stderr).strip().splitlines():
            print("  " + line)
    return done


def setup_claude(
    binary: str, env: dict[str, str], work: Path, root: Path, mcp: dict[str, Any], model_url: str
) -> list[str]:
    env.update(
        {
            "ANTHROPIC_BASE_URL": model_url,
            "ANTHROPIC_API_KEY": "sk-drive-agent",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "MCP_TIMEOUT": "60000",
            "MCP_CONNECTION_NONBLOCKING": "false",
        }
    )
    if mcp["url"]:
        env[TOKEN_ENV] = mcp["token"]
        run(
            [
                binary,
                "mcp",
                "add",
                "--scope",
                "user",
                "--transport",
                "http",
                SERVER_NAME,
                mcp["url"],
                "--header",
                f"Authorization: Bearer {mcp['token']}",
            ],
            env,
            root,
        )
    else:
        run(
            [binary, "mcp", "add", "--scope", "user", SERVER_NAME, "--", *mcp["command"]], env, root
        )
    run([binary, "mcp", "list"], env, root, timeout=120)
    settings = {
        "permissions": {
            "allow": [f"mcp__{SERVER_NAME}"],
            "deny": ["Bash", "Edit", "Write", "NotebookEdit", "Read", "Glob", "Grep"],
        }
    }
    path = Path(env["HOME"]) / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2) + "\n")
    print(f"wrote {path}:\n{textwrap_indent(path.read_text())}")
    prompt = f"{MAIN_MARK} Edit this project through the {SERVER_NAME} MCP tools."
    return [binary, "-p", prompt, "--output-format", "stream-json", "--verbose", "--max-turns", "8"]


def toml_string(value: str) -> str:
    return json.dumps(value)


def setup_codex(
    binary: str, env: dict[str, str], work: Path, root: Path, mcp: dict[str, Any], model_url: str
) -> list[str]:
    home = work / "codex-home"
    home.mkdir(parents=True, exist_ok=True)
    env.update({"CODEX_HOME": str(home), "DRIVE_AGENT_API_KEY": "sk-drive-agent"})
    if mcp["url"]:
        env[TOKEN_ENV] = mcp["token"]
        server = [f"url = {toml_string(mcp['url'])}", f'bearer_token_env_var = "{TOKEN_ENV}"']
    else:
        server = [
            f"command = {toml_string(mcp['command'][0])}",
            "args = [" + ", ".join(toml_string(a) for a in mcp["command"][1:]) + "]",
        ]
    config = "\n".join(
        [
            'model = "scripted-model"',
            'model_provider = "drive-agent"',
            'approval_policy = "never"',
            'sandbox_mode = "workspace-write"',
            "",
            "[model_providers.drive-agent]",
            'name = "drive-agent scripted model"',
            f"base_url = {toml_string(model_url + '/v1')}",
            'wire_api = "responses"',
            'env_key = "DRIVE_AGENT_API_KEY"',
            "request_max_retries = 0",
            "stream_max_retries = 0",
            "",
            f"[mcp_servers.{SERVER_NAME}]",
            *server,
            "supports_parallel_tool_calls = true",
            "required = true",
            'default_tools_approval_mode = "approve"',
            "startup_timeout_sec = 60",
            "tool_timeout_sec = 300",
            "",
        ]
    )
    (home / "config.toml").write_text(config)
    print(f"wrote {home / 'config.toml'}:\n{textwrap_indent(config)}")
    run([binary, "mcp", "list"], env, root, timeout=60)
    prompt = f"{MAIN_MARK} Edit this project through the {SERVER_NAME} MCP tools."
    return [binary, "exec", "--skip-git-repo-check", "--cd", str(root), "--json", prompt]


def setup_gemini(
    binary: str, env: dict[str, str], work: Path, root: Path, mcp: dict[str, Any], model_url: str
) -> list[str]:
    env.update(
        {
            "GEMINI_API_KEY": "drive-agent",
            "GOOGLE_GEMINI_BASE_URL": model_url,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
        }
    )
    if mcp["url"]:
        env[TOKEN_ENV] = mcp["token"]
        run(
            [
                binary,
                "mcp",
                "add",
                "--scope",
                "user",
                "--transport",
                "http",
                "--trust",
                "--header",
                f"Authorization: Bearer {mcp['token']}",
                SERVER_NAME,
                mcp["url"],
            ],
            env,
            root,
        )
    else:
        run(
            [binary, "mcp", "add", "--scope", "user", "--trust", SERVER_NAME, *mcp["command"]],
            env,
            root,
        )
    path = Path(env["HOME"]) / ".gemini" / "settings.json"
    settings = json.loads(path.read_text()) if path.exists() else {}
    settings.setdefault("security", {}).setdefault("auth", {})["selectedType"] = "gemini-api-key"
    settings.setdefault("tools", {})["exclude"] = [
        "read_file",
        "write_file",
        "replace",
        "run_shell_command",
        "glob",
        "grep_search",
        "list_directory",
        "read_many_files",
    ]
    path.write_text(json.dumps(settings, indent=2) + "\n")
    print(f"wrote {path}:\n{textwrap_indent(path.read_text())}")
    run([binary, "mcp", "list"], env, root, timeout=120)
    prompt = f"{MAIN_MARK} Edit this project through the {SERVER_NAME} MCP tools."
    return [
        binary,
        "--skip-trust",
        "--approval-mode",
        "yolo",
        "--output-format",
        "stream-json",
        "-p",
        prompt,
    ]


def setup_opencode(
    binary: str, env: dict[str, str], work: Path, root: Path, mcp: dict[str, Any], model_url: str
) -> list[str]:
    """opencode has no model API of its own: its Anthropic provider is pointed at the scripted
    model (provider.anthropic.options.baseURL)."""
    if mcp["url"]:
        env[TOKEN_ENV] = mcp["token"]
        server = {
            "type": "remote",
            "url": mcp["url"],
            "enabled": True,
            "oauth": False,
            "headers": {"Authorization": "Bearer {env:" + TOKEN_ENV + "}"},
        }
    else:
        server = {"type": "local", "command": mcp["command"], "enabled": True}
    config = {
        "$schema": "https://opencode.ai/config.json",
        "model": "anthropic/claude-sonnet-4-5",
        "provider": {
            "anthropic": {"options": {"baseURL": model_url + "/v1", "apiKey": "sk-drive-agent"}}
        },
        "mcp": {SERVER_NAME: server},
        "permission": {
            "edit": "deny",
            "bash": "deny",
            "read": "deny",
            "glob": "deny",
            "grep": "deny",
            "list": "deny",
            f"{SERVER_NAME}_*": "allow",
        },
        "autoupdate": False,
        "share": "disabled",
    }
    path = Path(env["HOME"]) / ".config" / "opencode" / "opencode.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n")
    print(f"wrote {path}:\n{textwrap_indent(path.read_text())}")
    env.update({"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1"})
    run([binary, "mcp", "list"], env, root, timeout=120)
    prompt = f"{MAIN_MARK} Edit this project through the {SERVER_NAME} MCP tools."
    return [binary, "run", "--format", "json", prompt]


def textwrap_indent(text: str) -> str:
    return "\n".join("    " + line for line in text.rstrip().splitlines())


# --------------------------------------------------------------------------------------------
# The report


def tree(root: Path) -> dict[str, str]:
    files = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            try:
                files[str(path.relative_to(root))] = path.read_text()
            except UnicodeDecodeError:
                files[str(path.relative_to(root))] = "<binary>"
    return files


def short(value: Any, width: int = 90) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    text = text.replace("\n", "\\n")
    return text if len(text) <= width else text[: width - 3] + "..."


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


def report_mcp(entries: list[dict[str, Any]], hold: float, run_started: float) -> None:
    """From the relay's log: the processes, what each client sent on initialize, and every
    tools/call with its `_meta`, when it was sent and when the client got its answer."""
    if not entries:
        print("  (nothing in the relay's log)")
        return
    t0 = min(e["t"] for e in entries)
    by_process: dict[Any, list[dict[str, Any]]] = {}
    for entry in sorted(entries, key=lambda e: e["t"]):
        by_process.setdefault(entry["relay_pid"], []).append(entry)
    during = sum(1 for mine in by_process.values() if mine[0]["t"] >= run_started)
    what = (
        "HTTP session(s)" if isinstance(entries[0]["relay_pid"], str) else "MCP server process(es)"
    )
    print(
        f"  {len(by_process)} {what} started; {during} by the agent's run, the others by the "
        "setup commands (mcp list)"
    )
    for pid, mine in by_process.items():
        server_pid = mine[0]["server_pid"]
        started = mine[0]["t"] - t0
        when = "the run" if mine[0]["t"] >= run_started else "setup"
        label = (
            f"{pid} (Mcp-Session-Id {server_pid})"
            if isinstance(pid, str)
            else f"relay pid {pid} (server pid {server_pid})"
        )
        print(f"  - {label}, started by {when}, first message at +{started:.3f}s")
        agents = {
            e["headers"].get("User-Agent") or e["headers"].get("user-agent")
            for e in mine
            if e.get("headers")
        }
        if agents - {None}:
            print(f"      User-Agent: {', '.join(sorted(a for a in agents if a))}")
        requests: dict[Any, dict[str, Any]] = {}
        answered: dict[Any, float] = {}
        for entry in mine:
            msg = entry["msg"]
            if entry["dir"] == "c2s" and isinstance(msg, dict):
                if msg.get("method") == "initialize":
                    p = msg.get("params") or {}
                    print(
                        f"      initialize: protocolVersion={p.get('protocolVersion')} "
                        f"clientInfo={json.dumps(p.get('clientInfo'))}"
                    )
                    print(f"        capabilities={short(p.get('capabilities'), 200)}")
                    if "_meta" in p:
                        print(f"        _meta={json.dumps(p['_meta'])}")
                if msg.get("method") == "tools/call":
                    requests[msg.get("id")] = {"t": entry["t"], "params": msg.get("params")}
            elif entry["dir"] == "s2c" and isinstance(msg, dict) and "method" not in msg:
                answered.setdefault(msg.get("id"), entry["t"])
            elif entry["dir"] == "forwarded":
                answered[entry.get("id")] = entry["t"]
        methods = [
            e["msg"].get("method")
            for e in mine
            if e["dir"] == "c2s" and isinstance(e["msg"], dict) and "method" in e["msg"]
        ]
        print(f"      methods the client sent: {', '.join(dict.fromkeys(methods))}")
        if not requests:
            print("      no tools/call")
            continue
        spans = []
        first_meta: dict[str, Any] | None = None
        for ident, request in requests.items():
            params = request["params"] or {}
            sent = request["t"] - t0
            got = answered.get(ident)
            end = f"+{got - t0:.3f}s" if got else "(no answer)"
            spans.append((request["t"], got or request["t"]))
            print(
                f"      tools/call id={ident} {params.get('name')} "
                f"{short(params.get('arguments'), 70)}"
            )
            meta = params.get("_meta")
            if first_meta is None or not isinstance(meta, dict):
                shown = f"_meta={json.dumps(meta)}"
                first_meta = meta if isinstance(meta, dict) else None
            else:
                changed = {k: v for k, v in meta.items() if first_meta.get(k) != v}
                shown = f"_meta as above but {json.dumps(changed)}"
            print(f"        sent +{sent:.3f}s, answer reached the client {end}; {shown}")
        overlap = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
        print(
            f"      most tools/call in flight at once: {overlap}"
            f" ({'parallel' if overlap > 1 else 'one at a time'}; answers held {hold}s)"
        )


def report(
    script: Script, work: Path, before: dict[str, str], root: Path, hold: float, run_started: float
) -> None:
    print("\n== What the scripted model received and sent")
    for request in script.requests:
        if request["api"] not in ("anthropic", "responses", "gemini"):
            print(f"- {request['api']} {request.get('path')}")
            continue
        extra = f" agent_name={request['agent_name']}" if request.get("agent_name") else ""
        print(
            f"- {request['api']} request: conversation={request['role']} "
            f"step={request['step']} session={request.get('session')}{extra}"
        )
        if request["role"] == "side":
            continue
        if request["step"] == 1:
            print(f"    MCP tools offered: {', '.join(request['mcp_tools']) or '(none)'}")
            if request.get("deferred"):
                print(f"    deferred tools: {', '.join(request['deferred'])}")
        for result in request["results"]:
            flag = " ERROR" if result.get("is_error") else ""
            tool = f" {result['tool']}" if result.get("tool") else ""
            print(f"    result for {result['id']}{tool}{flag}: {short(result['text'], 80)}")
        for sent in request["sent"]:
            print(f"    -> call {short(list(sent), 110)}")
        if not request["sent"]:
            print("    -> text (end of turn)")
    print("\n== MCP traffic (the relay's log)")
    report_mcp(read_jsonl(work / "mcp.jsonl"), hold, run_started)
    stand_in = read_jsonl(work / "stand-in.jsonl")
    if stand_in:
        calls = [
            e for e in stand_in if e.get("event") == "received" and e.get("method") == "tools/call"
        ]
        pids = sorted({e["pid"] for e in stand_in})
        print(f"\n== The stand-in's own log: {len(stand_in)} entries, server pids {pids}")
        for entry in calls:
            params = entry.get("params") or {}
            print(
                f"  tools/call {params.get('name')} _meta={json.dumps(params.get('_meta'))}"
                + (f" headers={short(entry['headers'], 120)}" if entry.get("headers") else "")
            )
    after = tree(root)
    print(f"\n== The tree {root} afterwards")
    for name, text in after.items():
        mark = "new" if name not in before else ("changed" if before[name] != text else "same")
        print(f"--- {name} ({mark})")
        for line in text.rstrip("\n").splitlines():
            print(f"    {line}")


def agent_output(agent: str, stdout: str) -> None:
    print(f"\n== The agent's output ({agent})")
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            print("  " + short(line, 160))
            continue
        if agent == "claude":
            kind = event.get("type")
            if kind == "system" and event.get("subtype") == "init":
                servers = event.get("mcp_servers")
                mcp_tools = [t for t in event.get("tools", []) if t.startswith("mcp__")]
                print(
                    f"  init: mcp_servers={json.dumps(servers)} tools={len(event['tools'])}"
                    f" (MCP: {', '.join(mcp_tools)})"
                )
            elif kind == "result":
                print(
                    f"  result: {event.get('subtype')} turns={event.get('num_turns')} "
                    f"text={short(event.get('result'), 100)}"
                )
                if event.get("permission_denials"):
                    print(f"  permission_denials: {short(event['permission_denials'], 200)}")
            elif kind in ("assistant", "user"):
                for block in (event.get("message") or {}).get("content") or []:
                    if not isinstance(block, dict):
                        continue
                    side = " (subagent)" if event.get("parent_tool_use_id") else ""
                    if block.get("type") == "tool_use":
                        print(
                            f"  {kind}{side}: tool_use {block['name']} "
                            f"{short(block.get('input'), 70)}"
                        )
                    elif block.get("type") == "tool_result":
                        print(
                            f"  {kind}{side}: tool_result "
                            f"{'ERROR ' if block.get('is_error') else ''}"
                            f"{short(block.get('content'), 80)}"
                        )
                    elif block.get("type") == "text":
                        print(f"  {kind}{side}: text {short(block.get('text'), 90)}")
        elif agent == "opencode":
            kind, part = event.get("type"), event.get("part") or {}
            state = part.get("state") or {}
            if kind == "tool_use":
                print(
                    f"  tool {part.get('tool')} {state.get('status')} "
                    f"{short(state.get('input'), 70)} -> {short(state.get('output'), 50)}"
                )
            elif kind == "text":
                print(f"  text {short(part.get('text'), 100)}")
            elif kind in ("step_start", "step_finish"):
                print(f"  {kind}" + (f" ({part.get('reason')})" if part.get("reason") else ""))
            else:
                print(f"  {kind}: {short(event, 140)}")
        elif agent == "gemini":
            kind = event.get("type")
            if kind == "tool_use":
                print(f"  tool_use {event.get('tool_name')} {short(event.get('parameters'), 80)}")
            elif kind == "tool_result":
                print(f"  tool_result {event.get('status')} {short(event.get('output'), 80)}")
            elif kind == "message" and event.get("role") == "assistant":
                print(f"  text {short(event.get('content'), 100)}")
            else:
                print(f"  {kind}: {short(event, 140)}")
        else:
            item = event.get("item") or {}
            kind = event.get("type")
            if kind in ("item.started", "item.completed") and item:
                what = item.get("type")
                if what == "mcp_tool_call":
                    res = item.get("result") or item.get("error")
                    print(
                        f"  {kind}: mcp {item.get('server')}/{item.get('tool')} "
                        f"{item.get('status')} {short(item.get('arguments'), 60)}"
                        + (f" -> {short(res, 60)}" if kind == "item.completed" else "")
                    )
                elif what == "agent_message":
                    print(f"  {kind}: message {short(item.get('text'), 100)}")
                else:
                    print(f"  {kind}: {what} {short(item, 110)}")
            else:
                print(f"  {kind}: {short(event, 140)}")


# --------------------------------------------------------------------------------------------


def cmd_drive(args: argparse.Namespace) -> int:
    binary = find_agent(args.agent, args.agent_bin)
    work = (
        Path(args.work).resolve()
        if args.work
        else Path(tempfile.mkdtemp(prefix=f"drive-{args.agent}-"))
    )
    work.mkdir(parents=True, exist_ok=True)
    root = Path(args.root).resolve() if args.root else work / "tree"
    root.mkdir(parents=True, exist_ok=True)
    clash = [name for name in SEED if (root / name).exists()]
    if clash:
        sys.exit(f"drive-agent: {root} already has {', '.join(clash)}; give an empty --root")
    for name, text in SEED.items():
        (root / name).write_text(text)
    before = tree(root)
    home = work / "home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "NO_COLOR": "1",
    }
    version = run([binary, "--version"], env, work, show=False)
    print(f"== {args.agent}: {binary} -> {(version.stdout or version.stderr).strip()}")
    command, which = server_command(args, root, work)
    print(f"== MCP server: {which}: {shlex.join(command)}")
    print(f"== work dir {work}, tree {root}")

    mcp: dict[str, Any] = {"url": None, "token": None, "command": None}
    server_process = None
    stack = contextlib.ExitStack()
    if args.http:
        token = secrets.token_urlsafe(16)
        server_env = {**os.environ, TOKEN_ENV: token}
        http_command = [*command, "--http", "127.0.0.1:0"]
        print(f"$ {TOKEN_ENV}=... {shlex.join(http_command)}")
        server_process = subprocess.Popen(
            http_command, env=server_env, stdout=subprocess.PIPE, text=True
        )
        url = server_process.stdout.readline().strip()
        print(f"  first line: {url}")
        relayed = stack.enter_context(http_relay(url, work / "mcp.jsonl", args.hold))
        print(f"  the agent gets the logging relay's {relayed}")
        mcp.update(url=relayed, token=token)
    else:
        mcp["command"] = [
            sys.executable,
            str(Path(__file__).resolve()),
            "relay",
            "--log",
            str(work / "mcp.jsonl"),
            "--hold",
            str(args.hold),
            "--",
            *command,
        ]

    script = Script(args.subagent)
    script.dump = open(work / "model-requests.jsonl", "w")  # noqa: SIM115
    try:
        with model_server(script) as model_url:
            print(f"== scripted model at {model_url}\n")
            setup = {
                "claude": setup_claude,
                "codex": setup_codex,
                "gemini": setup_gemini,
                "opencode": setup_opencode,
            }[args.agent]
            agent_command = setup(binary, env, work, root, mcp, model_url)
            print(f"\n$ {shlex.join(agent_command)}")
            started = time.time()
            try:
                done = subprocess.run(
                    agent_command,
                    env=env,
                    cwd=root,
                    capture_output=True,
                    text=True,
                    timeout=args.timeout,
                    stdin=subprocess.DEVNULL,
                )
                stdout, stderr, code = done.stdout, done.stderr, done.returncode
            except subprocess.TimeoutExpired as expired:
                stdout = (
                    expired.stdout.decode()
                    if isinstance(expired.stdout, bytes)
                    else expired.stdout or ""
                )
                stderr, code = "(timed out)", -1
            print(f"  exit {code} after {time.time() - started:.1f}s")
            (work / "agent-stdout.txt").write_text(stdout)
            (work / "agent-stderr.txt").write_text(stderr)
            time.sleep(args.hold + 0.5)
    finally:
        stack.close()
        if server_process:
            server_process.terminate()
            server_process.wait(timeout=10)
    agent_output(args.agent, stdout)
    if stderr.strip():
        print("  stderr: " + "\n  stderr: ".join(stderr.strip().splitlines()[-15:]))
    report(script, work, before, root, args.hold, started)
    print(f"\n(logs in {work}: mcp.jsonl, model-requests.jsonl, agent-stdout.txt)")
    return 0 if code == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command_name", required=True)
    for agent in ("claude", "codex", "gemini", "opencode"):
        drive = sub.add_parser(agent, help=f"drive {agent} against the MCP server")
        drive.set_defaults(func=cmd_drive, agent=agent)
        drive.add_argument("--root", help="the tree (default: a new temporary directory)")
        drive.add_argument("--server-command", help="the MCP server's command ({root} = tree)")
        drive.add_argument(
            "--stand-in",
            action="store_true",
            help="use the stand-in even when python -m toolkernel mcp exists",
        )
        drive.add_argument(
            "--http",
            action="store_true",
            help="streamable HTTP (--http 127.0.0.1:0) instead of stdio",
        )
        drive.add_argument(
            "--subagent",
            action="store_true",
            help="the model also spawns a subagent that calls MCP tools",
        )
        drive.add_argument(
            "--hold",
            type=float,
            default=0.5,
            help="seconds the relay holds each tools/call answer (default 0.5)",
        )
        drive.add_argument("--agent-bin", help="the agent's executable")
        drive.add_argument("--work", help="directory for HOME, configs and logs (default: temp)")
        drive.add_argument("--timeout", type=float, default=300)
    stand_in = sub.add_parser("stand-in", help="(internal) the stand-in MCP server")
    stand_in.set_defaults(func=cmd_stand_in)
    stand_in.add_argument("--root", required=True)
    stand_in.add_argument("--http", help="HOST:PORT for streamable HTTP at /mcp")
    stand_in.add_argument("--log", help="JSON-lines file of every request")
    stand_in.add_argument("--delay", type=float, default=0.0, help="seconds each call sleeps")
    relay = sub.add_parser("relay", help="(internal) a logging stdio relay")
    relay.set_defaults(func=cmd_relay)
    relay.add_argument("--log", required=True)
    relay.add_argument("--hold", type=float, default=0.0)
    relay.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

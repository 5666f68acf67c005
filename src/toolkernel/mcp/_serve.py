"""``python -m toolkernel mcp``: a :class:`~toolkernel.mcp._serving.ToolServer` on the official
SDK's low-level server, over stdio or streamable HTTP.

Over HTTP the endpoint is ``/mcp`` and every request passes three checks before the SDK sees
it (:func:`guarded`), as the MCP specification's security best practices ask:

- ``Host``, on a server bound to loopback, must name a loopback host: a page that reaches the
  port through a name it controls (DNS rebinding) names its own. On a network address any
  host is answered, and the token is what keeps others out.
- ``Origin``, when a browser sends one, must be a loopback origin or one allowed by
  ``--allow-origin``.
- ``Authorization: Bearer TOKEN``, compared in constant time; ``TOKEN`` is
  ``TOOLKERNEL_MCP_TOKEN`` when set, else one generated at start and printed (stderr).

A refused request gets a plain-text answer that says why and what to send instead (421, 403,
or 401 with ``WWW-Authenticate: Bearer``). The SDK's own check of these headers is off, so that
it refuses nothing these allow; its limit on a request's size (4 MiB) stays. The server binds
to loopback unless told otherwise.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
import sys
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from typing import Any, Final, TextIO

import anyio

from ..kernel import Kernel
from ._serving import Reporter, ToolServer

__all__ = ["serve_stdio", "serve_http", "listen", "is_loopback", "TOKEN_VARIABLE"]

TOKEN_VARIABLE = "TOOLKERNEL_MCP_TOKEN"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toolkernel")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "0"


def _agent_key(ctx: Any) -> object:
    """What one MCP session is, for this request.

    Over stdio a server has one client: the process is the session, whichever protocol era
    the client speaks (the 2026-07-28 one has no session of its own). Over HTTP it is the
    ``Mcp-Session-Id`` the SDK gave the client; a client speaking HTTP without sessions
    (stateless, or the 2026-07-28 era) can't be told from another, so such calls share one
    view, unless their ``_meta`` names their agent (:data:`~._serving.AGENT_KEYS`).
    """
    request = getattr(ctx, "request", None)
    if request is None:
        return "stdio"
    session_id = request.headers.get("mcp-session-id")
    return ("http", session_id) if session_id else "http"


def make_server(tools: ToolServer, instructions: str) -> Any:
    """The SDK's low-level ``Server`` answering ``tools/list`` and ``tools/call``."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    listed = types.ListToolsResult(
        tools=[types.Tool.model_validate(spec) for spec in tools.tool_list()]
    )

    async def list_tools(ctx: Any, params: Any) -> Any:
        return listed

    async def call_tool(ctx: Any, params: Any) -> Any:
        meta = _meta_dict(params) or {}
        agent = tools.agent_for(_agent_key(ctx), meta)
        token = meta.get("progressToken", meta.get("progress_token"))
        report = Reporter(ctx.session.report_progress) if token is not None else None
        result = await tools.call(params.name, params.arguments, agent=agent, report=report)
        return types.CallToolResult.model_validate(result)

    return Server(
        "toolkernel",
        version=_version(),
        title="toolkernel: race-free file tools and a sandboxed shell",
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _meta_dict(params: Any) -> Mapping[str, Any] | None:
    meta = getattr(params, "meta", None)
    if meta is None:
        return None
    if isinstance(meta, Mapping):
        return meta
    dump = getattr(meta, "model_dump", None)
    return dump(by_alias=True) if callable(dump) else None


INSTRUCTIONS = (
    "These tools work on one directory tree shared with other sessions and agents; they never "
    "lose an edit. Read a file before editing it: an edit of a file changed since you last "
    "read it (by another agent, a command or a person) is refused, and you are told to read "
    "it again. When you have several independent calls to make (edits of different files, "
    "reads, searches, commands), send them together in one Batch call: they run at once where "
    "they touch different files, and in the given order where they touch the same ones."
)


def load_transport(http: bool) -> None:
    """Import what serving over stdio (or HTTP) needs, before the kernel connects to a lease
    service. The lease client's heartbeat runs on the event loop, which an import blocks: the
    SDK's modules imported after connecting would leave it silent for as long as they take, and
    when many servers start at once on a few cores (an agent starting its subagents) that is
    past the service's TTL, which drops the connection and fails every call after."""
    import importlib

    names = ["mcp_types", "mcp.server.lowlevel", "._pipes"]
    names += ["uvicorn", "mcp.server.transport_security"] if http else ["mcp.server.stdio"]
    for name in names:
        importlib.import_module(name, __package__)


async def serve_stdio(kernel: Kernel) -> None:
    """Serve one MCP client over this process's stdin and stdout until it closes them."""
    from mcp.server.stdio import stdio_server

    from ._pipes import claimed_pipes

    server = make_server(ToolServer(kernel), INSTRUCTIONS)
    with claimed_pipes() as pipes:
        # Pipes (as clients start servers) are read and written from the loop; anything
        # else through the SDK's own threads.
        streams: dict[str, Any] = {}
        if pipes is not None:
            streams = {"stdin": pipes[0], "stdout": pipes[1]}
        async with stdio_server(**streams) as (read, write):
            await server.run(read, write, server.create_initialization_options())


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and the loopback addresses (``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _origin_allowed(origin: str, allowed: Sequence[str]) -> bool:
    if origin in allowed:
        return True
    parts = urllib.parse.urlsplit(origin)
    return parts.scheme in ("http", "https") and is_loopback(parts.hostname or "")


def _host_name(host: str) -> str:
    """``Host: [::1]:8765`` -> ``::1``; ``localhost:8765`` -> ``localhost``."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def guarded(
    app: ASGIApp, token: str, allowed_origins: Sequence[str], *, loopback_only: bool = True
) -> ASGIApp:
    """``app`` behind the ``Host`` and ``Origin`` checks and the bearer token.

    Served on loopback (``loopback_only``), a request must name a loopback host: a page that
    reaches the port through a name it controls (DNS rebinding) names its own. Served on a
    network address, any host is answered, and the token is what keeps others out."""
    expected = f"Bearer {token}".encode()

    async def refuse(
        send: Send, status: int, text: str, headers: Sequence[tuple[bytes, bytes]]
    ) -> None:
        body = text.encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    *headers,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        host = headers.get(b"host", b"").decode("latin-1")
        if loopback_only and not is_loopback(_host_name(host)):
            await refuse(
                send,
                421,
                f"refused: Host {host!r} is not this machine's loopback. This server answers "
                "requests to 127.0.0.1, localhost or ::1 only; start it with --http "
                "ADDRESS:PORT on an address others can reach to serve them.\n",
                (),
            )
            return
        origin = headers.get(b"origin")
        if origin is not None and not _origin_allowed(origin.decode("latin-1"), allowed_origins):
            await refuse(
                send,
                403,
                f"refused: Origin {origin.decode('latin-1')!r} is not allowed. This server "
                "answers pages on this machine only (loopback origins); start it with "
                "--allow-origin ORIGIN to allow another.\n",
                (),
            )
            return
        given = headers.get(b"authorization", b"")
        if not hmac.compare_digest(given, expected):
            why = "no Authorization header" if not given else "a wrong bearer token"
            await refuse(
                send,
                401,
                f"refused: {why}. Send 'Authorization: Bearer TOKEN' with the token the server "
                f"printed when it started (or the one in {TOKEN_VARIABLE}).\n",
                ((b"www-authenticate", b'Bearer realm="toolkernel"'),),
            )
            return
        await app(scope, receive, send)

    return guard


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (port 0: a free one) and listening, for
    :func:`serve_http`. Raises ``OSError`` where it can't: the port taken, an address that is
    not this machine's, a name that does not resolve (``socket.gaierror``)."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


async def serve_http(
    kernel: Kernel,
    sock: socket.socket,
    host: str,
    *,
    token: str,
    allowed_origins: Sequence[str] = (),
    out: TextIO = sys.stdout,
    ready: Callable[[str], None] | None = None,
    stop: anyio.Event | None = None,
) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` on ``sock`` (from :func:`listen`)
    until cancelled, interrupted or ``stop`` is set; prints the URL (one line on ``out``) once
    it listens. ``stop`` shuts it down as uvicorn does (open requests get a moment to end),
    where a cancellation leaves uvicorn to report the lifespan it cut short as an error."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    server = make_server(ToolServer(kernel), INSTRUCTIONS)
    bound = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if sock.family == socket.AF_INET6 else host
    # Host and Origin are checked in front (``guarded``), with messages that say what to do;
    # the SDK's own check of them is off so that it does not refuse what this one allows.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = server.streamable_http_app(transport_security=security, host=host)
    guard = guarded(app, token, allowed_origins, loopback_only=is_loopback(host.strip("[]")))
    config = uvicorn.Config(
        guard, log_level="warning", lifespan="on", timeout_graceful_shutdown=_GRACE
    )
    web = uvicorn.Server(config)
    url = f"http://{shown}:{bound}/mcp"
    print(url, file=out, flush=True)
    if ready is not None:
        ready(url)

    async def stop_when_told(stop: anyio.Event) -> None:
        await stop.wait()
        web.should_exit = True  # uvicorn's own way down

    async with anyio.create_task_group() as tasks:
        if stop is not None:
            tasks.start_soon(stop_when_told, stop)
        await web.serve(sockets=[sock])
        tasks.cancel_scope.cancel()


_GRACE: Final = 2
"""Seconds uvicorn gives open requests (a client's event stream) once told to stop."""

"""``python -m toolkernel mcp``: the built-in tools, Bash in its sandbox, served to MCP clients."""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import signal
import socket
import sys
from typing import Any

import anyio

from .._extras import missing_extra

__all__ = ["add_mcp", "run_mcp"]


def _address(text: str) -> tuple[str, int]:
    """``--http HOST:PORT`` (or ``PORT`` alone: loopback)."""
    host, sep, digits = text.rpartition(":")
    if not sep:
        host, digits = "127.0.0.1", text
    try:
        port = int(digits)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"write the address as HOST:PORT (127.0.0.1:8765) or PORT, not {text!r}"
        ) from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, not {port}")
    return host or "127.0.0.1", port


def add_mcp(commands: Any) -> None:
    mcp = commands.add_parser(
        "mcp",
        help="serve the built-in tools (and Bash in its sandbox) to MCP clients",
        description="Serve Read, Write, Edit, MultiEdit, Glob, Grep, ListDir, Move, Delete, "
        "TodoWrite, Bash and Batch over MCP, for the directory ROOT. Every call of every "
        "session runs through one kernel: calls on different files run together, conflicting "
        "ones in the order they arrived, and no edit is lost. Servers started on the same root "
        "(one per session or subagent) share its lease service, started on demand. Stdio by "
        "default; --http serves streamable HTTP at /mcp.",
    )
    mcp.add_argument(
        "--root", default=".", help="the directory the tools work in (default: the current one)"
    )
    mcp.add_argument(
        "--http",
        type=_address,
        default=None,
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (PORT alone: "
        "127.0.0.1; port 0: a free one; the URL is printed). Needs 'Authorization: Bearer "
        "TOKEN': TOOLKERNEL_MCP_TOKEN, or one generated and printed at start",
    )
    mcp.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="with --http: also answer browser requests from this origin (loopback origins "
        "always are); may be repeated",
    )
    mcp.add_argument(
        "--leases",
        default="auto",
        metavar="auto|none|unix:PATH|etcd://HOST:PORT",
        help="where leases are decided: auto (the default) finds the root's lease service or "
        "starts one, so every server on the root shares it; none keeps them in this process",
    )
    mcp.add_argument(
        "--no-bash", action="store_true", help="leave the Bash tool out (file tools only)"
    )
    mcp.add_argument(
        "--max-concurrency",
        type=int,
        default=16,
        metavar="N",
        help="at most N calls run at once in this server (default: 16)",
    )


class _NotStarted(Exception):
    """The server could not start: its message is the sentence ``mcp:`` says before exiting."""


def run_mcp(args: argparse.Namespace) -> int:
    """``python -m toolkernel mcp``: 0 once the client has gone (stdin closed, SIGTERM, SIGHUP);
    2 for a wrong option and 1 for a server that could not start, each with one line on stderr
    saying why."""
    missing = missing_extra("mcp", "the mcp command", "mcp", "uvicorn" if args.http else "mcp")
    if missing:
        print(f"mcp: {missing}", file=sys.stderr)
        return 2
    root = os.path.abspath(args.root)
    if not os.path.isdir(root):
        print(f"mcp: --root {args.root!r} is not a directory", file=sys.stderr)
        return 2
    if args.max_concurrency < 1:
        print("mcp: --max-concurrency takes a whole number of at least 1", file=sys.stderr)
        return 2
    if args.leases not in ("auto", "none"):
        from ..leases import parse_leases

        try:
            parse_leases(args.leases)
        except ValueError as exc:
            print(f"mcp: --leases: {exc}", file=sys.stderr)
            return 2
    try:
        with contextlib.ExitStack() as stack:
            sock = None if args.http is None else stack.enter_context(_listen(*args.http))
            leases: str | None = None if args.leases == "none" else args.leases
            if leases == "auto":
                leases = _find_or_start_service(root)
            token = "" if args.http is None else _announce_token(args.http[0])
            anyio.run(_serve, args, root, leases, token, sock, backend="asyncio")
    except _NotStarted as exc:
        print(f"mcp: {exc}", file=sys.stderr)
        return 1
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """The HTTP server's socket, bound before a lease service is started for it."""
    from ..mcp._serve import listen

    try:
        return listen(host, port)
    except OSError as exc:
        raise _NotStarted(f"can't listen on {host}:{port}: {_reason(exc)}") from None


def _reason(exc: OSError) -> str:
    """``[Errno 98] Address already in use`` -> ``address already in use``."""
    why = exc.strerror or str(exc)
    return why[:1].lower() + why[1:]


def _find_or_start_service(root: str) -> str:
    """The ``leases=`` URL of the root's lease service, started if none runs (on trio)."""
    from .._errors import LeaseServiceError
    from ..leases import find_service
    from ..leases._start import find_or_start_service

    try:
        found = find_service(root)
        if found is not None:
            return found
        missing = missing_extra("trio", "starting the root's lease service", "trio")
        if missing is not None:
            raise _NotStarted(f"--leases auto: {missing}; or pass --leases none")
        return find_or_start_service(root)
    except (LeaseServiceError, OSError) as exc:
        raise _NotStarted(str(exc)) from None


def _announce_token(host: str) -> str:
    """The bearer token (``TOOLKERNEL_MCP_TOKEN``, or one made and printed on stderr), after a
    warning if ``host`` is reachable from other machines."""
    from ..mcp._serve import TOKEN_VARIABLE, is_loopback

    token = os.environ.get(TOKEN_VARIABLE, "")
    if not token:
        token = secrets.token_urlsafe(32)
        print(f"mcp: bearer token (set {TOKEN_VARIABLE} to choose it): {token}", file=sys.stderr)
    if not is_loopback(host):
        print(
            f"mcp: listening on {host}, beyond this machine: anyone who can reach it and "
            "has the token can run commands in the root",
            file=sys.stderr,
        )
    return token


async def _serve(
    args: argparse.Namespace,
    root: str,
    leases: str | None,
    token: str,
    sock: socket.socket | None,
) -> None:
    from .. import open_kernel
    from .._errors import LeaseServiceError
    from ..mcp._serve import load_transport, serve_http, serve_stdio
    from ..tools import builtin_tools

    tools = builtin_tools(bash=not args.no_bash)
    load_transport(http=sock is not None)  # all imported before the leases are connected
    opening = open_kernel(tools, root=root, max_concurrency=args.max_concurrency, leases=leases)
    async with contextlib.AsyncExitStack() as stack:
        try:
            kernel = await stack.enter_async_context(opening)
        except LeaseServiceError as exc:  # the service or etcd not there, or refusing
            raise _NotStarted(str(exc)) from None
        except OSError as exc:  # the root gone or unreadable since it was checked
            raise _NotStarted(f"can't open the workspace {root}: {_reason(exc)}") from None
        async with anyio.create_task_group() as tasks:
            # A client stops a stdio server with SIGTERM once it has closed its stdin: what runs
            # is cancelled (its leases returned, a command's changes discarded), then it exits.
            # Over HTTP, uvicorn is told to stop, as it stops on its own signals: cancelled, it
            # reports the lifespan it was cut short in as an error, traceback and all.
            stop = None if sock is None else anyio.Event()
            await tasks.start(_stop_on_signals, tasks.cancel_scope, stop)  # before it listens
            if sock is None:
                await serve_stdio(kernel)
            else:
                await serve_http(
                    kernel,
                    sock,
                    args.http[0],
                    token=token,
                    allowed_origins=args.allow_origin,
                    stop=stop,
                )
            tasks.cancel_scope.cancel()


async def _stop_on_signals(
    scope: anyio.CancelScope,
    stop: anyio.Event | None,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
        task_status.started()  # a signal from now on stops it cleanly
        async for _ in signals:
            if stop is None:
                scope.cancel()
            else:
                stop.set()
            return

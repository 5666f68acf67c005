"""``python -m toolkernel mcp``: the built-in tools, Bash in its sandbox, served to MCP clients."""

from __future__ import annotations

import argparse
import os
import secrets
import signal
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


def run_mcp(args: argparse.Namespace) -> int:
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
    leases: str | None = args.leases
    if leases == "none":
        leases = None
    elif leases == "auto":
        from .._errors import LeaseServiceError
        from ..leases._start import find_or_start_service

        try:
            leases = find_or_start_service(root)
        except (LeaseServiceError, OSError) as exc:
            print(f"mcp: {exc}", file=sys.stderr)
            return 1
    else:
        from ..leases import parse_leases

        try:
            parse_leases(leases)
        except ValueError as exc:
            print(f"mcp: --leases: {exc}", file=sys.stderr)
            return 2
    token = ""
    if args.http is not None:
        from ..mcp._serve import TOKEN_VARIABLE, is_loopback

        token = os.environ.get(TOKEN_VARIABLE, "")
        if not token:
            token = secrets.token_urlsafe(32)
            print(
                f"mcp: bearer token (set {TOKEN_VARIABLE} to choose it): {token}", file=sys.stderr
            )
        host = args.http[0]
        if not is_loopback(host):
            print(
                f"mcp: listening on {host}, beyond this machine: anyone who can reach it and "
                "has the token can run commands in the root",
                file=sys.stderr,
            )
    anyio.run(_serve, args, root, leases, token, backend="asyncio")  # Ctrl-C: 130, from main
    return 0


async def _serve(args: argparse.Namespace, root: str, leases: str | None, token: str) -> None:
    from .. import open_kernel
    from ..mcp._serve import load_transport, serve_http, serve_stdio
    from ..tools import builtin_tools

    tools = builtin_tools(bash=not args.no_bash)
    load_transport(http=args.http is not None)  # all imported before the leases are connected
    async with (
        open_kernel(
            tools, root=root, max_concurrency=args.max_concurrency, leases=leases
        ) as kernel,
        anyio.create_task_group() as tasks,
    ):
        # A client stops a stdio server with SIGTERM once it has closed its stdin: what runs is
        # cancelled (its leases returned, a command's changes discarded), then it exits.
        tasks.start_soon(_stop_on_signals, tasks.cancel_scope)
        if args.http is None:
            await serve_stdio(kernel)
        else:
            host, port = args.http
            await serve_http(kernel, host, port, token=token, allowed_origins=args.allow_origin)
        tasks.cancel_scope.cancel()


async def _stop_on_signals(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
        async for _ in signals:
            scope.cancel()
            return

"""``python -m toolkernel serve``: the lease service for one workspace root."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from .._checks import check_capacity, check_ttl

__all__ = ["add_serve", "run_serve"]


def _pool(text: str) -> tuple[str, int]:
    """``--pool NAME=CAPACITY``, its capacity checked as every pool's is."""
    name, sep, digits = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"write a pool as NAME=CAPACITY, not {text!r}")
    try:
        capacity: object = int(digits)
    except ValueError:
        capacity = digits
    try:
        check_capacity(name, capacity)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (write a pool as NAME=CAPACITY)") from None
    return name, int(digits)


def _seconds(option: str) -> Callable[[str], float]:
    """``OPTION SECONDS``, checked as the lease service checks its ``ttl``."""

    def parse(text: str) -> float:
        try:
            seconds: object = float(text)
        except ValueError:
            seconds = text
        try:
            return check_ttl(option, seconds)
        except (TypeError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def add_serve(commands: Any) -> None:
    serve = commands.add_parser(
        "serve",
        help="share leases among the processes working on one directory (a Unix socket)",
        description="Run a lease service for the workspace ROOT: kernels opened with "
        "leases='unix:PATH' (PATH as printed) take their leases here, so agents in several "
        "processes never run conflicting calls together. Once it listens it prints the "
        "socket's path alone on the first line (for the program that started it to read; on "
        "a terminal a second line says it listens and how to stop it), then runs until Ctrl-C "
        "(SIGINT) or SIGTERM.",
    )
    serve.add_argument("--root", required=True, help="the workspace directory")
    serve.add_argument(
        "--socket",
        metavar="PATH",
        default=None,
        help="where to listen (default: derived from the root, found by "
        "toolkernel.leases.find_service)",
    )
    serve.add_argument(
        "--ttl",
        type=_seconds("--ttl"),
        default=None,
        metavar="SECONDS",
        help="release the leases of a client silent for this long (default: 10)",
    )
    serve.add_argument(
        "--exit-when-idle",
        type=_seconds("--exit-when-idle"),
        default=None,
        metavar="SECONDS",
        help="stop once no client has been connected for this long (a service started on "
        "demand, as 'mcp' does, ends after its last client)",
    )
    serve.add_argument(
        "--pool",
        type=_pool,
        action="append",
        default=[],
        metavar="NAME=CAPACITY",
        help="fix a pool's capacity (else the first client to name a pool sets it); "
        "may be repeated",
    )


def listening(root: str, path: str, idle_exit: float | None) -> str:
    """What ``serve`` says on a terminal once it listens, after the socket's path: where it
    listens, and how it stops."""
    stops = "Ctrl-C to stop"
    if idle_exit is not None:
        stops += f"; it stops by itself once no client has been connected for {idle_exit:g} s"
    return f"toolkernel lease service for {root} listening on unix:{path} ({stops})"


def run_serve(args: argparse.Namespace) -> int:
    import anyio

    from ..leases._service import DEFAULT_TTL, raise_descriptor_limit, serve

    if not os.path.isdir(args.root):
        print(f"serve: {args.root!r} is not a directory", file=sys.stderr)
        return 2
    ttl = DEFAULT_TTL if args.ttl is None else args.ttl
    raise_descriptor_limit()  # one descriptor a client
    root = os.path.abspath(args.root)

    def ready(path: str) -> None:
        # Said to a person only: a program that started it reads the path, the first line,
        # and stops it itself (a service started on demand is nobody's to Ctrl-C).
        if sys.stdout.isatty():
            print(listening(root, path, args.exit_when_idle), flush=True)

    try:
        anyio.run(
            lambda: serve(
                args.root,
                socket_path=args.socket,
                ttl=ttl,
                pools=dict(args.pool),
                idle_exit=args.exit_when_idle,
                ready=ready,
            ),
            backend="trio",
        )
    except OSError as exc:
        print(f"serve: {exc}", file=sys.stderr)
        return 1
    return 0

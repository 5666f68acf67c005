"""``python -m toolkernel``: the command line."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` names (default: ``sys.argv[1:]``); return the exit code."""
    parser = argparse.ArgumentParser(prog="python -m toolkernel", description=__doc__)
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="a scripted agent session, with a live timeline")
    demo.add_argument(
        "--no-latency",
        action="store_true",
        help="don't make calls take their tools' recorded median durations",
    )
    # -- console (its own modules: cli/_console*.py) --
    _add_console(commands)
    args = parser.parse_args(argv)
    if args.command == "demo":
        from ._demo import run_demo  # imported here: ``--help`` needs none of it

        return run_demo(latency=not args.no_latency)
    if args.command == "console":
        return _run_console(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


def _version() -> str:
    from .. import __version__

    return f"toolkernel {__version__}"


def _add_console(commands: Any) -> None:
    console = commands.add_parser(
        "console",
        help="type tool calls, or chat with a model that calls them, and watch them run",
        description="An interactive console over a directory: type calls (Read file_path=a.txt; "
        "Edit ...) that run as one batch, or, with --model, chat with a model that calls the "
        "tools. /help inside lists the commands.",
    )
    console.add_argument("--root", required=True, help="the directory the tools work in")
    console.add_argument(
        "--model",
        metavar="URL",
        help="base URL of a Chat Completions server (https://api.openai.com/v1, "
        "http://localhost:11434/v1 for Ollama); the key comes from OPENAI_API_KEY",
    )
    console.add_argument(
        "--model-name", metavar="NAME", help="the model to ask (default: $OPENAI_MODEL)"
    )
    console.add_argument(
        "--max-steps", type=int, default=30, help="model replies per message (default: 30)"
    )
    console.add_argument("--bash", action="store_true", help="add the Bash tool")
    console.add_argument(
        "--mcp",
        metavar="COMMAND",
        action="append",
        default=[],
        help="also offer the tools of this MCP server, started over stdio (a command line, "
        "such as 'mcp-server-git --repository .'); may be repeated",
    )


def _run_console(args: argparse.Namespace) -> int:
    from ._console import ConsoleOptions, run_console  # imported here: --help needs none of it

    return run_console(
        ConsoleOptions(
            root=args.root,
            model_url=args.model,
            model_name=args.model_name,
            bash=args.bash,
            mcp=tuple(args.mcp),
            max_steps=args.max_steps,
        )
    )

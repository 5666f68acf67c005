"""``python -m toolkernel``: the command line."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import pathlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .. import __version__
from .._extras import missing_extra
from ._mcp import add_mcp, run_mcp
from ._serve import add_serve, run_serve

DESCRIPTION = (
    "toolkernel runs the tool calls of LLM agents at once where they touch different things "
    "and one after the other, in the order they were made, where they conflict. Each command "
    "below has its own --help."
)
"""What ``python -m toolkernel --help`` opens with: plain text, as all help here is (a terminal
shows a docstring's reStructuredText as it is written)."""


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m toolkernel``, with every command."""
    parser = argparse.ArgumentParser(prog="python -m toolkernel", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"toolkernel {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="a scripted agent session, with a live timeline",
        description="A scripted agent explores, edits and tests a temporary copy of a small "
        "project through a kernel, with a live log and timeline of which calls run together "
        "and which wait. Then the same calls run one at a time, and reads together with every "
        "write alone, and it prints the speed-ups and where the Chrome trace (for Perfetto) "
        "was written.",
    )
    demo.add_argument(
        "--no-latency",
        action="store_true",
        help="don't make calls take their tools' recorded median durations",
    )
    demo.add_argument(
        "--agents",
        type=int,
        choices=(1, 2),
        default=1,
        help="2: two agents edit one copy of the project at once, sharing leases through a "
        "lease service (default: 1)",
    )
    # -- demo: its trace file and colours ------------------------------------------------------
    demo.add_argument(
        "--trace",
        type=pathlib.Path,
        default=None,
        metavar="PATH",
        help="where to write the Chrome trace JSON (default: toolkernel-demo-trace.json in the "
        "temporary directory); open it at https://ui.perfetto.dev",
    )
    demo.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the live timeline: on a terminal (auto, the default), always, or never",
    )
    # -- replay ----------------------------------------------------------------------------------
    replay = commands.add_parser(
        "replay",
        help="recorded turns under every scheduling strategy, side by side",
        description="Each recorded turn (JSON lines) runs through the kernel on a virtual clock, "
        "each call taking its recorded duration, beside the schedules of other runtimes; then "
        "where calls waited, and one turn under every strategy drawn as an SVG. With --agents "
        "N, N agent processes replay the turns at once on one fresh tree.",
    )
    replay.add_argument(
        "trace",
        type=pathlib.Path,
        nargs="?",
        default=None,
        help="recorded turns (JSON lines; default: the sample shipped with toolkernel, 764 turns "
        "of real Claude Code sessions)",
    )
    replay.add_argument(
        "--durations",
        choices=("capped", "recorded", "median"),
        default="capped",
        help="each call's duration: as recorded but capped at 30 s (default), as recorded, "
        "or its tool's median",
    )
    replay.add_argument(
        "--turn",
        default=None,
        help="the turn to draw: 's00 turn 7' or its number (default: "
        "the multi-call turn the kernel gains most on)",
    )
    replay.add_argument(
        "--svg",
        type=pathlib.Path,
        default=None,
        metavar="PATH",
        help="where to write the picture (default: toolkernel-replay.svg in the temporary "
        "directory)",
    )
    replay.add_argument(
        "--agents",
        type=_counted("--agents", 1),
        default=1,
        metavar="N",
        help="replay the turns by N agents at once, each its own process, on one fresh tree "
        "with a lease service, then one after the other; every edit is checked to have landed",
    )
    replay.add_argument(
        "--turns",
        type=_counted("--turns", 0),
        default=0,
        metavar="K",
        help="with --agents: only the first K turns (default: all)",
    )
    replay.add_argument(
        "--scale",
        type=_scale,
        default=0.01,
        help="with --agents: each call takes its recorded duration (capped at 30 s) times this, "
        "on the real clock (default: 0.01)",
    )
    # ---------------------------------------------------------------------------------------------
    # -- console (its own modules: cli/_console*.py) --
    _add_console(commands)
    add_serve(commands)  # -- serve (cli/_serve.py) --
    add_mcp(commands)  # -- mcp (cli/_mcp.py) --
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` names (default: ``sys.argv[1:]``); return the exit code.

    Ctrl-C that a command does not handle itself (one while it starts, say) ends it with 130,
    as a shell reports a program ended by SIGINT, and no traceback: what ran has been cancelled
    on the way out."""
    try:
        return _run(build_parser().parse_args(argv))
    except BrokenPipeError:
        # Its reader went (``| head -1``): nothing more to say, and nowhere to say it. Later
        # writes (the interpreter's flush on the way out) go nowhere instead of failing again.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as a shell reports a program ended by SIGPIPE
    except BaseException as exc:
        if not _only_interrupts(exc):
            raise
        return 130


def _counted(option: str, least: int) -> Callable[[str], int]:
    """An option that is a whole number, ``least`` or more."""

    def parse(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            number = least - 1
        if number < least:
            raise argparse.ArgumentTypeError(
                f"{option} must be a whole number, {least} or more, not {text!r}"
            )
        return number

    return parse


def _scale(text: str) -> float:
    """``--scale``: a finite number, 0 or more (0: calls take no time)."""
    try:
        factor = float(text)
    except ValueError:
        factor = math.nan
    if not (math.isfinite(factor) and factor >= 0):
        raise argparse.ArgumentTypeError(
            f"--scale must be a finite number, 0 or more, not {text!r}"
        )
    return factor


def _only_interrupts(exc: BaseException) -> bool:
    """Whether ``exc`` is a ``KeyboardInterrupt``, or a group (from a task group) of them."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(KeyboardInterrupt)[1] is None
    return isinstance(exc, KeyboardInterrupt)


def _run(args: argparse.Namespace) -> int:
    if args.command in ("demo", "replay", "serve"):
        # All run on trio (the replay on its virtual clock), which the [trio] extra brings.
        missing = missing_extra("trio", f"the {args.command} command", "trio")
        if missing is not None:
            print(f"{args.command}: {missing}", file=sys.stderr)
            return 2
    if args.command == "demo":
        from ._demo import run_demo  # imported here: ``--help`` needs none of it

        if args.agents == 2:
            from ._demo_agents import run_demo_agents

            return run_demo_agents(latency=not args.no_latency, color=args.color)
        return run_demo(latency=not args.no_latency, trace=args.trace, color=args.color)
    if args.command == "replay":
        from ._replay import run_replay, run_replay_agents, sample_trace

        if args.trace is None:
            args.trace = sample_trace()
        if args.agents > 1:
            return run_replay_agents(args.trace, args.agents, turns=args.turns, scale=args.scale)
        return run_replay(args.trace, durations=args.durations, turn=args.turn, svg=args.svg)
    if args.command == "console":
        return _run_console(args)
    if args.command == "serve":
        return run_serve(args)
    if args.command == "mcp":
        return run_mcp(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


def _add_console(commands: Any) -> None:
    console = commands.add_parser(
        "console",
        help="type tool calls, or chat with a model that calls them, and watch them run",
        description="An interactive console over a directory: type calls (Read file_path=a.txt; "
        "Edit ...) that run as one batch, or, with --model, chat with a model that calls the "
        "tools. /help inside lists the commands.",
    )
    console.add_argument(
        "--root", default=".", help="the directory the tools work in (default: the current one)"
    )
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
    # Checked before the console's modules are imported: they import prompt_toolkit and rich.
    missing = missing_extra("cli", "the console", "prompt_toolkit", "rich")
    if missing is not None:
        print(f"console: {missing}", file=sys.stderr)
        return 2
    if args.mcp:
        missing = missing_extra("mcp", "--mcp (toolkernel.mcp)", "mcp", "jsonschema", "re2")
        if missing is not None:
            print(f"console: {missing}", file=sys.stderr)
            return 2
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

"""``python -m toolkernel``: the command line."""

from __future__ import annotations

import argparse
import pathlib
from collections.abc import Sequence

from .. import __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` names (default: ``sys.argv[1:]``); return the exit code."""
    parser = argparse.ArgumentParser(prog="python -m toolkernel", description=__doc__)
    parser.add_argument("--version", action="version", version=f"toolkernel {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="a scripted agent session, with a live timeline")
    demo.add_argument(
        "--no-latency",
        action="store_true",
        help="don't make calls take their tools' recorded median durations",
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
        "replay", help="recorded turns under every scheduling strategy, side by side"
    )
    replay.add_argument("trace", type=pathlib.Path, help="recorded turns (JSON lines)")
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
    # ---------------------------------------------------------------------------------------------
    args = parser.parse_args(argv)
    if args.command == "demo":
        from ._demo import run_demo  # imported here: ``--help`` needs none of it

        return run_demo(latency=not args.no_latency, trace=args.trace, color=args.color)
    if args.command == "replay":
        from ._replay import run_replay

        return run_replay(args.trace, durations=args.durations, turn=args.turn, svg=args.svg)
    return 2  # pragma: no cover - argparse rejects unknown commands

"""``python -m toolkernel``: the command line."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` names (default: ``sys.argv[1:]``); return the exit code."""
    parser = argparse.ArgumentParser(prog="python -m toolkernel", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="a scripted agent session, with a live timeline")
    demo.add_argument(
        "--no-latency",
        action="store_true",
        help="don't make calls take their tools' recorded median durations",
    )
    args = parser.parse_args(argv)
    if args.command == "demo":
        from ._demo import run_demo  # imported here: ``--help`` needs none of it

        return run_demo(latency=not args.no_latency)
    return 2  # pragma: no cover - argparse rejects unknown commands

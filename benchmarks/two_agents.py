"""Two agents on one working tree: the same recorded turns replayed by two processes at once,
sharing leases through a lease service, against the same two agents one after the other.

Each agent is a process with its own kernel (``toolkernel._replay._agents``), on the real clock:
every call holds the claims its recorded tool would for its recorded duration (capped at 30 s)
times ``--scale``, and every ``Write``/``Edit``/``MultiEdit`` really edits its file (read, wait,
write back with a line added). Both agents replay the same turns, so they want the same files in
the same order: the worst case for sharing a tree. The makespan counts only the turns (the
processes start, import and connect before the clock starts). Every edit must land: a lost
update would lose a line. Benchmarks are never asserted as tests: read the lines printed.

    .venv/bin/python benchmarks/two_agents.py            # full run: 200 turns, x0.01
    .venv/bin/python benchmarks/two_agents.py --quick    # smoke run: a sample of 10 turns
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from toolkernel._replay._agents import replay_agents

HERE = pathlib.Path(__file__).resolve().parent
TRACE = HERE.parent / "src" / "toolkernel" / "_replay" / "sample-traces" / "claude-code-log.jsonl"
SAMPLE = HERE.parent / "tests" / "replay" / "two_agents_sample.jsonl"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run on the test sample")
    parser.add_argument("--trace", type=pathlib.Path, default=None, help="recorded turns")
    parser.add_argument("--turns", type=int, default=200, help="the first N turns (0: all)")
    parser.add_argument("--scale", type=float, default=0.01, help="durations times this")
    options = parser.parse_args()
    if options.quick:
        trace, turns, scale = SAMPLE, 0, 0.001
    else:
        trace = options.trace or (TRACE if TRACE.is_file() else SAMPLE)
        turns, scale = options.turns, options.scale
    report = replay_agents(trace, agents=2, turns=turns, scale=scale)
    ratio = report.one_after_another / report.together
    print(f"{trace.name}, {turns or 'all'} turns, durations x{scale:g}, 2 agents on one tree")
    print(f"  together:             {report.together:8.2f} s")
    print(f"  one after the other:  {report.one_after_another:8.2f} s   ({ratio:.2f}x)")
    print(f"  edits landed:         {report.landed} of {report.edits}")
    for failure in report.failures:
        print(f"  failed: {failure}")
    return 0 if report.landed == report.edits and not report.failures else 1


if __name__ == "__main__":
    sys.exit(main())

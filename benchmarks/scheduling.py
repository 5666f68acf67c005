"""Scheduling: the kernel's makespan against the schemes other agent runtimes use, side by side.

Every batch of tool calls is scheduled six ways, and each makespan is compared with the batch's
*critical path*: the longest chain of calls, in emission order, in which each call conflicts with
the next (``finish[i] = dur[i] + max(finish[j] for earlier j conflicting with i)``). No schedule
that keeps conflicting calls apart and in emission order can be shorter.

a. **kernel** — the real thing: ``toolkernel.open_kernel`` with fake tools that
   ``await trio.sleep(duration)`` and declare the claims the built-in tools declare (table below),
   on ``trio.testing.MockClock(autojump_threshold=0)`` (``toolkernel._replay.replay_on_kernel``).
   Its makespan must equal the critical path on every batch, exactly; each call's start and
   finish are also checked against the critical path, and no two conflicting calls may overlap.
b. **all-serial** — one call after the other (sum of durations).
c. **coarse read/write** — Claude Code's scheme: consecutive read-only calls run together (at most
   10 at a time), every other call runs alone, in order.
d. **parallelizable flag** — every read-only call of the batch first, all together, then the rest
   one by one in order. Fast, but it runs a read before an earlier write of the same file: the
   *hazards* column counts conflicting pairs it ran out of emission order.
e. **dependency levels** — levels of the conflict DAG (a call's level is one more than the highest
   level of the earlier calls it conflicts with); each level runs as a group behind a barrier, so
   the makespan is the sum over levels of the longest call in each.
f. **gather everything** — every call at once (makespan = the longest call), as most agent
   frameworks do. Unsafe: *hazards* counts conflicting pairs that overlapped in time.

(b)-(f) are computed from the durations (they are plain formulas); (a) is measured. All of it
lives in ``toolkernel._replay``, which ``python -m toolkernel replay`` uses too: this script adds
the synthetic batches and the checks.

Claims are those the built-in tools declare (the table in ``toolkernel._replay``'s ``_turns``):
Read shared, Edit/Write/MultiEdit exclusive on ``file_path``; Grep/Glob/LS/ListDir shared on
``path``; Bash what ``toolkernel.tools.shell_claims(command)`` says; TodoWrite the ``todo``
device; WebFetch/WebSearch nothing; any other tool is a barrier, as is a path that can't be keyed
without the session's root. "Read-only" for (c) and (d) (``is_read_only_call``): Read, Grep,
Glob, LS, ListDir, WebFetch, WebSearch, and a Bash command on the read-only list
(``is_read_only_command``, or ``git status|log|diff|show``). *hazards* counts the conflicting
pairs a scheme ran beside or before each other (``unsafe_pairs``).

Inputs: seeded random batches, and every turn of the recorded Claude Code sessions in
``src/toolkernel/_replay/sample-traces/claude-code-log.jsonl`` (see its README). Recorded durations
include time the agent spent waiting for a user's permission, so the traces are reported three ways:
recorded durations, durations capped at 30 s, and each call's duration replaced by its tool's
median.

The mock clock counts milliseconds: one unit of virtual time is 1 ms, and every duration is a
whole (or half, for medians) number of milliseconds. Sums of such numbers are exact in floating
point, so "makespan == critical path" is checked with ``==``, not with a tolerance. (In seconds,
``MockClock.jump`` adds ``deadline - now`` to its base, which can land one ulp off the deadline.)

Run from the repository root::

    .venv/bin/python benchmarks/scheduling.py            # full run, 2,000 synthetic batches
    .venv/bin/python benchmarks/scheduling.py --quick    # smoke run, 50 synthetic batches

Options: ``--traces PATH``, ``--seed N``, ``--synthetic N``. The exit status is 1 if the kernel
missed the critical path on any batch (each miss is printed in full), else 0.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path as FilePath
from typing import Any, NamedTuple

from toolkernel._replay import (
    BARRIER,
    KNOWN_TOOLS,
    STRATEGIES,
    Comparison,
    RecordedTurn,
    TurnSchedules,
    capped,
    compare,
    load_turns,
    per_tool_medians,
    recorded_call,
)
from toolkernel._replay import CAP_MS as CAP_MS
from toolkernel._replay import coarse as coarse_schedule
from toolkernel._replay import conflict_matrix as conflict_matrix
from toolkernel._replay import critical_path as critical_path
from toolkernel._replay import makespan as makespan

REPO = FilePath(__file__).resolve().parents[1]
# The recorded sessions shipped with toolkernel (``python -m toolkernel replay``'s sample).
DEFAULT_TRACES = REPO / "src" / "toolkernel" / "_replay" / "sample-traces" / "claude-code-log.jsonl"

FULL_SYNTHETIC = 2_000
QUICK_SYNTHETIC = 50

# The names benchmarks/shell.py (and earlier versions of this script) use.
Batch = RecordedTurn
load_traces = load_turns
PATH_TOOLS = frozenset({"Read", "Edit", "Write", "MultiEdit"})
TREE_TOOLS = frozenset({"Grep", "Glob", "LS", "ListDir"})


def coarse(calls: Sequence[Any]) -> float:
    """The makespan of the coarse read/write scheme."""
    return makespan(calls, coarse_schedule(calls))


SYNTHETIC_FILES = (
    "README.md",
    "pyproject.toml",
    "src/app/__init__.py",
    "src/app/core.py",
    "src/app/io.py",
    "src/app/util/text.py",
    "src/app/util/paths.py",
    "tests/test_core.py",
    "tests/test_io.py",
    "docs/guide.md",
)
SYNTHETIC_SPELLINGS = ("./{}", "{}", "src/../{}")  # all key to the same file
SYNTHETIC_TREES = (None, ".", "src", "src/app/util", "tests", "docs")
# tool: (weight, median duration in ms)
SYNTHETIC_TOOLS = {
    "Read": (25, 400),
    "Edit": (20, 600),
    "Bash": (20, 2_000),
    "TodoWrite": (8, 50),
    "Grep": (8, 300),
    "Glob": (5, 100),
    "MultiEdit": (3, 900),
    "Write": (3, 500),
    "WebFetch": (3, 3_000),
    "WebSearch": (2, 5_000),
    "Task": (2, 20_000),  # unknown to the kernel: a barrier
}
SYNTHETIC_COMMANDS = (
    "ls -la src",
    "git status",
    "git diff src/app/core.py",
    "grep -rn TODO src",
    "pytest -q",
    "ruff check src",
    "python -m app --help > out.txt",
    "cat README.md | head -5",
    "mkdir -p build && cp README.md build/",
)


def synthetic_batches(count: int, seed: int) -> list[RecordedTurn]:
    """``count`` random batches of 1 to 12 calls over a small tree, reproducible from ``seed``."""
    rng = random.Random(seed)
    names = list(SYNTHETIC_TOOLS)
    weights = [SYNTHETIC_TOOLS[n][0] for n in names]
    batches = []
    for number in range(count):
        calls = []
        for index in range(rng.randint(1, 12)):
            tool = rng.choices(names, weights)[0]
            args: dict[str, Any] = {}
            if tool in PATH_TOOLS:
                spelling = rng.choice(SYNTHETIC_SPELLINGS)
                args["file_path"] = spelling.format(rng.choice(SYNTHETIC_FILES))
                if rng.random() < 0.02:  # now and then a path that can't be keyed
                    args["file_path"] = "/elsewhere/" + args["file_path"]
            elif tool in TREE_TOOLS:
                args["path"] = rng.choice(SYNTHETIC_TREES)
            elif tool == "Bash":
                args["command"] = rng.choice(SYNTHETIC_COMMANDS)
            median = SYNTHETIC_TOOLS[tool][1]
            ms = max(1, round(rng.lognormvariate(math.log(median), 1.0)))
            calls.append(recorded_call(f"c{index + 1}", tool, args, ms))
        batches.append(RecordedTurn(f"synthetic {number}", tuple(calls)))
    return batches


# -- putting it together -----------------------------------------------------------------------


class Report(NamedTuple):
    title: str
    batches: int
    multi: int
    calls: int
    totals: dict[str, float]  # strategy -> total makespan over all batches, ms
    multi_totals: dict[str, float]  # the same over multi-call batches only
    hazards: dict[str, int]  # strategy -> conflicting pairs run beside or before each other
    misses: list[str]  # batches where the kernel did not match the critical path, described


def describe_miss(scheduled: TurnSchedules) -> str:
    turn = scheduled.turn
    cp = scheduled.starts["cp"]
    lines = [
        f"  {turn.label}: kernel {scheduled.makespan('kernel'):g} ms, critical path "
        f"{scheduled.makespan('cp'):g} ms"
    ]
    for i, call in enumerate(turn.calls):
        claims = ", ".join(str(c) for c in call.claims) or "nothing"
        lines.append(
            f"    {call.id} {call.tool:<10} {call.ms:>9g} ms  kernel "
            f"{scheduled.starts['kernel'][i]:>9g}-{scheduled.kernel_ends[i]:<9g} critical path "
            f"{cp[i]:>9g}-{cp[i] + call.ms:<9g} [{claims}]"
        )
    return "\n".join(lines)


def evaluate(title: str, batches: Sequence[RecordedTurn]) -> Report:
    comparison: Comparison = compare(title, batches)
    keys = [key for _, key in STRATEGIES]
    misses = [describe_miss(t) for t in comparison.misses]
    misses += [f"  not ok: {text}" for text in comparison.kernel.failures]
    return Report(
        title=title,
        batches=len(batches),
        multi=sum(1 for b in batches if len(b.calls) > 1),
        calls=sum(len(b.calls) for b in batches),
        totals={key: comparison.total(key) for key in keys},
        multi_totals={key: comparison.total(key, multi_only=True) for key in keys},
        hazards={key: comparison.unsafe(key) for key in keys},
        misses=misses,
    )


def ratio(value: float, reference: float) -> str:
    return f"{value / reference:.3f}" if reference else "-"


def print_report(report: Report) -> None:
    print()
    print(
        f"{report.title}: {report.batches} batches ({report.multi} with several calls), "
        f"{report.calls} calls"
    )
    print(
        f"  {'strategy':<22}{'all batches s':>14}{'x CP':>8}"
        f"{'multi-call s':>14}{'x CP':>8}  hazards (conflicting pairs run beside or before "
        f"each other)"
    )
    cp, multi_cp = report.totals["cp"], report.multi_totals["cp"]
    for label, key in STRATEGIES:
        total, multi = report.totals[key], report.multi_totals[key]
        print(
            f"  {label:<22}{total / 1000:>14.1f}{ratio(total, cp):>8}"
            f"{multi / 1000:>14.1f}{ratio(multi, multi_cp):>8}  {report.hazards[key]}"
        )
    print(
        f"  batches where the kernel's makespan (or any call's start or finish) != critical "
        f"path: {len(report.misses)}"
    )


def count_fallbacks(batches: Sequence[RecordedTurn]) -> str:
    calls = [c for b in batches for c in b.calls]
    unknown = sum(1 for c in calls if c.tool not in KNOWN_TOOLS)
    unkeyed = sum(1 for c in calls if c.tool in KNOWN_TOOLS and c.claims == BARRIER)
    bash = [c for c in calls if c.tool == "Bash"]
    read_only_bash = sum(1 for c in bash if c.read_only)
    return (
        f"{unknown} calls of tools unknown to the kernel and {unkeyed} with a path that "
        f"can't be keyed run as barriers; {read_only_bash} of {len(bash)} Bash calls read-only"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: few synthetic batches")
    parser.add_argument("--traces", type=FilePath, default=DEFAULT_TRACES, help="JSONL traces")
    parser.add_argument("--seed", type=int, default=20240601, help="seed of synthetic batches")
    parser.add_argument("--synthetic", type=int, default=None, help="number of synthetic batches")
    options = parser.parse_args(argv)
    count = options.synthetic
    if count is None:
        count = QUICK_SYNTHETIC if options.quick else FULL_SYNTHETIC

    began = time.perf_counter()
    synthetic = synthetic_batches(count, options.seed)
    inputs = [(f"Synthetic (seed {options.seed})", synthetic)]
    print("Makespan of each strategy, summed over batches; x CP = ratio to the critical path.")
    if options.traces.exists():
        traces = load_traces(options.traces)
        inputs += [
            ("Traces, recorded durations", traces),
            (f"Traces, durations capped at {CAP_MS // 1000} s", capped(traces)),
            ("Traces, per-tool median durations", per_tool_medians(traces)),
        ]
        print(f"Traces: {options.traces} ({count_fallbacks(traces)}).")
    else:  # --traces named a file that is not there
        print(f"Traces: none at {options.traces} (pass --traces FILE); synthetic batches only.")
    print(f"Synthetic: {count_fallbacks(synthetic)}.")
    reports = [evaluate(title, batches) for title, batches in inputs]
    for report in reports:
        print_report(report)
    misses = [miss for report in reports for miss in report.misses]
    overlaps = sum(report.hazards["kernel"] for report in reports)
    print()
    if misses:
        print(f"KERNEL MISSED THE CRITICAL PATH on {len(misses)} batches:")
        for miss in misses:
            print(miss)
    else:
        batches = sum(report.batches for report in reports)
        print(f"Kernel makespan == critical path on all {batches} batches: PASS")
    print(f"Conflicting calls overlapping under the kernel: {overlaps}")
    print(f"({time.perf_counter() - began:.1f} s of real time)")
    return 1 if misses or overlaps else 0


if __name__ == "__main__":
    sys.exit(main())

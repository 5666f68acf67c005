"""Argument validation: what ``parse_arguments`` costs per call, for the built-in tools' signatures.

The kernel validates every call's arguments before anything else, so this is paid once per call.
For each built-in tool (and the one-``int`` no-op tool of ``overhead.py``), a typical valid call's
arguments go through ``tool.parse_arguments`` N times; the floor is ``dict(arguments)`` (a fresh
dict of the same arguments, the least any validator returning a new dict does), timed in the same
run. A few invalid calls show what writing the model's message costs (paid only on a mistake).

Timing is by ``time.process_time``; each repetition times every case once, interleaved, and each
figure is the best repetition. Nothing is asserted: compare the ``x floor`` column across runs
(this script runs unchanged against earlier versions, which have the same ``parse_arguments``).

Run from the repository root::

    .venv/bin/python benchmarks/validation.py            # 20,000 calls a case, 7 repetitions
    .venv/bin/python benchmarks/validation.py --quick    # 2,000 calls a case, 3 repetitions
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import toolkernel as tk
from toolkernel.tools import builtin_tools


@tk.tool(name="noop_path", claims=lambda a: [tk.reads(f"f{a['i']}")])
async def noop_path(ctx: tk.ToolContext, i: int) -> None:
    """Do nothing (the no-op tool of ``overhead.py``)."""


EDITS = [
    {"old_string": "def f(", "new_string": "def g("},
    {"old_string": "f()", "new_string": "g()", "replace_all": True},
]
TODOS = [
    {"content": "add power()", "status": "completed"},
    {"content": "run the tests", "status": "in_progress", "activeForm": "running the tests"},
]
VALID: list[tuple[str, str, dict[str, Any]]] = [
    ("noop_path", "one int", {"i": 7}),
    ("Read", "file_path", {"file_path": "calc/ops.py"}),
    ("Read", "file_path, offset, limit", {"file_path": "calc/ops.py", "offset": 10, "limit": 50}),
    ("Write", "file_path, content", {"file_path": "a.py", "content": "x = 1\n" * 20}),
    ("Edit", "3 strings", {"file_path": "a.py", "old_string": "x", "new_string": "y"}),
    ("MultiEdit", "2 edits", {"file_path": "a.py", "edits": EDITS}),
    ("Glob", "pattern", {"pattern": "**/*.py"}),
    ("Grep", "pattern, output_mode", {"pattern": "TODO", "output_mode": "content"}),
    ("ListDir", "no arguments", {}),
    ("Move", "2 paths", {"source": "a.py", "destination": "b.py"}),
    ("TodoWrite", "2 todos", {"todos": TODOS}),
    ("Bash", "command, timeout", {"command": "ls", "timeout": 5000}),
]
INVALID: list[tuple[str, str, dict[str, Any]]] = [
    ("Read", "str for an int", {"file_path": "a.py", "limit": "10"}),
    ("Edit", "missing argument", {"file_path": "a.py", "old_string": "x"}),
    ("MultiEdit", "edit missing a key", {"file_path": "a.py", "edits": [{"old_string": "x"}]}),
]


def time_loop(work: Callable[[], object], count: int) -> float:
    """Seconds of CPU per call of ``work``."""
    start = time.process_time()
    for _ in range(count):
        work()
    return (time.process_time() - start) / count


def failing(
    parse: Callable[[Mapping[str, Any]], object], arguments: dict[str, Any]
) -> Callable[[], object]:
    def work() -> object:
        try:
            return parse(arguments)
        except tk.errors.InvalidArgumentsError as exc:
            return exc

    return work


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and repetitions")
    options = parser.parse_args(argv)
    count = 2_000 if options.quick else 20_000
    reps = 3 if options.quick else 7
    tools = {t.name: t for t in [*builtin_tools(bash=True), noop_path]}

    cases: list[tuple[str, Callable[[], object], Callable[[], object]]] = []
    for name, what, arguments in VALID:
        parse = tools[name].parse_arguments
        parse(arguments)  # valid: it must not raise
        cases.append(
            (f"{name} ({what})", lambda p=parse, a=arguments: p(a), lambda a=arguments: dict(a))
        )
    for name, what, arguments in INVALID:
        work = failing(tools[name].parse_arguments, arguments)
        assert isinstance(work(), tk.errors.InvalidArgumentsError), (name, what)
        cases.append((f"{name}, invalid: {what}", work, lambda a=arguments: dict(a)))

    best: dict[str, tuple[float, float]] = {}
    for _ in range(reps):
        for label, work, floor in cases:
            measured = (time_loop(work, count), time_loop(floor, count))
            old = best.get(label)
            best[label] = (
                measured if old is None else (min(old[0], measured[0]), min(old[1], measured[1]))
            )

    print(f"Python {platform.python_version()}, toolkernel {tk.__version__}, best of {reps} reps")
    print(f"  {'case':<44}{'us/call':>9}{'floor us':>10}{'x floor':>9}")
    total = total_floor = 0.0
    for label, _, _ in cases:
        seconds, floor = best[label]
        print(f"  {label:<44}{seconds * 1e6:>9.3f}{floor * 1e6:>10.3f}{seconds / floor:>9.2f}")
        if "invalid" not in label:
            total, total_floor = total + seconds, total_floor + floor
    print(f"Valid calls, all cases together: {total / total_floor:.2f}x the floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())

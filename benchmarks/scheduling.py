"""Scheduling: the kernel's makespan against the schemes other agent runtimes use, side by side.

Every batch of tool calls is scheduled six ways, and each makespan is compared with the batch's
*critical path*: the longest chain of calls, in emission order, in which each call conflicts with
the next (``finish[i] = dur[i] + max(finish[j] for earlier j conflicting with i)``). No schedule
that keeps conflicting calls apart and in emission order can be shorter.

a. **kernel** — the real thing: ``toolkernel.open_kernel`` with fake tools that
   ``await trio.sleep(duration)`` and declare the claims the built-in tools declare (table below),
   on ``trio.testing.MockClock(autojump_threshold=0)``. Its makespan must equal the critical path
   on every batch, exactly; each call's start and finish are also checked against the critical
   path, and no two conflicting calls may overlap.
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

(b)-(f) are computed from the durations (they are plain formulas); (a) is measured.

Claims, as the built-in tools declare them (``DESIGN.md`` section 4):

==========================  =====================================================================
Read                        shared ``file_path``
Edit, Write, MultiEdit      exclusive ``file_path``
Grep, Glob, LS, ListDir     shared subtree of ``path`` (default ``.``, the whole workspace)
Bash                        exclusive workspace; shared workspace if the command is read-only
TodoWrite                   exclusive device ``todo``
WebFetch, WebSearch         nothing (an empty claim list: runs freely)
anything else               nothing declared: a barrier (exclusive on everything)
==========================  =====================================================================

A path that can't be keyed without knowing the session's root (absolute, ``~``, climbing above the
root with ``..``) makes the call a barrier. A Bash command is read-only when its first word is one
of ``ls cat head tail grep rg find wc pwd echo which`` or ``git status|log|diff|show``, ``find`` has
no action that writes or runs (``-delete``, ``-exec``, ...), and the text holds none of ``> < ; &
| ` $(`` or a newline. "Read-only" for (c) and (d): Read, Grep, Glob, LS, ListDir, WebFetch,
WebSearch and read-only Bash.

Inputs: seeded random batches, and every turn of the recorded Claude Code sessions in
``../shared/data/traces/claude-code-log.jsonl`` (see its README). Recorded durations include time
the agent spent waiting for a user's permission, so the traces are reported three ways: recorded
durations, durations capped at 30 s, and each call's duration replaced by its tool's median.

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
import json
import math
import random
import shlex
import statistics
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path as FilePath
from typing import Any, NamedTuple

import trio
import trio.testing

import toolkernel as tk
from toolkernel.locks import EVERYTHING, Claim, Path, canonical_claims, claims_conflict

REPO = FilePath(__file__).resolve().parents[1]
DEFAULT_TRACES = REPO.parent / "shared" / "data" / "traces" / "claude-code-log.jsonl"

COARSE_GROUP_LIMIT = 10  # Claude Code runs at most 10 concurrency-safe calls together
CAP_MS = 30_000  # the cap of the "capped" duration mode
FULL_SYNTHETIC = 2_000
QUICK_SYNTHETIC = 50

# -- claims ------------------------------------------------------------------------------------

READ_ONLY_COMMANDS = frozenset(
    {"ls", "cat", "head", "tail", "grep", "rg", "find", "wc", "pwd", "echo", "which"}
)
READ_ONLY_GIT = frozenset({"status", "log", "diff", "show"})
# Anything that writes, chains or substitutes; '&' also covers '&&' and background jobs.
SHELL_HAZARDS = (">", "<", ";", "&", "|", "`", "$(", "\n")
FIND_ACTIONS = frozenset(
    {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}
)
PATH_TOOLS = {"Read": False, "Edit": True, "Write": True, "MultiEdit": True}  # name -> exclusive
TREE_TOOLS = frozenset({"Grep", "Glob", "LS", "ListDir"})
FREE_TOOLS = frozenset({"WebFetch", "WebSearch"})
READ_ONLY_TOOLS = frozenset({"Read", *TREE_TOOLS, *FREE_TOOLS})
KNOWN_TOOLS = frozenset({*PATH_TOOLS, *TREE_TOOLS, *FREE_TOOLS, "Bash", "TodoWrite"})
BARRIER = (tk.exclusive(EVERYTHING),)


def bash_is_read_only(command: object) -> bool:
    """True iff ``command`` is clearly read-only (a conservative, purely textual check)."""
    if not isinstance(command, str) or any(mark in command for mark in SHELL_HAZARDS):
        return False
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes
        return False
    if not words:
        return False
    if words[0] == "git":
        return (
            len(words) > 1
            and words[1] in READ_ONLY_GIT
            and not any(w.startswith("--output") for w in words)
        )
    if words[0] == "find":
        return not any(w in FIND_ACTIONS for w in words)
    return words[0] in READ_ONLY_COMMANDS


def path_key(raw: object) -> Path | None:
    """The lease key of a workspace-relative spelling, or None if it can't be keyed safely."""
    if not isinstance(raw, str) or not raw or raw.startswith(("/", "~")):
        return None
    try:
        return tk.path(raw)
    except tk.InvalidClaimError:  # '..' above the root, NUL bytes
        return None


def claims_for(tool: str, args: Mapping[str, Any]) -> tuple[Claim, ...]:
    """The canonical claims a call of ``tool`` with ``args`` declares (see the module docstring)."""
    if tool in PATH_TOOLS:
        key = path_key(args.get("file_path"))
        if key is None:
            return BARRIER
        claims = [tk.writes(key) if PATH_TOOLS[tool] else tk.reads(key)]
    elif tool in TREE_TOOLS:
        key = path_key(args.get("path") or ".")
        if key is None:
            return BARRIER
        claims = [tk.reads(key)]
    elif tool == "Bash":
        workspace = tk.path()
        read_only = bash_is_read_only(args.get("command"))
        claims = [tk.shared(workspace) if read_only else tk.exclusive(workspace)]
    elif tool == "TodoWrite":
        claims = [tk.exclusive(tk.device("todo"))]
    elif tool in FREE_TOOLS:
        claims = []
    else:
        return BARRIER
    return canonical_claims(claims)


def is_read_only(tool: str, args: Mapping[str, Any]) -> bool:
    """Read-only in the sense of the coarse scheme (c) and the parallelizable flag (d)."""
    if tool == "Bash":
        return bash_is_read_only(args.get("command"))
    return tool in READ_ONLY_TOOLS


# -- batches -----------------------------------------------------------------------------------


class Call(NamedTuple):
    id: str
    tool: str
    args: dict[str, Any]  # only what the claims depend on
    ms: float  # duration in milliseconds of virtual time
    claims: tuple[Claim, ...]
    read_only: bool


class Batch(NamedTuple):
    label: str
    calls: tuple[Call, ...]


def make_call(call_id: str, tool: str, args: Mapping[str, Any], ms: float) -> Call:
    kept = {k: args[k] for k in ("file_path", "path", "command") if args.get(k) is not None}
    return Call(call_id, tool, kept, ms, claims_for(tool, kept), is_read_only(tool, kept))


def with_durations(batch: Batch, durations: Iterable[float]) -> Batch:
    calls = zip(batch.calls, durations, strict=True)
    return batch._replace(calls=tuple(call._replace(ms=ms) for call, ms in calls))


def load_traces(file: FilePath) -> list[Batch]:
    """Every recorded turn, with its recorded durations rounded to whole milliseconds."""
    batches = []
    with file.open(encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                continue
            turn = json.loads(line)
            calls = tuple(
                make_call(c["id"], c["tool"], c.get("args") or {}, round(c["duration_s"] * 1000))
                for c in turn["calls"]
            )
            batches.append(Batch(f"{turn['session']} turn {turn['turn']}", calls))
    return batches


def capped(batches: Sequence[Batch]) -> list[Batch]:
    return [with_durations(b, (min(c.ms, CAP_MS) for c in b.calls)) for b in batches]


def per_tool_medians(batches: Sequence[Batch]) -> list[Batch]:
    by_tool: dict[str, list[float]] = {}
    for batch in batches:
        for call in batch.calls:
            by_tool.setdefault(call.tool, []).append(call.ms)
    median = {tool: statistics.median(values) for tool, values in by_tool.items()}
    return [with_durations(b, (median[c.tool] for c in b.calls)) for b in batches]


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


def synthetic_batches(count: int, seed: int) -> list[Batch]:
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
            calls.append(make_call(f"c{index + 1}", tool, args, ms))
        batches.append(Batch(f"synthetic {number}", tuple(calls)))
    return batches


# -- the strategies computed from durations ----------------------------------------------------


def conflict_matrix(calls: Sequence[Call]) -> list[list[bool]]:
    n = len(calls)
    matrix = [[False] * n for _ in range(n)]
    for i in range(n):
        for j in range(i):
            hit = any(claims_conflict(a, b) for a in calls[i].claims for b in calls[j].claims)
            matrix[i][j] = matrix[j][i] = hit
    return matrix


def critical_path(calls: Sequence[Call], conflicts: list[list[bool]]) -> list[float]:
    """Each call's finish time on the critical path schedule (it starts when every earlier
    conflicting call has finished)."""
    finish: list[float] = []
    for i, call in enumerate(calls):
        start = max((finish[j] for j in range(i) if conflicts[i][j]), default=0)
        finish.append(start + call.ms)
    return finish


def coarse(calls: Sequence[Call]) -> float:
    total, group = 0.0, 0.0
    size = 0
    for call in calls:
        if call.read_only and size < COARSE_GROUP_LIMIT:
            group, size = max(group, call.ms), size + 1
            continue
        total, group, size = total + group, 0.0, 0
        if call.read_only:
            group, size = call.ms, 1
        else:
            total += call.ms
    return total + group


def parallelizable_flag(calls: Sequence[Call], conflicts: list[list[bool]]) -> tuple[float, int]:
    """Makespan, and conflicting pairs run out of emission order (a read moved before a write)."""
    reads = [c.ms for c in calls if c.read_only]
    makespan = max(reads, default=0) + sum(c.ms for c in calls if not c.read_only)
    reordered = sum(
        1
        for i, call in enumerate(calls)
        if call.read_only
        for j in range(i)
        if conflicts[i][j] and not calls[j].read_only
    )
    return makespan, reordered


def dependency_levels(calls: Sequence[Call], conflicts: list[list[bool]]) -> float:
    level: list[int] = []
    longest: dict[int, float] = {}
    for i, call in enumerate(calls):
        mine = 1 + max((level[j] for j in range(i) if conflicts[i][j]), default=0)
        level.append(mine)
        longest[mine] = max(longest.get(mine, 0), call.ms)
    return sum(longest.values())


def gather(calls: Sequence[Call], conflicts: list[list[bool]]) -> tuple[float, int]:
    """Makespan, and conflicting pairs that overlapped (all start at 0; both must take time)."""
    overlapped = sum(
        1
        for i in range(len(calls))
        for j in range(i)
        if conflicts[i][j] and calls[i].ms > 0 and calls[j].ms > 0
    )
    return max((c.ms for c in calls), default=0), overlapped


# -- the kernel --------------------------------------------------------------------------------


def fake_tool(name: str) -> tk.Tool:
    """A tool that sleeps ``ms`` units of virtual time and declares what ``name`` declares."""

    async def run(
        ctx: tk.ToolContext,
        ms: float,
        file_path: str | None = None,
        path: str | None = None,
        command: str | None = None,
    ) -> None:
        await trio.sleep(ms)

    if name not in KNOWN_TOOLS:
        return tk.tool(name=name)(run)  # declares nothing: the kernel makes it a barrier
    return tk.tool(name=name, claims=lambda args: claims_for(name, args))(run)


class KernelRun(NamedTuple):
    makespan: float
    starts: list[float]
    finishes: list[float]
    not_ok: list[str]


async def run_on_kernel(batches: Sequence[Batch]) -> list[KernelRun]:
    """Run every batch, one after the other, through one kernel; times relative to each start."""
    names = sorted({call.tool for batch in batches for call in batch.calls})
    runs = []
    async with tk.open_kernel(tools=[fake_tool(n) for n in names]) as kernel:
        for batch in batches:
            calls = [tk.ToolCall(c.id, c.tool, {**c.args, "ms": c.ms}) for c in batch.calls]
            begin = trio.current_time()
            results = await kernel.run(calls)
            starts = [math.nan if r.started_at is None else r.started_at - begin for r in results]
            finishes = [r.finished_at - begin for r in results]
            not_ok = [f"{r.call_id}: {r.status.name} {r.error}" for r in results if not r.ok]
            runs.append(KernelRun(max(finishes, default=0.0), starts, finishes, not_ok))
    return runs


def kernel_runs(batches: Sequence[Batch]) -> list[KernelRun]:
    async def main() -> list[KernelRun]:
        return await run_on_kernel(batches)

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


# -- putting it together -----------------------------------------------------------------------

STRATEGIES = (
    ("critical path", "cp"),
    ("kernel (toolkernel)", "kernel"),
    ("all-serial", "serial"),
    ("coarse read/write", "coarse"),
    ("parallelizable flag", "flag"),
    ("dependency levels", "levels"),
    ("gather everything", "gather"),
)


class Report(NamedTuple):
    title: str
    batches: int
    multi: int
    calls: int
    totals: dict[str, float]  # strategy -> total makespan over all batches, ms
    multi_totals: dict[str, float]  # the same over multi-call batches only
    hazards: dict[str, int]
    misses: list[str]  # batches where the kernel did not match the critical path, described
    kernel_overlaps: int  # conflicting pairs that overlapped under the kernel (must be 0)


def describe_miss(batch: Batch, run: KernelRun, finish: list[float]) -> str:
    lines = [f"  {batch.label}: kernel {run.makespan:g} ms, critical path {max(finish):g} ms"]
    for i, call in enumerate(batch.calls):
        claims = ", ".join(str(c) for c in call.claims) or "nothing"
        expected = finish[i] - call.ms
        lines.append(
            f"    {call.id} {call.tool:<10} {call.ms:>9g} ms  kernel {run.starts[i]:>9g}"
            f"-{run.finishes[i]:<9g} critical path {expected:>9g}-{finish[i]:<9g} [{claims}]"
        )
    lines.extend(f"    not ok: {text}" for text in run.not_ok)
    return "\n".join(lines)


def evaluate(title: str, batches: Sequence[Batch]) -> Report:
    runs = kernel_runs(batches)
    totals = dict.fromkeys((key for _, key in STRATEGIES), 0.0)
    multi_totals = dict(totals)
    hazards = {"flag": 0, "gather": 0}
    misses = []
    kernel_overlaps = 0
    for batch, run in zip(batches, runs, strict=True):
        calls = batch.calls
        conflicts = conflict_matrix(calls)
        finish = critical_path(calls, conflicts)
        flag, reordered = parallelizable_flag(calls, conflicts)
        unsafe, overlapped = gather(calls, conflicts)
        spans = {
            "cp": max(finish, default=0.0),
            "kernel": run.makespan,
            "serial": sum(c.ms for c in calls),
            "coarse": coarse(calls),
            "flag": flag,
            "levels": dependency_levels(calls, conflicts),
            "gather": unsafe,
        }
        hazards["flag"] += reordered
        hazards["gather"] += overlapped
        for key, span in spans.items():
            totals[key] += span
            if len(calls) > 1:
                multi_totals[key] += span
        exact = all(
            run.starts[i] == finish[i] - c.ms and run.finishes[i] == finish[i]
            for i, c in enumerate(calls)
        )
        if run.makespan != spans["cp"] or not exact or run.not_ok:
            misses.append(describe_miss(batch, run, finish))
        kernel_overlaps += sum(
            1
            for i in range(len(calls))
            for j in range(i)
            if conflicts[i][j]
            and run.starts[i] < run.finishes[j]
            and run.starts[j] < run.finishes[i]
        )
    return Report(
        title=title,
        batches=len(batches),
        multi=sum(1 for b in batches if len(b.calls) > 1),
        calls=sum(len(b.calls) for b in batches),
        totals=totals,
        multi_totals=multi_totals,
        hazards=hazards,
        misses=misses,
        kernel_overlaps=kernel_overlaps,
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
        f"{'multi-call s':>14}{'x CP':>8}  hazards"
    )
    cp, multi_cp = report.totals["cp"], report.multi_totals["cp"]
    hazard_text = {
        "flag": f"{report.hazards['flag']} conflicting pairs run out of order",
        "gather": f"{report.hazards['gather']} conflicting pairs overlapped",
        "kernel": f"{report.kernel_overlaps} conflicting pairs overlapped",
    }
    for label, key in STRATEGIES:
        total, multi = report.totals[key], report.multi_totals[key]
        print(
            f"  {label:<22}{total / 1000:>14.1f}{ratio(total, cp):>8}"
            f"{multi / 1000:>14.1f}{ratio(multi, multi_cp):>8}  {hazard_text.get(key, '')}"
        )
    print(
        f"  batches where the kernel's makespan (or any call's start or finish) != critical "
        f"path: {len(report.misses)}"
    )


def count_fallbacks(batches: Sequence[Batch]) -> str:
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
    traces = load_traces(options.traces)
    inputs = [
        (f"Synthetic (seed {options.seed})", synthetic),
        ("Traces, recorded durations", traces),
        (f"Traces, durations capped at {CAP_MS // 1000} s", capped(traces)),
        ("Traces, per-tool median durations", per_tool_medians(traces)),
    ]
    print("Makespan of each strategy, summed over batches; x CP = ratio to the critical path.")
    print(f"Traces: {options.traces} ({count_fallbacks(traces)}).")
    print(f"Synthetic: {count_fallbacks(synthetic)}.")
    reports = [evaluate(title, batches) for title, batches in inputs]
    for report in reports:
        print_report(report)
    misses = [miss for report in reports for miss in report.misses]
    overlaps = sum(report.kernel_overlaps for report in reports)
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

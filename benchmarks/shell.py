"""Shell commands with their own claims: the recorded turns replayed, and Landlock's cost.

Part 1 replays every recorded turn of ``../shared/data/traces/claude-code-log.jsonl`` (the
inputs and the claims of the other tools are those of ``scheduling.py``) with each Bash call
declaring ``toolkernel.tools.shell_claims(command)``, and compares, on the turns with several
calls:

a. **kernel, shell claims** — measured: ``open_kernel`` with fake tools sleeping each call's
   duration on ``MockClock``; its makespan must equal the critical path, and no two conflicting
   calls may overlap;
b. **all-serial**;
c. **kernel, old barrier scheme** — the critical path when a command holds the whole workspace
   (shared if the old allow-list, ``is_read_only_command``, calls it read-only, else exclusive);
d. **coarse, every shell command alone** — consecutive read-only tool calls run together (at
   most 10), every Bash call and every write alone;
e. **coarse, reading shell commands with the reads** — the same, but a Bash call whose claims
   are all shared counts as a read (what Claude Code does with its read-only command list).

It also reports the share of Bash calls, and of Bash time, that no longer hold the whole
workspace exclusively. Targets (multi-call turns, durations capped at 30 s): (a) >= 1.3x faster
than (b) and >= 1.1x faster than (d), with no conflicting overlap.

Part 2 runs a few commands through the real Bash tool, confined by Landlock and unconfined, in
one run, interleaved, and reports the cost per command.

Run from the repository root::

    .venv/bin/python benchmarks/shell.py            # full run
    .venv/bin/python benchmarks/shell.py --quick    # smoke run: fewer Landlock repetitions

Prints PASS or MISS beside each target; never fails on a figure.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import trio
import trio.testing

import toolkernel as tk
from toolkernel.locks import Claim, Mode, Path, canonical_claims
from toolkernel.tools import builtin_tools, is_read_only_command, shell_claims
from toolkernel.tools.shell import _confine

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import scheduling

WORKSPACE = tk.path()
OLD_SHARED = (tk.shared(WORKSPACE),)
OLD_EXCLUSIVE = (tk.exclusive(WORKSPACE),)


# -- claims of each scheme ---------------------------------------------------------------------


def is_barrier(claims: Sequence[Claim]) -> bool:
    """True if ``claims`` hold the whole workspace (or everything) exclusively."""
    return any(
        c.mode is Mode.EXCLUSIVE and (not isinstance(c.resource, Path) or c.resource == WORKSPACE)
        for c in claims
    )


def only_reads(claims: Sequence[Claim]) -> bool:
    return all(c.mode is Mode.SHARED for c in claims)


def with_shell_claims(batch: scheduling.Batch, old: bool) -> scheduling.Batch:
    """``batch`` with each Bash call declaring its shell claims (or the old scheme's)."""
    calls = []
    for call in batch.calls:
        if call.tool == "Bash":
            command = str(call.args.get("command", ""))
            if old:
                claims = OLD_SHARED if is_read_only_command(command) else OLD_EXCLUSIVE
            else:
                claims = canonical_claims(shell_claims(command))
            call = call._replace(claims=claims, read_only=only_reads(claims))
        calls.append(call)
    return batch._replace(calls=tuple(calls))


def shell_alone(batch: scheduling.Batch) -> scheduling.Batch:
    """Coarse split (d): every Bash call counts as a write."""
    calls = tuple(c._replace(read_only=False) if c.tool == "Bash" else c for c in batch.calls)
    return batch._replace(calls=calls)


# -- the kernel --------------------------------------------------------------------------------


def fake_tools(names: Sequence[str], table: Mapping[str, Sequence[Claim]]) -> list[tk.Tool]:
    tools = []
    for name in names:

        async def run(ctx: tk.ToolContext, ms: float, key: str) -> None:
            await trio.sleep(ms)

        def claims(args: Mapping[str, Any]) -> Sequence[Claim]:
            return table[args["key"]]

        tools.append(tk.tool(name=name, claims=claims)(run))
    return tools


class Run(NamedTuple):
    makespan: float
    starts: list[float]
    finishes: list[float]


def run_kernel(batches: Sequence[scheduling.Batch]) -> list[Run]:
    table = {
        f"{b}/{c}": call.claims
        for b, batch in enumerate(batches)
        for c, call in enumerate(batch.calls)
    }
    names = sorted({call.tool for batch in batches for call in batch.calls})

    async def main() -> list[Run]:
        runs = []
        async with tk.open_kernel(tools=fake_tools(names, table)) as kernel:
            for b, batch in enumerate(batches):
                calls = [
                    tk.ToolCall(call.id, call.tool, {"ms": call.ms, "key": f"{b}/{c}"})
                    for c, call in enumerate(batch.calls)
                ]
                begin = trio.current_time()
                results = await kernel.run(calls)
                assert all(r.ok for r in results), [r.error for r in results if not r.ok]
                starts = [
                    math.nan if r.started_at is None else r.started_at - begin for r in results
                ]
                finishes = [r.finished_at - begin for r in results]
                runs.append(Run(max(finishes, default=0.0), starts, finishes))
        return runs

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def ends(calls: Sequence[Any], starts: Sequence[float]) -> list[float]:
    """When each call ends, given when it starts."""
    return [start + call.ms for call, start in zip(calls, starts, strict=True)]


class Figures(NamedTuple):
    totals: dict[str, float]
    misses: int
    overlaps: int


def replay(batches: Sequence[scheduling.Batch]) -> Figures:
    """Makespans of each scheme, summed over ``batches``."""
    new = [with_shell_claims(b, old=False) for b in batches]
    old = [with_shell_claims(b, old=True) for b in batches]
    runs = run_kernel(new)
    totals = dict.fromkeys(("kernel", "cp", "serial", "old", "alone", "reads"), 0.0)
    misses = overlaps = 0
    for new_batch, old_batch, run in zip(new, old, runs, strict=True):
        calls = new_batch.calls
        conflicts = scheduling.conflict_matrix(calls)
        finish = ends(calls, scheduling.critical_path(calls, conflicts))
        old_finish = ends(
            old_batch.calls,
            scheduling.critical_path(old_batch.calls, scheduling.conflict_matrix(old_batch.calls)),
        )
        totals["kernel"] += run.makespan
        totals["cp"] += max(finish, default=0.0)
        totals["serial"] += sum(c.ms for c in calls)
        totals["old"] += max(old_finish, default=0.0)
        totals["alone"] += scheduling.coarse(shell_alone(new_batch).calls)
        totals["reads"] += scheduling.coarse(calls)
        misses += run.makespan != max(finish, default=0.0)
        overlaps += sum(
            1
            for i in range(len(calls))
            for j in range(i)
            if conflicts[i][j]
            and run.starts[i] < run.finishes[j]
            and run.starts[j] < run.finishes[i]
        )
    return Figures(totals, misses, overlaps)


def shares(batches: Sequence[scheduling.Batch]) -> tuple[int, int, int, float, float, float]:
    """Bash calls, barriers before and after, and Bash time (ms) and its barrier parts."""
    bash = [c for b in batches for c in b.calls if c.tool == "Bash"]
    commands = [str(c.args.get("command", "")) for c in bash]
    old = [not is_read_only_command(command) for command in commands]
    new = [is_barrier(shell_claims(command)) for command in commands]
    time_all = sum(c.ms for c in bash)
    time_old = sum(c.ms for c, barrier in zip(bash, old, strict=True) if barrier)
    time_new = sum(c.ms for c, barrier in zip(bash, new, strict=True) if barrier)
    return len(bash), sum(old), sum(new), time_all, time_old, time_new


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def report_replay(traces: pathlib.Path) -> None:
    if not traces.exists():  # the recorded sessions live beside the repository, not in it
        print(f"Traces: none at {traces} (pass --traces FILE); no replay.")
        return
    loaded = scheduling.load_traces(traces)
    capped = scheduling.capped(loaded)
    multi = [b for b in capped if len(b.calls) > 1]
    count, old, new, time_all, time_old, time_new = shares(capped)
    print(f"Traces: {traces}: {len(loaded)} turns, {len(multi)} with several calls.")
    print(
        f"Bash calls holding the whole workspace exclusively: {old} of {count} before "
        f"(allow-list), {new} now; no longer a barrier: {(old - new) / count:.0%} of the calls, "
        f"{(time_old - time_new) / time_all:.0%} of Bash time (capped at 30 s); "
        f"{(count - new) / count:.0%} of the calls and {(time_all - time_new) / time_all:.0%} of "
        f"the time are not barriers now."
    )
    for title, batches in (
        ("multi-call turns, durations capped at 30 s", multi),
        ("multi-call turns, recorded durations", [b for b in loaded if len(b.calls) > 1]),
        (
            "multi-call turns, per-tool median durations",
            [b for b in scheduling.per_tool_medians(loaded) if len(b.calls) > 1],
        ),
    ):
        figures = replay(batches)
        t = figures.totals
        print(f"\n{title}: makespan, summed (s), and the kernel's speed-up over each")
        rows = (
            ("kernel, shell claims", "kernel"),
            ("critical path", "cp"),
            ("all-serial", "serial"),
            ("kernel, old barrier scheme", "old"),
            ("coarse, every shell command alone", "alone"),
            ("coarse, reading shell commands with reads", "reads"),
        )
        for label, key in rows:
            speed = t[key] / t["kernel"] if t["kernel"] else math.nan
            print(f"  {label:<44}{t[key] / 1000:>10.1f} s   x{speed:.3f}")
        print(
            f"  kernel makespan != critical path on {figures.misses} turns; conflicting calls "
            f"overlapping: {figures.overlaps}"
        )
        if title.startswith("multi-call turns, durations capped"):
            serial = t["serial"] / t["kernel"]
            alone = t["alone"] / t["kernel"]
            print(
                f"  target >= 1.3x faster than all-serial: x{serial:.3f} {verdict(serial >= 1.3)}"
            )
            print(
                f"  target >= 1.1x faster than every shell command alone: x{alone:.3f} "
                f"{verdict(alone >= 1.1)}"
            )
            print(f"  target zero conflicting overlaps: {verdict(figures.overlaps == 0)}")
            print(f"  target makespan == critical path: {verdict(figures.misses == 0)}")


# -- Landlock's cost ---------------------------------------------------------------------------

COMMANDS = (
    "true",
    "cat a.txt",
    "ls -la",
    "grep -n x a.txt > found.txt",
    "mkdir -p build && cp a.txt build/",
)


def time_commands(repetitions: int) -> dict[tuple[str, bool], list[float]]:
    """Seconds per Bash call of each command, confined and not, interleaved in one run."""
    found: dict[tuple[str, bool], list[float]] = {}
    real_abi = _confine.landlock_abi

    async def main(root: pathlib.Path) -> None:
        async with tk.open_kernel(builtin_tools(bash=True), root=root) as kernel:
            for _ in range(repetitions):
                for command in COMMANDS:
                    for confined in (True, False):
                        _confine.landlock_abi = real_abi if confined else (lambda: 0)
                        call = tk.ToolCall("b", "Bash", {"command": command})
                        began = time.perf_counter()
                        (result,) = await kernel.run([call])
                        elapsed = time.perf_counter() - began
                        assert result.ok, result.error
                        found.setdefault((command, confined), []).append(elapsed)
        _confine.landlock_abi = real_abi

    _confine._noted = True  # the once-only note about unconfined commands is not measured
    with tempfile.TemporaryDirectory() as directory:
        root = pathlib.Path(directory)
        (root / "a.txt").write_text("a\nx\n" * 100)
        trio.run(main, root)
    return found


def report_landlock(repetitions: int) -> None:
    abi = _confine.landlock_abi()
    print(f"\nLandlock: ABI {abi} on this kernel; {repetitions} runs of each command, interleaved")
    if abi <= 0:
        print("  no Landlock here: nothing to measure")
        return
    found = time_commands(repetitions)
    extra = []
    for command in COMMANDS:
        confined = statistics.median(found[(command, True)]) * 1000
        free = statistics.median(found[(command, False)]) * 1000
        extra.append(confined - free)
        print(
            f"  {command:<34} confined {confined:7.2f} ms   unconfined {free:7.2f} ms   "
            f"+{confined - free:.2f} ms  x{confined / free:.2f}"
        )
    cost = statistics.median(extra)
    print(f"  Landlock's cost per command (median of the differences): {cost:.2f} ms")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: few Landlock runs")
    parser.add_argument("--traces", type=pathlib.Path, default=scheduling.DEFAULT_TRACES)
    options = parser.parse_args(argv)
    report_replay(options.traces)
    report_landlock(5 if options.quick else 40)
    return 0


if __name__ == "__main__":
    sys.exit(main())

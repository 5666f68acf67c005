"""Kernel overhead: no-op calls through the kernel against bare ``nursery.start_soon``, one run.

What is measured, on trio's real clock (``trio.run`` default), in one process:

a. **bare** — a nursery, ``nursery.start_soon(noop)`` for each of N calls, the nursery closed:
   the least any trio scheduler can do to run N coroutines concurrently.
b. **kernel, distinct paths** — ``await kernel.run(calls)`` of N calls of a no-op tool declared
   ``claims=lambda a: [reads(f"f{a['i']}")]``: admission (argument validation, claims), one lease
   request and release each, a task each, a result each.
c. **kernel, no claims** — the same with ``claims=lambda a: []``: nothing to lock.

Target (``DESIGN.md`` section 6): (b) within 3x of (a) per call. For information, the same with
one call per batch: N times ``kernel.run([call])`` against N times a nursery with one
``start_soon``; this includes a batch's fixed costs and the wake-up of the waiting ``run``.

The ``ToolCall`` objects are built before the clock starts (the model's JSON is not the kernel's
work). Timing is by ``time.process_time``, the CPU time of this process, with the garbage
collector on: everything measured is CPU work in this process, and CPU time leaves out the time
other processes on a busy machine take from it. Each repetition times
every variant once, interleaved, and each figure is the best repetition. Benchmarks are never
asserted as tests: read the PASS/MISS line.

Run from the repository root::

    .venv/bin/python benchmarks/overhead.py            # full run: 10,000 calls, 7 repetitions
    .venv/bin/python benchmarks/overhead.py --quick    # smoke run: 2,000 calls, 3 repetitions
    .venv/bin/python benchmarks/overhead.py --profile  # also cProfile one kernel batch
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import platform
import pstats
import sys
import time
from collections.abc import Awaitable, Callable, Sequence

import trio

import toolkernel as tk

TARGET = 3.0


async def noop() -> None:
    pass


@tk.tool(name="noop_path", claims=lambda a: [tk.reads(f"f{a['i']}")])
async def noop_path(ctx: tk.ToolContext, i: int) -> None:
    """Do nothing, holding a shared lease on a path of its own."""


@tk.tool(name="noop_free", claims=lambda a: [])
async def noop_free(ctx: tk.ToolContext, i: int) -> None:
    """Do nothing, holding nothing."""


def batch_of(tool: str, count: int) -> list[tk.ToolCall]:
    return [tk.ToolCall(f"c{i}", tool, {"i": i}) for i in range(count)]


async def timed(action: Callable[[], Awaitable[object]]) -> float:
    began = time.process_time()
    await action()
    return time.process_time() - began


async def measure(count: int, reps: int, singles: int) -> dict[str, float]:
    """Best seconds per call of each variant over ``reps`` interleaved repetitions."""
    best: dict[str, float] = {}
    async with tk.open_kernel(tools=[noop_path, noop_free]) as kernel:

        async def bare() -> None:
            async with trio.open_nursery() as nursery:
                for _ in range(count):
                    nursery.start_soon(noop)

        async def bare_single() -> None:
            for _ in range(singles):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(noop)

        for rep in range(reps):
            # Fresh call objects each time: call ids are looked up across batches by after=.
            paths, free = batch_of("noop_path", count), batch_of("noop_free", count)
            singles_calls = [[call] for call in batch_of("noop_path", singles)]

            async def kernel_paths(calls: list[tk.ToolCall] = paths) -> None:
                results = await kernel.run(calls)
                assert all(r.ok for r in results), results[0]

            async def kernel_free(calls: list[tk.ToolCall] = free) -> None:
                results = await kernel.run(calls)
                assert all(r.ok for r in results), results[0]

            async def kernel_single(batches: list[list[tk.ToolCall]] = singles_calls) -> None:
                for batch in batches:
                    (result,) = await kernel.run(batch)
                    assert result.ok, result

            variants = {
                "bare": (bare, count),
                "kernel": (kernel_paths, count),
                "kernel_free": (kernel_free, count),
                "bare_single": (bare_single, singles),
                "kernel_single": (kernel_single, singles),
            }
            order = list(variants)
            if rep % 2:  # alternate the order so neither side always runs on a warmer heap
                order.reverse()
            for name in order:
                action, n = variants[name]
                gc.collect()
                per_call = await timed(action) / n
                best[name] = min(best.get(name, per_call), per_call)
    return best


HOT_FILES = ("toolkernel/kernel/_kernel.py", "toolkernel/locks/_table.py")


async def profile_one_batch(count: int) -> str:
    """cProfile of one kernel batch of ``count`` distinct-path no-op calls (garbage collector off,
    so its pauses are not charged to whichever function happened to allocate): each source
    file's share of the time, then the hot spots of the kernel and of the lease table."""
    profiler = cProfile.Profile()
    async with tk.open_kernel(tools=[noop_path]) as kernel:
        await kernel.run(batch_of("noop_path", count))  # warm up
        calls = batch_of("noop_path", count)
        gc.collect()
        gc.disable()
        profiler.enable()
        await kernel.run(calls)
        profiler.disable()
        gc.enable()
    stats = pstats.Stats(profiler)
    rows = stats.stats  # type: ignore[attr-defined]
    total = sum(row[2] for row in rows.values())
    by_file: dict[str, float] = {}
    for (file, _, _), row in rows.items():
        short = file.split("site-packages/")[-1].split("src/")[-1]
        by_file[short] = by_file.get(short, 0.0) + row[2]
    lines = [f"  {'own time':>8}  file (cProfile, {count:,} calls, {total:.2f} s in all)"]
    for file, seconds in sorted(by_file.items(), key=lambda item: -item[1])[:8]:
        lines.append(f"  {seconds / total:>8.1%}  {file}")
    for hot in HOT_FILES:
        lines.append("")
        header = f"  {'own us':>7}{'cum us':>8}{'calls':>8}"
        lines.append(f"{header}  function in {hot} (microseconds per kernel call)")
        mine = [(key, row) for key, row in rows.items() if key[0].endswith(hot)]
        mine.sort(key=lambda item: -item[1][2])
        for (_, line, name), (_, ncalls, own, cumulative, _) in mine[:8]:
            lines.append(
                f"  {own / count * 1e6:>7.2f}{cumulative / count * 1e6:>8.2f}"
                f"{ncalls:>8}  {name} (line {line})"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer calls and reps")
    parser.add_argument("--calls", type=int, default=None, help="calls per batch")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (best is kept)")
    parser.add_argument("--profile", action="store_true", help="cProfile one kernel batch")
    options = parser.parse_args(argv)
    count = options.calls or (2_000 if options.quick else 10_000)
    reps = options.reps or (3 if options.quick else 7)
    singles = count // 5

    best = trio.run(measure, count, reps, singles)
    us = {name: seconds * 1e6 for name, seconds in best.items()}
    print(f"Python {platform.python_version()}, trio {trio.__version__}, best of {reps} reps")
    print(f"  {'variant':<52}{'us/call':>9}{'x bare':>9}")
    rows = [
        (f"bare nursery.start_soon, {count:,} per nursery", "bare", "bare"),
        (f"kernel.run, {count:,} calls, distinct paths", "kernel", "bare"),
        (f"kernel.run, {count:,} calls, no claims", "kernel_free", "bare"),
        (f"bare nursery, 1 start_soon each, x{singles:,}", "bare_single", "bare_single"),
        (f"kernel.run of 1 call, x{singles:,}", "kernel_single", "bare_single"),
    ]
    for label, name, against in rows:
        print(f"  {label:<52}{us[name]:>9.2f}{us[name] / us[against]:>9.2f}")
    ratio = best["kernel"] / best["bare"]
    verdict = "PASS" if ratio <= TARGET else "MISS"
    print(f"Kernel overhead, distinct paths: {ratio:.2f}x bare (target <= {TARGET:g}x): {verdict}")
    if options.profile or ratio > TARGET:
        print()
        print(f"Where the time goes in one kernel batch of {count:,} calls:")
        print(trio.run(profile_one_batch, count))
    return 0


if __name__ == "__main__":
    sys.exit(main())

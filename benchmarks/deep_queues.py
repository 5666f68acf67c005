"""Deep queues and big batches: the kernel's cost stays linear in the number of calls.

In one process, on trio's real clock, each figure the best of a few repetitions:

a. **One file, many waiters** — n calls all writing one file (each waits for the one before)
   run to completion, and n such calls queued then all cancelled with ``cancel_all``; seconds
   in all and per call, for growing n. Target: 10,000 of them run in <= 1 s and cancel in
   <= 1 s, and the cost per call stays flat as n grows.
b. **Lease-wait timers** — the same queue with a wait timeout on every call (long enough never
   to fire): the cost per call with timers against without, flat from 100 to 100,000 calls.
c. **A 100,000-call batch** — against 100,000 bare ``nursery.start_soon`` of the same no-op,
   calls touching distinct files, and calls all writing one of 100 files; and the share of
   that time the garbage collector took. Targets: <= 5x bare, collector <= 10%.
d. **Memory per queued call** — tracemalloc's count of the bytes a queued call keeps alive
   (its record, request, arguments, claims). Target: <= 1 KiB.

The kernel runs as applications run it: a workspace root and ``max_concurrency=16``.
Benchmarks are never asserted as tests: read the PASS/MISS lines.

    .venv/bin/python benchmarks/deep_queues.py            # full run
    .venv/bin/python benchmarks/deep_queues.py --quick    # smoke run, smaller n
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Sequence

import trio
import trio.lowlevel

import toolkernel as tk

MAX_CONCURRENCY = 16


async def noop() -> None:
    pass


@tk.tool(name="write_one", claims=lambda a: [tk.writes(f"f{a['i']}")])
async def write_one(ctx: tk.ToolContext, i: int) -> None:
    """Do nothing, holding an exclusive lease on file f{i}."""


@tk.tool(name="hold", claims=lambda a: [tk.writes("f0")])
async def hold(ctx: tk.ToolContext, seconds: float) -> None:
    """Hold file f0 for a while."""
    await trio.sleep(seconds)


TOOLS = [write_one, hold]


def same_file(count: int, prefix: str, wait_timeout: float | None = None) -> list[tk.ToolCall]:
    return [
        tk.ToolCall(f"{prefix}{i}", "write_one", {"i": 0}, wait_timeout=wait_timeout)
        for i in range(count)
    ]


async def one_file(root: str, sizes: Sequence[int], reps: int) -> dict[str, float]:
    """Seconds to run, and to cancel, n calls queued on one file; with and without timers."""
    best: dict[str, float] = {}
    async with tk.open_kernel(TOOLS, root=root, max_concurrency=MAX_CONCURRENCY) as kernel:
        for rep in range(reps):
            for n in sizes:
                for timers in (False, True):
                    timeout = 3600.0 if timers else None
                    calls = same_file(n, f"r{rep}.{n}.{timers}.", timeout)
                    gc.collect()
                    began = time.process_time()
                    await kernel.run(calls)
                    ran = time.process_time() - began
                    key = f"run/{n}/{'timers' if timers else 'plain'}"
                    best[key] = min(best.get(key, ran), ran)
                # Queued behind a holder, then cancelled all at once.
                holder = kernel.submit(tk.ToolCall(f"h{rep}.{n}", "hold", {"seconds": 3600}))
                await trio.lowlevel.checkpoint()
                handles = kernel.submit_batch(same_file(n, f"c{rep}.{n}."))
                gc.collect()
                began = time.process_time()
                kernel.cancel_all()
                cancelled = time.process_time() - began
                await holder.wait_finished()
                assert all(h.finished for h in handles)
                best[f"cancel/{n}"] = min(best.get(f"cancel/{n}", cancelled), cancelled)
    return best


async def big_batch(root: str, count: int, reps: int) -> dict[str, float]:
    """Seconds for a ``count``-call batch (distinct files; one of 100 files) and bare spawns,
    and the garbage collector's share of the kernel runs."""
    best: dict[str, float] = {}
    collecting = 0.0
    started = 0.0

    def on_gc(phase: str, info: dict[str, int]) -> None:
        nonlocal collecting, started
        if phase == "start":
            started = time.process_time()
        else:
            collecting += time.process_time() - started

    async with tk.open_kernel(TOOLS, root=root, max_concurrency=MAX_CONCURRENCY) as kernel:
        for rep in range(reps):
            gc.collect()
            began = time.process_time()
            async with trio.open_nursery() as nursery:
                for _ in range(count):
                    nursery.start_soon(noop)
            bare = time.process_time() - began
            best["bare"] = min(best.get("bare", bare), bare)
            for name, spread in (("distinct", count), ("hundred", 100)):
                calls = [
                    tk.ToolCall(f"{name}{rep}.{i}", "write_one", {"i": i % spread})
                    for i in range(count)
                ]
                gc.collect()
                collecting = 0.0
                gc.callbacks.append(on_gc)
                began = time.process_time()
                try:
                    await kernel.run(calls)
                finally:
                    took = time.process_time() - began
                    gc.callbacks.remove(on_gc)
                if took < best.get(name, float("inf")):
                    best[name] = took
                    best[f"{name}/gc"] = collecting / took
    return best


async def memory_per_queued_call(root: str, count: int) -> float:
    """Bytes kept alive per call queued behind a holder (tracemalloc)."""
    async with tk.open_kernel(TOOLS, root=root, max_concurrency=MAX_CONCURRENCY) as kernel:
        holder = kernel.submit(tk.ToolCall("holder", "hold", {"seconds": 3600}))
        await trio.lowlevel.checkpoint()
        calls = same_file(count, "m")
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        handles = kernel.submit_batch(calls)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        per_call = (after - before) / count
        del handles
        kernel.cancel_all()
        await holder.wait_finished()
    return per_call


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: smaller n, fewer reps")
    options = parser.parse_args(argv)
    sizes = (100, 1_000, 10_000) if options.quick else (100, 1_000, 10_000, 100_000)
    batch = 10_000 if options.quick else 100_000
    reps = 1 if options.quick else 3
    with tempfile.TemporaryDirectory() as root:
        queues = trio.run(one_file, root, sizes, reps)
        batches = trio.run(big_batch, root, batch, reps)
        memory = trio.run(memory_per_queued_call, root, 10_000 if options.quick else 50_000)

    print(f"a/b. n calls writing one file, workspace root, max_concurrency={MAX_CONCURRENCY}")
    print(
        f"  {'n':>8}{'run s':>9}{'us/call':>9}{'timers s':>10}{'us/call':>9}{'cancel s':>10}"
        f"{'us/call':>9}"
    )
    for n in sizes:
        run, timed, cancel = (
            queues[f"run/{n}/plain"],
            queues[f"run/{n}/timers"],
            queues[f"cancel/{n}"],
        )
        print(
            f"  {n:>8,}{run:>9.3f}{run / n * 1e6:>9.1f}{timed:>10.3f}{timed / n * 1e6:>9.1f}"
            f"{cancel:>10.3f}{cancel / n * 1e6:>9.1f}"
        )
    ten = 10_000
    print(
        f"10,000 queued on one file run in {queues[f'run/{ten}/plain']:.2f} s (target <= 1 s): "
        f"{verdict(queues[f'run/{ten}/plain'] <= 1)}; cancel in {queues[f'cancel/{ten}']:.2f} s "
        f"(target <= 1 s): {verdict(queues[f'cancel/{ten}'] <= 1)}"
    )
    small, large = sizes[0], sizes[-1]
    for kind in ("run/{}/plain", "run/{}/timers", "cancel/{}"):
        growth = (queues[kind.format(large)] / large) / (queues[kind.format(small)] / small)
        label = kind.format("n").replace("/", " ")
        print(
            f"Per-call cost of {label} at {large:,} against {small:,}: {growth:.2f}x "
            f"(target: flat, <= 1.5x): {verdict(growth <= 1.5)}"
        )

    print(f"c. a {batch:,}-call batch against {batch:,} bare start_soon")
    for name, label in (("distinct", "distinct files"), ("hundred", "one of 100 files")):
        ratio = batches[name] / batches["bare"]
        share = batches[f"{name}/gc"]
        print(
            f"  {label}: {batches[name]:.2f} s, {ratio:.2f}x bare (target <= 5x): "
            f"{verdict(ratio <= 5)}; garbage collection {share:.1%} (target <= 10%): "
            f"{verdict(share <= 0.10)}"
        )
    print(
        f"d. memory per queued call: {memory:.0f} bytes (target <= 1024): {verdict(memory <= 1024)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

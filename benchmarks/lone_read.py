"""A lone Read: through the kernel, through ``ctx.fs`` alone, and as a plain thread hop.

Variants, each reading one small file, N times in a row, in one process:

a. **plain** — ``await trio.to_thread.run_sync(path.read_bytes)``: the floor for reading a file
   off the event loop;
b. **fs** — ``await FileAccess(...).read_bytes(name)``: the key, the claim check and the I/O
   relative to the root's descriptor, in one thread hop;
c. **kernel** — ``await kernel.run([ToolCall(..., "Read", ...)])``: admission, lease, task, the
   Read tool (numbering lines) and the result.

The kernel's share of (c) is ``(c - b) / c``; the tool's file layer adds ``b - a``. Each figure
is the best of several repetitions, by ``time.perf_counter`` (the thread hop waits, so CPU time
would hide it). Benchmarks are never asserted as tests.

Run from the repository root::

    .venv/bin/python benchmarks/lone_read.py            # full run
    .venv/bin/python benchmarks/lone_read.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import pathlib
import platform
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence

import trio

import toolkernel as tk
from toolkernel.locks import reads
from toolkernel.tools import FileAccess, Workspace, builtin_tools


async def best_us(action: Callable[[], Awaitable[object]], count: int, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        began = time.perf_counter()
        for _ in range(count):
            await action()
        best = min(best, (time.perf_counter() - began) / count)
    return best * 1e6


async def measure(root: pathlib.Path, count: int, reps: int) -> dict[str, float]:
    target = root / "a.py"
    with Workspace(root) as ws:
        fs = FileAccess(ws, [reads("a.py")])
        async with tk.open_kernel(builtin_tools(), root=ws) as kernel:
            serial = iter(range(10**9))

            async def plain() -> object:
                return await trio.to_thread.run_sync(target.read_bytes)

            async def through_fs() -> object:
                return await fs.read_bytes("a.py")

            async def through_kernel() -> object:
                call = tk.ToolCall(f"r{next(serial)}", "Read", {"file_path": "a.py"})
                (result,) = await kernel.run([call])
                assert result.status is tk.Status.OK, result.error
                return result

            variants = {"plain": plain, "fs": through_fs, "kernel": through_kernel}
            best: dict[str, float] = {}
            for rep in range(reps):
                order = list(variants) if rep % 2 == 0 else list(reversed(variants))
                for name in order:
                    figure = await best_us(variants[name], count, 1)
                    best[name] = min(best.get(name, figure), figure)
    return best


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer reads and reps")
    options = parser.parse_args(argv)
    count, reps = (200, 3) if options.quick else (2_000, 7)
    with tempfile.TemporaryDirectory() as directory:
        root = pathlib.Path(directory)
        (root / "a.py").write_text("".join(f"line {i}\n" for i in range(50)))
        us = trio.run(measure, root, count, reps)
    print(f"Python {platform.python_version()}, trio {trio.__version__}, best of {reps} reps")
    print(f"  {'variant':<44}{'us/read':>9}{'x plain':>9}")
    for label, name in (
        ("plain trio.to_thread.run_sync(read_bytes)", "plain"),
        ("ctx.fs.read_bytes (FileAccess)", "fs"),
        ("kernel.run([Read]) of one call", "kernel"),
    ):
        print(f"  {label:<44}{us[name]:>9.1f}{us[name] / us['plain']:>9.2f}")
    share = (us["kernel"] - us["fs"]) / us["kernel"]
    print(f"The kernel's share of a lone Read (beyond ctx.fs): {share:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

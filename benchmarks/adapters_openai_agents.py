"""The OpenAI Agents SDK's tools, leased, against the same tools as the SDK runs them.

Everything goes through the SDK's own ``Runner.run`` with the SDK's own scripted model
(``agents.testing.ScriptedModel``: no network, no tokens), tracing off, on asyncio (the SDK's
loop), in one process and one run:

1. **Per-call overhead** (dispatch only). One response of ``n`` calls of a tool that does
   nothing (``n`` = 1, 10, 100), then a final answer, run (a) with the SDK's own ``@function_tool``
   and (b) with the same tool from ``leased(...)``, ``writes={"touch": ["path"]}``, each call on
   a file of its own (so all may run together), in a kernel opened with a workspace root. A
   run whose response has no call at all is timed too, and taken off: what is left is the cost
   of ``n`` calls, per call. ``+us`` is what leasing adds to the SDK's own cost of a call;
   target: at most the SDK's own (``leased/SDK`` at most 2x). Rounds alternate which side goes
   first; each figure is the median of the rounds. The garbage collector is off while a run is
   timed (as ``timeit`` does) and collects between runs: the SDK's import leaves a heap whose
   collections would otherwise land, milliseconds at a time, on whichever run set them off.
2. **Lost edits.** ``turns`` responses, each with two calls of a tool that reads a file, awaits
   (``asyncio.sleep(0)``: any await between the read and the write, as real tools have), and
   writes it back with a line added. A turn loses an edit when its file ends with fewer than two
   lines. The SDK's runner starts both calls at once; leased, the second waits for the first.

    .venv/bin/python benchmarks/adapters_openai_agents.py            # full run
    .venv/bin/python benchmarks/adapters_openai_agents.py --quick    # smoke run (seconds)

Nothing is asserted; read the PASS/MISS lines.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata
import os
import pathlib
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from agents import Agent, FunctionTool, RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

import toolkernel as tk
from toolkernel.integrations.openai_agents import leased

SIZES = (1, 10, 100)
TARGET = 2.0  # leased per call at most twice the SDK's own: what leasing adds <= the SDK's cost
NO_TRACING = RunConfig(tracing_disabled=True)


@function_tool
async def touch(path: str) -> str:
    """Do nothing with a file (dispatch only)."""
    return "ok"


def edit_tool(root: pathlib.Path) -> FunctionTool:
    @function_tool
    async def add_line(path: str, line: str) -> str:
        """Add a line to a file: read it, await, write it back."""
        file = root / path
        old = file.read_text() if file.exists() else ""
        await asyncio.sleep(0)
        file.write_text(old + line + "\n")
        return "added"

    return add_line


def responses(size: int, serial: int) -> list[Any]:
    calls = [
        function_call("touch", {"path": f"f{i}.txt"}, call_id=f"r{serial}.{i}") for i in range(size)
    ]
    return [calls, [assistant_message("done")]] if size else [[assistant_message("done")]]


async def timed_run(tools: Sequence[FunctionTool], size: int, serial: int) -> tuple[float, float]:
    """Wall and CPU seconds for one ``Runner.run`` whose model answers ``size`` calls, then a
    message."""
    agent = Agent(name="bench", model=ScriptedModel(responses(size, serial)), tools=list(tools))
    gc.disable()  # as timeit does: a collection would land on whichever run set it off
    try:
        began, cpu = time.perf_counter(), time.process_time()
        result = await Runner.run(agent, "go", run_config=NO_TRACING, max_turns=4)
        elapsed = time.perf_counter() - began, time.process_time() - cpu
    finally:
        gc.enable()
    assert result.final_output == "done", result.final_output
    return elapsed


async def overhead(root: str, rounds: int, warm: int) -> dict[tuple[str, int], tuple[float, float]]:
    """Median wall and CPU seconds per call of each side and size, the empty run taken off."""
    samples: dict[tuple[str, int], list[tuple[float, float]]] = {}
    serial = 0
    async with tk.open_kernel(root=root) as kernel:
        sides = {"sdk": [touch], "leased": leased([touch], kernel, writes={"touch": ["path"]})}
        for _ in range(warm):
            for tools in sides.values():
                for size in (0, *SIZES):
                    serial += 1
                    await timed_run(tools, size, serial)
        gc.collect()
        gc.freeze()  # the SDK's import leaves a large heap: a full collection takes 0.3 s
        for rnd in range(rounds):
            order = list(sides.items())
            if rnd % 2:
                order.reverse()
            for size in (0, *SIZES):
                for name, tools in order:
                    gc.collect()
                    serial += 1
                    samples.setdefault((name, size), []).append(
                        await timed_run(tools, size, serial)
                    )
        held = kernel.lease_statistics()
        assert held.held == held.waiting == 0, held
    medians = {
        key: (statistics.median(w for w, _ in timed), statistics.median(c for _, c in timed))
        for key, timed in samples.items()
    }
    return {
        (name, size): (
            (medians[(name, size)][0] - medians[(name, 0)][0]) / size,
            (medians[(name, size)][1] - medians[(name, 0)][1]) / size,
        )
        for name in ("sdk", "leased")
        for size in SIZES
    }


async def lost_edits(turns: int) -> dict[str, int]:
    """Turns (of ``turns``) that lost an edit, each side."""
    lost = {}
    for side in ("sdk", "leased"):
        with tempfile.TemporaryDirectory() as scratch:
            root = pathlib.Path(scratch)
            steps: list[Any] = [
                [
                    function_call("add_line", {"path": f"t{t}.txt", "line": "a"}, call_id=f"{t}a"),
                    function_call("add_line", {"path": f"t{t}.txt", "line": "b"}, call_id=f"{t}b"),
                ]
                for t in range(turns)
            ]
            steps.append([assistant_message("done")])
            async with tk.open_kernel(root=root) as kernel:
                tool = edit_tool(root)
                tools = [tool]
                if side == "leased":
                    tools = leased([tool], kernel, writes={"add_line": ["path"]})
                agent = Agent(name="bench", model=ScriptedModel(steps), tools=tools)
                await Runner.run(agent, "go", run_config=NO_TRACING, max_turns=turns + 2)
            lost[side] = sum(
                len((root / f"t{t}.txt").read_text().splitlines()) < 2 for t in range(turns)
            )
    return lost


def report(
    per_call: dict[tuple[str, int], tuple[float, float]], lost: dict[str, int], turns: int
) -> None:
    print("1. Per-call overhead: Runner.run, scripted model, one response of n no-op calls")
    print("   microseconds per call (the run with no call taken off), medians of the rounds;")
    print("   CPU is this process's (everything runs in it), steadier than wall time on a")
    print("   shared machine; the verdict is on CPU")
    print(
        f"   {'calls':>7}{'SDK':>8}{'leased':>8}{'+us':>7}{'SDK cpu':>9}{'leased cpu':>11}"
        f"{'+us cpu':>8}{'leased/SDK':>12}{'(cpu)':>7}"
    )
    for size in SIZES:
        (sdk, sdk_cpu), (ours, ours_cpu) = per_call[("sdk", size)], per_call[("leased", size)]
        ratio, ratio_cpu = ours / sdk, ours_cpu / sdk_cpu
        verdict = "PASS" if ratio_cpu <= TARGET else "MISS"
        print(
            f"   {size:>7}{sdk * 1e6:>8.0f}{ours * 1e6:>8.0f}{(ours - sdk) * 1e6:>+7.0f}"
            f"{sdk_cpu * 1e6:>9.0f}{ours_cpu * 1e6:>11.0f}{(ours_cpu - sdk_cpu) * 1e6:>+8.0f}"
            f"{ratio:>11.2f}x{ratio_cpu:>6.2f}x  {verdict}"
        )
    print(f"   (target: what leasing adds at most the SDK's own cost, leased/SDK <= {TARGET:g}x)")
    print(f"2. Lost edits: {turns} turns of two read-await-write edits of one file each")
    for side, name in (("sdk", "SDK's own tools"), ("leased", "leased tools")):
        share = lost[side] / turns
        print(f"   {name:<16} lost an edit in {lost[side]:>5} of {turns} turns ({share:.0%})")
    verdict = "PASS" if lost["leased"] == 0 else "MISS"
    print(f"   (target: leased tools lose none) {verdict}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer rounds and turns")
    options = parser.parse_args(argv)
    rounds, warm, turns = (2, 1, 20) if options.quick else (21, 3, 500)
    print(
        f"Python {platform.python_version()}, openai-agents "
        f"{importlib.metadata.version('openai-agents')}, toolkernel "
        f"{importlib.metadata.version('toolkernel')}, {os.cpu_count()} CPUs"
    )
    if options.quick:
        print("Smoke run: too few rounds for stable figures; run without --quick to compare.")
    with tempfile.TemporaryDirectory() as root:
        per_call = asyncio.run(overhead(root, rounds, warm))
    lost = asyncio.run(lost_edits(turns))
    report(per_call, lost, turns)
    return 0


if __name__ == "__main__":
    sys.exit(main())

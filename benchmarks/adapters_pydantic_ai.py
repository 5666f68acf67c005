"""pydantic-ai's tools in a LeasedToolset, against the same toolset as pydantic-ai runs it.

Everything goes through pydantic-ai's own ``Agent.run`` with pydantic-ai's own scripted model
(``pydantic_ai.models.function.FunctionModel``: no network, no tokens), instrumentation off
(its default), on asyncio (pydantic-ai's loop), in one process and one run:

1. **Per-call overhead** (dispatch only). One response of ``n`` calls of a tool that does
   nothing (``n`` = 1, 10, 100), then a final answer, run (a) with a ``FunctionToolset`` of that
   tool and (b) with the same toolset in ``LeasedToolset(..., writes={"touch": ["path"]})``,
   each call on a file of its own (so all may run together), in a kernel opened with a
   workspace root. A run whose response has no call at all is timed too, and taken off: what is
   left is the cost of ``n`` calls, per call. ``+us`` is what leasing adds to pydantic-ai's own
   cost of a call; target: at most pydantic-ai's own (``leased/own`` at most 2x). Beside them,
   (c) the same toolset in pydantic-ai's own ``WrapperToolset``, which does nothing: what any
   wrapper costs in pydantic-ai, part of ``+us``. Rounds alternate which side goes first; each
   figure is the median of the rounds.
2. **Lost edits.** ``turns`` responses, each with two calls of a tool that reads a file, awaits
   (``asyncio.sleep(0)``: any await between the read and the write, as real tools have), and
   writes it back with a line added. A turn loses an edit when its file ends with fewer than two
   lines. pydantic-ai starts both calls at once; leased, the second waits for the first.

    .venv/bin/python benchmarks/adapters_pydantic_ai.py            # full run
    .venv/bin/python benchmarks/adapters_pydantic_ai.py --quick    # smoke run (seconds)

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

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset
from pydantic_ai.usage import UsageLimits

import toolkernel as tk
from toolkernel.integrations.pydantic_ai import LeasedToolset

SIZES = (1, 10, 100)
TARGET = 2.0  # leased per call at most twice pydantic-ai's own: what leasing adds <= its cost


async def touch(path: str) -> str:
    """Do nothing with a file (dispatch only)."""
    return "ok"


def edit_toolset(root: pathlib.Path) -> FunctionToolset[Any]:
    async def add_line(path: str, line: str) -> str:
        """Add a line to a file: read it, await, write it back."""
        file = root / path
        old = file.read_text() if file.exists() else ""
        await asyncio.sleep(0)
        file.write_text(old + line + "\n")
        return "added"

    return FunctionToolset([add_line])


def scripted(turns: Sequence[Sequence[ToolCallPart]]) -> FunctionModel:
    """A model answering with each turn's calls, then "done"."""

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step < len(turns):
            return ModelResponse(parts=list(turns[step]))
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(answer)


def touches(size: int) -> list[list[ToolCallPart]]:
    calls = [
        ToolCallPart("touch", {"path": f"f{i}.txt"}, tool_call_id=f"c{i}") for i in range(size)
    ]
    return [calls] if size else []


async def timed_run(toolset: AbstractToolset[Any], size: int) -> tuple[float, float]:
    """Wall and CPU seconds for one ``Agent.run`` whose model answers ``size`` calls, then a
    message."""
    agent = Agent(scripted(touches(size)), toolsets=[toolset])
    began, cpu = time.perf_counter(), time.process_time()
    result = await agent.run("go")
    elapsed = time.perf_counter() - began, time.process_time() - cpu
    assert result.output == "done", result.output
    return elapsed


async def overhead(root: str, rounds: int, warm: int) -> dict[tuple[str, int], tuple[float, float]]:
    """Median wall and CPU seconds per call of each side and size, the empty run taken off."""
    samples: dict[tuple[str, int], list[tuple[float, float]]] = {}
    async with tk.open_kernel(root=root) as kernel:
        own = FunctionToolset([touch])
        sides: dict[str, AbstractToolset[Any]] = {
            "own": own,
            "leased": LeasedToolset(own, kernel, writes={"touch": ["path"]}),
            "wrapper": WrapperToolset(own),
        }
        for _ in range(warm):
            for toolset in sides.values():
                for size in (0, *SIZES):
                    await timed_run(toolset, size)
        gc.collect()
        gc.freeze()  # pydantic-ai's import leaves a large heap: don't time its collections
        for rnd in range(rounds):
            order = list(sides.items())
            if rnd % 2:
                order.reverse()
            gc.collect()
            for size in (0, *SIZES):
                for name, toolset in order:
                    samples.setdefault((name, size), []).append(await timed_run(toolset, size))
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
        for name in ("own", "leased", "wrapper")
        for size in SIZES
    }


async def lost_edits(turns: int) -> dict[str, int]:
    """Turns (of ``turns``) that lost an edit, each side."""
    lost = {}
    for side in ("own", "leased"):
        with tempfile.TemporaryDirectory() as scratch:
            root = pathlib.Path(scratch)
            steps = [
                [
                    ToolCallPart("add_line", {"path": f"t{t}.txt", "line": "a"}, tool_call_id="a"),
                    ToolCallPart("add_line", {"path": f"t{t}.txt", "line": "b"}, tool_call_id="b"),
                ]
                for t in range(turns)
            ]
            async with tk.open_kernel(root=root) as kernel:
                toolset: AbstractToolset[Any] = edit_toolset(root)
                if side == "leased":
                    toolset = LeasedToolset(toolset, kernel, writes={"add_line": ["path"]})
                agent = Agent(scripted(steps), toolsets=[toolset])
                await agent.run("go", usage_limits=UsageLimits(request_limit=turns + 1))
            lost[side] = sum(
                len((root / f"t{t}.txt").read_text().splitlines()) < 2 for t in range(turns)
            )
    return lost


def report(
    per_call: dict[tuple[str, int], tuple[float, float]], lost: dict[str, int], turns: int
) -> None:
    print("1. Per-call overhead: Agent.run, FunctionModel, one response of n no-op calls")
    print("   microseconds per call (the run with no call taken off), medians of the rounds;")
    print("   CPU is this process's (everything runs in it), steadier than wall time on a")
    print("   shared machine; the verdict is on CPU")
    print(
        f"   {'calls':>7}{'own':>8}{'leased':>8}{'+us':>7}{'own cpu':>9}{'leased cpu':>11}"
        f"{'+us cpu':>8}{'wrapper cpu':>12}{'leased/own':>12}{'(cpu)':>7}"
    )
    for size in SIZES:
        (own, own_cpu), (ours, ours_cpu) = per_call[("own", size)], per_call[("leased", size)]
        wrapper_cpu = per_call[("wrapper", size)][1]
        ratio, ratio_cpu = ours / own, ours_cpu / own_cpu
        verdict = "PASS" if ratio_cpu <= TARGET else "MISS"
        print(
            f"   {size:>7}{own * 1e6:>8.0f}{ours * 1e6:>8.0f}{(ours - own) * 1e6:>+7.0f}"
            f"{own_cpu * 1e6:>9.0f}{ours_cpu * 1e6:>11.0f}{(ours_cpu - own_cpu) * 1e6:>+8.0f}"
            f"{wrapper_cpu * 1e6:>12.0f}{ratio:>11.2f}x{ratio_cpu:>6.2f}x  {verdict}"
        )
    print(
        f"   (target: what leasing adds at most pydantic-ai's own cost, leased/own <= {TARGET:g}x)"
    )
    print(f"2. Lost edits: {turns} turns of two read-await-write edits of one file each")
    for side, name in (("own", "pydantic-ai's own"), ("leased", "LeasedToolset")):
        share = lost[side] / turns
        print(f"   {name:<18} lost an edit in {lost[side]:>5} of {turns} turns ({share:.0%})")
    verdict = "PASS" if lost["leased"] == 0 else "MISS"
    print(f"   (target: LeasedToolset loses none) {verdict}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer rounds and turns")
    options = parser.parse_args(argv)
    rounds, warm, turns = (2, 1, 20) if options.quick else (21, 3, 500)
    print(
        f"Python {platform.python_version()}, pydantic-ai-slim "
        f"{importlib.metadata.version('pydantic-ai-slim')}, toolkernel "
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

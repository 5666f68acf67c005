"""LangGraph adapter: ``toolkernel.integrations.langgraph.ToolNode`` against LangGraph's own.

Two figures, each measured side by side in one run.

1. **Per-call overhead.** The same no-op LangChain tool (``async def noop(path) -> path``; a
   plain ``def`` for the sync rows) is called in messages of 1, 10 and 100 calls, each call on a
   file of its own, by:

   a. **direct** — the tool's coroutines gathered (``asyncio.gather(*(noop.coroutine(...)))``),
      or its function called in a loop (sync): the work itself, no framework;
   b. **LangGraph** — ``langgraph.prebuilt.ToolNode([noop]).ainvoke({"messages": [msg]})``
      (``invoke`` for sync), outside a graph, as LangGraph's own tests call it;
   c. **ours** — ``ToolNode([noop], writes={"noop": ["path"]})``: a kernel opened for the run
      (a thread with its event loop under ``invoke``), one batch, every call leased;
   d. **ours, shared kernel** — the same with ``kernel=`` a kernel opened once (async only).

   LangGraph's own overhead per call is b - a; what the adapter adds is c - b (d - b).
   Target: what we add at most LangGraph's own (``added/own`` <= 1). A message of one call
   with no kernel given runs without one (alone, it would be granted at once), so c's first
   row shows that path; d's shows a lone call leased. Each round times every case once, in
   turn; each figure is the median of the rounds, in microseconds per call of this process's
   CPU time (all its threads: the executor's and the kernel loop's under ``invoke``), which a
   machine busy with other work disturbs less than wall time (``--wall`` for wall time).

2. **Lost edits.** N turns; in each, one AI message with two calls of ``append(path, text)``
   on one file, a tool that reads the file, awaits (``asyncio.sleep(0)``, as any I/O would;
   ``time.sleep(0.0005)`` in the sync tool), and writes what it read plus its text. A turn loses
   an edit when the file does not end with both texts in the order emitted. LangGraph's
   ToolNode runs both calls at once; ours runs them one after the other. Target: ours 0.

Nothing is asserted: read the PASS/MISS lines.

    .venv/bin/python benchmarks/adapters_langgraph.py          # full run
    .venv/bin/python benchmarks/adapters_langgraph.py --quick  # smoke run (a few seconds)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata
import platform
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, tool
from langgraph.prebuilt import ToolNode as LangGraphToolNode
from langgraph.runtime import Runtime

import toolkernel as tk
from toolkernel.integrations.langgraph import ToolNode

SIZES = (1, 10, 100)
CLOCK = time.process_time  # --wall: time.perf_counter
# Outside a graph, a ToolNode takes its runtime from the config, as a graph gives it.
CONFIG: Any = {"configurable": {"__pregel_runtime": Runtime()}}


@tool
async def noop(path: str) -> str:
    """Do nothing."""
    return path


@tool
def sync_noop(path: str) -> str:
    """Do nothing (sync)."""
    return path


def message(name: str, n: int) -> AIMessage:
    return AIMessage(
        "",
        tool_calls=[
            {"name": name, "args": {"path": f"dir/{i}.txt"}, "id": f"c{i}", "type": "tool_call"}
            for i in range(n)
        ],
    )


# -- 1. overhead ----------------------------------------------------------------------------------


async def time_async(run: Callable[[], Awaitable[Any]], reps: int) -> float:
    gc.collect()
    start = CLOCK()
    for _ in range(reps):
        await run()
    return CLOCK() - start


def time_sync(run: Callable[[], Any], reps: int) -> float:
    gc.collect()
    start = CLOCK()
    for _ in range(reps):
        run()
    return CLOCK() - start


async def overhead_async(rounds: int, calls_per_round: int) -> dict[int, dict[str, float]]:
    figures: dict[int, dict[str, float]] = {}
    async with tk.open_kernel() as kernel:
        declared = {"noop": ["path"]}
        theirs = LangGraphToolNode([noop])
        ours = ToolNode([noop], writes=declared)
        shared = ToolNode([noop], writes=declared, kernel=kernel)
        for n in SIZES:
            msg = message("noop", n)
            state = {"messages": [msg]}
            coroutine = noop.coroutine
            assert coroutine is not None
            paths = [call["args"]["path"] for call in msg.tool_calls]

            async def direct() -> Any:
                return await asyncio.gather(*(coroutine(path=p) for p in paths))  # noqa: B023

            cases: dict[str, Callable[[], Awaitable[Any]]] = {
                "direct": direct,
                "LangGraph": lambda: theirs.ainvoke(state, CONFIG),  # noqa: B023
                "ours": lambda: ours.ainvoke(state, CONFIG),  # noqa: B023
                "ours, shared kernel": lambda: shared.ainvoke(state, CONFIG),  # noqa: B023
            }
            reps = max(1, calls_per_round // n)
            samples: dict[str, list[float]] = {case: [] for case in cases}
            for run in cases.values():  # warm up
                await run()
            for _ in range(rounds):
                for case, run in cases.items():
                    samples[case].append(await time_async(run, reps) / (reps * n) * 1e6)
            figures[n] = {case: statistics.median(s) for case, s in samples.items()}
    return figures


def overhead_sync(rounds: int, calls_per_round: int) -> dict[int, dict[str, float]]:
    figures: dict[int, dict[str, float]] = {}
    theirs = LangGraphToolNode([sync_noop])
    ours = ToolNode([sync_noop], writes={"sync_noop": ["path"]})
    function = sync_noop.func
    assert function is not None
    for n in SIZES:
        msg = message("sync_noop", n)
        state = {"messages": [msg]}
        paths = [call["args"]["path"] for call in msg.tool_calls]

        def direct() -> Any:
            return [function(path=p) for p in paths]  # noqa: B023

        cases: dict[str, Callable[[], Any]] = {
            "direct": direct,
            "LangGraph": lambda: theirs.invoke(state, CONFIG),  # noqa: B023
            "ours": lambda: ours.invoke(state, CONFIG),  # noqa: B023
        }
        reps = max(1, calls_per_round // n)
        samples: dict[str, list[float]] = {case: [] for case in cases}
        for run in cases.values():
            run()
        for _ in range(rounds):
            for case, run in cases.items():
                samples[case].append(time_sync(run, reps) / (reps * n) * 1e6)
        figures[n] = {case: statistics.median(s) for case, s in samples.items()}
    return figures


def report_overhead(title: str, figures: dict[int, dict[str, float]]) -> None:
    print(f"\n{title}: microseconds per call (median of rounds)")
    cases = list(next(iter(figures.values())))
    print(f"  {'calls':>5}  " + "  ".join(f"{case:>19}" for case in cases) + "   added/own")
    for n, row in figures.items():
        own = row["LangGraph"] - row["direct"]
        ratios = []
        for case in cases:
            if case.startswith("ours"):
                added = row[case] - row["LangGraph"]
                ratio = added / own if own > 0 else float("inf")
                ratios.append(f"{ratio:.2f} {'PASS' if ratio <= 1 else 'MISS'}")
        line = "  ".join(f"{row[case]:>19.1f}" for case in cases)
        print(f"  {n:>5}  {line}   {' / '.join(ratios)}")


# -- 2. lost edits --------------------------------------------------------------------------------


def edit_tools(files: dict[str, str]) -> list[BaseTool]:
    @tool
    async def append(path: str, text: str) -> str:
        """Append text to a file."""
        old = files.get(path, "")
        await asyncio.sleep(0)  # any I/O between the read and the write
        files[path] = old + text
        return "ok"

    @tool
    def sync_append(path: str, text: str) -> str:
        """Append text to a file (blocking)."""
        old = files.get(path, "")
        time.sleep(0.0005)
        files[path] = old + text
        return "ok"

    return [append, sync_append]


def edit_message(name: str, turn: int) -> AIMessage:
    return AIMessage(
        "",
        tool_calls=[
            {"name": name, "args": {"path": f"f{turn}", "text": text}, "id": f"c{turn}{text}"}
            for text in "ab"
        ],
    )


async def lost_edits(turns: int) -> dict[str, int]:
    lost: dict[str, int] = {}
    writes = {"append": ["path"], "sync_append": ["path"]}
    for mode in ("async", "sync"):
        name = "append" if mode == "async" else "sync_append"
        for label, make in (
            ("LangGraph", lambda tools: LangGraphToolNode(tools)),
            ("ours", lambda tools: ToolNode(tools, writes=writes)),
        ):
            files: dict[str, str] = {}
            node = make(edit_tools(files))
            for turn in range(turns):
                state = {"messages": [edit_message(name, turn)]}
                if mode == "async":
                    await node.ainvoke(state, CONFIG)
                else:
                    await asyncio.to_thread(node.invoke, state, CONFIG)
            lost[f"{label}, {mode}"] = sum(files[f"f{t}"] != "ab" for t in range(turns))
    return lost


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    parser.add_argument("--wall", action="store_true", help="wall time, not CPU time")
    options = parser.parse_args()
    global CLOCK
    if options.wall:
        CLOCK = time.perf_counter
    rounds, per_round, turns = (1, 10, 5) if options.quick else (11, 500, 500)
    versions = ", ".join(
        f"{name} {importlib.metadata.version(name)}" for name in ("langgraph", "langgraph-prebuilt")
    )
    print(f"Python {platform.python_version()}, {versions}, asyncio")
    clock = "wall time" if options.wall else "CPU time of this process (all its threads)"
    print(f"{rounds} rounds of about {per_round} calls per case per message size; {clock}")
    report_overhead("ainvoke", await overhead_async(rounds, per_round))
    report_overhead("invoke", await asyncio.to_thread(overhead_sync, rounds, per_round))
    print(f"\nlost edits: {turns} turns, two read-await-write appends of one file per turn")
    for label, count in (await lost_edits(turns)).items():
        verdict = "" if label.startswith("LangGraph") else ("  PASS" if count == 0 else "  MISS")
        print(f"  {label:<16} {count:>5} of {turns} turns ({100 * count / turns:.0f}%){verdict}")


if __name__ == "__main__":
    asyncio.run(main())

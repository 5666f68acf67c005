"""MCP overhead: a tool of an MCP server called through the kernel against the SDK's own call.

One MCP server (written below with the SDK's ``MCPServer``; this file run with ``--serve``)
is started over stdio by ``toolkernel.mcp.stdio_tools`` in a temporary directory, which is
both its working directory and the kernel's workspace root. In one run, on that one server
and connection, interleaved:

a. **SDK** — ``await client.call_tool(name, arguments)`` on the ``mcp.Client`` the kernel's
   tools use themselves (``MCPTool._connection.client``, a private attribute read here so
   that the server, the process and the connection are the very same for both contenders).
b. **kernel** — ``await kernel.run([ToolCall(id, name, arguments)])`` through
   ``open_kernel([*builtin_tools(), *mcp_tools], root=<that directory>, max_concurrency=16)``,
   the configuration applications run: arguments checked against the tool's schema, claims
   keyed through the workspace, leases granted and released, the result converted.

Two tools, both ``readOnlyHint``: ``echo(text)``, which names no path, so each call is a
barrier (a shared lease on the whole workspace and on the server); and ``read_file(path)``
with a relative path of a file in the root, whose claim is inferred from the argument's name
and keyed through the workspace. Each is called one at a time (**sequential**) and in
**batches of 10** concurrent calls (one ``kernel.run`` of 10 calls against 10 ``call_tool``
awaited together: ``asyncio.gather`` on asyncio, a nursery on trio), on asyncio (the loop most
applications run) and on trio.

Timing is wall time (``time.perf_counter``: a call is mostly the pipe and the server's work in
another process), beside this process's CPU time (``time.process_time``: the client's side
only, less disturbed by other processes); ``+us`` is what the kernel adds to a call. Each round
times every case once, the contenders alternating which goes first, and each figure is the
median of the rounds. Target: the kernel at most 1.2x the SDK's call, per call, in wall time.
Nothing is asserted: read the PASS/MISS lines. ``--profile`` runs sequential ``read_file``
calls each way under cProfile and shows each package's own time per call; cProfile slows
Python code several times more than it slows system calls, so compare its rows with each other,
not with the table.

    .venv/bin/python benchmarks/mcp_overhead.py            # full run
    .venv/bin/python benchmarks/mcp_overhead.py --quick    # smoke run (a few seconds)
    .venv/bin/python benchmarks/mcp_overhead.py --profile  # also cProfile read_file calls
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib.metadata
import os
import pathlib
import platform
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import anyio
import sniffio
import trio

import toolkernel as tk
from toolkernel.mcp import MCPTool, stdio_tools
from toolkernel.tools import Workspace, builtin_tools

MAX_CONCURRENCY = 16
BATCH = 10
TARGET = 1.2
FILE_NAME = "notes.txt"
SERVER = [sys.executable, os.path.abspath(__file__), "--serve"]  # this file, as the server
CASES = (
    # (case, tool, arguments, calls awaited together)
    ("echo, sequential", "echo", {"text": "hello"}, 1),
    ("echo, batch of 10", "echo", {"text": "hello"}, BATCH),
    ("read_file, sequential", "read_file", {"path": FILE_NAME}, 1),
    ("read_file, batch of 10", "read_file", {"path": FILE_NAME}, BATCH),
)


def serve() -> None:
    """The benchmark's MCP server, over stdio: two read-only tools answering at once."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    read_only = ToolAnnotations(read_only_hint=True)
    server = MCPServer("bench-server", log_level="WARNING")

    @server.tool(annotations=read_only, structured_output=False)
    async def echo(text: str) -> str:
        """Answer ``text``."""
        return text

    @server.tool(annotations=read_only, structured_output=False)
    async def read_file(path: str) -> str:
        """Read a file of the server's working directory."""
        return await anyio.Path(path).read_text()

    server.run()


async def together(actions: Sequence[Callable[[], Awaitable[object]]]) -> None:
    """Await ``actions`` concurrently, the way an application would on this loop."""
    if sniffio.current_async_library() == "trio":
        async with trio.open_nursery() as nursery:
            for action in actions:
                nursery.start_soon(action)
        return
    await asyncio.gather(*(action() for action in actions))


class Contenders:
    """The two ways of making a case's calls, each timed per call: ``(wall, cpu)`` seconds, the
    CPU being this process's (the client's side; the server's process is not in it)."""

    def __init__(self, kernel: tk.Kernel, client: Any) -> None:
        self.kernel = kernel
        self.client = client
        self.serial = 0

    def batches(self, tool: str, arguments: dict[str, Any], size: int, count: int) -> Any:
        """Fresh ``ToolCall`` batches, built before the clock starts (ids stay nameable by
        ``after=`` for a while, so none is reused)."""
        self.serial += 1
        return [
            [tk.ToolCall(f"c{self.serial}.{b}.{i}", tool, arguments) for i in range(size)]
            for b in range(count)
        ]

    async def sdk(
        self, tool: str, arguments: dict[str, Any], size: int, count: int
    ) -> tuple[float, float]:
        client = self.client

        async def one() -> None:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result

        began, cpu = time.perf_counter(), time.process_time()
        if size == 1:
            for _ in range(count):
                await one()
        else:
            for _ in range(count):
                await together([one] * size)
        return per_call(began, cpu, size * count)

    async def kernel_run(
        self, tool: str, arguments: dict[str, Any], size: int, count: int
    ) -> tuple[float, float]:
        batches = self.batches(tool, arguments, size, count)
        kernel = self.kernel
        began, cpu = time.perf_counter(), time.process_time()
        for batch in batches:
            results = await kernel.run(batch)
            assert results[-1].ok, results[-1]
        return per_call(began, cpu, size * count)


def per_call(began: float, cpu: float, calls: int) -> tuple[float, float]:
    """Wall and CPU seconds per call since ``began`` (``perf_counter``) and ``cpu``
    (``process_time``)."""
    return (time.perf_counter() - began) / calls, (time.process_time() - cpu) / calls


def check_claims(tools: Sequence[MCPTool], root: str) -> dict[str, str]:
    """What one call of each tool claims, to show that ``read_file`` is keyed to its file and
    ``echo`` is a barrier (a setup check, not a timing)."""
    key = Workspace(root).key
    shown = {}
    for tool in tools:
        arguments = next(args for _, name, args, _ in CASES if name == tool.name)
        claims = tool.claims(arguments, key) or []
        shown[tool.name] = ", ".join(str(claim) for claim in claims)
    return shown


async def measure(root: str, count: int, rounds: int, warm: int, profile: bool) -> dict[str, Any]:
    """Medians per call of each case and contender, over ``rounds`` alternating rounds."""
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    async with stdio_tools(SERVER, cwd=root) as tools:
        # The kernel's tools share one connection; its client is the SDK contender.
        client = tools[0]._connection.client
        claims = check_claims(tools, root)
        async with tk.open_kernel(
            [*builtin_tools(), *tools], root=root, max_concurrency=MAX_CONCURRENCY
        ) as kernel:
            contenders = Contenders(kernel, client)
            for _, tool, arguments, size in CASES:  # warm both paths up
                await contenders.sdk(tool, arguments, size, warm)
                await contenders.kernel_run(tool, arguments, size, warm)
            for rnd in range(rounds):
                for case, tool, arguments, size in CASES:
                    batches = max(1, count // size)
                    order = [("sdk", contenders.sdk), ("kernel", contenders.kernel_run)]
                    if rnd % 2:  # alternate so neither side always runs second
                        order.reverse()
                    for name, action in order:
                        gc.collect()
                        timed = await action(tool, arguments, size, batches)
                        samples.setdefault((case, name), []).append(timed)
            profiled = await profile_calls(contenders, count) if profile else ""
    medians = {
        key: (statistics.median(w for w, _ in timed), statistics.median(c for _, c in timed))
        for key, timed in samples.items()
    }
    return {"medians": medians, "claims": claims, "profile": profiled}


PACKAGES = (
    # (what the report calls it, path fragments of its files), the first match wins
    ("toolkernel", ("/toolkernel/",)),
    ("jsonschema (the kernel's check)", ("/jsonschema/", "/re2")),
    ("mcp SDK", ("/mcp/", "/mcp_types/")),
    ("pydantic", ("/pydantic",)),
    ("trio / asyncio / anyio", ("/trio/", "/asyncio/", "/anyio/", "/sniffio/", "/outcome/")),
    ("built-ins (pipe writes, epoll waits)", ("~",)),
)


def package_of(file: str) -> str:
    for name, fragments in PACKAGES:
        if any(fragment in file for fragment in fragments):
            return name
    return "other"


async def profile_calls(contenders: Contenders, count: int) -> str:
    """cProfile of ``count`` sequential ``read_file`` calls each way: each package's own time
    per call, SDK against kernel, then the kernel's costliest functions."""
    profiles = {}
    for name in ("sdk", "kernel"):
        action = contenders.sdk if name == "sdk" else contenders.kernel_run
        profiler = cProfile.Profile()
        gc.collect()
        profiler.enable()
        await action("read_file", {"path": FILE_NAME}, 1, count)
        profiler.disable()
        profiles[name] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    by_package: dict[str, dict[str, float]] = {}
    for name, rows in profiles.items():
        for (file, _, _), row in rows.items():
            shares = by_package.setdefault(package_of(file), {})
            shares[name] = shares.get(name, 0.0) + row[2] * 1e6 / count
    lines = [f"    {'own time, us per call':<38}{'SDK':>8}{'kernel':>8}{'+us':>7}"]
    for package, shares in sorted(by_package.items(), key=lambda item: -item[1].get("kernel", 0)):
        sdk, kernel = shares.get("sdk", 0.0), shares.get("kernel", 0.0)
        lines.append(f"    {package:<38}{sdk:>8.0f}{kernel:>8.0f}{kernel - sdk:>+7.0f}")
    ours = [
        (row[2] * 1e6 / count, f"{file.split('src/')[-1].split('site-packages/')[-1]}:{function}")
        for (file, _, function), row in profiles["kernel"].items()
        if package_of(file) in ("toolkernel", "jsonschema (the kernel's check)")
    ]
    lines.append("    the kernel's costliest functions (own time, us per call):")
    for seconds, where in sorted(ours, reverse=True)[:10]:
        lines.append(f"    {seconds:>8.1f}  {where}")
    return "\n".join(lines)


def on_loop(loop: str, function: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> Any:
    """Run ``function(*args)`` on a fresh ``loop`` ("trio" or "asyncio")."""
    if loop == "trio":
        return trio.run(function, *args)
    return asyncio.run(function(*args))


def report(loop: str, measured: dict[str, Any]) -> None:
    medians = measured["medians"]
    print(f"On {loop}: microseconds per call, medians of the rounds (CPU: this process's)")
    for tool, claims in measured["claims"].items():
        print(f"  a {tool} call claims: {claims}")
    print(
        f"  {'case':<24}{'SDK':>7}{'kernel':>8}{'+us':>7}{'SDK cpu':>9}{'kernel cpu':>11}"
        f"{'kernel/SDK':>12}"
    )
    for case, _, _, _ in CASES:
        (sdk, sdk_cpu), (kernel, kernel_cpu) = medians[(case, "sdk")], medians[(case, "kernel")]
        ratio = kernel / sdk
        verdict = "PASS" if ratio <= TARGET else "MISS"
        print(
            f"  {case:<24}{sdk * 1e6:>7.0f}{kernel * 1e6:>8.0f}{(kernel - sdk) * 1e6:>+7.0f}"
            f"{sdk_cpu * 1e6:>9.0f}{kernel_cpu * 1e6:>11.0f}{ratio:>11.2f}x"
            f"  (target: at most {TARGET:g}x) {verdict}"
        )
    if measured["profile"]:
        print(f"  Where the time goes in sequential read_file calls, under cProfile ({loop}):")
        print(measured["profile"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer calls and rounds")
    parser.add_argument("--profile", action="store_true", help="cProfile read_file calls")
    parser.add_argument("--serve", action="store_true", help="be the MCP server (over stdio)")
    options = parser.parse_args(argv)
    if options.serve:
        serve()
        return 0
    count = 10 if options.quick else 100
    rounds = 2 if options.quick else 31
    warm = 1 if options.quick else 5
    print(
        f"Python {platform.python_version()}, mcp {importlib.metadata.version('mcp')}, trio "
        f"{trio.__version__}, anyio {importlib.metadata.version('anyio')}, {os.cpu_count()} "
        f"CPUs; {count} calls a case a round, median of {rounds} rounds; the kernel with a "
        f"workspace root and max_concurrency={MAX_CONCURRENCY}; one server and connection"
    )
    if options.quick:
        print("Smoke run: too few calls for stable figures; run without --quick to compare.")
    with tempfile.TemporaryDirectory() as root:
        pathlib.Path(root, FILE_NAME).write_text("".join(f"line {i}\n" for i in range(50)))
        for loop in ("asyncio", "trio"):
            report(loop, on_loop(loop, measure, root, count, rounds, warm, options.profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Recorded turns replayed by several agents at once, each its own process, on one working tree.

Every agent runs the same recorded turns through its own kernel, on the real clock, sharing
leases through one lease service (``python -m toolkernel serve``) started for a fresh workspace.
Each call holds the claims its tool would (``RecordedCall.claims``) for its recorded duration
times ``scale``; a ``Write``, ``Edit`` or ``MultiEdit`` really edits its file through ``ctx.fs``:
it reads the file, waits out its duration, and writes it back with one line of its own added. A
lost update (two agents editing from the same read) would lose a line, so counting the lines
at the end says whether every edit landed.

``replay_agents`` runs them together and, for comparison, one after the other; the same module
run as a program (``python -m toolkernel._replay._agents``) is one agent.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
import trio

from .._open import open_kernel
from ..kernel import ToolCall, ToolContext
from ..locks import Mode, Path
from ..tools import Tool, tool
from ._turns import RecordedTurn, capped, load_turns

__all__ = ["AgentsReplay", "replay_agents", "expected_edits", "serving"]

_EDITS = ("Write", "Edit", "MultiEdit")


@attrs.frozen
class AgentsReplay:
    """What several agents replaying the same turns on one tree did."""

    agents: int
    together: float
    """Seconds from the first agent's first turn to the last one's last, all at once."""
    one_after_another: float
    """Seconds for the same agents run one after the other (each agent's turns only: the
    processes start, import and connect before the clock starts, in both runs)."""
    edits: int
    """Edits made (every agent's ``Write``/``Edit``/``MultiEdit`` calls, in every run)."""
    landed: int
    """Edits found in the files at the end: ``edits`` when none was lost."""
    failures: tuple[str, ...]
    """Calls that did not end OK."""


def _edited_file(tool: str, claims: Sequence[Any]) -> str | None:
    if tool not in _EDITS:
        return None
    for claim in claims:
        if isinstance(claim.resource, Path) and claim.mode is Mode.EXCLUSIVE:
            return str(claim.resource)
    return None


def expected_edits(turns: Sequence[RecordedTurn]) -> dict[str, int]:
    """How many lines one agent's replay adds to each file."""
    found: dict[str, int] = {}
    for turn in turns:
        for call in turn.calls:
            file = _edited_file(call.tool, call.claims)
            if file is not None:
                found[file] = found.get(file, 0) + 1
    return found


_SERVICE_IDLE_EXIT = 30.0
"""Seconds the service of :func:`serving` waits with no client before it ends (room for its
agents' interpreters to start on a loaded machine)."""


@contextlib.contextmanager
def serving(root: str | os.PathLike[str]) -> Iterator[str]:
    """A lease service for ``root`` in a child process, for as long as the block runs: its
    ``leases=`` URL."""
    directory = tempfile.mkdtemp(prefix="tk-")  # short: a socket path has 108 bytes at most
    socket = os.path.join(directory, "s.sock")
    command = [sys.executable, "-m", "toolkernel", "serve", "--root", os.fspath(root)]
    # Ending by itself once its clients have gone: this process, stopped by a signal (SIGTERM
    # runs no ``finally``), would otherwise leave it serving nobody for ever.
    command += ["--socket", socket, "--exit-when-idle", str(_SERVICE_IDLE_EXIT)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != socket:  # it prints it once it listens
            raise RuntimeError(f"the lease service did not start (exit {process.poll()})")
        yield f"unix:{socket}"
    finally:
        process.terminate()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()
        with contextlib.suppress(OSError):
            os.rmdir(directory)


def _start_agent(trace: str, turns: int, scale: float, root: str, leases: str, name: str) -> Any:
    command = [sys.executable, "-m", "toolkernel._replay._agents"]
    arguments = [trace, str(turns), str(scale), root, leases, name]
    process = subprocess.Popen(
        [*command, *arguments], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":  # its kernel is open, its leases shared
        process.kill()
        raise RuntimeError("an agent's replay did not start")
    return process


def _go(process: Any) -> None:
    process.stdin.write("go\n")
    process.stdin.flush()


def _finish(process: Any) -> dict[str, Any]:
    out, _ = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"an agent's replay failed (exit {process.returncode})")
    report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return report


def replay_agents(
    trace: str | os.PathLike[str],
    *,
    agents: int = 2,
    turns: int = 0,
    scale: float = 0.001,
    compare: bool = True,
) -> AgentsReplay:
    """Replay the first ``turns`` turns of ``trace`` (0: all of them, capped at 30 s a call) by
    ``agents`` processes on one fresh tree, together and then (if ``compare``; else
    ``one_after_another`` is NaN) one after the other."""
    trace = os.fspath(trace)
    chosen = capped(load_turns(trace))
    chosen = chosen[:turns] if turns else chosen
    per_agent = expected_edits(chosen)
    failures: list[str] = []
    timings: list[float] = []
    landed = 0
    for together in (True, False) if compare else (True,):
        with tempfile.TemporaryDirectory() as root, serving(root) as leases:
            names = [f"agent{i}" for i in range(agents)]
            started = [_start_agent(trace, turns, scale, root, leases, n) for n in names]
            if together:
                for process in started:
                    _go(process)
                reports = [_finish(process) for process in started]
                timings.append(max(r["end"] for r in reports) - min(r["start"] for r in reports))
            else:
                reports = []
                for process in started:
                    _go(process)
                    reports.append(_finish(process))
                timings.append(sum(r["end"] - r["start"] for r in reports))
            for report in reports:
                failures += report["failures"]
            landed += _count_lines(root, per_agent)
    edits = len(timings) * agents * sum(per_agent.values())
    sequential = timings[1] if compare else math.nan
    return AgentsReplay(agents, timings[0], sequential, edits, landed, tuple(failures))


def _count_lines(root: str, files: Mapping[str, int]) -> int:
    count = 0
    for file in files:
        with contextlib.suppress(OSError), open(os.path.join(root, file), encoding="utf-8") as f:
            count += sum(1 for _ in f)
    return count


# -- one agent ------------------------------------------------------------------------------------


def _agent(trace: str, turns: int, scale: float, root: str, leases: str, name: str) -> None:
    chosen = capped(load_turns(trace))
    chosen = chosen[:turns] if turns else chosen
    table = {f"{t}/{c}": call for t, turn in enumerate(chosen) for c, call in enumerate(turn.calls)}

    def stand_in(tool_name: str) -> Tool:
        async def run(ctx: ToolContext, key: str) -> None:
            call = table[key]
            file = _edited_file(call.tool, call.claims)
            if file is None:
                await trio.sleep(call.ms / 1000 * scale)
                return
            try:
                before = await ctx.fs.read_text(file)
            except FileNotFoundError:
                before = ""
            await trio.sleep(call.ms / 1000 * scale)  # whoever edits from the same read loses
            await ctx.fs.write_text(file, f"{before}{name} {key}\n", parents=True)

        return tool(name=tool_name, claims=lambda a: table[a["key"]].claims)(run)

    failures: list[str] = []

    async def main() -> None:
        names = sorted({call.tool for call in table.values()})
        tools = [stand_in(n) for n in names]
        parent = os.getppid()
        async with open_kernel(tools, root=root, leases=leases, max_concurrency=16) as kernel:
            print("ready", flush=True)
            if await trio.to_thread.run_sync(sys.stdin.readline) != "go\n":
                return  # the replay that started it is gone (stopped by a signal, say)
            times["start"] = time.time()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_end_with, parent, nursery.cancel_scope)
                for t, turn in enumerate(chosen):
                    calls = [
                        ToolCall(f"{name}.{t}.{c}", call.tool, {"key": f"{t}/{c}"})
                        for c, call in enumerate(turn.calls)
                    ]
                    for result in await kernel.run(calls):
                        if not result.ok:
                            failures.append(
                                f"{result.call_id}: {result.status.name} {result.error}"
                            )
                nursery.cancel_scope.cancel()
            times["end"] = time.time()

    times: dict[str, float] = {}
    trio.run(main)
    print(json.dumps({"agent": name, "failures": failures, **times}))


async def _end_with(parent: int, scope: trio.CancelScope) -> None:
    """Cancel ``scope`` once the process ``parent`` has gone (this one is reparented): an
    agent of a replay stopped by a signal does not replay on for nobody."""
    try:
        watch = os.pidfd_open(parent)  # Linux: readable once the process has ended
    except (AttributeError, OSError):
        watch = None
    if watch is not None:
        try:
            await trio.lowlevel.wait_readable(watch)
        finally:
            os.close(watch)
    else:
        while os.getppid() == parent:  # noqa: ASYNC110 - no event says a parent ended
            await trio.sleep(0.5)
    scope.cancel()


if __name__ == "__main__":
    trace_arg, turns_arg, scale_arg, root_arg, leases_arg, name_arg = sys.argv[1:7]
    _agent(trace_arg, int(turns_arg), float(scale_arg), root_arg, leases_arg, name_arg)

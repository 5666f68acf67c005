"""``python -m toolkernel demo``: a scripted agent session over a copy of a small project.

The agent loop (``toolkernel.agent.run_agent``) drives a scripted model
(``ScriptedModel(DEMO_TURNS)``) through three turns, as a model would emit them: explore (reads,
greps, a glob in parallel), edit (several files at once, two edits and a read of the same file
that must take turns), verify (a grep and the project's tests through Bash). Each turn prints a
live log and a timeline (``toolkernel.trace.Timeline``; in colour on a terminal, with rich);
then the kernel's statistics, and where the Chrome trace of the session was written (open it in
Perfetto). Then the same calls run one by one, and in the coarse "reads together, every write
alone" scheme, on fresh copies, and the demo prints the speed-ups and checks that all three left
identical trees.

Each call takes at least the median duration recorded for its tool in real agent sessions
(``shared/data/traces``), standing in for a real disk, editor and test run; ``--no-latency``
turns that off and leaves only what the tools really take.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs
import trio

from .._open import open_kernel
from .._replay import is_read_only_call
from ..agent import AgentEvent, ModelReplied, ScriptedModel, StepStarted, run_agent
from ..agent._demo_turns import DEMO_TURNS
from ..kernel import Kernel, KeyFunction, ToolCall, ToolContext, ToolResult
from ..locks import Claim
from ..tools import Tool, builtin_tools
from ..trace import ChromeTrace, Timeline, format_statistics
from ._screen import Screen, make_screen

# Package data beside this module (not an installed package: see pyproject.toml).
SAMPLE_PROJECT = Path(__file__).parent / "sample-project"

# Median seconds per call of each tool in the recorded sessions (shared/data/traces).
RECORDED_MEDIANS = {
    "Read": 0.10,
    "Edit": 0.11,
    "MultiEdit": 0.33,
    "Write": 0.10,
    "Grep": 0.11,
    "Glob": 0.40,
    "ListDir": 0.07,
    "TodoWrite": 0.06,
    "Bash": 1.14,
}


@attrs.define(eq=False)
class AtLeast:
    """Wraps a tool so each call takes at least ``seconds`` (holding its leases meanwhile)."""

    inner: Tool
    seconds: float

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def wait_timeout(self) -> float | None:
        return self.inner.wait_timeout

    @property
    def run_timeout(self) -> float | None:
        return self.inner.run_timeout

    def parse_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return self.inner.parse_arguments(arguments)

    def claims(self, arguments: Mapping[str, Any], key: KeyFunction) -> Sequence[Claim] | None:
        return self.inner.claims(arguments, key)

    async def invoke(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> Any:
        deadline = trio.current_time() + self.seconds
        try:
            return await self.inner.invoke(ctx, arguments)
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep_until(deadline)


def _tools(latency: bool) -> list[Any]:
    tools = builtin_tools(bash=True)
    if not latency:
        return list(tools)
    return [AtLeast(t, RECORDED_MEDIANS.get(t.name, 0.0)) for t in tools]


def _label(call: ToolCall) -> str:
    args = call.arguments if isinstance(call.arguments, Mapping) else {}
    for key in ("file_path", "pattern", "command", "path"):
        if key in args:
            text = str(args[key]).replace(sys.executable, "python")
            return text if len(text) <= 28 else text[:25] + "..."
    return ""


def _is_read_only(call: ToolCall) -> bool:
    args = call.arguments if isinstance(call.arguments, Mapping) else {}
    return is_read_only_call(call.name, args)


async def _one_by_one(kernel: Kernel, calls: Sequence[ToolCall]) -> list[ToolResult]:
    return [(await kernel.run([call]))[0] for call in calls]


async def _coarse(kernel: Kernel, calls: Sequence[ToolCall]) -> list[ToolResult]:
    """Consecutive read-only calls together (at most 10), every other call alone."""
    results: list[ToolResult] = []
    group: list[ToolCall] = []
    for call in calls:
        if _is_read_only(call) and len(group) < 10:
            group.append(call)
            continue
        if group:
            results += await kernel.run(group)
            group = []
        if _is_read_only(call):
            group.append(call)
        else:
            results += await kernel.run([call])
    if group:
        results += await kernel.run(group)
    return results


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def _copy_project(into: Path, name: str) -> Path:
    target = into / name
    shutil.copytree(SAMPLE_PROJECT, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


async def _agent_session(
    root: Path, latency: bool, screen: Screen, trace: ChromeTrace
) -> tuple[list[ToolResult], float, str]:
    """The scripted model's session through the agent loop; its results, how long it took,
    and the kernel's statistics as text."""
    timeline = Timeline(echo=screen.live_line)
    model = ScriptedModel(DEMO_TURNS, final="The tests pass; power() is in.")
    asked_at = 0.0
    open_batch = False

    def on_event(event: AgentEvent) -> None:
        nonlocal asked_at, open_batch
        if isinstance(event, StepStarted):
            if open_batch:
                screen.chart(timeline.chart())
                open_batch = False
            asked_at = trio.current_time()
        elif isinstance(event, ModelReplied):
            trace.span(
                f"turn {event.step}: model",
                asked_at,
                trio.current_time(),
                lane="model",
                args={"says": event.text, "calls": [c.id for c in event.calls]},
            )
            if event.calls:
                screen.heading(
                    f"turn {event.step} — the model says: {event.text!r} and emits "
                    f"{len(event.calls)} calls"
                )
                timeline.clear()
                labels = {c.id: _label(c) for c in event.calls}
                timeline.labels.update(labels)
                trace.labels.update(labels)
                open_batch = True
            else:
                screen.heading(f"the model says: {event.text!r} and stops")

    async with open_kernel(_tools(latency), root=root) as kernel:
        kernel.add_listener(timeline)
        kernel.add_listener(trace)
        start = trio.current_time()
        outcome = await run_agent(
            model, kernel, "Add power() to the calculator, with a test.", on_event=on_event
        )
        elapsed = trio.current_time() - start
        statistics = format_statistics(kernel.statistics())
    if open_batch:
        screen.chart(timeline.chart())
    results = [result for step in outcome.steps for result in step.results]
    return results, elapsed, statistics


async def _session(latency: bool, screen: Screen, trace_path: Path) -> int:
    with tempfile.TemporaryDirectory(prefix="toolkernel-demo-") as tmp:
        base = Path(tmp)
        roots = {name: _copy_project(base, name) for name in ("kernel", "serial", "coarse")}
        screen.say(f"toolkernel demo: a scripted agent edits a copy of a small project in {base}")
        if latency:
            screen.say(
                "(each call takes at least its tool's median duration in recorded agent "
                "sessions; --no-latency turns that off)"
            )
        trace = ChromeTrace(title="toolkernel demo")
        results, kernel_time, statistics = await _agent_session(
            roots["kernel"], latency, screen, trace
        )
        elapsed = {"kernel": kernel_time}
        statuses = {"kernel": [r.status.value for r in results]}
        failed = [r for r in results if not r.ok]
        for r in failed:
            screen.say(f"\n{r.call_id} {r.name} ended {r.status.value}: {r.error}")
        tests = next((r for r in results if r.call_id == "c16"), None)
        if tests is not None and tests.ok:
            screen.say(f"\nthe project's tests pass after the edits: {tests.text().strip()!r}")
        screen.say("\nthe kernel's statistics:\n" + statistics)
        try:
            trace.write(trace_path)
        except OSError as exc:  # gone, or made unwritable, while the session ran
            raise SystemExit(f"demo: can't write {trace_path}: {exc.strerror or exc}") from None
        screen.say(
            f"\na trace of the session (Chrome trace JSON): {trace_path}\n"
            f"  open it at https://ui.perfetto.dev (Open trace file): a lane per call running "
            f"at once, waits drawn apart, the model's turns above"
        )
        for name, runner in (("serial", _one_by_one), ("coarse", _coarse)):
            async with open_kernel(_tools(latency), root=roots[name]) as kernel:
                start = trio.current_time()
                found: list[ToolResult] = []
                for turn in DEMO_TURNS:
                    found += await runner(kernel, turn.calls)
                elapsed[name] = trio.current_time() - start
                statuses[name] = [r.status.value for r in found]
        trees = {name: _tree(root) for name, root in roots.items()}
        same = trees["kernel"] == trees["serial"] == trees["coarse"]
        same_status = statuses["kernel"] == statuses["serial"] == statuses["coarse"]
        screen.say("\nthe same session, three ways:")
        screen.say(
            f"  toolkernel (each call as soon as its leases are free) {elapsed['kernel']:6.2f}s"
        )
        screen.say(
            f"  coarse (reads together, every write alone)            {elapsed['coarse']:6.2f}s"
            f"   {_speed_up(elapsed['coarse'], elapsed['kernel'], latency)}"
        )
        screen.say(
            f"  one by one                                            {elapsed['serial']:6.2f}s"
            f"   {_speed_up(elapsed['serial'], elapsed['kernel'], latency)}"
        )
        if not latency:
            screen.say(
                "  (with --no-latency the calls take next to nothing, so the times are mostly "
                "the agent loop's and the timeline's own work, which only the toolkernel run "
                "does: run without it to compare)"
            )
        screen.say(f"  final trees identical: {same}; every call ended the same way: {same_status}")
        return 0 if same and same_status and not failed else 1


def _speed_up(theirs: float, ours: float, latency: bool) -> str:
    """How the kernel's time compares with another scheme's, where the comparison means
    something: with no latency, calls take next to nothing and the kernel's run is mostly the
    agent loop's and the timeline's work, which the other schemes' runs skip."""
    if not latency:
        return "no latency: speed-up not measured"
    if ours > 0 and theirs >= ours:
        return f"toolkernel is {theirs / ours:.2f}x faster"
    return f"toolkernel is {ours / theirs:.2f}x slower" if theirs > 0 else "not measured"


def run_demo(
    latency: bool = True, trace: Path | None = None, color: str = "auto", out: TextIO | None = None
) -> int:
    """Run the demo session; return the process exit code.

    ``trace``: where to write the Chrome trace (default: ``toolkernel-demo-trace.json`` in the
    temporary directory). ``color``: ``auto`` (on a terminal, if rich is installed),
    ``always`` or ``never``.
    """
    target = trace or Path(tempfile.gettempdir()) / "toolkernel-demo-trace.json"
    problem = _unwritable(target)
    if problem is not None:  # said before the session, not after it
        raise SystemExit(f"demo: can't write the trace to {target}: {problem}")
    screen = make_screen(out or sys.stdout, color)
    code = trio.run(_session, latency, screen, target)
    return 141 if screen.gone else code  # its reader went: as a shell says SIGPIPE ended it


def _unwritable(target: Path) -> str | None:
    """Why the trace can't be written to ``target``, or None if it can."""
    if target.is_dir():
        return "it is a directory"
    if not target.parent.is_dir():
        return f"there is no directory {str(target.parent)!r}"
    if not os.access(target if target.exists() else target.parent, os.W_OK):
        return "permission denied"
    return None

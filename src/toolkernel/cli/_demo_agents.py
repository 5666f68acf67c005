"""``python -m toolkernel demo --agents 2``: two agents on one copy of the sample project.

A lease service (``python -m toolkernel serve``) serves a fresh copy of the project; two agent
loops, each with its own kernel sharing leases through it, run at once: the demo's session
(``DEMO_TURNS``: add power() and a test) and a second scripted session that documents the
project (``DOCS_TURNS``: it edits ``calc/format.py`` and the README, files the first one searches
and reads). Conflicting calls of the two agents take turns; the rest overlap. (Leases order
calls, not another agent's change of several turns: an agent running the tests halfway through
the other's edits would see them half done, as it would beside a person. So the second agent
reads its work back instead.) The same two sessions then run one after the other on another
copy, through a lease service too, and the demo checks that both ways left the same tree, with
every edit of both agents in it.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

import trio

from .._open import open_kernel
from .._replay._agents import serving
from ..agent import ScriptedModel, run_agent
from ..agent._demo_turns import DEMO_TURNS
from ..agent._turns import Turn
from ..kernel import CallBlocked, CallEvent, CallFinished, CallStarted, ToolCall
from ._demo import _copy_project, _label, _tools, _tree
from ._screen import Screen, make_screen

DOCS_TURNS: tuple[Turn, ...] = (
    Turn(
        "Let me read the README and how answers are formatted.",
        (
            ToolCall("d1", "Read", {"file_path": "README.md"}),
            ToolCall("d2", "Read", {"file_path": "calc/format.py"}),
        ),
    ),
    Turn(
        "I'll document what the calculator does.",
        (
            ToolCall(
                "d3",
                "Edit",
                {
                    "file_path": "calc/format.py",
                    "old_string": '"""Formatting answers."""',
                    "new_string": '"""Formatting answers: numbers as the calculator prints '
                    'them."""',
                },
            ),
            ToolCall(
                "d4",
                "Edit",
                {
                    "file_path": "README.md",
                    "old_string": "A tiny calculator used by",
                    "new_string": "A tiny calculator (+, -, *, /, ^) used by",
                },
            ),
        ),
    ),
    Turn(
        "Let me read them back.",
        (
            ToolCall("d5", "Read", {"file_path": "calc/format.py"}),
            ToolCall("d6", "Grep", {"pattern": "calculator", "path": "README.md"}),
        ),
    ),
)

AGENTS = {"coder": (DEMO_TURNS, "Add power() to the calculator."), "docs": (DOCS_TURNS, "Docs.")}


async def _agent(
    name: str, root: Path, leases: str, tools: list[Any], screen: Screen, *, live: bool
) -> bool:
    turns, prompt = AGENTS[name]
    labels: dict[str, str] = {}

    def show(event: CallEvent) -> None:
        label = f"{name:>5} {event.call_id:<4}{labels.get(event.call_id, '')}"
        if isinstance(event, CallStarted):
            screen.live_line(f"{label} starts")
        elif isinstance(event, CallBlocked):
            screen.live_line(f"{label} waits for {', '.join(event.resources)}")
        elif isinstance(event, CallFinished):
            screen.live_line(f"{label} {event.result.status.value}")

    for turn in turns:
        labels.update({c.id: f"{c.name} {_label(c)}" for c in turn.calls})
    async with open_kernel(tools, root=root, leases=leases) as kernel:
        if live:
            kernel.add_listener(show)
        outcome = await run_agent(ScriptedModel(turns, final="Done."), kernel, prompt)
    failed = [r for step in outcome.steps for r in step.results if not r.ok]
    for r in failed:
        screen.say(f"{name} {r.call_id} {r.name} ended {r.status.value}: {r.error}")
    return not failed


async def _session(latency: bool, screen: Screen) -> int:
    with tempfile.TemporaryDirectory(prefix="toolkernel-demo-") as tmp:
        together, apart = _copy_project(Path(tmp), "together"), _copy_project(Path(tmp), "apart")
        screen.say(
            f"toolkernel demo: two agents edit one copy of a small project in {together}, "
            f"sharing leases through a lease service"
        )
        ok: list[bool] = []
        tools = _tools(latency)
        # Once untimed first, on a copy of its own: what the first run in a process pays (the
        # shell parser, imports) would otherwise count against whichever way runs first.
        warm = _copy_project(Path(tmp), "warm-up")
        with serving(warm) as leases:
            for name in AGENTS:
                await _agent(name, warm, leases, tools, screen, live=False)

        async def one(name: str, leases: str) -> None:
            ok.append(await _agent(name, together, leases, tools, screen, live=True))

        with serving(together) as leases:
            start = trio.current_time()
            async with trio.open_nursery() as nursery:
                for name in AGENTS:
                    nursery.start_soon(one, name, leases)
            at_once = trio.current_time() - start
        with serving(apart) as leases:
            start = trio.current_time()
            for name in AGENTS:
                ok.append(await _agent(name, apart, leases, tools, screen, live=False))
            one_after_another = trio.current_time() - start
        same = _tree(together) == _tree(apart)
        text = (together / "calc" / "ops.py").read_text() + (together / "README.md").read_text()
        landed = "def power(" in text and "(+, -, *, /, ^)" in text
        screen.say(
            f"\ntwo agents at once: {at_once:.2f}s; one after the other: {one_after_another:.2f}s "
            f"({one_after_another / at_once:.2f}x)\n"
            f"every call ok: {all(ok)}; both agents' edits landed: {landed}; the same tree as "
            f"one after the other: {same}"
        )
        return 0 if all(ok) and landed and same else 1


def run_demo_agents(latency: bool = True, color: str = "auto", out: TextIO | None = None) -> int:
    """Run the two agents' demo; return the process exit code."""
    screen = make_screen(out or sys.stdout, color)
    code = trio.run(_session, latency, screen)
    return 141 if screen.gone else code  # its reader went: as a shell says SIGPIPE ended it

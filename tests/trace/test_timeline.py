"""The text timeline: a live line as each call waits, starts and ends, and a chart per batch."""

from __future__ import annotations

import anyio
import trio

import toolkernel as tk
from toolkernel.trace import Timeline


@tk.tool(writes=["path"])
async def edit(ctx: tk.ToolContext, path: str, seconds: float = 1.0, fail: bool = False) -> str:
    """Pretend to edit a file."""
    await anyio.sleep(seconds)
    if fail:
        raise tk.ToolError("it broke")
    return "edited"


async def run_with_timeline(calls: list[tk.ToolCall]) -> tuple[Timeline, list[str]]:
    lines: list[str] = []
    timeline = Timeline(echo=lines.append)
    timeline.labels.update({call.id: call.arguments["path"] for call in calls})  # type: ignore[index]
    async with tk.open_kernel(tools=[edit]) as kernel:
        kernel.add_listener(timeline)
        await kernel.run(calls)
    return timeline, lines


async def test_live_lines_say_who_waits_for_whom_and_when_calls_start_and_end(
    autojump_clock: trio.abc.Clock,
) -> None:
    _, lines = await run_with_timeline(
        [tk.ToolCall("c1", "edit", {"path": "a.py"}), tk.ToolCall("c2", "edit", {"path": "a.py"})]
    )
    assert lines == [
        "    0.00s … c2 edit a.py  (waits for c1 on a.py)",
        "    0.00s ▶ c1 edit a.py",
        "    1.00s ■ c1 edit a.py",
        "    1.00s ▶ c2 edit a.py",
        "    2.00s ■ c2 edit a.py",
    ]


async def test_the_chart_draws_waiting_running_and_failure(
    autojump_clock: trio.abc.Clock,
) -> None:
    timeline, _ = await run_with_timeline(
        [
            tk.ToolCall("c1", "edit", {"path": "a.py"}),
            tk.ToolCall("c2", "edit", {"path": "a.py", "fail": True}),
        ]
    )
    chart = timeline.chart(width=10).splitlines()
    assert chart[0] == "  c1 edit a.py |█████      |"
    assert chart[1] == "  c2 edit a.py |·····█████ | waited for c1 on a.py; error"
    assert chart[2].endswith("2.00s")
    timeline.clear()
    assert timeline.chart() == "(no calls)"

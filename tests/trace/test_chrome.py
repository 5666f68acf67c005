"""Chrome trace JSON: one lane per call running at once, waits drawn apart, every slice saying
what the call was, held, and waited behind; arrows from each call to those that waited for it."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import toolkernel as tk
from toolkernel.testing import FakeTool
from toolkernel.trace import ChromeTrace

read, edit = FakeTool("read", reads=True), FakeTool("edit", writes=True)


def slices(trace: dict[str, Any], pid: int) -> list[dict[str, Any]]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == pid]


def names(trace: dict[str, Any], kind: str) -> dict[tuple[int, int | None], str]:
    return {
        (e["pid"], e.get("tid")): e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == kind
    }


async def test_lanes_waits_and_arrows(autojump_clock: object, tmp_path: pathlib.Path) -> None:
    trace = ChromeTrace(labels={"c1": "a.py"})
    async with tk.open_kernel([read, edit]) as kernel:
        kernel.add_listener(trace)
        await kernel.run(
            [
                tk.ToolCall("c1", "edit", {"paths": ["a.py"], "duration": 2}),
                tk.ToolCall("c2", "read", {"paths": ["b.py"], "duration": 1}),
                tk.ToolCall("c3", "read", {"paths": ["b.py"], "duration": 3}),
                tk.ToolCall("c4", "read", {"paths": ["a.py"], "duration": 1, "fail": "end"}),
                tk.ToolCall("c5", "edit", {"paths": ["b.py"], "duration": 1}),
            ]
        )
    trace.write(tmp_path / "trace.json")
    data = json.loads((tmp_path / "trace.json").read_text())
    assert names(data, "process_name") == {
        (2, None): "toolkernel: running",
        (3, None): "toolkernel: waiting",
    }
    running = {e["name"]: e for e in slices(data, 2)}
    assert {name: (e["tid"], e["ts"], e["dur"]) for name, e in running.items()} == {
        "c1 edit a.py": (1, 0, 2_000_000),
        "c2 read": (2, 0, 1_000_000),
        "c3 read": (3, 0, 3_000_000),
        "c4 read": (1, 2_000_000, 1_000_000),  # lane 1 again: c1 had left it
        "c5 edit": (1, 3_000_000, 1_000_000),
    }
    lanes = {tid for (pid, tid) in names(data, "thread_name") if pid == 2}
    assert lanes == {1, 2, 3}  # the peak concurrency
    c4 = running["c4 read"]["args"]
    assert c4 == {
        "call_id": "c4",
        "tool": "read",
        "claims": ["shared a.py"],
        "status": "error",
        "waited_s": 2.0,
        "waited_behind": ["c1"],
        "contested": ["a.py"],
        "error_type": "FakeToolError",
        "error": "read call c4 failed at its end, as scripted",
    }
    waiting = {e["name"]: (e["ts"], e["dur"], e["args"]["waited_behind"]) for e in slices(data, 3)}
    assert waiting == {
        "c4 read (waiting)": (0, 2_000_000, ["c1"]),
        "c5 edit (waiting)": (0, 3_000_000, ["c2", "c3"]),
    }
    flows = [(e["ph"], e["tid"], e["ts"]) for e in data["traceEvents"] if e["ph"] in "sf"]
    assert ("f", 1, 3_000_000) in flows and ("s", 3, 2_999_999.999) in flows
    assert sum(1 for ph, _, _ in flows if ph == "f") == 3  # c1->c4, c2->c5, c3->c5


async def test_spans_of_your_own_go_above_the_calls(autojump_clock: object) -> None:
    trace = ChromeTrace()
    async with tk.open_kernel([edit]) as kernel:
        kernel.add_listener(trace)
        await kernel.run([tk.ToolCall("c1", "edit", {"paths": ["a"]})])
    trace.span("turn 1", 0, 1.5, lane="model", args={"says": "hi"})
    data = trace.to_json()
    assert names(data, "process_name")[(1, None)] == "toolkernel: agent"
    assert [(e["name"], e["tid"], e["dur"]) for e in slices(data, 1)] == [("turn 1", 1, 1_500_000)]
    assert names(data, "thread_name")[(1, 1)] == "model"

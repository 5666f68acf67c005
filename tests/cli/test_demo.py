"""``python -m toolkernel demo``: the scripted session runs, and ends the same three ways.

The demo edits a copy of its sample project with real files and runs the project's tests
through Bash, so this runs on the real clock (``--no-latency``: no recorded durations added).
"""

from __future__ import annotations

import io
import json
import pathlib
import subprocess
import sys

import pytest

from toolkernel.cli import main
from toolkernel.cli._demo import _speed_up, run_demo


def test_the_demo_runs_every_turn_and_ends_the_same_three_ways(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    trace = tmp_path / "trace.json"
    assert main(["demo", "--no-latency", "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    for number in (1, 2, 3):
        assert f"turn {number} — the model says:" in out
    assert "the model says: 'The tests pass; power() is in.' and stops" in out
    assert "waited for c7 on calc/ops.py" in out
    assert "the project's tests pass after the edits" in out
    assert "the kernel's statistics:\n  17 calls finished, at most" in out
    assert "where calls waited" in out and "calc/ops.py" in out
    assert f"a trace of the session (Chrome trace JSON): {trace}" in out
    assert "final trees identical: True; every call ended the same way: True" in out
    assert "\x1b[" not in out  # piped: plain text


def test_the_trace_file_opens_as_chrome_trace_json(tmp_path: pathlib.Path) -> None:
    trace = tmp_path / "trace.json"
    assert main(["demo", "--no-latency", "--trace", str(trace), "--color", "never"]) == 0
    events = json.loads(trace.read_text())["traceEvents"]
    calls = {e["args"]["call_id"] for e in events if e["ph"] == "X" and e["pid"] == 2}
    assert calls == {f"c{n}" for n in range(1, 18)}
    turns = [e["name"] for e in events if e["ph"] == "X" and e["pid"] == 1]
    assert turns == [f"turn {n}: model" for n in (1, 2, 3, 4)]
    waited = {e["args"]["call_id"] for e in events if e["ph"] == "X" and e["pid"] == 3}
    assert {"c9", "c10", "c11"} <= waited


def test_on_a_terminal_the_timeline_is_in_colour(tmp_path: pathlib.Path) -> None:
    out = io.StringIO()
    assert run_demo(latency=False, trace=tmp_path / "t.json", color="always", out=out) == 0
    text = out.getvalue()
    assert "\x1b[36m" in text and "\x1b[33m" in text  # starts in cyan, waits in yellow
    assert "final trees identical: True" in text


def test_version_and_help_on_every_command() -> None:
    for argv in (["--version"], ["demo", "--help"], ["replay", "--help"]):
        done = subprocess.run(
            [sys.executable, "-m", "toolkernel", *argv], capture_output=True, text=True, check=True
        )
        assert done.stdout.strip()


def test_python_dash_m_toolkernel_is_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolkernel", "demo", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--no-latency" in done.stdout


def test_two_agents_edit_one_tree_at_once_and_leave_what_one_after_the_other_leaves(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--agents", "2", "--no-latency"]) == 0
    out = capsys.readouterr().out
    assert "sharing leases through a lease service" in out
    assert " docs d4  Edit README.md ok" in out and "coder c9  Edit calc/ops.py ok" in out
    assert (
        "every call ok: True; both agents' edits landed: True; the same tree as one after "
        "the other: True"
    ) in out


def test_with_no_latency_the_demo_claims_no_speed_up(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    assert main(["demo", "--no-latency", "--trace", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    compared = out.split("the same session, three ways:")[1]
    assert "faster" not in compared and "slower" not in compared
    assert compared.count("no latency: speed-up not measured") == 2


def test_a_speed_up_is_said_as_faster_or_slower_only_with_latency() -> None:
    assert _speed_up(3.0, 1.0, latency=True) == "toolkernel is 3.00x faster"
    assert _speed_up(1.0, 2.0, latency=True) == "toolkernel is 2.00x slower"
    assert _speed_up(3.0, 1.0, latency=False) == "no latency: speed-up not measured"

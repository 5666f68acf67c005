"""``python -m toolkernel demo``: the scripted session runs, and ends the same three ways.

The demo edits a copy of its sample project with real files and runs the project's tests
through Bash, so this runs on the real clock (``--no-latency``: no recorded durations added).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from toolkernel.cli import main


def test_the_demo_runs_every_turn_and_ends_the_same_three_ways(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--no-latency"]) == 0
    out = capsys.readouterr().out
    for number in (1, 2, 3):
        assert f"turn {number} — the model says:" in out
    assert "waited for c7 on calc/ops.py" in out
    assert "the project's tests pass after the edits" in out
    assert "final trees identical: True; every call ended the same way: True" in out


def test_python_dash_m_toolkernel_is_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolkernel", "demo", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--no-latency" in done.stdout

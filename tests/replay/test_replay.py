"""Recorded turns under every strategy: the formulas on a turn worked by hand, the kernel on
the critical path, and ``python -m toolkernel replay``."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

import toolkernel as tk
from toolkernel._replay import (
    RecordedTurn,
    claims_for,
    compare,
    is_read_only_call,
    load_turns,
    recorded_call,
)
from toolkernel.cli import main

# Emission order: a write of a.py, a read of a.py, a read of b.py, a write of b.py, a grep.
TURN = RecordedTurn(
    "hand turn 1",
    (
        recorded_call("c1", "Edit", {"file_path": "a.py"}, 3000),
        recorded_call("c2", "Read", {"file_path": "a.py"}, 1000),
        recorded_call("c3", "Read", {"file_path": "b.py"}, 2000),
        recorded_call("c4", "Write", {"file_path": "b.py"}, 1000),
        recorded_call("c5", "Grep", {"path": "docs"}, 500),
    ),
)


def test_every_strategy_schedules_the_hand_turn_as_worked_out() -> None:
    (scheduled,) = compare("hand", [TURN]).turns
    assert scheduled.starts["serial"] == (0, 3000, 4000, 6000, 7000)
    # c1 alone; c2, c3 together; c4 alone; c5.
    assert scheduled.starts["coarse"] == (0, 3000, 3000, 5000, 6000)
    # Reads first (c2 before the edit of its file: unsafe), then c1, c4 one by one.
    assert scheduled.starts["flag"] == (2000, 0, 0, 5000, 0)
    assert scheduled.starts["levels"] == (0, 3000, 0, 3000, 0)
    assert scheduled.starts["gather"] == (0, 0, 0, 0, 0)
    assert scheduled.starts["cp"] == (0, 3000, 0, 2000, 0)
    assert scheduled.starts["kernel"] == scheduled.starts["cp"] and scheduled.kernel_exact
    spans = {key: scheduled.makespan(key) for key in scheduled.starts}
    assert spans == {
        "serial": 7500,
        "coarse": 6500,
        "flag": 6000,
        "levels": 4000,
        "gather": 3000,
        "cp": 4000,
        "kernel": 4000,
    }
    assert {key: scheduled.unsafe(key) for key in scheduled.starts} == {
        "serial": 0,
        "coarse": 0,
        "flag": 1,  # c2 read a.py before c1's edit ended
        "levels": 0,
        "gather": 2,  # c1/c2 and c3/c4 overlapped
        "cp": 0,
        "kernel": 0,
    }


def test_bash_calls_claim_what_the_bash_tool_would() -> None:
    command = "grep -rn TODO src > out.txt"
    assert claims_for("Bash", {"command": command}) == tk.locks.canonical_claims(
        tk.tools.shell_claims(command)
    )
    assert claims_for("Read", {"file_path": "/etc/passwd"}) == (tk.exclusive(tk.EVERYTHING),)
    assert claims_for("Task", {}) == (tk.exclusive(tk.EVERYTHING),)
    # The task list, however a Claude Code release keeps it: the list, nothing else.
    for tool in ("TodoWrite", "TaskCreate", "TaskUpdate", "TaskList", "TaskGet"):
        assert claims_for(tool, {}) == (tk.exclusive(tk.device("todo")),)
    assert is_read_only_call("Bash", {"command": "git status"})
    assert not is_read_only_call("Bash", {"command": "git status > x"})


def write_trace(path: pathlib.Path) -> None:
    calls = [
        {"id": "c1", "tool": "Edit", "args": {"file_path": "a.py"}, "duration_s": 3.0},
        {"id": "c2", "tool": "Read", "args": {"file_path": "a.py"}, "duration_s": 1.0},
        {"id": "c3", "tool": "Read", "args": {"file_path": "b.py"}, "duration_s": 2.0},
        {"id": "c4", "tool": "Write", "args": {"file_path": "b.py"}, "duration_s": 1.0},
        {"id": "c5", "tool": "Grep", "args": {"path": "docs"}, "duration_s": 0.5},
    ]
    lines = [
        {"session": "s00", "turn": 1, "calls": calls},
        {"session": "s00", "turn": 2, "calls": calls[:1]},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")


def test_the_replay_command_prints_the_table_and_draws_a_turn(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace, svg = tmp_path / "t.jsonl", tmp_path / "turn.svg"
    write_trace(trace)
    assert load_turns(trace)[0].calls == TURN.calls
    assert main(["replay", str(trace), "--svg", str(svg)]) == 0
    out = capsys.readouterr().out
    assert "t.jsonl, durations capped at 30 s: 2 turns (1 with several calls), 6 calls" in out
    assert "kernel (toolkernel)" in out and "x1.88" in out  # 7.5 s serial / 4 s kernel
    assert "turns where the kernel's schedule != the critical path: 0" in out
    assert "where calls waited" in out and "a.py" in out
    picture = svg.read_text()
    assert picture.startswith("<svg") and picture.count("<rect") == 1 + 7 * 5
    assert "s00 turn 1: 5 calls" in picture and 'stroke="#d00"' in picture
    drawn = "s00 turn 1 (5 calls; kernel 4.00 s, coarse 6.50 s, serial 7.50 s)"
    assert f"{drawn} under every strategy: {svg}" in out


def test_the_replay_command_names_a_turn_it_does_not_know(tmp_path: pathlib.Path) -> None:
    trace = tmp_path / "t.jsonl"
    write_trace(trace)
    with pytest.raises(SystemExit, match="no turn 's09 turn 1'"):
        main(["replay", str(trace), "--turn", "s09 turn 1", "--svg", str(tmp_path / "x.svg")])


def test_the_sample_sessions_replay_on_the_critical_path(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["replay", "--svg", str(tmp_path / "t.svg")])  # no trace: the shipped sample
    out = capsys.readouterr().out
    assert code == 0, out
    assert "764 turns (81 with several calls), 905 calls" in out
    assert "turns where the kernel's schedule != the critical path: 0; calls that failed: 0" in out


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        ("# Recorded sessions\n\nSome prose.\n", "line 1 is not JSON"),
        ('{"session": "s00", "turn": 1}\n', "line 1 is not a recorded turn"),
        ("[1, 2]\n", "line 1 is not a recorded turn"),
        (
            '{"session": "s00", "turn": 1, "calls": [{"id": "c1", "tool": "Read"}]}\n',
            "line 1 is not a recorded turn",
        ),
    ],
)
def test_the_replay_command_says_what_is_wrong_with_a_file_that_is_not_a_trace(
    tmp_path: pathlib.Path, content: str, complaint: str
) -> None:
    trace = tmp_path / "README.md"
    trace.write_text(content)
    with pytest.raises(SystemExit, match=re.escape(f"replay: {trace}: {complaint}")):
        main(["replay", str(trace), "--svg", str(tmp_path / "x.svg")])
    with pytest.raises(ValueError, match=complaint):
        load_turns(trace)


def test_the_replay_command_says_when_the_trace_file_is_missing(tmp_path: pathlib.Path) -> None:
    trace = tmp_path / "nowhere.jsonl"
    with pytest.raises(SystemExit, match=r"replay: can't read .*nowhere\.jsonl"):
        main(["replay", str(trace), "--svg", str(tmp_path / "x.svg")])


LONE_SURROGATE = (
    '{"session": "s", "turn": 1, "calls": [{"id": "c1", "tool": "Read", "args": '
    '{"file_path": "\\udcff.txt"}, "duration_s": 1, "is_error": false}]}\n'
)


def test_the_replay_command_says_when_it_cant_write_the_picture(tmp_path: pathlib.Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(LONE_SURROGATE)
    for target in (tmp_path / "missing" / "x.svg", tmp_path):
        with pytest.raises(SystemExit, match=r"replay: can't write .*: (No such|Is a dir)"):
            main(["replay", str(trace), "--svg", str(target)])


def test_a_name_that_is_not_utf8_in_a_trace_is_drawn_as_a_replacement_character(
    tmp_path: pathlib.Path,
) -> None:
    trace, picture = tmp_path / "t.jsonl", tmp_path / "x.svg"
    trace.write_text(LONE_SURROGATE)
    assert main(["replay", str(trace), "--svg", str(picture)]) == 0
    picture.read_bytes().decode()  # UTF-8 throughout

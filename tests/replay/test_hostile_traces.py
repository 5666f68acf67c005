"""A trace no recorder wrote: lines nested deeper than JSON reads, durations that are infinite,
NaN, negative, beyond exact milliseconds, or not numbers. ``replay`` says which line and why,
and exits; it never dies with a traceback."""

from __future__ import annotations

import json
import math
import pathlib

import pytest

from toolkernel._replay import load_turns, recorded_call
from toolkernel.cli import main

CALL = {"id": "a", "tool": "Read", "args": {"file_path": "x.py"}}


def turn_line(*calls: dict[str, object]) -> str:
    return json.dumps({"session": "s", "turn": 1, "calls": list(calls)})


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


HOSTILE = {
    "nested too deeply to read": ('{"session": "s", "turn": 1, "calls": [' + nested(5000) + "]}"),
    "duration_s must be a finite, non-negative number of seconds, not inf": turn_line(
        {**CALL, "duration_s": math.inf}
    ),
    "duration_s must be a finite, non-negative number of seconds, not nan": turn_line(
        {**CALL, "duration_s": math.nan}
    ),
    "duration_s must be a finite, non-negative number of seconds, not -5": turn_line(
        {**CALL, "duration_s": -5}
    ),
    "duration_s must be at most 9007199254740 s, not 1e+300": turn_line(
        {**CALL, "duration_s": 1e300}
    ),
    "duration_s must be a finite, non-negative number of seconds, not '5'": turn_line(
        {**CALL, "duration_s": "5"}
    ),
}


@pytest.mark.parametrize("why", list(HOSTILE))
def test_replay_names_the_line_and_what_is_wrong(
    why: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "trace.jsonl"
    good = turn_line({**CALL, "duration_s": 1})
    trace.write_text(f"{good}\n{HOSTILE[why]}\n")
    with pytest.raises(SystemExit) as leaving:
        main(["replay", str(trace), "--durations", "recorded", "--svg", str(tmp_path / "t.svg")])
    message = str(leaving.value.code)
    assert message.startswith(f"replay: {trace}: line 2 ")
    assert why in message


def test_deep_values_beside_what_the_replay_reads_are_left_alone(tmp_path: pathlib.Path) -> None:
    deep = json.loads(nested(900))
    trace = tmp_path / "trace.jsonl"
    trace.write_text(
        turn_line({**CALL, "id": deep, "args": {"file_path": "x", "z": deep}, "duration_s": 2})
    )
    (turn,) = load_turns(trace)
    assert [call.ms for call in turn.calls] == [2000]
    assert main(["replay", str(trace), "--svg", str(tmp_path / "t.svg")]) == 0


@pytest.mark.parametrize(
    ("ms", "error"),
    [
        (-1, ValueError),
        (math.inf, ValueError),
        (math.nan, ValueError),
        (True, TypeError),
        ("5", TypeError),
    ],
)
def test_a_recorded_call_needs_a_finite_non_negative_duration(ms: object, error: type) -> None:
    with pytest.raises(error, match="the duration of call c1 must be a finite"):
        recorded_call("c1", "Read", {"file_path": "a"}, ms)  # type: ignore[arg-type]

"""What a person (or a model, in a chat) may type that no tool wants: JSON nested deeper than
Python's json reads, infinite and negative numbers. Each becomes that call's error; the console
goes on to the next line."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from toolkernel import ToolCall
from toolkernel.cli._console_syntax import coerce, format_arguments
from toolkernel.cli._console_view import call_line

DEEP = "[" * 5000 + "]" * 5000


def test_a_value_nested_deeper_than_json_reads_goes_as_typed() -> None:
    assert coerce(DEEP, {"type": "integer"}) == DEEP
    assert coerce("1e999", {"type": "integer"}) == float("inf")


def test_arguments_too_deep_to_write_are_shown_by_their_type() -> None:
    deep: object = "x"
    for _ in range(5000):
        deep = [deep]
    looped: list[object] = []
    looped.append(looped)
    assert format_arguments({"a": deep, "b": looped}) == "a='(list)' b='(list)'"


def test_a_call_whose_argument_text_is_too_deep_is_shown_as_text() -> None:
    line = call_line(ToolCall("c1", "Read", json.dumps({"x": 1})[:-1] + ', "y": ' + DEEP + "}"))
    assert line.plain.startswith("→ c1 Read (arguments)=")


def test_the_console_answers_each_hostile_line_and_goes_on(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    lines = [
        f"Read file_path=a.txt limit={DEEP}",
        "Read file_path=a.txt limit=1e999",
        "Read file_path=a.txt offset=-1e999",
        "Read file_path=a.txt limit=-1",
        "Read file_path=a.txt",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "toolkernel", "console", "--root", str(tmp_path)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    out = done.stdout
    for number in (1, 2, 3, 4):
        assert f"✗ c{number} Read error" in out
    assert "must be integer or null, not number (inf)" in out
    assert "✓ c5 Read ok" in out and "hello" in out.split("✓ c5 Read ok")[1]

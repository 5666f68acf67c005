"""What a tool's output reads as in the answer to the model, in every format."""

from __future__ import annotations

from typing import Any

import pytest

import toolkernel as tk
from toolkernel.formats import anthropic, openai


def answered(output: Any) -> list[str]:
    """The text each format answers a call with, when the tool returned ``output``."""
    result = tk.ToolResult("c1", "t", tk.Status.OK, output=output)
    return [
        openai.chat_tool_messages([result])[0]["content"],
        openai.responses_outputs([result])[0]["output"],
        anthropic.tool_results([result])[0]["content"],
    ]


@pytest.mark.parametrize(
    ("output", "text"),
    [
        ("plain", "plain"),
        ({"a": [1, 2]}, '{"a": [1, 2]}'),
        (None, "(no output)"),
        ("", "(no output)"),
        ({1: "int key"}, '{"1": "int key"}'),
    ],
)
def test_outputs_read_as_their_text_or_json(output: Any, text: str) -> None:
    assert answered(output) == [text] * 3


@pytest.mark.parametrize(
    ("output", "text"),
    [(b"hello \xe2\x9c\x93", "hello \u2713"), ({"s": {1}}, '{"s": [1]}')],
    ids=["bytes", "set"],
)
def test_bytes_read_as_their_utf8_text_and_sets_as_lists(output: Any, text: str) -> None:
    assert answered(output) == [text] * 3


def test_a_name_that_is_not_utf8_reads_as_a_replacement_character_in_every_format() -> None:
    """``os.listdir`` gives such a name's bytes as lone surrogates, which UTF-8 (and so every
    model provider's JSON) can't carry; an error quoting it likewise."""
    listed = "bad\udcff.txt\nok.txt"
    assert answered(listed) == ["bad\N{REPLACEMENT CHARACTER}.txt\nok.txt"] * 3
    failed = tk.ToolResult("c1", "t", tk.Status.ERROR, error="no file 'x\ud800'")
    said = anthropic.tool_results([failed])[0]["content"]
    assert said.encode() and "x\N{REPLACEMENT CHARACTER}" in said

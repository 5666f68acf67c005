"""How the console reads a typed line into calls, and what it offers to complete: pure
functions of the text and the built-in tools' schemas."""

from __future__ import annotations

import pytest

from toolkernel.cli._console_syntax import (
    ConsoleSyntaxError,
    answer_value,
    coerce,
    complete,
    format_arguments,
    missing_question,
    parse_calls,
)
from toolkernel.tools import builtin_tools

TOOLS = {tool.name: tool for tool in builtin_tools()}


def calls(text: str) -> list[tuple[str, dict[str, object], list[str]]]:
    return [(d.name, d.arguments, d.missing) for d in parse_calls(text, TOOLS)]


def error(text: str) -> str:
    with pytest.raises(ConsoleSyntaxError) as raised:
        parse_calls(text, TOOLS)
    return str(raised.value)


def test_a_line_is_calls_separated_by_semicolons_with_shell_quoting() -> None:
    assert calls(
        "Read file_path=a.txt; Edit file_path=a.txt old_string='x = 1' new_string=\"\""
    ) == [
        ("Read", {"file_path": "a.txt"}, []),
        ("Edit", {"file_path": "a.txt", "old_string": "x = 1", "new_string": ""}, []),
    ]
    # ; and # inside quotes are text; a trailing ; and empty segments are nothing.
    assert calls("Grep pattern='a;b' glob='#*.py';; ") == [
        ("Grep", {"pattern": "a;b", "glob": "#*.py"}, [])
    ]
    # Tool names in another case, when that names one tool.
    assert calls("read file_path=x")[0][0] == "Read"


def test_values_are_json_unless_the_parameter_takes_a_string() -> None:
    read, edit, multi = calls(
        "Read file_path=10 limit=20 offset=null; "
        "Edit file_path=a old_string=true new_string=[1] replace_all=true; "
        """MultiEdit file_path=a edits='[{"old_string": "a", "new_string": "b"}]'"""
    )
    assert read[1] == {"file_path": "10", "limit": 20, "offset": None}
    assert edit[1] == {
        "file_path": "a",
        "old_string": "true",
        "new_string": "[1]",
        "replace_all": True,
    }
    assert multi[1]["edits"] == [{"old_string": "a", "new_string": "b"}]
    # Not JSON: passed as typed, for the kernel to refuse with its own message.
    assert coerce("ten", {"type": ["integer", "null"]}) == "ten"
    assert coerce("3", {}) == 3 and coerce("a b", {}) == "a b"


def test_required_arguments_left_out_are_listed_in_the_tools_order() -> None:
    assert calls("Edit new_string=y") == [
        ("Edit", {"new_string": "y"}, ["file_path", "old_string"])
    ]
    assert (
        missing_question(
            "Edit", "old_string", TOOLS["Edit"].parameters_schema()["properties"]["old_string"]
        )
        == "Edit old_string (string): "
    )
    assert answer_value("two words", {"type": "string"}) == "two words"
    assert answer_value('""', {"type": "string"}) == ""
    assert answer_value('"quoted words"', {"type": "string"}) == "quoted words"
    assert answer_value('"a" and "b"', {"type": "string"}) == '"a" and "b"'
    assert answer_value("5", {"type": "integer"}) == 5


def test_mistakes_are_explained_with_what_to_type() -> None:
    assert error("Raed file_path=a") == (
        "there is no tool named 'Raed'; did you mean Read? (/tools lists them)"
    )
    assert error("Read a.txt") == (
        "Read takes arguments as NAME=VALUE, not 'a.txt'; for example file_path=a.txt"
    )
    assert error("Read path=a") == "Read has no parameter 'path'; it takes file_path, offset, limit"
    assert error("Read file_path=a file_path=b") == "Read argument 'file_path' is given twice"
    assert error("Read file_path='a") == "can't read the line: no closing quotation"
    assert error(" ; ") == "no call to run: type a tool's name and its arguments"


def test_completion_offers_commands_tools_parameters_and_call_ids() -> None:
    assert complete("/st", TOOLS) == [("/status", -3)]
    assert complete("/tool Mu", TOOLS) == [("MultiEdit", -2)]
    assert complete("/cancel c", TOOLS, ["c1", "c7"]) == [("c1", -1), ("c7", -1)]
    assert complete("Wr", TOOLS) == [("Write", -2)]
    assert complete("Read file_path=a; Ed", TOOLS) == [("Edit", -2)]
    assert complete("Edit file_path=a ", TOOLS) == [
        ("old_string=", 0),
        ("new_string=", 0),
        ("replace_all=", 0),
    ]
    assert complete("Edit file_path=a re", TOOLS) == [("replace_all=", -2)]
    assert complete("/call Gl", TOOLS) == [("Glob", -2)]
    assert complete("Nothing ", TOOLS) == []


def test_arguments_are_shown_as_they_would_be_typed() -> None:
    assert format_arguments({"file_path": "a b.txt", "limit": 3, "new_string": ""}) == (
        "file_path='a b.txt' limit=3 new_string=\"\""
    )
    assert format_arguments({"content": "x" * 100}, width=10) == "content=xxxxxxx..."

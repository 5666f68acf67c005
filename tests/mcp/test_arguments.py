"""The patterns of an MCP tool's ``inputSchema`` run on RE2, so a server's schema can't freeze the
kernel: a call's arguments are checked on the event loop, and Python's ``re`` backtracks
(``^(a+)+$`` against ``aaa…a!`` takes time doubling with each ``a``).

The tests that would hang on a backtracking engine run under :func:`deadline`, which interrupts
them: ``re`` matching holds the GIL, so a worker thread's timeout could not fire, but it checks
for signals. The passing runs take milliseconds.
"""

from __future__ import annotations

import contextlib
import logging
import pathlib
import re
import signal
import sys
import types
from collections.abc import Iterator
from typing import Any

import jsonschema._format
import jsonschema._keywords
import jsonschema._legacy_keywords
import jsonschema._utils
import mcp_types
import pytest

import toolkernel as tk
from toolkernel.mcp import MCPTool, stdio_tools
from toolkernel.mcp._tool import ServerConnection

SERVER = [sys.executable, str(pathlib.Path(__file__).with_name("hostile_server.py"))]
HOSTILE = "^(a+)+$"
LONG = "a" * 5000 + "!"  # under re, ^(a+)+$ would try 2**5000 ways of splitting it
# The message for it: the argument is not echoed whole.
REFUSED = "match argument 'name': '" + "a" * 36 + "... does not match '^(a+)+$'"


class Hung(BaseException):
    """The deadline passed (a BaseException, so that no ``except Exception`` swallows it)."""


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Interrupt the code inside if it runs past ``seconds`` of real time."""

    def interrupt(signum: int, frame: types.FrameType | None) -> None:
        raise Hung(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


needs_alarm = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs SIGALRM")


def make(schema: dict[str, Any], name: str = "match") -> MCPTool:
    spec = mcp_types.Tool(name=name, description=f"{name}, for the tests", input_schema=schema)
    return MCPTool(ServerConnection("fs", ["fs-server"], None), spec)


def string_with(pattern: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"name": {"type": "string", "pattern": pattern}}}


def message(tool: MCPTool, arguments: dict[str, Any]) -> str:
    with pytest.raises(tk.errors.InvalidArgumentsError) as raised:
        tool.parse_arguments(arguments)
    return str(raised.value)


# -- no backtracking -------------------------------------------------------------------------


@needs_alarm
def test_a_catastrophic_pattern_refuses_a_long_argument_in_linear_time() -> None:
    names_of_as = {
        "type": "object",
        "patternProperties": {"^x-(a+)+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    tools = [
        make(string_with(HOSTILE)),
        make(names_of_as),
        make({"type": "object", "propertyNames": {"pattern": HOSTILE}}),
        make({**names_of_as, "additionalProperties": {"type": "string"}}),
    ]
    with deadline(10):
        assert message(tools[0], {"name": LONG}) == REFUSED
        assert message(tools[1], {"x-" + LONG: 1}).startswith("match got unexpected argument")
        assert "does not match '^(a+)+$'" in message(tools[2], {LONG: 1})
        assert message(tools[3], {"x-" + LONG: 1}) == (
            f"match argument 'x-{LONG}' must be string, not integer (1)"
        )


@needs_alarm
def test_a_subschema_in_another_dialect_gets_re2_too() -> None:
    # zod writes draft-07 with a root $schema; a $ref to the root, a nested $schema or the
    # metaschema would give jsonschema's own class for that dialect, which matches with re.
    tool = make(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "name": {"$ref": "#/definitions/name"},
                "child": {"$ref": "#"},
                "schema": {"$ref": "http://json-schema.org/draft-07/schema#"},
            },
            "definitions": {
                "name": {
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "string",
                    "pattern": HOSTILE,
                }
            },
        }
    )
    with deadline(10):
        assert "argument 'name'" in message(tool, {"name": LONG})
        assert "argument 'child.name'" in message(tool, {"child": {"name": LONG}})
        # A reference to a metaschema is followed with these keywords too.
        assert tool.parse_arguments({"schema": {"pattern": LONG}}) == {"schema": {"pattern": LONG}}


class Backtracking:
    """Stands in for the ``re`` module inside jsonschema: matching with it is a failure."""

    compile = staticmethod(re.compile)  # compiling is fine (format: regex does it)

    def search(self, *args: object) -> None:
        raise Hung(f"jsonschema matched with re: {args}")

    match = fullmatch = findall = finditer = search


def test_no_pattern_of_the_schema_is_matched_with_re_on_a_calls_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dialects = [
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    ]
    body = {
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": "^[a-z]+$"}, "nested": {"$ref": "#"}},
        "patternProperties": {"^x-": {"type": "integer"}},
        "additionalProperties": False,
    }
    tools = [make({"$schema": dialect, **body}) for dialect in dialects]
    for dialect in dialects[3:]:
        tools.append(make({"$schema": dialect, **body, "unevaluatedProperties": False}))
    keys = make({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}})
    for module in (jsonschema._keywords, jsonschema._legacy_keywords, jsonschema._utils):
        monkeypatch.setattr(module, "re", Backtracking())
    monkeypatch.setattr(jsonschema._format, "re", Backtracking())
    for tool in tools:
        good = {"name": "abc", "x-1": 1, "nested": {"name": "d"}}
        assert tool.parse_arguments(good) == good
        assert "does not match" in message(tool, {"nested": {"name": "ABC"}})
        assert "must be integer" in message(tool, {"x-1": "one"})
        assert "unexpected argument 'other'" in message(tool, {"other": 1})
    assert keys.parse_arguments({"abc": 1}) == {"abc": 1}
    assert "does not match" in message(keys, {"ABC": 1})


@needs_alarm
def test_a_pattern_too_costly_for_a_long_argument_leaves_that_argument_to_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A 3 kB pattern whose RE2 program is ~45,000 instructions, each of them stepped for each
    # byte once its DFA gives up: on 20 kB of text, half a minute even on RE2.
    costly = "(?:" + "|".join(f"[ab]{{{n}}}c" for n in range(1, 300)) + ")"
    tool = make(string_with(costly))
    with deadline(10), caplog.at_level(logging.DEBUG, logger="toolkernel.mcp"):
        assert tool.parse_arguments({"name": "ab" * 10_000}) == {"name": "ab" * 10_000}
        assert "some are left to the server" in caplog.text
        assert tool.parse_arguments({"name": "abc"}) == {"name": "abc"}
        assert "does not match" in message(tool, {"name": "zz"})


# -- what patterns still check ---------------------------------------------------------------


def test_patterns_accept_what_matches_and_name_the_argument_that_does_not() -> None:
    tool = make(
        {
            "type": "object",
            "properties": {
                "date": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
                "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}},
                "word": {"type": "string", "pattern": "[a-z]"},  # unanchored: anywhere
            },
            "patternProperties": {"^x-": {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    good = {"date": "2025-01-31", "tags": ["a", "bc"], "word": "1a2", "x-limit": 3}
    assert tool.parse_arguments(good) == good
    assert message(tool, {"date": "31/01/2025"}) == (
        r"match argument 'date': '31/01/2025' does not match '^\\d{4}-\\d{2}-\\d{2}$'"
    )
    assert message(tool, {"tags": ["a", "B"]}) == (
        "match argument 'tags[1]': 'B' does not match '^[a-z]+$'"
    )
    assert message(tool, {"word": "123"}) == "match argument 'word': '123' does not match '[a-z]'"
    assert message(tool, {"x-limit": "3"}) == (
        "match argument 'x-limit' must be integer, not string ('3')"
    )
    assert message(tool, {"limit": 3}) == (
        "match got unexpected argument 'limit'; it takes date, tags, word"
    )


def test_patterns_read_as_ecma_262_not_as_python() -> None:
    def accepts(pattern: str, text: str) -> bool:
        try:
            make(string_with(pattern)).parse_arguments({"name": text})
        except tk.errors.InvalidArgumentsError:
            return False
        return True

    # $ is the end of the text, \d is ASCII: in Python's re neither is.
    assert not accepts("^a$", "a\n")
    assert not accepts(r"^\d$", "\u0663")  # ARABIC-INDIC DIGIT THREE
    # \uXXXX, a surrogate pair, \u{X}: RE2 writes them \x{X}.
    assert accepts(r"^[\u00c0-\u017f]+$", "éŧ")
    assert not accepts(r"^[\u00c0-\u017f]+$", "e")
    assert accepts(r"^\uD83D\uDE00$", "😀")
    assert accepts(r"^\u{1F600}$", "😀")
    assert accepts(r"^\\u0041$", "\\u0041")  # an escaped backslash, then the letters
    # \s and \S are ECMA's whitespace (RE2's own \s is [\t\n\f\r ]), inside a class or not.
    spaces = "\t\n\v\f\r \u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
    neighbours = "\x08\x0e\x1f!\u009f\u00a1\u167f\u1681\u1fff\u200b\u2027\u202a\u2030\u2060"
    for char in spaces:
        assert accepts(r"^\s$", char) and accepts(r"^[\s]$", char), hex(ord(char))
        assert not accepts(r"^\S$", char) and not accepts(r"^[x\S]$", char), hex(ord(char))
    for char in neighbours + "a\u3001\ufefe\uff00😀":
        assert not accepts(r"^\s$", char) and not accepts(r"^[\s]$", char), hex(ord(char))
        assert accepts(r"^\S$", char) and accepts(r"^[x\S]$", char), hex(ord(char))


def test_a_pattern_re2_cannot_run_is_left_to_the_server_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    schema = {
        "type": "object",
        "properties": {
            "twice": {"type": "string", "pattern": r"^(a)\1$"},  # a backreference
            "count": {"type": "integer"},
        },
        "patternProperties": {"^(?!x)": {"type": "string"}},  # a lookahead
    }
    with caplog.at_level(logging.WARNING, logger="toolkernel.mcp"):
        tool = make(schema)
        assert tool.parse_arguments({"twice": "ab", "y": 1}) == {"twice": "ab", "y": 1}
        assert tool.parse_arguments({"twice": "cd"}) == {"twice": "cd"}
        # The rest of the schema still holds.
        assert message(tool, {"count": "1"}) == (
            "match argument 'count' must be integer, not string ('1')"
        )
    warnings = sorted(r.getMessage() for r in caplog.records)
    assert warnings == [
        "toolkernel.mcp: RE2 can't run the pattern '^(?!x)' in the input schema of 'match' "
        "(invalid perl operator: (?!); the server checks it",
        "toolkernel.mcp: RE2 can't run the pattern '^(a)\\\\1$' in the input schema of 'match' "
        "(invalid escape sequence: \\1); the server checks it",
    ]


@needs_alarm
def test_unevaluated_properties_beside_pattern_properties_is_left_to_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # jsonschema finds the properties patternProperties evaluated by matching with re itself.
    with caplog.at_level(logging.WARNING, logger="toolkernel.mcp"):
        tool = make(
            {
                "type": "object",
                "patternProperties": {"^x-(a+)+$": {"type": "integer"}},
                "unevaluatedProperties": False,
            }
        )
    assert "has both patternProperties and unevaluatedProperties" in caplog.text
    with deadline(10):
        assert tool.parse_arguments({"x-" + LONG: 1}) == {"x-" + LONG: 1}
    # Without patternProperties, unevaluatedProperties is checked.
    closed = make({"type": "object", "properties": {"a": {}}, "unevaluatedProperties": False})
    assert message(closed, {"b": 1}) == (
        "the arguments of match are not valid: Unevaluated properties are not allowed "
        "('b' was unexpected)"
    )


def test_a_pattern_nested_too_deeply_to_compile_leaves_the_schema_to_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="toolkernel.mcp"):
        tool = make(string_with("(" * 1000 + ")" * 1000))
    assert "is not valid JSON Schema (nested too deeply to check)" in caplog.text
    assert tool.parse_arguments({"name": 1}) == {"name": 1}


# -- end to end ------------------------------------------------------------------------------


@needs_alarm
async def test_a_servers_catastrophic_pattern_fails_only_its_call_and_the_others_run() -> None:
    with deadline(60):
        async with (
            stdio_tools([*SERVER, "catastrophic-pattern"]) as tools,
            tk.open_kernel(tools) as kernel,
        ):
            hostile, other, fine = await kernel.run(
                [
                    tk.ToolCall("c1", "match", {"name": LONG}),
                    tk.ToolCall("c2", "lookup", {"key": "k"}),
                    tk.ToolCall("c3", "match", {"name": "aaa"}),
                ]
            )
    assert hostile.status is tk.Status.ERROR and hostile.error_type == "InvalidArgumentsError"
    assert hostile.error == f"InvalidArgumentsError: {REFUSED}"
    assert other.output == "lookup answered"
    assert fine.output == "match answered"

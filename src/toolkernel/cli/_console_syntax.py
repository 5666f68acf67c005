"""What a person types at the console, read into calls; and what the line editor offers to
complete. Pure: no terminal, no kernel, only the tools' names and parameter schemas.

A line of calls is ``NAME key=value ...``, calls of one batch separated by ``;``::

    Read file_path=a.txt; Edit file_path=a.txt old_string='two words' new_string=""

Words are split as a POSIX shell splits them (quotes keep spaces, ``;`` inside quotes is text;
``#`` is text too). A value goes to the tool as the string typed when the parameter takes a
string, and is read as JSON otherwise (``limit=20``, ``replace_all=true``,
``edits='[{"old_string": "a", "new_string": "b"}]'``); a value that is not JSON is passed as
typed, for the kernel to refuse with its own message. Tool names may be typed in any case when
that names one tool.
"""

from __future__ import annotations

import difflib
import json
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

__all__ = [
    "CallDraft",
    "ConsoleSyntaxError",
    "parse_calls",
    "coerce",
    "parameters",
    "required",
    "complete",
    "format_arguments",
    "missing_question",
    "answer_value",
    "find_tool",
    "COMMANDS",
]

COMMANDS = ("/status", "/cancel", "/tools", "/tool", "/call", "/help", "/quit")


class ConsoleSyntaxError(ValueError):
    """A line that can't be read as calls; the message says what to type instead."""


@attrs.define
class CallDraft:
    """One call as typed: its tool's name, the arguments given, and the required ones missing
    (in the order the tool lists them)."""

    name: str
    arguments: dict[str, Any]
    missing: list[str]


def parameters(tool: object) -> dict[str, Any]:
    """The tool's parameters by name, with their JSON Schemas."""
    schema_of = getattr(tool, "parameters_schema", None)
    schema = schema_of() if callable(schema_of) else None
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return dict(properties) if isinstance(properties, Mapping) else {}


def required(tool: object) -> list[str]:
    """The names of the tool's required parameters, in its order."""
    schema_of = getattr(tool, "parameters_schema", None)
    schema = schema_of() if callable(schema_of) else None
    names = schema.get("required") if isinstance(schema, Mapping) else None
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def _words(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError as exc:  # "No closing quotation"
        raise ConsoleSyntaxError(f"can't read the line: {str(exc).lower()}") from None


def find_tool(name: str, tools: Mapping[str, object]) -> str:
    """The tool ``name`` names: exactly, or in another case when that is one tool."""
    if name in tools:
        return name
    folded = [known for known in tools if known.lower() == name.lower()]
    if len(folded) == 1:
        return folded[0]
    close = difflib.get_close_matches(name, list(tools), n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise ConsoleSyntaxError(f"there is no tool named {name!r}{hint} (/tools lists them)")


def parse_calls(text: str, tools: Mapping[str, object]) -> list[CallDraft]:
    """The calls of a line, in order; raises :class:`ConsoleSyntaxError`."""
    drafts: list[CallDraft] = []
    segment: list[str] = []
    for word in [*_words(text), ";"]:
        if word.strip(";"):  # shlex gives ";;" as one word
            segment.append(word)
            continue
        if segment:
            drafts.append(_draft(segment, tools))
        segment = []
    if not drafts:
        raise ConsoleSyntaxError("no call to run: type a tool's name and its arguments")
    return drafts


def _draft(words: list[str], tools: Mapping[str, object]) -> CallDraft:
    name = find_tool(words[0], tools)
    tool = tools[name]
    known = parameters(tool)
    needed = required(tool)
    arguments: dict[str, Any] = {}
    for word in words[1:]:
        key, equals, raw = word.partition("=")
        if not equals or not key:
            missing = [n for n in needed if n not in arguments]
            example = f"{missing[0]}={word}" if missing else f"NAME={word}"
            raise ConsoleSyntaxError(
                f"{name} takes arguments as NAME=VALUE, not {word!r}; for example {example}"
            )
        if known and key not in known:
            raise ConsoleSyntaxError(
                f"{name} has no parameter {key!r}; it takes {', '.join(known)}"
            )
        if key in arguments:
            raise ConsoleSyntaxError(f"{name} argument {key!r} is given twice")
        arguments[key] = coerce(raw, known.get(key))
    return CallDraft(name, arguments, [n for n in needed if n not in arguments])


def _types(schema: Any) -> set[str]:
    if not isinstance(schema, Mapping):
        return set()
    kind = schema.get("type")
    found = {kind} if isinstance(kind, str) else {k for k in kind or () if isinstance(k, str)}
    for key in ("anyOf", "oneOf"):
        for member in schema.get(key) or ():
            found |= _types(member)
    for value in schema.get("enum") or ():
        found.add("string" if isinstance(value, str) else "other")
    return found


def coerce(raw: str, schema: Any) -> Any:
    """The value ``raw`` stands for, given the parameter's schema: the text itself for a
    string parameter, else JSON when it parses, else the text."""
    if "string" in _types(schema):
        return raw
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # nested deeper than json reads: as typed
        return raw


def format_arguments(arguments: Mapping[str, Any], width: int = 60) -> str:
    """Arguments as they would be typed: ``file_path=a.txt limit=20``, long values cut."""
    parts = []
    for key, value in arguments.items():
        text = value if isinstance(value, str) else _json_text(value)
        if len(text) > width:
            text = text[: width - 3] + "..."
        parts.append(f"{key}={shlex.quote(text) if text else chr(34) * 2}")
    return " ".join(parts)


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, default=str)
    except (ValueError, RecursionError):  # nested too deep to write, or holding itself
        return f"({type(value).__name__})"


# -- completion ----------------------------------------------------------------------------------


def complete(
    text: str, tools: Mapping[str, object], call_ids: Iterable[str] = ()
) -> list[tuple[str, int]]:
    """What may complete ``text`` (the line before the cursor): ``(completion, start)``
    pairs, ``start`` being where the word being completed starts (negative, from the cursor).

    Offers the commands after ``/``, tool names after ``/tool`` and at the start of a call,
    unfinished call ids after ``/cancel``, and ``parameter=`` for the parameters a call has
    not given yet.
    """
    if text.startswith("/"):
        command, space, rest = text.partition(" ")
        if not space:
            return _matching(COMMANDS, command)
        if command == "/tool":
            return _matching(tools, rest)
        if command == "/cancel":
            return _matching(call_ids, rest)
        if command == "/call":
            return complete(rest, tools)
        return []
    segment = text.rsplit(";", 1)[-1].lstrip()
    words = segment.split()
    current = "" if not segment or segment[-1].isspace() else words[-1]
    done = words[:-1] if current else words
    if not done:
        return _matching(tools, current)
    try:
        tool = tools[find_tool(done[0], tools)]
    except ConsoleSyntaxError:
        return []
    if "=" in current:
        return []
    given = {word.partition("=")[0] for word in done[1:]}
    return _matching([f"{name}=" for name in parameters(tool) if name not in given], current)


def _matching(candidates: Iterable[str], prefix: str) -> list[tuple[str, int]]:
    return [(c, -len(prefix)) for c in candidates if c.startswith(prefix)]


def missing_question(tool_name: str, parameter: str, schema: Any) -> str:
    """The prompt asking for a missing required argument."""
    kinds = sorted(_types(schema) - {"other"})
    kind = f" ({' or '.join(kinds)})" if kinds else ""
    return f"{tool_name} {parameter}{kind}: "


def answer_value(answer: str, schema: Any) -> Any:
    """The value of an answer to :func:`missing_question`: the line as typed, no quotes needed
    (one quoted word loses its quotes: ``""`` is the empty string), read as JSON for a
    parameter that does not take a string."""
    if answer[:1] in ("'", '"'):
        try:
            words = shlex.split(answer)
        except ValueError:
            words = []
        if len(words) == 1:
            answer = words[0]
    return coerce(answer, schema)

"""Output passing: a call's arguments may use the outputs of calls it runs after. Pure.

A call that lists ``c1`` in ``after=`` may write ``"${c1}"`` inside any string argument, or a
whole string ``"$c1"``, for c1's output (the LLMCompiler ``$1`` idea, opt-in per dependency)::

    ToolCall("c1", "Glob", {"pattern": "**/config.py"})
    ToolCall("c2", "Read", {"file_path": "$c1"}, after=["c1"])
    ToolCall("c3", "Bash", {"command": "wc -l ${c1}"}, after=["c1"])

Only ids named in ``after=`` are placeholders, so ``$HOME`` in a shell command stays as it is. A
whole-string placeholder becomes the output itself when it is a JSON value (a list stays a list),
otherwise its text; a placeholder inside a longer string becomes the output's text
(``ToolResult.text()``). Such a call is admitted in two steps: at submission only what can be
known then (its tool, its dependencies), and when its dependencies have finished, its arguments
(filled in), their validation and its claims.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from ._call import ToolResult

__all__ = ["placeholders", "fill_in"]

_EMBEDDED = re.compile(r"\$\{([^}]+)\}")
_JSON = (str, int, float, bool, list, dict, type(None))


def placeholders(arguments: Any, ids: Collection[str]) -> set[str]:
    """The ids among ``ids`` that ``arguments`` use as ``${id}`` or a whole-string ``$id``."""
    found: set[str] = set()
    stack = [arguments]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if "$" not in value:
                continue
            if value[1:] in ids and value[0] == "$":
                found.add(value[1:])
            found.update(m for m in _EMBEDDED.findall(value) if m in ids)
        elif isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return found


def fill_in(arguments: Any, results: Mapping[str, ToolResult]) -> Any:
    """``arguments`` with every placeholder of ``results``' ids replaced by that output."""
    if isinstance(arguments, str):
        if arguments[:1] == "$":
            braced = arguments[1:2] == "{" and arguments[-1:] == "}"
            name = arguments[2:-1] if braced else arguments[1:]
            if name in results:
                output = results[name].output
                return output if isinstance(output, _JSON) else results[name].text()
        if "${" not in arguments:
            return arguments
        return _EMBEDDED.sub(
            lambda m: results[m.group(1)].text() if m.group(1) in results else m.group(0),
            arguments,
        )
    if isinstance(arguments, Mapping):
        return {key: fill_in(value, results) for key, value in arguments.items()}
    if isinstance(arguments, list | tuple):
        return [fill_in(value, results) for value in arguments]
    return arguments

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
from collections.abc import Callable, Collection, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from ._call import ToolResult

__all__ = ["placeholders", "fill_in", "map_strings"]

_EMBEDDED = re.compile(r"\$\{([^}]+)\}")
_JSON = (str, int, float, bool, list, dict, type(None))


def placeholders(arguments: Any, ids: Collection[str]) -> set[str]:
    """The ids among ``ids`` that ``arguments`` use as ``${id}`` or a whole-string ``$id``."""
    if not isinstance(ids, AbstractSet):
        ids = frozenset(ids)  # looked up for every string: ``after=`` may list thousands
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
    return map_strings(arguments, lambda text: _filled(text, results))


def _filled(text: str, results: Mapping[str, ToolResult]) -> Any:
    if text[:1] == "$":
        braced = text[1:2] == "{" and text[-1:] == "}"
        name = text[2:-1] if braced else text[1:]
        if name in results:
            output = results[name].output
            return output if isinstance(output, _JSON) else results[name].text()
    if "${" not in text:
        return text
    return _EMBEDDED.sub(
        lambda m: results[m.group(1)].text() if m.group(1) in results else m.group(0), text
    )


def map_strings(value: Any, function: Callable[[str], Any]) -> Any:
    """``value`` with every string in it replaced by ``function(string)``; mappings are rebuilt
    as dicts, lists and tuples as lists, anything else is kept.

    Iterative, not recursive: arguments come from a model, and no depth of nesting it sends may
    exhaust the stack (a recursive walk raised ``RecursionError`` at a few hundred levels). A
    container met twice (shared, or holding itself) is rebuilt once.
    """
    if isinstance(value, str):
        return function(value)
    if not isinstance(value, Mapping | list | tuple):
        return value
    top: list[Any] = [None]
    built: dict[int, Any] = {}
    stack: list[tuple[Any, Any, Any]] = [(top, 0, value)]  # (where, key, what goes there)
    while stack:
        target, key, item = stack.pop()
        if isinstance(item, str):
            target[key] = function(item)
        elif not isinstance(item, Mapping | list | tuple):
            target[key] = item
        elif id(item) in built:
            target[key] = built[id(item)]
        elif isinstance(item, Mapping):
            mapping: dict[Any, Any] = dict.fromkeys(item)  # the keys in their order, first
            target[key] = built[id(item)] = mapping
            stack.extend((mapping, k, v) for k, v in item.items())
        else:
            items: list[Any] = [None] * len(item)
            target[key] = built[id(item)] = items
            stack.extend((items, i, v) for i, v in enumerate(item))
    return top[0]

"""Dependent calls in one model message: ``depends_on`` and ``${N}``, mapped to ``after=``.

A model does not know the ids of the calls it is writing (the provider assigns them), so within
one message it names them by position, as LLMCompiler's plans do with ``$1``:

- ``"depends_on": [1, 3]`` among a call's arguments: this call runs once the first and third
  calls of the same message have finished, and is skipped (with the reason) if one of them did
  not succeed. It becomes the kernel call's ``after=`` (with those calls' ids), and the argument
  itself is removed before the tool sees the arguments. Entries may also be ids (the calls of
  the same message, or of an earlier one the kernel still remembers).
- ``${N}`` inside any string argument stands for the output of call N as text, and a whole
  string ``"$N"`` for the output itself (a list stays a list); call N must be listed in
  ``depends_on``. Both are rewritten to ``${<id of call N>}``, the kernel's placeholder, which
  the kernel fills in when call N has finished, before it validates the arguments.
  Placeholders naming anything not listed in ``depends_on`` are left alone, so ``$1`` in an
  ``awk`` program or ``${HOME}`` in a shell command keep their meaning.

Entries that name nothing (position 7 of a message of 3 calls, ``true``) are passed on as they
are; the kernel then fails the call with "it must run after '7', which is not a known call".
A tool that has a parameter of its own named ``depends_on`` keeps it; its calls can't use this
convention.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..kernel._admission import map_strings

__all__ = ["resolve_dependencies"]

_BRACED = re.compile(r"\$\{([^{}]+)\}")


def resolve_dependencies(
    requested: object, arguments: object, position: int, ids: Sequence[str]
) -> tuple[tuple[str, ...], object]:
    """``after=`` for the call at ``position`` (1-based) of a message whose calls have ``ids``,
    and its arguments with placeholders rewritten to those ids."""
    if requested is None:
        return (), arguments
    entries = requested if isinstance(requested, list | tuple) else [requested]
    # Linear in the entries and the ids: a model may list thousands (a list kept unique by
    # ``in`` and a lookup in ``ids`` each cost O(n) per entry, quadratic in all).
    known = frozenset(ids)
    after: dict[str, None] = {}
    refs: dict[str, str] = {}
    for entry in entries:
        token, target = _target(entry, ids, known)
        after[target] = None
        refs[token] = target
    if refs:
        arguments = _rewrite(arguments, refs)
    return tuple(after), arguments


def _target(entry: object, ids: Sequence[str], known: frozenset[str]) -> tuple[str, str]:
    """(how placeholders spell it, the id it stands for)."""
    if isinstance(entry, bool):
        return json.dumps(entry), json.dumps(entry)
    if isinstance(entry, int) or (isinstance(entry, str) and _is_position(entry)):
        index = int(entry)
        if 1 <= index <= len(ids) and not (isinstance(entry, str) and entry in known):
            return str(index), ids[index - 1]
    text = entry if isinstance(entry, str) else _spelled(entry)
    return text, text


def _spelled(entry: object) -> str:
    try:
        return json.dumps(entry, default=str)
    except (ValueError, RecursionError):  # too deep, circular, an int too long to print
        return f"<{type(entry).__name__}>"


def _is_position(text: str) -> bool:
    # Short: int() refuses strings of more than 4,300 digits, and no message has that many calls.
    return len(text) <= 18 and text.isascii() and text.isdigit()


def _rewrite(value: Any, refs: Mapping[str, str]) -> Any:
    # Iteratively (``map_strings``): a model may nest its arguments deeper than the stack.
    return map_strings(value, lambda text: _rewritten(text, refs))


def _rewritten(text: str, refs: Mapping[str, str]) -> str:
    if text.startswith("$") and not text.startswith("${") and text[1:] in refs:
        return "${" + refs[text[1:]] + "}"
    if "${" not in text:
        return text
    return _BRACED.sub(
        lambda m: "${" + refs[m.group(1)] + "}" if m.group(1) in refs else m.group(0), text
    )

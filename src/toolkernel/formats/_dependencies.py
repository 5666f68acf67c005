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
    after: list[str] = []
    refs: dict[str, str] = {}
    for entry in entries:
        token, target = _target(entry, ids)
        if target not in after:
            after.append(target)
        refs[token] = target
    if refs:
        arguments = _rewrite(arguments, refs)
    return tuple(after), arguments


def _target(entry: object, ids: Sequence[str]) -> tuple[str, str]:
    """(how placeholders spell it, the id it stands for)."""
    if isinstance(entry, bool):
        return json.dumps(entry), json.dumps(entry)
    if isinstance(entry, int) or (isinstance(entry, str) and entry.isdigit() and entry.isascii()):
        index = int(entry)
        if 1 <= index <= len(ids) and not (isinstance(entry, str) and entry in ids):
            return str(index), ids[index - 1]
        return str(entry), str(entry)
    if isinstance(entry, str):
        return entry, entry
    text = json.dumps(entry, default=str)
    return text, text


def _rewrite(value: Any, refs: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        if value.startswith("$") and not value.startswith("${") and value[1:] in refs:
            return "${" + refs[value[1:]] + "}"
        if "${" not in value:
            return value
        return _BRACED.sub(
            lambda m: "${" + refs[m.group(1)] + "}" if m.group(1) in refs else m.group(0), value
        )
    if isinstance(value, dict):
        return {key: _rewrite(item, refs) for key, item in value.items()}
    if isinstance(value, list):
        return [_rewrite(item, refs) for item in value]
    return value

"""Recorded turns: the calls a model emitted together, with what each declares and took.

The format is that of ``shared/data/traces/claude-code-log.jsonl``: one turn a line,
``{"session": ..., "turn": ..., "calls": [{"id", "tool", "args", "duration_s", "is_error"}]}``,
paths relative to the session's working directory (the workspace root).

Each call's claims are what toolkernel's built-in tools declare for it:

==========================  =====================================================================
Read                        shared ``file_path``
Edit, Write, MultiEdit      exclusive ``file_path``
Grep, Glob, LS, ListDir     shared subtree of ``path`` (default ``.``, the whole workspace)
Bash                        ``toolkernel.tools.shell_claims(command)``, as the Bash tool declares
TodoWrite                   exclusive device ``todo`` (the task list), as do TaskCreate,
                            TaskUpdate, TaskList and TaskGet
WebFetch, WebSearch         nothing (an empty claim list: runs freely)
anything else               nothing declared: a barrier (exclusive on everything)
==========================  =====================================================================

A path that can't be keyed without knowing the session's root (absolute, ``~``, climbing above
the root) makes the call a barrier. Durations are kept in whole milliseconds: sums of them are
exact in floating point, so a schedule can be compared with ``==``.
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from .._checks import check_number
from .._errors import InvalidClaimError
from ..locks import (
    EVERYTHING,
    Claim,
    Path,
    canonical_claims,
    device,
    exclusive,
    path,
    reads,
    writes,
)
from ..tools import shell_claims
from ._read_only import is_read_only_command

__all__ = [
    "RecordedCall",
    "RecordedTurn",
    "load_turns",
    "recorded_call",
    "claims_for",
    "is_read_only_call",
    "capped",
    "per_tool_medians",
    "CAP_MS",
    "BARRIER",
    "KNOWN_TOOLS",
]

CAP_MS = 30_000
"""The cap of the "capped" durations: recorded durations include time the original agent
waited for a person's permission, minutes long at times."""

PATH_TOOLS = {"Read": False, "Edit": True, "Write": True, "MultiEdit": True}  # name -> writes
TREE_TOOLS = frozenset({"Grep", "Glob", "LS", "ListDir"})
FREE_TOOLS = frozenset({"WebFetch", "WebSearch"})
READ_ONLY_TOOLS = frozenset({"Read", *TREE_TOOLS, *FREE_TOOLS})
TASK_LIST_TOOLS = frozenset({"TodoWrite", "TaskCreate", "TaskUpdate", "TaskList", "TaskGet"})
"""The agent's task list: ``TodoWrite``, and the tools newer Claude Code releases keep it with.
They change the list, nothing in the workspace."""
KNOWN_TOOLS = frozenset({*PATH_TOOLS, *TREE_TOOLS, *FREE_TOOLS, "Bash", *TASK_LIST_TOOLS})
BARRIER = (exclusive(EVERYTHING),)

_READ_ONLY_GIT = frozenset({"status", "log", "diff", "show"})
_SHELL_MARKS = (">", "<", ";", "&", "|", "`", "$(", "\n")


class RecordedCall(NamedTuple):
    """One recorded call: what the replay needs of it."""

    id: str
    tool: str
    args: dict[str, Any]
    """Only what its claims depend on (``file_path``, ``path``, ``command``)."""
    ms: float
    """Its duration, in milliseconds."""
    claims: tuple[Claim, ...]
    """What the kernel's tools declare for it (canonical)."""
    read_only: bool
    """Whether the coarse schemes run it with other reads (see :func:`is_read_only_call`)."""


class RecordedTurn(NamedTuple):
    """The calls of one model turn, in the order they were emitted."""

    label: str
    calls: tuple[RecordedCall, ...]


def _key(raw: object) -> Path | None:
    if not isinstance(raw, str) or not raw or raw.startswith(("/", "~")):
        return None
    try:
        return path(raw)
    except InvalidClaimError:  # '..' above the root, NUL bytes
        return None


def claims_for(tool: str, args: Mapping[str, Any]) -> tuple[Claim, ...]:
    """The canonical claims of a call of ``tool`` with ``args`` (see the module's table)."""
    if tool in PATH_TOOLS:
        key = _key(args.get("file_path"))
        if key is None:
            return BARRIER
        return (writes(key) if PATH_TOOLS[tool] else reads(key),)
    if tool in TREE_TOOLS:
        key = _key(args.get("path") or ".")
        return BARRIER if key is None else (reads(key),)
    if tool == "Bash":
        return canonical_claims(shell_claims(str(args.get("command", ""))))
    if tool in TASK_LIST_TOOLS:
        return (exclusive(device("todo")),)
    if tool in FREE_TOOLS:
        return ()
    return BARRIER


def is_read_only_call(tool: str, args: Mapping[str, Any]) -> bool:
    """Read-only as the coarse schemes other agents use see it: Read, Grep, Glob, LS,
    ListDir, WebFetch, WebSearch, and a Bash command on a read-only list
    (:func:`is_read_only_command`, or ``git status|log|diff|show`` alone, which
    Claude Code's list takes as read-only too)."""
    if tool != "Bash":
        return tool in READ_ONLY_TOOLS
    command = str(args.get("command", ""))
    if is_read_only_command(command):
        return True
    if any(mark in command for mark in _SHELL_MARKS):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return (
        len(words) > 1
        and words[0] == "git"
        and words[1] in _READ_ONLY_GIT
        and not any(w.startswith("--output") for w in words)
    )


def recorded_call(call_id: str, tool: str, args: Mapping[str, Any], ms: float) -> RecordedCall:
    """A call with its claims and coarse read-only-ness worked out. Raises ``TypeError`` if
    ``ms`` is not a number, ``ValueError`` if it is not finite and non-negative."""
    check_number(f"the duration of call {call_id}", ms, unit="milliseconds", finite=True)
    kept = {k: args[k] for k in ("file_path", "path", "command") if args.get(k) is not None}
    return RecordedCall(
        call_id, tool, kept, ms, claims_for(tool, kept), is_read_only_call(tool, kept)
    )


def load_turns(file: str | os.PathLike[str]) -> list[RecordedTurn]:
    """Every turn of a recorded session file, durations rounded to whole milliseconds.

    Raises ``ValueError`` naming the line that is not a recorded turn (a file in another
    format), and ``OSError`` if the file can't be read.
    """
    turns = []
    with open(file, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                turns.append(_turn(file, number, line))
    return turns


_TURN_FORMAT = (
    'one turn a line: {"session": ..., "turn": ..., "calls": [{"id": ..., "tool": ..., '
    '"args": {...}, "duration_s": ...}, ...]}'
)


def _turn(file: str | os.PathLike[str], number: int, line: str) -> RecordedTurn:
    try:
        turn = json.loads(line)
    except RecursionError:
        raise ValueError(
            f"{os.fspath(file)}: line {number} is nested too deeply to read; a trace holds "
            f"{_TURN_FORMAT}"
        ) from None
    except ValueError:
        raise ValueError(
            f"{os.fspath(file)}: line {number} is not JSON; a trace holds {_TURN_FORMAT}"
        ) from None
    try:
        calls = tuple(
            recorded_call(
                str(c["id"]), str(c["tool"]), c.get("args") or {}, _milliseconds(c["duration_s"])
            )
            for c in turn["calls"]
        )
        return RecordedTurn(f"{turn['session']} turn {turn['turn']}", calls)
    except RecursionError:  # an id or a label nested too deeply to spell
        raise ValueError(
            f"{os.fspath(file)}: line {number} is not a recorded turn (a value in it is nested "
            f"too deeply); a trace holds {_TURN_FORMAT}"
        ) from None
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(
            f"{os.fspath(file)}: line {number} is not a recorded turn ({type(exc).__name__}: "
            f"{exc}); a trace holds {_TURN_FORMAT}"
        ) from None


def _milliseconds(seconds: object) -> float:
    """A recorded ``duration_s`` in whole milliseconds; ``TypeError`` unless it is a number,
    ``ValueError`` unless a finite, non-negative one (JSON allows ``Infinity``, ``NaN`` and
    ``-5`` alike)."""
    seconds = check_number("duration_s", seconds, unit="seconds", finite=True)
    if seconds * 1000 > _LONGEST_MS:
        raise ValueError(f"duration_s must be at most {_LONGEST_MS // 1000} s, not {seconds!r}")
    return round(seconds * 1000)


# Beyond 2^53 ms (285,000 years) whole milliseconds are no longer exact in floating point, and
# a schedule's sums could not be compared with ``==``.
_LONGEST_MS = 2**53


def with_durations(turn: RecordedTurn, durations: Iterable[float]) -> RecordedTurn:
    """``turn`` with each call's duration replaced."""
    calls = zip(turn.calls, durations, strict=True)
    return turn._replace(calls=tuple(call._replace(ms=ms) for call, ms in calls))


def capped(turns: Sequence[RecordedTurn], cap_ms: float = CAP_MS) -> list[RecordedTurn]:
    """Every duration capped at ``cap_ms``."""
    return [with_durations(t, (min(c.ms, cap_ms) for c in t.calls)) for t in turns]


def per_tool_medians(turns: Sequence[RecordedTurn]) -> list[RecordedTurn]:
    """Every call's duration replaced by the median of its tool's."""
    by_tool: dict[str, list[float]] = {}
    for turn in turns:
        for call in turn.calls:
            by_tool.setdefault(call.tool, []).append(call.ms)
    median = {tool: statistics.median(values) for tool, values in by_tool.items()}
    return [with_durations(t, (median[c.tool] for c in t.calls)) for t in turns]

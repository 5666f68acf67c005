"""Normalize Claude Code session transcripts into recorded turns, the format of
``src/toolkernel/_replay/sample-traces/claude-code-log.jsonl`` (see its README).

A Claude Code transcript (``~/.claude/projects/<project>/<session>.jsonl``) holds one JSON
object a line; an assistant message's content blocks come on lines sharing ``message.id``, its
``tool_use`` blocks are the calls the model emitted together (one *turn*), and a later user
line's ``tool_result`` block answers each by ``tool_use_id``. Each turn becomes one line::

    {"session": "e00", "turn": 7, "calls": [
      {"id": "c1", "tool": "Bash", "args": {"command": "go test ./..."},
       "duration_s": 12.4, "is_error": false}]}

``duration_s`` runs from the assistant line to its result's line. Paths (``file_path``,
``path``) are made relative to the session's working directory; file contents (``content``,
``old_string``, ``new_string``, ``edits``) are dropped, shell commands kept as they were, and
the turn's ``cwd`` (the workspace root) is kept so that a command's absolute paths inside it
can be keyed as the Bash tool keys them.

Sources (read-only git snapshots, never part of this repository; see ``data/README.md``)::

    .venv/bin/python benchmarks/normalize_sessions.py spotter GIT_DIR OUT.jsonl
    .venv/bin/python benchmarks/normalize_sessions.py entire GIT_DIR OUT.jsonl [--sessions N]
    .venv/bin/python benchmarks/normalize_sessions.py files OUT.jsonl TRANSCRIPT...
    .venv/bin/python benchmarks/normalize_sessions.py --quick      # smoke run on a sample

``spotter``: the transcripts under ``test/fixtures/transcripts/`` of marot/spotter (Elixir and
Phoenix, SQLite, beads); ``entire``: the ``full.jsonl`` checkpoints on the
``entire/checkpoints/v1`` branch of entireio/cli (Go), the longest transcript of each session.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

KEPT_ARGS = ("command", "file_path", "path", "pattern", "glob", "output_mode", "notebook_path")
PATH_ARGS = ("file_path", "path", "notebook_path")


def _time(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _relative(value: Any, cwd: str | None) -> Any:
    if not isinstance(value, str) or not cwd or not value.startswith("/"):
        return value
    if value == cwd:
        return "."
    if value.startswith(cwd.rstrip("/") + "/"):
        return value[len(cwd.rstrip("/")) + 1 :]
    return value


def turns_of(lines: Iterable[str]) -> list[tuple[str | None, list[dict[str, Any]]]]:
    """The turns of one transcript: for each assistant message with tool calls, the
    directory it ran in and its calls."""
    order: list[str] = []
    where: dict[str, str | None] = {}
    calls: dict[str, list[dict[str, Any]]] = {}
    started: dict[str, float | None] = {}
    results: dict[str, tuple[float | None, bool]] = {}
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        message = entry.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            continue
        stamp = _time(entry.get("timestamp"))
        cwd = entry.get("cwd")
        if entry.get("type") == "assistant":
            key = str(message.get("id") or entry.get("uuid"))
            for block in message["content"]:
                if not isinstance(block, dict) or block.get("type") != "tool_use":
                    continue
                raw = block.get("input") if isinstance(block.get("input"), dict) else {}
                args = {
                    k: _relative(raw[k], cwd) if k in PATH_ARGS else raw[k]
                    for k in KEPT_ARGS
                    if k in raw
                }
                if key not in calls:
                    order.append(key)
                    calls[key] = []
                    where[key] = cwd
                calls[key].append(
                    {"tool_use_id": block.get("id"), "tool": block.get("name"), "args": args}
                )
                started.setdefault(str(block.get("id")), stamp)
        elif entry.get("type") == "user":
            for block in message["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    results[str(block.get("tool_use_id"))] = (stamp, bool(block.get("is_error")))
    turns = []
    for key in order:
        turn = []
        for index, call in enumerate(calls[key], 1):
            tool_use_id = str(call["tool_use_id"])
            begun = started.get(tool_use_id)
            ended, error = results.get(tool_use_id, (None, False))
            if begun is None or ended is None:
                continue  # never answered (the session ended, or was interrupted)
            turn.append(
                {
                    "id": f"c{index}",
                    "tool": call["tool"],
                    "args": call["args"],
                    "duration_s": round(max(0.0, ended - begun), 3),
                    "is_error": error,
                }
            )
        if turn:
            turns.append((where.get(key), turn))
    return turns


def _git(git_dir: str, *arguments: str) -> str:
    """What git prints; nothing for a file the snapshot lacks (files of 4 MiB and more)."""
    done = subprocess.run(["git", "--git-dir", git_dir, *arguments], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else ""


def spotter(git_dir: str) -> Iterator[tuple[str, list[str]]]:
    listing = _git(git_dir, "ls-tree", "-r", "--name-only", "HEAD", "test/fixtures/transcripts")
    for name in sorted(listing.split()):
        lines = (
            _git(git_dir, "show", f"HEAD:{name}").splitlines() if name.endswith(".jsonl") else []
        )
        if lines:
            yield name, lines


def entire(git_dir: str, sessions: int) -> Iterator[tuple[str, list[str]]]:
    branch = "entire/checkpoints/v1"
    listing = _git(git_dir, "ls-tree", "-r", "-l", branch)
    files = []
    for row in listing.splitlines():
        meta, _, name = row.partition("\t")
        size = meta.split()[3]
        if name.endswith("full.jsonl") and size.isdigit():
            files.append((int(size), name))
    # One transcript a session: the longest checkpoint holds the others' turns.
    longest: dict[str, tuple[int, str, list[str]]] = {}
    for size, name in sorted(files):
        lines = _git(git_dir, "show", f"{branch}:{name}").splitlines()
        if not lines:
            continue
        session = _session_id(lines) or name
        if session not in longest or size > longest[session][0]:
            longest[session] = (size, name, lines)
    chosen = sorted(longest.values(), key=lambda item: item[1])[:sessions]
    for _, name, lines in chosen:
        yield name, lines


def _session_id(lines: Sequence[str]) -> str | None:
    for line in lines:
        if '"sessionId"' in line:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("sessionId"):
                return str(entry["sessionId"])
    return None


def write(out: str, prefix: str, transcripts: Iterable[tuple[str, Sequence[str]]]) -> None:
    count = turns_written = 0
    with open(out, "w", encoding="utf-8") as stream:
        for count, (_name, lines) in enumerate(transcripts):
            for number, (cwd, calls) in enumerate(turns_of(lines), 1):
                turn = {"session": f"{prefix}{count:02d}", "turn": number, "cwd": cwd}
                stream.write(json.dumps({**turn, "calls": calls}) + "\n")
                turns_written += 1
    print(f"{out}: {turns_written} turns from {count + 1} transcripts", file=sys.stderr)


SAMPLE = (
    '{"type": "assistant", "timestamp": "2026-01-01T10:00:00Z", "cwd": "/w/app", '
    '"message": {"id": "m1", "content": [{"type": "tool_use", "id": "t1", "name": "Read", '
    '"input": {"file_path": "/w/app/src/a.py"}}]}}',
    '{"type": "assistant", "timestamp": "2026-01-01T10:00:00Z", "cwd": "/w/app", '
    '"message": {"id": "m1", "content": [{"type": "tool_use", "id": "t2", "name": "Bash", '
    '"input": {"command": "go test ./..."}}]}}',
    '{"type": "user", "timestamp": "2026-01-01T10:00:01Z", "message": {"content": '
    '[{"type": "tool_result", "tool_use_id": "t1"}]}}',
    '{"type": "user", "timestamp": "2026-01-01T10:00:05Z", "message": {"content": '
    '[{"type": "tool_result", "tool_use_id": "t2", "is_error": true}]}}',
)
"""A transcript of one turn with two calls, for the smoke run."""


def smoke() -> int:
    """Normalize :data:`SAMPLE` and check the turn it makes."""
    (turn,) = turns_of(SAMPLE)
    cwd, calls = turn
    assert cwd == "/w/app"
    assert [c["args"] for c in calls] == [{"file_path": "src/a.py"}, {"command": "go test ./..."}]
    assert [c["duration_s"] for c in calls] == [1.0, 5.0]
    assert [c["is_error"] for c in calls] == [False, True]
    print("normalize_sessions: the sample transcript makes one turn of two calls")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run on a built-in sample")
    sub = parser.add_subparsers(dest="source")
    one = sub.add_parser("spotter")
    one.add_argument("git_dir")
    one.add_argument("out")
    two = sub.add_parser("entire")
    two.add_argument("git_dir")
    two.add_argument("out")
    two.add_argument("--sessions", type=int, default=120)
    three = sub.add_parser("files")
    three.add_argument("out")
    three.add_argument("transcripts", nargs="+")
    three.add_argument("--prefix", default="f")
    options = parser.parse_args(argv)
    if options.quick or options.source is None:
        return smoke()
    if options.source == "spotter":
        write(options.out, "x", spotter(options.git_dir))
    elif options.source == "entire":
        write(options.out, "g", entire(options.git_dir, options.sessions))
    else:
        files = [
            (name, open(name, encoding="utf-8").read().splitlines())  # noqa: SIM115
            for name in options.transcripts
            if os.path.isfile(name)
        ]
        write(options.out, options.prefix, files)
    return 0


if __name__ == "__main__":
    sys.exit(main())

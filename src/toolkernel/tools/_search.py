"""The built-in search tools: Glob (file names) and Grep (file contents).

Globs are wcmatch's (``**`` with GLOBSTAR, ``{a,b}`` with BRACE, dot files matched like any
other), applied to the path relative to the searched directory (Grep also tries the bare file
name, so ``glob="*.py"`` finds Python files at any depth).

Grep's regular expressions are the ``regex`` module's (a superset of ``re``). Matching never runs
on the event loop: a pattern that backtracks catastrophically (``(a|aa)+$`` on a long line) would
stall every other call and its own timeout. Each file is matched in a worker thread, with
``concurrent=True`` so the GIL is released while the engine runs (CPython's ``re`` never releases
it), and every single search is bounded by ``timeout=``: the time left before the call's deadline
(its run timeout), and at most :data:`SEARCH_TIME_LIMIT`. Cancelling the call abandons the thread
at once; the thread stops at its next line, or when its current search times out, so no thread
burns for longer than the call's deadline or :data:`SEARCH_TIME_LIMIT` after it.
"""

from __future__ import annotations

import errno
import math
import time
from typing import Final, Literal

import anyio
import anyio.from_thread
import anyio.to_thread
import regex
from wcmatch import glob as wcglob

from .._errors import InvalidClaimError, ToolError
from ..kernel import ToolContext
from ._declare import tool
from ._file_tools import READ_LINE_WIDTH, TEXT_SIZE_LIMIT, fs_of, text_lines
from ._fs import FileAccess

__all__ = ["SEARCH_SIZE_LIMIT", "SEARCH_TIME_LIMIT", "compile_glob", "glob", "grep"]

RESULT_LIMIT: Final = 1000
SEARCH_SIZE_LIMIT: Final = TEXT_SIZE_LIMIT
"""The largest file Grep searches (bytes): each is read whole, so a sparse terabyte must not be.
Larger files are skipped unread, and the output names them."""
SEARCH_TIME_LIMIT: Final = 1.0
"""Seconds one search may take: over a whole file (``files_with_matches``) or over one line."""

_GLOB_FLAGS: Final = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.DOTGLOB | wcglob.FORCEUNIX
OutputMode = Literal["files_with_matches", "content", "count"]


def compile_glob(pattern: str) -> wcglob.WcMatcher[str]:
    """Compile a glob for matching relative POSIX paths: ``**/*.py``, ``src/*.{js,ts}``.

    A pattern that could never match a relative path (absolute, or climbing with ``..``) is
    refused with a message saying how to search there, rather than matching nothing.
    """
    if pattern.startswith("/"):
        raise ToolError(
            f"glob {pattern!r} is absolute; globs match paths relative to the directory searched: "
            f"give that directory as path and a relative pattern (path='src', pattern='**/*.py')"
        )
    if ".." in pattern.split("/"):
        raise ToolError(
            f"glob {pattern!r} climbs with '..'; globs match paths below the directory searched: "
            f"give the directory to search as path instead"
        )
    try:
        return wcglob.compile(pattern, flags=_GLOB_FLAGS)
    except Exception as exc:  # wcmatch's PatternLimitException is a plain Exception
        raise ToolError(f"glob {pattern!r} is not a valid pattern: {exc}") from None


def _relative_to(base: str, file: str) -> str:
    if base in ("", "."):
        return file
    return file[len(base) + 1 :] if file.startswith(base + "/") else file


async def _files_under(fs: FileAccess, given: str) -> tuple[str, list[str]]:
    """The files below ``given``, and ``given`` spelled as they spell it: on disk, which is not
    the key's spelling on a file system that folds case or Unicode (``SRC`` walks ``Src``)."""
    try:
        files = await fs.walk(given)
    except FileNotFoundError:
        raise ToolError(f"path {given!r} does not exist") from None
    return "/".join(fs.workspace._locate_parts(given)[1]), files


@tool(reads=["path"], name="Glob")
async def glob(ctx: ToolContext, pattern: str, path: str = ".") -> str:
    """Find files by glob pattern (`**/*.py`, `src/*.{js,ts}`) under a directory.

    Args:
        pattern: The glob, matched against paths relative to `path`.
        path: The directory to search. Defaults to the workspace root.
    """
    fs = fs_of(ctx)
    matcher = compile_glob(pattern)
    base, files = await _files_under(fs, path)
    found = [f for f in files if matcher.match(_relative_to(base, f))]
    if not found:
        return f"no files match {pattern!r} under {path}"
    shown = found[:RESULT_LIMIT]
    more = len(found) - len(shown)
    return "\n".join(shown) + (f"\n... ({more} more)" if more else "")


@tool(reads=["path"], name="Grep")
async def grep(
    ctx: ToolContext,
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    output_mode: OutputMode = "files_with_matches",
) -> str:
    """Search file contents with a regular expression.

    Args:
        pattern: A Python regular expression.
        path: The file or directory to search. Defaults to the workspace root.
        glob: Only search files whose path (or name) matches this glob, e.g. `*.py`.
        output_mode: `files_with_matches` (paths), `content` (matching lines), or `count`.
    """
    try:
        compiled = regex.compile(pattern)
    except regex.error as exc:
        raise ToolError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None
    fs = fs_of(ctx)
    base, files = await _files_under(fs, path)
    if glob is not None:
        matcher = compile_glob(glob)
        files = [
            f
            for f in files
            if matcher.match(_relative_to(base, f)) or matcher.match(f.rsplit("/", 1)[-1])
        ]
    lines: list[str] = []
    too_large: list[str] = []
    for file in files:
        try:
            data = await fs.read_bytes(file, max_bytes=SEARCH_SIZE_LIMIT)
        except OSError as exc:
            if exc.errno == errno.EFBIG:
                too_large.append(file)
            continue  # vanished, unreadable, or not a regular file: not a match
        except InvalidClaimError:
            continue  # turned into a link out of the workspace (or a loop) since the walk
        if b"\x00" in data[:8192]:
            continue
        text = data.decode("utf-8", errors="replace")
        hits = await _matching(compiled, text, output_mode, file, pattern)
        if output_mode == "files_with_matches":
            if hits:
                lines.append(file)
        elif output_mode == "count":
            if hits:
                lines.append(f"{file}:{len(hits)}")
        else:
            lines.extend(f"{file}:{number}:{line[:READ_LINE_WIDTH]}" for number, line in hits)
        if len(lines) > RESULT_LIMIT:
            break
    skipped = _skipped(too_large)
    if not lines:
        return f"no matches for {pattern!r} under {path}" + skipped
    more = len(lines) > RESULT_LIMIT
    return "\n".join(lines[:RESULT_LIMIT]) + ("\n... (more results cut)" if more else "") + skipped


def _skipped(too_large: list[str]) -> str:
    """The note naming the files too large to search (empty if none)."""
    if not too_large:
        return ""
    count = len(too_large)
    names = ", ".join(too_large[:10]) + (", ..." if count > 10 else "")
    return (
        f"\n({count} file{'s' if count > 1 else ''} over {SEARCH_SIZE_LIMIT >> 20} MiB not "
        f"searched: {names})"
    )


async def _matching(
    compiled: regex.Pattern[str], text: str, mode: OutputMode, file: str, pattern: str
) -> list[tuple[int, str]]:
    """Match ``text`` in a worker thread: the lines that match (one, for files_with_matches)."""
    deadline = anyio.current_effective_deadline()
    budget = deadline - anyio.current_time()  # inf without a run timeout
    # Never less than a little: a deadline already past cancels us at the next checkpoint.
    seconds = max(budget, 0.01)
    try:
        return await anyio.to_thread.run_sync(
            _match_lines, compiled, text, mode, seconds, abandon_on_cancel=True
        )
    except TimeoutError:
        if budget < SEARCH_TIME_LIMIT:
            # The search ran into the call's own deadline: let the run timeout report it.
            await anyio.sleep_until(deadline)
        raise ToolError(
            f"pattern {pattern!r} took more than {SEARCH_TIME_LIMIT:g} s on one "
            f"{'file' if mode == 'files_with_matches' else 'line'} of {file}; it probably "
            f"backtracks catastrophically (nested or overlapping repetition such as (a+)+ or "
            f"(a|aa)+): simplify it, or narrow the search with path or glob"
        ) from None


def _match_lines(
    compiled: regex.Pattern[str],
    text: str,
    mode: OutputMode,
    seconds: float,
) -> list[tuple[int, str]]:
    """Runs in a worker thread; every search gets what is left of ``seconds`` (capped).

    Abandoned when its call is cancelled, it stops at its next line (``check_cancelled``).
    """
    end = time.monotonic() + seconds if math.isfinite(seconds) else math.inf

    def timeout() -> float:
        return max(min(SEARCH_TIME_LIMIT, end - time.monotonic()), 0.0)

    if mode == "files_with_matches":
        found = compiled.search(text, timeout=timeout(), concurrent=True)
        return [(0, "")] if found is not None else []
    hits: list[tuple[int, str]] = []
    for number, line in enumerate(text_lines(text), 1):
        anyio.from_thread.check_cancelled()
        if compiled.search(line, timeout=timeout(), concurrent=True) is not None:
            hits.append((number, line))
    return hits

"""The built-in search tools: Glob (file names) and Grep (file contents).

Globs are wcmatch's (``**`` with GLOBSTAR, ``{a,b}`` with BRACE, dot files matched like any
other), applied to the path relative to the searched directory (Grep also tries the bare file
name, so ``glob="*.py"`` finds Python files at any depth). Both tools list the tree as ripgrep
does: the ``.gitignore`` files in and below the searched directory and in every directory
above it up to the workspace root are honoured, and each repository's ``.git/info/exclude``;
``.git`` is left out, hidden files are not (:mod:`._tree_search`). The ignore files above the
searched directory are claimed with it (shared), so an edit of one waits for the search.
Unlike ripgrep, the global excludes file (git's ``core.excludesFile``) is not read: it lies
outside the workspace, where no lease orders it, and it would make a search's result depend on
the account it runs under.

Both only read (``ahead=True``): a search emitted after a sandboxed Bash command that writes in
the tree it searches starts at once, beside the command, and runs again once the command has
committed if that changed anything in the tree (or an ignore file above it), so its result is
the one it would have given after the command (``toolkernel.kernel._ahead``). After a Write,
an Edit or any call that writes directly, it waits, as ever.

Grep also takes the spellings of Claude Code's Grep, which models trained on it send: ``-i``,
``-n``, ``-A``, ``-B`` and ``-C`` for ``ignore_case``, ``line_numbers``, ``after_context``,
``before_context`` and ``context`` (the schema shows our names only; both spellings with
different values are refused), and its ``head_limit`` and ``offset`` to page through results.

Grep's regular expressions are the ``regex`` module's (a superset of ``re``), matched line by
line as ``grep`` matches them (:mod:`._line_match`); ``multiline`` matches across lines.

How fast, and why this engine. A search is one worker thread for the whole tree
(``FileAccess.search``): the walk, every read and every match run there, and the event loop
waits once. The first version made one thread hop per file and one engine call per line: on a
tree of 1,321 source files, ``files_with_matches`` took 460 ms against 14 ms for ``grep -rl``,
and ``content`` 3,023 ms against 17 ms for ``grep -rn``. Now the tree is walked and read a
directory at a time (:mod:`._tree_search`): a directory's names are told apart, left out (the
ignore rules, ``glob``, ``type``) and sorted a list at a time, with compiled expressions' methods
and ``str.endswith`` rather than a step of Python a name (a glob ``D/N`` tests ``D`` once a
directory, and Glob enters only the directories its first plain components name); the files
of a directory without subdirectories are read while it is still open, each in one ``read`` if
it is small (a NUL in its first 8 KiB skips the rest), in a loop that calls nothing
interpreted for a file without a match. A file without the plain text every match must hold
(``needle_`` in ``needle_[0-9]+``; one alternative's for ``a|b``; in either case, for
``ignore_case``, in an ASCII file) is passed by undecoded, and the others are searched joined,
a MiB of text per call into the engine (each alternative of ``a|b`` in turn: the alternation
tries both at every position, five times as slow), only the lines holding a match being
looked at on their own.

Real trees cost what generated ones do not: bigger files (up to 200 KiB) and common words on
thousands of lines. ``content`` stops at its 1,000 lines, but ``count`` goes through them all,
each matching line a call into the engine and a few interpreted steps (``count`` of ``self``
over the benchmark's real tree, 1,301 files of pip, setuptools, trio, pydantic, hypothesis,
attrs, anyio, h11 and httpx: 16x ``grep -rc``). So a pattern that is plain text (``self``,
``ValidationError``: every match is the pattern itself), in ``files_with_matches`` and
``count`` mode, is answered from each file's bytes, undecoded and without the engine: a file
matches iff it holds the text (in its lower case, ignoring case, for a file without the four
characters that match an ASCII letter ignoring case; another is searched by the engine), and
its matching lines are counted in C (first split at the text, one line for the first and one
more for each piece between two that holds a line end; now one ``re.findall`` a file: see
:mod:`._tree_search`). Counting the
35,000 lines holding ``self`` in those files, reads left out, measured side by side on a
loaded machine: the engine over decoded texts (alone or joined) 890-900 ms, ``re.findall`` of
``^[^\n]*?self`` over the bytes 580 ms (``regex``'s 1,500 ms), splitting into lines and
testing each 256 ms, a ``bytes.find`` for each matching line and its end 71-80 ms, the split
25 ms. Through the kernel, alternating with the programs (``benchmarks/search.py``'s real tree,
on two cores loaded by other work), ``count`` of ``self`` went from 10-17x ``grep -rc`` to
1.8-2.4x and ``files_with_matches`` of it from 2.7-2.9x to 0.8-1.2x; ``content`` keeps its
path, being within 2x there already (0.5-1.7x: it stops at its 1,000 lines). A regular
expression (``class \\w+Error``) measured 1.0-1.8x in every mode on the loaded cores, but
2.5-2.9x in ``files_with_matches`` and ``count`` in one quieter run: the engine's own scan of
every file holding ``class``, not changed here.

The split still left ``count`` of ``self`` at 2.3-2.8x ``grep -rc`` (it copies the file and
makes an object an occurrence), and ``count`` of ``self`` ignoring case at 3.7x (121 of the
files are not ASCII, and went to the engine a line at a time). One ``re.findall`` a file, of
the literal from its rarest byte then the rest of the line, and lowering the files that are
not ASCII but hold none of the four characters, brought them to 1.6-2.0x and 1.8-1.9x (on the
two cores loaded four to five times over by other work; the other modes unchanged): what is
left is ``re``'s scan for the expression's first byte, one byte at a time, over the 11 MB of
the files holding ``self``, where grep skips with ``memchr`` and Boyer-Moore.

Measured side by side (``benchmarks/search.py --sizes 1000 10000 100000``: through a kernel
with a root and ``max_concurrency``, against the programs started as a shell starts them,
median of five alternating runs, on two cores shared with other work), the time of grep's
(of ``find``'s for Glob):

======================================  ========  ========  ========  =============
tree (files)                            1,000     10,000    100,000   site-packages
======================================  ========  ========  ========  =============
``files_with_matches`` / ``grep -rl``   1.4x      1.7x      1.3x      0.7x
``content`` / ``grep -rn``              1.3x      1.5x      1.1x      0.4x
``count`` / ``grep -rc``                1.4x      1.0x      1.5x      0.8x
``glob``, ``type`` / ``--include``      1.4-1.5x  1.1-1.6x  1.4-1.7x  1.3-1.6x
``context=2`` / ``grep -C2``            1.2x      1.2x      1.4x      0.5x
``multiline`` / ``grep -lzP``           1.5x      1.5x      1.6x      0.4x
``ignore_case`` / ``grep -li``          1.5x      1.4x      1.55x     1.2x
``a|b`` / ``grep -n``                   1.5x      1.6x      1.55x     0.4x
Glob ``**/*.py`` / ``find -name``       1.1x      1.2x      1.3x      1.2x
Glob ``src/**/*.txt`` / ``find -path``  1.3x      1.25x     1.45x     1.0x
======================================  ========  ========  ========  =============

From one run to the next on the shared cores a ratio moves by 0.2-0.4 either way; trio's own
146 files are 1.3-1.65x, and Glob 0.75x. Before this walk (one directory listed at a time, then
every path sorted and every file opened again beneath its directory, a step of Python a name),
the same benchmark had ``content`` at 2.1x on 10,000 files, and over site-packages a Glob of
``trio/**/*.py`` at 21x (the whole tree walked) and ``a|b`` over trio at 2.5x.

What is left is the interpreter's: 2 to 5 microseconds a file over the ``open``, ``read`` and
``close`` grep makes too, and 20 a directory (``os.scandir``, the ignore rules, the glob); the
reads themselves are as fast in one thread as in two (the GIL is free during a system call,
but two threads were slower here).

The alternatives were measured in the same way and rejected:

- ripgrep: a wheel on PyPI (``ripgrep`` 14.1.0, 6.9 MB) ships ``rg``, and it is about twice
  as fast as grep (``-l`` over site-packages: 1.4-1.7 s, grep 2.7-4.9 s on a busy machine).
  But it would bring a second regular-expression dialect (Rust's: no look-around, no
  backreferences, other classes) whose results differ from the fallback every install without
  the extra must keep, and a process that opens paths by name, to be kept beneath the lease
  and killed on cancellation; the Python engine is within the target without it.
- RE2 (``google-re2``, linear time): from 0.7 to 3 times as slow as ``regex`` on the same
  texts (7.3 s against 2.4 s over the whole of site-packages, reads included: every text is
  encoded to UTF-8 again for each call), and a pattern language of its own. ``regex`` is
  bounded instead: every call into it has ``timeout=``.

Neither compiling nor matching runs on the event loop. Compiling a pattern (the regular
expression, ``glob``, ``type``, Glob's pattern) is done first thing in the search's thread, so
its errors come after the path's: a regular expression can take seconds to compile (a
30,000-word alternation 3-4 s, ``(?:a{1000}){1000}`` 1 s: the engine expands counted
repetition), and on the loop it froze every other call and overran the call's own run timeout.
One call into the engine cannot be interrupted, so a cancelled or timed-out call's thread
stops after it, before its first file; but a split alternation (:attr:`LinePattern.branches`)
is compiled an alternative at a time, and stops between two.

Matching never runs on the event loop: a pattern that backtracks catastrophically (``(a|aa)+$``
on a long line) would stall every other call and its own timeout. The engine runs with
``concurrent=True``, so the GIL is released while it runs (CPython's ``re`` never releases it),
and every single call is bounded by ``timeout=``: the time left before the call's deadline (its
run timeout), and at most :data:`SEARCH_TIME_LIMIT`. Cancelling the call abandons the thread at
once; the thread stops before its next file, or when its current search times out, so no thread
burns for longer than the call's deadline or :data:`SEARCH_TIME_LIMIT` after it, and none opens
a file after its call has ended.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Final, TypeVar

import anyio
import attrs
import regex
from wcmatch import glob as wcglob

from .._errors import ToolError
from ..kernel import KeyFunction, ToolContext
from ..locks import Claim, shared
from ._arguments import Aliases
from ._declare import FunctionTool
from ._file_tools import READ_LINE_WIDTH, TEXT_SIZE_LIMIT, fs_of
from ._file_types import type_matcher
from ._fs import FileAccess, Subtree
from ._line_match import LinePattern, Timeout
from ._tree_search import (
    FileFilter,
    GrepOptions,
    OutputMode,
    Searched,
    SearchTimedOut,
    grep_tree,
    ignore_files_above,
    list_tree,
)

__all__ = [
    "SEARCH_SIZE_LIMIT",
    "SEARCH_TIME_LIMIT",
    "GlobMatcher",
    "compile_glob",
    "glob",
    "grep",
]

RESULT_LIMIT: Final = 1000
SEARCH_SIZE_LIMIT: Final = TEXT_SIZE_LIMIT
"""The largest file Grep searches (bytes): each is read whole, so a sparse terabyte must not be.
Larger files are skipped unread, and the output names them."""
SEARCH_TIME_LIMIT: Final = 1.0
"""Seconds one search may take: over a whole file (``files_with_matches``) or over one line."""

T = TypeVar("T")
_GLOB_FLAGS: Final = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.DOTGLOB | wcglob.FORCEUNIX


@attrs.frozen
class GlobMatcher:
    """A compiled glob: :meth:`match` says whether a relative POSIX path matches it, and
    :meth:`select` which names of a directory do (a list at a time, for the walk)."""

    expression: re.Pattern[str]
    """wcmatch's translation of the glob (every brace expansion, one alternative each): one
    ``re`` call per path, where wcmatch's own matcher costs ten times that in Python."""
    on_names: bool = False
    """True iff ``expression`` is matched against the last component only: ``**/*.py`` is
    ``*.py`` on the name, and that expression is several times quicker than the path's."""
    single: bool = False
    """True iff the glob matches paths of one component only (no ``/``, no ``**``: ``*.py``),
    so that ``expression`` on a name is the glob's match of that name."""
    directory: re.Pattern[str] | None = None
    """For a glob ``D/N`` whose last component ``N`` is a name's glob (``src/**/*.py``): the
    translation of ``D/`` + :data:`_SENTINEL`, which a directory's path + ``/`` +
    :data:`_SENTINEL` matches iff ``D`` matches it. A path matches the glob iff its directory
    matches ``D`` and its name ``N`` (``N`` holds no ``**``, so it is the last component): one
    ``re`` call a directory, and one a name, of a shorter expression."""
    name: re.Pattern[str] | None = None
    """The expression a name must match, where the glob is one of names (all but a glob
    matched on whole paths only)."""
    suffix: str | None = None
    """For ``*`` then plain characters on a name (``**/*.py``, ``*.py``): those characters,
    which a name matches iff it ends with them (``str.endswith`` is quicker than ``re``)."""
    prefix: tuple[str, ...] = ()
    """The glob's first directories, where they are plain names (``trio`` of
    ``trio/**/*.py``): only paths in them can match, so no other directory is entered."""
    rooted: bool = False
    """True iff the glob was spelled with ``.`` for the directory searched (``./*.py``): it
    matches paths from there only, never Grep's bare names at any depth."""

    def match(self, path: str) -> bool:
        if self.on_names:
            path = path.rpartition("/")[2]
        return self.expression.match(path) is not None

    def match_name(self, relative: str, name: str) -> bool:
        """:meth:`match` of ``relative``, whose last component is ``name``."""
        return self.expression.match(name if self.on_names else relative) is not None

    def select(self, inside: str, names: list[str]) -> list[str]:
        """The ``names`` of one directory whose paths (``inside`` + name) match, in order:
        Glob's filter (``inside`` is ``""`` or ends with ``/``)."""
        if self.on_names or (self.single and not inside):
            return self._names(names)
        if self.single:
            return []  # a path of more than one component
        if self.directory is not None:
            return self._names(names) if self._directory_matches(inside) else []
        match = self.expression.match
        return [name for name in names if match(inside + name)]

    def select_by_path_or_name(self, inside: str, names: list[str]) -> list[str]:
        """The ``names`` of one directory whose paths or names match, in order: Grep's
        filter, under which ``*.py`` keeps Python files at any depth."""
        if self.rooted:
            return self.select(inside, names)
        if self.on_names or self.single:  # a path matches only if its name does
            return self._names(names)
        if self.directory is not None:
            # A name alone is a path in no directory.
            either = self._directory_matches(inside) or self._directory_matches("")
            return self._names(names) if either else []
        match = self.expression.match
        return [name for name in names if match(inside + name) or match(name)]

    def enter(self, inside: str, names: list[str]) -> list[str]:
        """The subdirectories ``names`` of directory ``inside`` (``""`` or ending with ``/``,
        itself entered) below which a path may match: Glob's walk enters only those."""
        depth = inside.count("/")
        if depth >= len(self.prefix):
            return names
        wanted = self.prefix[depth]
        return [wanted] if wanted in names else []

    def _directory_matches(self, inside: str) -> bool:
        assert self.directory is not None
        return self.directory.match(inside + _SENTINEL) is not None

    def _names(self, names: list[str]) -> list[str]:
        suffix = self.suffix
        if suffix is not None:
            return [name for name in names if name.endswith(suffix)]
        assert self.name is not None
        return list(filter(self.name.match, names))  # one C call a name


_PLAIN_NAME: Final = re.compile(r"\*[A-Za-z0-9._-]+")
"""A glob on names that is a suffix test: ``*`` then characters no glob syntax uses."""
_GLOB_SYNTAX: Final = frozenset("*?[]{}\\!")
_SENTINEL: Final = "toolkernel-glob-name"
"""The last component put for a name's glob, to match a directory against the rest."""


def _translate(pattern: str) -> re.Pattern[str]:
    # No NEGATE flag, so nothing is excluded: the expressions to include are all.
    include, _ = wcglob.translate(pattern, flags=_GLOB_FLAGS)
    return re.compile("|".join(f"(?:{part})" for part in include))


def compile_glob(pattern: str) -> GlobMatcher:
    """Compile a glob for matching relative POSIX paths: ``**/*.py``, ``src/*.{js,ts}``.

    A pattern that could never match a relative path (absolute, or climbing with ``..``) is
    refused with a message saying how to search there, rather than matching nothing. A ``.``
    component is the directory it is in, as it is to the shell, ``find`` and ripgrep:
    ``./src/*.py`` is ``src/*.py`` (wcmatch's match would want the paths spelled ``./src/a.py``,
    which no walk lists), ``src/./a/*`` is ``src/a/*``.
    """
    spelled = pattern
    if pattern.startswith("/"):
        raise ToolError(
            f"glob {pattern!r} is absolute; globs match paths relative to the directory searched: "
            f"give that directory as path and a relative pattern (path='src', pattern='**/*.py')"
        )
    components = pattern.split("/")
    if ".." in components:
        raise ToolError(
            f"glob {pattern!r} climbs with '..'; globs match paths below the directory searched: "
            f"give the directory to search as path instead"
        )
    rooted = "." in components
    if rooted:
        # "./" is no component of a relative path, nor is the "/" after it (".//a" is "a");
        # "." or "./" alone is the directory itself, which matches no file.
        pattern = "/".join(part for part in components if part != ".").lstrip("/") or pattern
    # "**/" then no "/" (not even in braces): whatever the directories, the name decides.
    last = pattern[3:]
    on_names = pattern.startswith("**/") and "/" not in last and "**" not in last
    # Without "/" or "**" (which GLOBSTAR lets span directories) a glob matches one name: no
    # wildcard or class of it matches a "/".
    single = not on_names and "/" not in pattern and "**" not in pattern
    directory = None
    if not (on_names or single):
        directory, _, last = pattern.rpartition("/")
        # Split only where the last "/" parts components: not within braces, a class or an
        # escape ("{a,b/c}", "a[/]b", "a\/b").
        if "**" in last or any(char in directory for char in "{}[]\\"):
            directory = None
    try:
        expression = _translate(last if on_names else pattern)
        ends = None if directory is None else _translate(f"{directory}/{_SENTINEL}")
        name = expression if on_names or single else None if ends is None else _translate(last)
    except Exception as exc:  # wcmatch's PatternLimitException is a plain Exception
        raise ToolError(f"glob {spelled!r} is not a valid pattern: {exc}") from None
    on_name = last if on_names or ends is not None else pattern if single else None
    suffix = on_name[1:] if on_name is not None and _PLAIN_NAME.fullmatch(on_name) else None
    prefix: list[str] = []
    for component in pattern.split("/")[:-1]:
        if component in ("", ".") or any(char in component for char in _GLOB_SYNTAX):
            break  # "a//b" is "a/b": no pruning from there on
        prefix.append(component)
    return GlobMatcher(expression, on_names, single, ends, name, suffix, tuple(prefix), rooted)


class _SearchTool(FunctionTool):
    """A search tool: it reads the tree below its ``path`` argument, and the ignore files above
    that tree which decide what the tree lists (``src/.gitignore`` for a search of ``src/a``),
    so a change to one of them is ordered against the search as a change inside the tree is."""

    def claims(self, arguments: Mapping[str, Any], key: KeyFunction) -> Sequence[Claim] | None:
        found = super().claims(arguments, key)
        if found is None:
            return None
        above = ignore_files_above(key(arguments["path"]))
        return [*found, *(shared(file) for file in above)]


def _search_tool(name: str) -> Callable[[Callable[..., Any]], FunctionTool]:
    return lambda function: _SearchTool(function, reads=["path"], name=name, ahead=True)


async def _search(fs: FileAccess, given: str, work: Callable[[Subtree], T]) -> T:
    try:
        return await fs.search(given, work)
    except FileNotFoundError:
        raise ToolError(f"path {given!r} does not exist") from None


@_search_tool("Glob")
async def glob(ctx: ToolContext, pattern: str, path: str = ".") -> str:
    """Find files by glob pattern (`**/*.py`, `src/*.{js,ts}`) under a directory.

    Files ignored by `.gitignore` and the `.git` directory are left out.

    Args:
        pattern: The glob, matched against paths relative to `path`.
        path: The directory to search. Defaults to the workspace root.
    """

    if pattern.startswith("!"):
        raise ToolError(
            f"Glob's pattern {pattern!r} starts with '!': Glob lists the files a pattern "
            "matches, and leaves none out; give a pattern for the files wanted (Grep's glob "
            "takes '!' to leave files out)"
        )

    def listed(tree: Subtree) -> list[str]:
        matcher = compile_glob(pattern)  # in the thread: see the module's docstring
        return list_tree(tree, matcher.select, matcher.enter)

    found = await _search(fs_of(ctx), path, listed)
    if not found:
        return f"no files match {pattern!r} under {path}"
    shown = found[:RESULT_LIMIT]
    more = len(found) - len(shown)
    return "\n".join(shown) + (f"\n... ({more} more)" if more else "")


@_search_tool("Grep")
async def grep(
    ctx: ToolContext,
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    output_mode: OutputMode = "files_with_matches",
    type: str | None = None,
    ignore_case: Annotated[bool, Aliases("-i")] = False,
    context: Annotated[int, Aliases("-C")] = 0,
    before_context: Annotated[int, Aliases("-B")] = 0,
    after_context: Annotated[int, Aliases("-A")] = 0,
    line_numbers: Annotated[bool, Aliases("-n")] = True,
    multiline: bool = False,
    head_limit: int | None = None,
    offset: int = 0,
) -> str:
    """Search file contents with a regular expression, line by line as grep does.

    Files ignored by `.gitignore`, the `.git` directory and binary files are left out.

    Args:
        pattern: A Python regular expression.
        path: The file or directory to search. Defaults to the workspace root.
        glob: Only search files whose path (or name) matches this glob, e.g. `*.py`; one
            starting with `!` leaves those out instead (`!*.test.js`).
        output_mode: `files_with_matches` (paths), `content` (matching lines), or `count`.
        type: Only search files of this type, as ripgrep names them: `py`, `js`, `ts`, `rust`,
            `go`, `java`, `c`, `cpp`, `md`...
        ignore_case: Match letters in either case.
        context: Lines to show before and after each match (content mode), like grep -C.
        before_context: Lines to show before each match (content mode), like grep -B.
        after_context: Lines to show after each match (content mode), like grep -A.
        line_numbers: Show each line's number (content mode), like grep -n.
        multiline: Let the pattern match across lines (`.` matches line ends too).
        head_limit: Show at most this many lines or entries, like `| head -N`; at most and by
            default 1000 (0 means that too).
        offset: Skip this many lines or entries first, to see on past the ones shown.
    """
    for name, value in (
        ("context", context),
        ("before_context", before_context),
        ("after_context", after_context),
        ("offset", offset),
    ):
        if value < 0:
            raise ToolError(f"{name} must be a number of lines from 0, not {value}")
    if head_limit is not None and head_limit < 0:
        raise ToolError(f"head_limit must be a number of lines from 0, not {head_limit}")
    shown = min(head_limit or RESULT_LIMIT, RESULT_LIMIT)

    deadline = anyio.current_effective_deadline()
    budget = deadline - anyio.current_time()  # inf without a run timeout
    limit = SEARCH_TIME_LIMIT
    # Never less than a little: a deadline already past cancels us at the next checkpoint.
    timeout = _timeout(max(budget, 0.01), limit)

    def searched_tree(tree: Subtree) -> Searched:
        # Compiled in the search's thread, not on the event loop: see the module's docstring.
        try:
            compiled = LinePattern.compile(
                pattern, ignore_case=ignore_case, multiline=multiline, check=tree.check
            )
        except regex.error as exc:
            raise ToolError(
                f"pattern {pattern!r} is not a valid regular expression: {exc}"
            ) from None
        keep = _file_filter(glob, type)
        options = GrepOptions(
            compiled,
            output_mode,
            before=max(before_context, context),
            after=max(after_context, context),
            limit=offset + shown,
            width=READ_LINE_WIDTH,
            max_bytes=SEARCH_SIZE_LIMIT,
            numbered=line_numbers,
        )
        return grep_tree(tree, keep, options, timeout)

    try:
        searched = await _search(fs_of(ctx), path, searched_tree)
    except SearchTimedOut as exc:
        if budget < limit:
            # The search ran into the call's own deadline: let the run timeout report it.
            await anyio.sleep_until(deadline)
        raise ToolError(
            f"pattern {pattern!r} took more than {limit:g} s on one "
            f"{'file' if output_mode == 'files_with_matches' else 'line'} of {exc.file}; it "
            f"probably backtracks catastrophically (nested or overlapping repetition such as "
            f"(a+)+ or (a|aa)+): simplify it, or narrow the search with path or glob"
        ) from None
    return _grep_output(searched, pattern, path, offset, shown)


def _file_filter(glob: str | None, type: str | None) -> FileFilter | None:
    """What Grep's ``glob`` and ``type`` keep, or None to keep every file. A glob that starts
    with ``!`` keeps the files it does not match, as ripgrep's ``--glob '!*.py'`` does."""
    leave_out = glob is not None and glob.startswith("!")
    if glob is not None and leave_out:
        glob = glob[1:]
    matcher = compile_glob(glob) if glob is not None else None
    kind: re.Pattern[str] | None = type_matcher(type) if type is not None else None
    if matcher is None and kind is None:
        return None

    def keep(inside: str, names: list[str]) -> list[str]:
        if kind is not None:
            names = list(filter(kind.fullmatch, names))
        if matcher is None:
            return names
        if leave_out:
            matched = set(matcher.select_by_path_or_name(inside, names))
            return [name for name in names if name not in matched]
        return matcher.select_by_path_or_name(inside, names)

    return keep


def _timeout(seconds: float, limit: float) -> Timeout:
    """Seconds each call into the engine may take: what is left of ``seconds``, at most
    ``limit`` (the clock starts when this is made; the search runs right after)."""
    end = time.monotonic() + seconds if math.isfinite(seconds) else math.inf

    def timeout() -> float:
        return max(min(limit, end - time.monotonic()), 0.0)

    return timeout


def _grep_output(searched: Searched, pattern: str, path: str, offset: int, shown: int) -> str:
    """Lines ``offset`` to ``offset + shown`` of what the search found, saying if more were."""
    lines = searched.lines
    skipped = _skipped(searched.too_large)
    if not lines:
        return f"no matches for {pattern!r} under {path}" + skipped
    if offset >= len(lines):
        return (
            f"no more matches for {pattern!r} under {path}: offset {offset} skips all "
            f"{len(lines)} lines found" + skipped
        )
    end = offset + shown
    if len(lines) <= end:
        return "\n".join(lines[offset:]) + skipped
    return (
        "\n".join(lines[offset:end])
        + f"\n... (more results cut; use offset={end} to see on)"
        + skipped
    )


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

"""Glob's and Grep's work on one tree, done in one worker thread (``FileAccess.search``).

The walk lists the tree below the checked path as ripgrep does: ``.gitignore`` files met on the
way and those above the checked path (read through the access's check, so only where the call's
claims cover them: :func:`ignores_above`) are honoured (:mod:`._ignore`), and below them the
``.git/info/exclude`` of each repository; version-control directories (``.git``, ``.hg``,
``.svn``) are left out, hidden files are not. Each directory is opened from the root without
following a link (``open_directory``: one ``openat2`` with ``RESOLVE_BENEATH |
RESOLVE_NO_SYMLINKS``, or one ``O_NOFOLLOW`` open a component), so the walk never leaves the
tree the call's lease covers, and a directory swapped for a link since it was listed is passed
by. A symbolic link to a file is listed only if it leads to a file in the workspace that the
call may read, and is read through the access's own check. Paths no key can name
(``MAX_PATH_BYTES``) and trees being deleted are left out. The files are read in sorted order
of their paths (depth first, each directory's names sorted, a subdirectory's with its ``/``),
each opened with ``O_NOFOLLOW`` beneath its directory's descriptor, so the result is the same
whatever order the disk lists them in; a directory without subdirectories is read while the
walk holds it open.

A pattern that is plain text, in ``files_with_matches`` and ``count`` mode, is answered from
each file's bytes (:func:`_matching_lines`): no decoding and no call into the engine a matching
line, which on real sources (a common word on thousands of lines) cost 16x ``grep -rc``; the
engine's answer is the same (an ASCII text is in the bytes iff it is in their decoding; ignoring
case, its lower case is in their lower case unless they hold one of the four characters that
match an ASCII letter: :func:`foldable`). The figures and the alternatives measured are in
:mod:`._search`.

Counting (the choice measured on the benchmark's real tree, 667 files holding ``self`` on 35,000
lines, in the search's loop, each file counted just after its read): the lines holding the
literal are one ``re.findall`` of the literal then ``[^\n]*`` (one match a line, the rest of the
line skipped in C), from the literal's first occurrence found by ``bytes.find``, 11 ms over
reading alone against 15 ms for splitting the bytes at the literal and testing each piece for a
line end, 14 ms for a ``find`` of the literal and of the line end a line, 17-23 ms for
``bytes.replace`` with a marker, ``translate`` and ``count``, and more for ``regex`` on bytes or
a look-ahead for a second occurrence. ``re`` looks for the expression's first byte one byte at a
time, the whole cost on a common word: so the expression starts at the literal's rarest byte
but its last (``lf(?<=self)``: half the time of ``self``; :func:`_line_counter`). Ignoring case,
a file that is not ASCII was searched by the engine a line at a time (3.7x ``grep -rci`` for
``self``); it is lowered and counted as an ASCII one is unless :func:`foldable` says no.

Cancellation: the walk checks before each directory and the search before each file
(:meth:`Subtree.check`): the call's end at once, its cancellation within a few milliseconds,
and a cancelled call's thread stops there. The engine's own calls are bounded by ``timeout=``,
so a pattern that backtracks stops within its time limit.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import functools
import os
import re
import stat
from collections.abc import Callable, Generator
from typing import Final, Literal, NamedTuple

import attrs

from .._beneath import READ_NONBLOCK_FLAGS, open_directory
from .._errors import InvalidClaimError
from ..locks import Path
from ._fileops import _ASIDE_INFIX, moved_aside
from ._fs import Subtree
from ._ignore import IgnoreRules, ignored, names_only
from ._line_match import LinePattern, Timeout, text_lines
from ._workspace import MAX_PATH_BYTES

__all__ = [
    "FileFilter",
    "GrepOptions",
    "SearchTimedOut",
    "Searched",
    "grep_tree",
    "ignore_files_above",
    "ignores_above",
    "list_tree",
]

VERSION_CONTROL: Final = frozenset({".git", ".hg", ".svn"})
IGNORE_FILE: Final = ".gitignore"
EXCLUDE_FILE: Final = ".git/info/exclude"
IGNORE_FILE_LIMIT: Final = 1 << 20
"""The largest ``.gitignore`` read (bytes); a larger one is not honoured."""
BINARY_PROBE: Final = 8192
"""A NUL in a file's first 8 KiB makes it binary (as for grep): it is read no further."""
FIRST_READ: Final = 1 << 16
"""Bytes read before a file is ``fstat``-ed: most source files are smaller, and cost one read."""

OutputMode = Literal["files_with_matches", "content", "count"]
FileFilter = Callable[[str, list[str]], list[str]]
"""Which files of one directory to keep, from the directory's path relative to the searched
directory (``""``, or ending with ``/``) and the files' names."""


class SearchTimedOut(Exception):
    """A call into the engine ran out of time on ``file`` (root-relative)."""

    def __init__(self, file: str) -> None:
        super().__init__(file)
        self.file = file


@attrs.frozen
class GrepOptions:
    pattern: LinePattern
    mode: OutputMode
    before: int
    after: int
    limit: int
    """Output lines wanted; the search stops once it has one more (so it can say more were cut)."""
    width: int
    """Characters of a line shown."""
    max_bytes: int
    """The largest file searched; larger ones are named in :attr:`Searched.too_large`."""
    numbered: bool = True
    """Content lines show their numbers: ``path:12:line`` (else ``path:line``), as ``grep -n``."""


@attrs.define
class Searched:
    lines: list[str] = attrs.Factory(list)
    too_large: list[str] = attrs.Factory(list)


def list_tree(tree: Subtree, keep: FileFilter | None, enter: FileFilter | None = None) -> list[str]:
    """The root-relative paths of the files below ``tree`` that ``keep`` keeps, sorted; with
    ``enter``, only in the directories it keeps of those met (the same arguments as ``keep``)."""
    found: list[str] = []
    for run in _walk(tree, keep, enter):
        found += map(run.outer.__add__, run.names)
    return found


def grep_tree(
    tree: Subtree, keep: FileFilter | None, options: GrepOptions, timeout: Timeout
) -> Searched:
    """Search the files below ``tree`` that ``keep`` keeps, in sorted order, until
    ``options.limit`` output lines are exceeded."""
    searched = Searched()
    search = _Search(tree, options, timeout, searched)
    needle, absent = _prefilter(options.pattern)
    pattern = options.pattern
    literal = None
    if options.mode != "content" and _is_literal(pattern):
        assert pattern.literals is not None
        literal = pattern.literals[0].encode()
    with contextlib.closing(_walk(tree, keep)) as runs:
        for run in runs:
            if _search_run(
                tree, run, search, needle, absent, literal, options.max_bytes, searched.too_large
            ):
                return searched
    search.flush()
    return searched


def _prefilter(pattern: LinePattern) -> tuple[bytes | None, Callable[[bytes], bool] | None]:
    """What passes a file by undecoded: the one literal every match holds, or a test that
    says a file holds none of the pattern's literals.

    A match holds one of them in bytes as in text: they are ASCII, which no byte of a character
    decoded as U+FFFD ever is. Ignoring case, a file is asked in lower case if it is
    :func:`foldable`; another is searched.
    """
    if pattern.literals is None:
        return None, None
    needles = tuple(literal.encode() for literal in pattern.literals)
    if not pattern.folded:
        if len(needles) == 1:
            return needles[0], None
        return None, lambda data: not any(needle in data for needle in needles)

    def absent(data: bytes) -> bool:
        if not foldable(data):
            return False
        lower = data.lower()
        return not any(needle in lower for needle in needles)

    return None, absent


def foldable(data: bytes) -> bool:
    """True iff a text of ASCII letters, ignoring case, is in ``data`` decoded exactly where its
    lower case is in ``data.lower()`` (which changes ASCII letters only): none of the only
    characters that match an ASCII letter ignoring case (the engine's simple case folding) is
    in it, U+0130 and U+0131 (``i``), U+017F (``s``) and U+212A, the Kelvin sign (``k``).

    Their UTF-8 is looked for after a byte of it (``memchr``) is found: three multi-byte
    searches of every file that is not ASCII cost 25 times as much."""
    return data.isascii() or not (
        (b"\xc4" in data and (b"\xc4\xb0" in data or b"\xc4\xb1" in data))
        or (b"\xc5" in data and b"\xc5\xbf" in data)
        or (b"\xaa" in data and b"\xe2\x84\xaa" in data)
    )


def _is_literal(pattern: LinePattern) -> bool:
    """True iff every match of ``pattern`` is its source itself (in either case, with
    :attr:`LinePattern.folded`): plain characters only (:func:`required_literal` of the
    whole), which span no line end."""
    literals = pattern.literals
    return literals is not None and len(literals) == 1 and len(literals[0]) == len(pattern.source)


_BY_FREQUENCY: Final = (
    b" etrsainoldc_pfum,h.\":)(gyb'=v0wxk-NT1`E#ASC2[]IRPF>DM3OL/46"
    b"jqBU59\\78*V{}zGH|W+YKXQ@J<~!Z?$%;^&"
)
"""The printable ASCII bytes from the most to the least frequent in source code (counted over
the benchmark's real tree): where a search for a literal starts (:func:`_line_counter`)."""
_RARENESS: Final = {byte: rank for rank, byte in enumerate(_BY_FREQUENCY)}


@functools.lru_cache(maxsize=64)  # bounded: a pattern a literal searched
def _line_counter(literal: bytes) -> Callable[[bytes, int], list[bytes]]:
    """``findall`` of an expression that matches once on each line holding ``literal`` (which
    holds no line end): the literal, then the rest of its line, so the next search starts at
    the line end (the empty group makes each item the shared empty bytes).

    ``re`` looks for a pattern's first byte one byte at a time, so the expression starts at the
    literal's rarest byte but its last (two bytes at least), the part before it asked by a
    look-behind: for ``self``, ``lf(?<=self)`` is twice as fast as ``self``.
    """
    rarest = max(range(len(literal) - 1), key=lambda i: _RARENESS.get(literal[i], 256))
    behind = b"(?<=" + re.escape(literal) + b")" if rarest else b""
    return re.compile(re.escape(literal[rarest:]) + behind + rb"[^\n]*()").findall


def _matching_lines(data: bytes, literal: bytes, start: int = 0) -> int:
    """How many lines of ``data`` from ``start`` (a line's start, or where the first
    occurrence is) hold ``literal``, which holds no line end: one match of
    :func:`_line_counter` a line, the whole count in one C call."""
    return len(_line_counter(literal)(data, start))


def _search_run(
    tree: Subtree,
    run: _Run,
    search: _Search,
    needle: bytes | None,
    absent: Callable[[bytes], bool] | None,
    literal: bytes | None,
    max_bytes: int,
    too_large: list[str],
) -> bool:
    """Search the files of ``run``; True once enough lines are written.

    With ``literal`` (a pattern that is plain text, in ``files_with_matches`` or ``count``
    mode; in lower case if it ignores case) a file is answered from its bytes, undecoded: the
    lines that hold it are the lines that match, and an ASCII text is in the bytes iff it is in
    their decoding (no byte of a character decoded as U+FFFD is ASCII)."""
    outer, links, directory = run.outer, run.links, run.fd
    folded = search.folded
    check, observed, below = tree.check, tree.observed, len(tree.parts)
    if directory < 0:
        check()
        try:
            directory = open_directory(tree.root, run.parts)
        except OSError:
            return False  # vanished, or swapped for a link since the walk: not a match
    try:
        # The loop of every file: only system calls and C methods for a file without a match
        # (an interpreted call costs about as much as a file's open).
        for name in run.names:
            check()
            try:
                if name in links:
                    data = _read_link(tree, outer + name, max_bytes)
                else:
                    fd = os.open(name, READ_NONBLOCK_FLAGS, dir_fd=directory)
                    try:
                        data = os.read(fd, FIRST_READ)
                        if not 0 < len(data) < FIRST_READ:
                            data = _read_rest(fd, data, max_bytes, outer + name)
                        elif data.find(b"\x00", 0, BINARY_PROBE) >= 0:
                            data = None  # the end of a regular file (see read_searchable)
                    finally:
                        os.close(fd)
            except OSError as exc:
                if exc.errno == errno.EFBIG:
                    too_large.append(outer + name)
                continue  # vanished, unreadable, or not a regular file: not a match
            except InvalidClaimError:
                continue  # turned into a link out of the workspace (or a loop) since the walk
            if data is None:
                continue  # binary
            if observed:
                tree.read(tuple((outer + name).split("/")[below:]))
            if literal is not None:
                # Ignoring case, a foldable text holds the literal iff its lower case holds it
                # in lower case; another is searched by the engine.
                plain = data if not folded else data.lower() if foldable(data) else None
                if plain is not None:
                    first = plain.find(literal)
                    if first >= 0 and search.found(outer + name, plain, literal, first):
                        return True
                    continue
            if needle is not None:
                if needle not in data:
                    continue  # no match can be in it
            elif absent is not None and absent(data):
                continue
            if search.add(outer + name, data.decode("utf-8", errors="replace")):
                return True
    finally:
        if run.fd < 0:
            os.close(directory)
    return False


def _read_link(tree: Subtree, path: str, max_bytes: int) -> bytes | None:
    data = tree.read_link(path, max_bytes)
    return None if data.find(b"\x00", 0, BINARY_PROBE) >= 0 else data


JOINED_SIZE: Final = 1 << 20
"""Characters of small files searched in one call into the engine (see :class:`_Search`)."""


class _Search:
    """Matches the texts of the files in order and writes their output lines.

    A call into the engine costs a few microseconds whatever it searches, as much as reading
    a small file: so small files are searched joined, :data:`JOINED_SIZE` characters at a
    time, where the pattern allows it (:attr:`LinePattern.joinable`). A joined search that runs
    out of time is done again one file at a time, so the message names the file.
    """

    def __init__(
        self, tree: Subtree, options: GrepOptions, timeout: Timeout, searched: Searched
    ) -> None:
        self._tree, self._options, self._timeout = tree, options, timeout
        self._joinable = options.pattern.joinable
        self._multiline = options.pattern.multiline
        pattern = options.pattern
        self._literals = None if pattern.folded else pattern.literals
        self.folded = pattern.folded
        self._lines = searched.lines
        self._pending: list[tuple[str, str]] = []
        self._size = 0

    def add(self, path: str, text: str) -> bool:
        """Search ``text`` (now or with the next ones); True once enough lines are written."""
        literals = self._literals
        if literals is not None and not any(literal in text for literal in literals):
            return False  # no match can be in it
        if self._joinable and (self._multiline or "\r" not in text):
            self._pending.append((path, text))
            self._size += len(text)
            return self._size >= JOINED_SIZE and self.flush()
        return self.flush() or self._alone(path, text)

    def found(self, path: str, data: bytes, literal: bytes, first: int) -> bool:
        """Write the output of file ``path`` holding plain-text pattern ``literal`` (not in
        ``content`` mode) first at ``first``, from its bytes; True once enough lines are
        written."""
        if self.flush():
            return True
        lines = self._lines
        if self._options.mode == "count":
            lines.append(f"{path}:{_matching_lines(data, literal, first)}")
        else:
            lines.append(path)
        return len(lines) > self._options.limit

    def flush(self) -> bool:
        """Search the texts held back; True once enough lines are written."""
        pending = self._pending
        if not pending:
            return False
        self._pending, self._size = [], 0
        if len(pending) == 1:
            return self._alone(*pending[0])
        # Each text ends with a line end, so the next starts on a line of its own (the same
        # lines: text_lines does not count a last line end).
        texts = [text if text.endswith("\n") or not text else text + "\n" for _, text in pending]
        firsts, offset = [], 0
        for text in texts:
            firsts.append(offset)
            offset += len(text)
        pattern = self._options.pattern
        try:
            if pattern.multiline:
                return self._holding_a_match(pending, "".join(texts), firsts)
            starts = pattern.starts(
                "".join(texts),
                self._timeout,
                firsts if self._options.mode == "files_with_matches" else None,
            )
        except TimeoutError:
            for path, text in pending:
                self._tree.check()
                if self._alone(path, text):
                    return True
            return False
        index, count = 0, len(starts)
        for (path, _), text, first in zip(pending, texts, firsts, strict=True):
            found, counted, number = [], 0, 0
            while index < count and starts[index] < first + len(text):
                start = starts[index] - first
                number += text.count("\n", counted, start)
                counted = start
                found.append(number)
                index += 1
            if found and self._emit(path, text, found):
                return True
        return False

    def _holding_a_match(
        self, pending: list[tuple[str, str]], joined: str, firsts: list[int]
    ) -> bool:
        """Search each text of ``joined`` that holds the start of a match alone (a multiline
        match may run on into the next text, so only a search of it alone says)."""
        position, size = 0, len(joined)
        while position <= size:
            match = self._options.pattern.line.search(
                joined, position, timeout=self._timeout(), concurrent=True
            )
            if match is None:
                break
            index = bisect.bisect_right(firsts, match.start()) - 1
            self._tree.check()
            if self._alone(*pending[index]):
                return True
            if index + 1 == len(firsts):
                break
            position = firsts[index + 1]
        return False

    def _alone(self, path: str, text: str) -> bool:
        mode = self._options.mode
        try:
            found = self._options.pattern.lines(
                text, self._timeout, first=mode == "files_with_matches"
            )
        except TimeoutError:
            raise SearchTimedOut(path) from None
        return bool(found) and self._emit(path, text, found)

    def _emit(self, path: str, text: str, found: list[int]) -> bool:
        options, lines = self._options, self._lines
        if options.mode == "files_with_matches":
            lines.append(path)
        elif options.mode == "count":
            lines.append(f"{path}:{len(found)}")
        elif options.before or options.after:
            if lines:
                lines.append("--")
            _with_context(lines, path, text_lines(text), found, options)
        else:
            _content(lines, path, text, found, options.width, options.numbered)
        return len(lines) > options.limit


def _content(
    lines: list[str], path: str, text: str, found: list[int], width: int, numbered: bool
) -> None:
    # Only the matching lines are cut out of the text: splitting a big file into lines costs
    # more than the search.
    position, number = 0, 0
    for wanted in found:
        while number < wanted:
            position = text.index("\n", position) + 1
            number += 1
        end = text.find("\n", position)
        line = text[position : end if end >= 0 else len(text)]
        if line.endswith("\r"):
            line = line[:-1]
        if numbered:
            lines.append(f"{path}:{number + 1}:{line[:width]}")
        else:
            lines.append(f"{path}:{line[:width]}")


def _with_context(
    lines: list[str], path: str, all_lines: list[str], found: list[int], options: GrepOptions
) -> None:
    """The matching lines as ``path:n:line`` and their context as ``path-n-line``, groups that
    do not touch separated by ``--`` (as ``grep -n -C`` prints them)."""
    matching = set(found)
    shown_until = -1
    for number in found:
        start = max(number - options.before, shown_until + 1, 0)
        if shown_until >= 0 and start > shown_until + 1:
            lines.append("--")
        stop = min(number + options.after, len(all_lines) - 1)
        for index in range(start, stop + 1):
            if index <= shown_until:
                continue
            mark = ":" if index in matching else "-"
            label = f"{index + 1}{mark}" if options.numbered else ""
            lines.append(f"{path}{mark}{label}{all_lines[index][: options.width]}")
        shown_until = max(shown_until, stop)


def read_searchable(directory: int, name: str, max_bytes: int, path: str) -> bytes | None:
    """The content of regular file ``name`` in ``directory``, None if it is binary (a NUL in
    its first :data:`BINARY_PROBE` bytes, which are all that is read of it then).

    Raises ``OSError`` for anything but a regular file and ``EFBIG`` for one over ``max_bytes``.
    Opened ``O_NONBLOCK | O_NOFOLLOW``: a link is refused, and a fifo swapped in since the walk
    listed a regular file answers at once. A file that fits in the first read (most source
    files) costs ``open``, one ``read`` and ``close``: only a longer one is ``fstat``-ed (is it
    regular, and how large) before more is read. What the first read returned was then at most
    :data:`FIRST_READ` bytes of whatever was swapped in, and is not returned unless it is a
    regular file.
    """
    fd = os.open(name, READ_NONBLOCK_FLAGS, dir_fd=directory)
    try:
        head = os.read(fd, FIRST_READ)
        if 0 < len(head) < FIRST_READ:
            return None if head.find(b"\x00", 0, BINARY_PROBE) >= 0 else head
        return _read_rest(fd, head, max_bytes, path)
    finally:
        os.close(fd)


def _read_rest(fd: int, head: bytes, max_bytes: int, path: str) -> bytes | None:
    """What :func:`read_searchable` returns, from the file open as ``fd`` whose first read gave
    ``head``: nothing, or all of :data:`FIRST_READ`."""
    if not head:
        # A short read is the end of a regular file; of a fifo (O_NONBLOCK) it is what a
        # writer had written, or nothing: rarely anything, and never blocking. Told apart
        # cheaply where it matters: an empty read is checked.
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        return head
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", path)
    if status.st_size > max_bytes:
        raise OSError(errno.EFBIG, "too large", path)  # named, binary or not
    if head.find(b"\x00", 0, BINARY_PROBE) >= 0:
        return None
    chunks = [head]
    left = max_bytes + 1 - len(head)
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        left -= len(chunk)
    raise OSError(errno.EFBIG, "too large", path)  # grew past the limit since the fstat


class _Run(NamedTuple):
    """Files of one directory that come one after another in the sorted listing."""

    outer: str
    """The directory, root-relative, with a ``/`` after it (``""`` for the root)."""
    parts: tuple[str, ...]
    """Its components, to open it."""
    names: list[str]
    links: frozenset[str]
    """Which of ``names`` are symbolic links (to files the call may read)."""
    fd: int = -1
    """The directory, open while the walk is in it (until the next run is asked for); -1 for a
    run met after the walk left its directory, to be opened again."""


_NO_LINKS: Final = frozenset[str]()


def _walk(
    tree: Subtree, keep: FileFilter | None, enter: FileFilter | None = None
) -> Generator[_Run, None, None]:
    """The files below ``tree`` that ``keep`` keeps, in runs of one directory, in sorted order
    of their paths; a directory without subdirectories (where most files are) is still open
    (:attr:`_Run.fd`), so the search reads its files without opening it again.

    Depth first, each directory's entries in the order of their names, a directory's with a
    ``/`` after it (all its paths start so): that is the order of the whole paths, so nothing
    is sorted but the names of one directory at a time. Each directory's names are told apart,
    left out and kept a list at a time (``filter`` with a compiled expression's method, one
    expression for all the ignore rules on names): no interpreted step an entry.
    """
    root, parts = tree.root, tree.parts
    base = "/".join(parts)
    try:
        top = open_directory(root, parts)
    except NotADirectoryError:
        # A file given as the path is searched whatever the ignore files say, as ripgrep does.
        name = parts[-1]
        directory = open_directory(root, parts[:-1])
        try:
            regular = stat.S_ISREG(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)
        finally:
            os.close(directory)
        outer = base[: len(base) - len(name)]
        if regular and (keep is None or keep(outer, [name])):
            yield _Run(outer, parts[:-1], [name], _NO_LINKS)
        return
    os.close(top)
    prefix = base + "/" if base else ""
    # Directories still to list (their path below the base, and the ignore files above them),
    # and runs of files met in a directory with subdirectories, waiting for those before them.
    # Each directory is opened from the root in one openat2 (RESOLVE_BENEATH, no link followed;
    # a component walk without it), so only one directory is open at a time however wide the
    # tree is.
    waiting: list[tuple[str, Ignores] | _Run] = [("", ignores_above(tree))]
    quick = _NamesOnly()
    while waiting:
        item = waiting.pop()
        if isinstance(item, _Run):
            yield item
            continue
        below, ignores = item
        # A tree can be huge: the call's cancellation (its run timeout) stops the walk.
        tree.check()
        inner = (*parts, *below.split("/")) if below else parts
        try:
            fd = open_directory(root, inner)
        except OSError:
            continue  # vanished, unreadable, or swapped for a link: skip it, like rg
        inside = below + "/" if below else ""
        outer = prefix + inside  # the directory, root-relative
        try:
            files, directories, links, ignores = _list_directory(tree, fd, outer, ignores, quick)
            if keep is not None and files:
                files = keep(inside, files)
            if enter is not None and directories:
                directories = enter(inside, directories)
            if links:
                links &= set(files)
                refused = {name for name in links if not tree.readable_link(outer + name)}
                if refused:
                    links -= refused
                    files = [name for name in files if name not in refused]
            files.sort()
            linked = frozenset(links) if links else _NO_LINKS
            if not directories:
                if files:
                    yield _Run(outer, inner, files, linked, fd)
                continue
        finally:
            os.close(fd)
        # Files and subdirectories in the order of their paths, pushed last first.
        keys = sorted([*files, *(name + "/" for name in directories)])
        pending: list[tuple[str, Ignores] | _Run] = []
        start = 0
        for index, key in enumerate(keys):
            if key.endswith("/"):
                if start < index:
                    pending.append(_Run(outer, inner, keys[start:index], linked))
                pending.append((inside + key[:-1], ignores))
                start = index + 1
        if start < len(keys):
            pending.append(_Run(outer, inner, keys[start:], linked))
        pending.reverse()
        waiting += pending


class _NamesOnly:
    """:func:`names_only` of the last ``Ignores`` asked, kept: a walk asks of the same tuple in
    directory after directory (hashing it for the cache costs as much as listing a directory)."""

    __slots__ = ("_ignores", "_quick")

    def __init__(self) -> None:
        self._ignores: Ignores | None = None
        self._quick: re.Pattern[str] | None = None

    def __call__(self, ignores: Ignores) -> re.Pattern[str] | None:
        if ignores is not self._ignores:
            self._ignores, self._quick = ignores, names_only(ignores)
        return self._quick


def _list_directory(
    tree: Subtree, fd: int, outer: str, ignores: Ignores, quick_of: _NamesOnly
) -> tuple[list[str], list[str], set[str], Ignores]:
    """The files of directory ``fd`` (``outer``, root-relative with its ``/``), its
    subdirectories to enter and which of the files are symbolic links, as the ignore files in
    force say (``ignores``, and a ``.gitignore`` or a repository's exclude file found here); and
    the ignore files in force below it."""
    try:
        with os.scandir(fd) as iterator:
            entries = list(iterator)
    except OSError:
        return [], [], set(), ignores  # unreadable: skip it, like rg
    files = [entry.name for entry in entries if entry.is_file(follow_symlinks=False)]
    directories: list[str] = []
    links: set[str] = set()
    if len(files) < len(entries):  # most directories hold only files
        directories = [entry.name for entry in entries if entry.is_dir(follow_symlinks=False)]
        if len(files) + len(directories) < len(entries):
            links = {entry.name for entry in entries if entry.is_symlink()}
            # A fifo, a socket, a device is none of these.
    if IGNORE_FILE in files or ".git" in directories:
        ignores = _enter(tree, fd, outer[:-1], ignores, files, directories)
    if links:
        files += links
    if not VERSION_CONTROL.isdisjoint(directories):
        directories = [name for name in directories if name not in VERSION_CONTROL]
    room = _SHORT_PATH - len(outer)
    for names in (files, directories):
        # Names are rarely too long, or being deleted: one check of all of them first.
        if names and (max(map(len, names)) > room or _ASIDE_INFIX in "/".join(names)):
            names[:] = [
                name
                for name in names
                if not moved_aside(name)
                and not (len(name) > room and len(os.fsencode(outer + name)) > MAX_PATH_BYTES)
            ]
    if ignores:
        # Most names match no rule: one call a name tells, where every rule in force is on
        # names; then only those that do are asked of the rules in turn.
        quick = quick_of(ignores)
        for names, is_dir in ((files, False), (directories, True)):
            if not names:
                continue
            maybe = names if quick is None else list(filter(quick.fullmatch, names))
            out = {name for name in maybe if ignored(ignores, outer + name, name, is_dir=is_dir)}
            if out:
                names[:] = [name for name in names if name not in out]
                links -= out
    return files, directories, links, ignores


Ignores = tuple[tuple[str, IgnoreRules], ...]
"""The ignore files in force, least precedence first: each one's directory (root-relative),
and its rules."""


_SHORT_PATH: Final = MAX_PATH_BYTES // 4


def ignores_above(tree: Subtree) -> Ignores:
    """The ignore files above the searched directory that the walk would not meet: the
    ``.gitignore`` of each directory from the root down to its parent, and below them, as git
    ranks them, the ``.git/info/exclude`` of each repository in those directories.

    Read only where the call's claims cover them (the search tools claim them:
    :func:`ignore_files_above`); one that is missing or can't be read is no rules.
    """
    parts = tree.parts
    excludes: list[tuple[str, IgnoreRules]] = []
    gitignores: list[tuple[str, IgnoreRules]] = []
    for depth in range(len(parts)):
        directory = "/".join(parts[:depth])
        inside = directory + "/" if directory else ""
        for name, found in ((EXCLUDE_FILE, excludes), (IGNORE_FILE, gitignores)):
            rules = _rules(tree.read_beside(inside + name, IGNORE_FILE_LIMIT))
            if rules is not None:
                found.append((directory, rules))
    return (*excludes, *gitignores)


def ignore_files_above(base: Path) -> list[Path]:
    """The keys of the files :func:`ignores_above` reads for a search of ``base``."""
    return [
        Path((*base.parts[:depth], *name.split("/")))
        for depth in range(len(base.parts))
        for name in (EXCLUDE_FILE, IGNORE_FILE)
    ]


def _rules(data: bytes | None) -> IgnoreRules | None:
    if not data:
        return None
    rules = IgnoreRules.parse(data.decode("utf-8", errors="replace"))
    return rules if rules.rules else None


def _enter(
    tree: Subtree,
    fd: int,
    directory: str,
    ignores: Ignores,
    files: list[str],
    directories: list[str],
) -> Ignores:
    """The ignore files in force below directory ``fd`` (``directory``, root-relative), whose
    regular files and directories are ``files`` and ``directories``: ``ignores``, then the
    ``.git/info/exclude`` of a repository there and its own ``.gitignore``, if any."""
    base_depth = len(tree.parts)
    for found, names in (((IGNORE_FILE,), files), ((".git", "info", "exclude"), directories)):
        if found[0] not in names:
            continue
        try:
            inner = open_directory(fd, found[:-1]) if len(found) > 1 else fd
        except OSError:
            continue
        try:
            data = read_searchable(inner, found[-1], IGNORE_FILE_LIMIT, "/".join(found))
        except OSError:
            continue
        finally:
            if inner != fd:
                os.close(inner)
        if tree.observed:
            below = directory.split("/")[base_depth:] if directory else []
            tree.read((*below, *found))
        rules = _rules(data)
        if rules is not None:
            # The exclude file ranks below every .gitignore, this directory's included.
            at = len(ignores) if found[0] != ".git" else _below_gitignores(ignores, directory)
            ignores = (*ignores[:at], (directory, rules), *ignores[at:])
    return ignores


def _below_gitignores(ignores: Ignores, directory: str) -> int:
    """Where an exclude file of ``directory`` goes in ``ignores``: before its own .gitignore."""
    if ignores and ignores[-1][0] == directory:
        return len(ignores) - 1
    return len(ignores)

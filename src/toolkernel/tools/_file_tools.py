"""The built-in tools that read and change files: Read, Write, Edit, MultiEdit, ListDir, Move,
Delete.

Each declares its claims from its arguments and touches files only through ``ctx.fs``, which
checks every access against those claims. Read and ListDir only read (``ahead=True``): a call
of them emitted after a sandboxed Bash command that writes what it reads runs at once, beside
it, and runs again once the command has committed if that changed what it read, so it returns
what it would have returned after the command (``toolkernel.kernel._ahead``). After a Write,
an Edit or any call that writes directly, it waits, as ever.

Failures raise :class:`ToolError` with a message the model can act on (the kernel turns it into
an ERROR result); an undeclared access or a path that changed under the call is left to raise
as itself, so the result names it.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import functools
import io
import itertools
import operator
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, AnyStr, Final, NamedTuple, TypedDict

import anyio.from_thread
import anyio.to_thread

from .._errors import NoWorkspaceError, PathChangedError, ToolError, UndeclaredAccessError
from ..kernel import KeyFunction, ToolContext
from ..locks import Claim, exclusive
from . import _fileops
from ._declare import FunctionTool, tool
from ._fs import Entry, FileAccess, entry_keys
from ._line_match import text_lines

__all__ = [
    "TEXT_SIZE_LIMIT",
    "delete",
    "edit",
    "fs_of",
    "list_dir",
    "move",
    "multi_edit",
    "read",
    "text_lines",
    "write",
]

READ_LINE_LIMIT = 2000
READ_LINE_WIDTH = 2000
LIST_LIMIT = 1000
"""The most entries ListDir shows (sorted by name); it says how many more there are."""
TEXT_SIZE_LIMIT = 16 * 1024 * 1024
"""The largest file Edit and MultiEdit take (bytes), refused unread if larger; and the most
bytes of a file's lines Read keeps at once (it reads any part of a larger file)."""
WHOLE_READ: Final = 2 << 20
"""Files up to this size (bytes) Read reads whole, so it counts the lines it does not show and
checks that all of it is UTF-8; of a larger one it reads only up to the last line it shows, as
``head`` does (counting the lines of 12 MiB took four times as long as ``head -n 2000``),
whatever its size."""
LINE_NUMBER_LIMIT: Final = sys.maxsize // 2
"""Read takes a larger ``offset`` or ``limit`` as this one: no file has so many lines, and the
two add up to a number C's ``ssize_t`` still holds (``str.split`` takes it)."""
BINARY_PROBE: Final = 8192
"""A NUL in a file's first 8 KiB makes it binary: it is not shown as text."""
_FIRST_CHUNK: Final = 1 << 16


def fs_of(ctx: ToolContext) -> FileAccess:
    try:
        fs = ctx.fs
    except NoWorkspaceError:
        fs = None
    if not isinstance(fs, FileAccess):
        raise ToolError(f"{ctx.tool_name} needs a workspace: open the kernel with root=...")
    return fs


def _a_file(file_path: str) -> None:
    """Refuse a file's path that ends in '/': it names a directory, as every system call reads
    it (``cat f/`` and ``sed -i`` on it say "Not a directory", ``echo x > new/`` "Is a
    directory"), where the workspace's key of it drops the '/'."""
    if file_path.endswith("/") and file_path.strip("/"):
        raise ToolError(
            f"{file_path!r} ends in '/', so it names a directory, not a file; give the file's "
            "path without the '/'"
        )


async def _read_data(fs: FileAccess, file_path: str, *, fresh: bool = False) -> bytes:
    """Read a file that is not binary (one thread hop) or raise a ToolError saying why not; with
    ``fresh``, only as the agent last saw it (``StaleViewError`` otherwise, see ``_views``)."""
    _a_file(file_path)
    with _read_failures(file_path):
        data = await fs.read_bytes(file_path, max_bytes=TEXT_SIZE_LIMIT, fresh=fresh)
    _refuse_binary(data, file_path)
    return data


class _Head(NamedTuple):
    data: bytes
    """The file's lines from number ``lines_before + 1``, as many as were asked for."""
    whole: bool
    """True iff the file holds nothing more."""
    lines_before: int = 0
    """Lines read and left out before ``data`` (they were counted, not kept)."""
    bytes_before: int = 0
    """Their bytes."""
    bad: int | None = None
    """Where a byte that is not UTF-8 is in the lines left out, if one is."""


async def _read_head(fs: FileAccess, file_path: str, skip: int, lines: int) -> _Head:
    """The lines of a file that is not binary from number ``skip + 1`` (or from an earlier one)
    up to the end of its line number ``lines`` (one thread hop); else a ToolError saying why
    not. A file of any size: only the lines kept count against :data:`TEXT_SIZE_LIMIT`, and a
    cancelled call (its deadline passed) stops it between two chunks."""
    _a_file(file_path)
    with _read_failures(file_path):
        try:
            head = await fs.read_with(
                file_path,
                lambda file: _head(
                    file, lines, skip=skip, checkpoint=anyio.from_thread.check_cancelled
                ),
                as_seen=True,
            )
        except OSError as exc:
            if exc.errno != errno.EFBIG:
                raise
            limit = f"{TEXT_SIZE_LIMIT >> 20} MiB"
            if lines == skip + 1:  # one line: no smaller window shows it
                raise ToolError(
                    f"can't show line {lines} of {file_path!r}: it alone holds more than {limit}, "
                    "more than Read shows at once; read the lines around it (an offset past it "
                    "shows the rest), or look into it with Grep or Bash (head -c, cut -c)"
                ) from None
            raise ToolError(
                f"can't show lines {skip + 1} to {lines} of {file_path!r}: they (or a line just "
                f"before them) hold more than {limit}, more than Read shows at once; pass offset "
                "and a smaller limit"
            ) from None
    if not head.bytes_before:  # else its first bytes were found not binary before
        _refuse_binary(head.data, file_path)
    return head


def _no_check() -> None:
    pass


def _head(
    file: io.FileIO,
    lines: int,
    whole_read: int = WHOLE_READ,
    skip: int = 0,
    checkpoint: Callable[[], None] = _no_check,
) -> _Head:
    """The start of ``file`` up to the end of its line number ``lines`` (1-based), or all of
    it (then whole) if it has no more or if it is at most ``whole_read`` bytes.

    Of a file read in part, the lines before number ``skip + 1`` are counted and left out as
    they are read (all but the last line begun in each chunk, until that line): splitting off
    and decoding the 100,000 lines before a window took twice as long as ``sed`` takes to show
    it. So a file of any size can be read in part; what is kept (the window, and a line begun
    before it) is refused with ``EFBIG`` past :data:`TEXT_SIZE_LIMIT`. ``checkpoint`` is called
    before each chunk (to stop a cancelled call). A binary file (a NUL in its first
    :data:`BINARY_PROBE` bytes) gives its first chunk.
    """
    whole = os.fstat(file.fileno()).st_size <= whole_read
    chunks: list[bytes] = []
    size, ends, step = 0, 0, _FIRST_CHUNK
    lines_before, bytes_before, bad = 0, 0, None
    # What is left out is checked as UTF-8 as it goes: a line longer than what is kept (left
    # out a chunk at a time) may be cut inside a character.
    left_out = codecs.getincrementaldecoder("utf-8")()
    in_long_line = False  # bytes of a line left out were let go before its end was seen
    while True:
        checkpoint()
        chunk = file.read(step)
        if not chunk:
            if in_long_line and ends == lines_before:  # the last line, left out, had no end
                if bad is None:
                    try:  # its last bytes, held yet, and a character it ends inside
                        left_out.decode(b"".join(chunks), final=True)
                    except UnicodeDecodeError as exc:
                        bad = bytes_before + exc.start
                return _Head(b"", True, lines_before + 1, size, bad)
            return _Head(_kept(b"".join(chunks), file), True, lines_before, bytes_before, bad)
        if not size and chunk.find(b"\x00", 0, BINARY_PROBE) >= 0:
            return _Head(chunk, whole)  # binary: refused by its first bytes, kept
        chunks.append(chunk)
        size += len(chunk)
        if not whole:
            ends += chunk.count(b"\n")
            if lines_before < skip and ends > lines_before:
                pending = b"".join(chunks) if len(chunks) > 1 else chunk
                if ends >= skip:  # line skip + 1 has begun: keep from its start
                    rest = pending.split(b"\n", skip - lines_before)[-1]
                    lines_before = skip
                else:
                    rest = pending[pending.rfind(b"\n") + 1 :]
                    lines_before = ends
                cut = len(pending) - len(rest)
                if bad is None and not pending.isascii():
                    try:
                        left_out.decode(pending[:cut])
                    except UnicodeDecodeError as exc:
                        bad = bytes_before + exc.start
                bytes_before += cut
                chunks, in_long_line = [rest], False
            elif lines_before < skip and size - bytes_before > _fileops.CHUNK:
                # All in a line left out, not ended yet, and long: nothing of it to keep (a
                # line longer than what is kept would otherwise hide every line after it).
                pending = b"".join(chunks) if len(chunks) > 1 else chunk
                if bad is None and not pending.isascii():
                    try:
                        left_out.decode(pending)
                    except UnicodeDecodeError as exc:
                        bad = bytes_before + exc.start
                bytes_before += len(pending)
                chunks, in_long_line = [], True
            if ends > lines:  # the line after the last one wanted has begun: more follow
                data = b"".join(chunks) if len(chunks) > 1 else chunks[0]
                # One split finds the end of the last line wanted (a call a line was a fifth
                # of a Read).
                rest = data.split(b"\n", lines - lines_before)[-1]
                data = _kept(data[: len(data) - len(rest)], file)
                return _Head(data, False, lines_before, bytes_before, bad)
        if size - bytes_before > TEXT_SIZE_LIMIT:  # too much kept (or a small file grew)
            raise _fileops.too_large((str(file.name),), None, TEXT_SIZE_LIMIT)
        step = min(step * 2, _fileops.CHUNK)


def _kept(data: bytes, file: io.FileIO) -> bytes:
    """``data``, the lines of ``file`` :func:`_head` keeps, if they fit in
    :data:`TEXT_SIZE_LIMIT`; else ``EFBIG``."""
    if len(data) > TEXT_SIZE_LIMIT:
        raise _fileops.too_large((str(file.name),), None, TEXT_SIZE_LIMIT)
    return data


@contextlib.contextmanager
def _read_failures(file_path: str) -> Iterator[None]:
    """Turn what the file system refuses into a ToolError saying plainly why."""
    try:
        yield
    except (UndeclaredAccessError, PathChangedError):
        raise  # the kernel reports these under their own names
    except FileNotFoundError:
        raise ToolError(f"file {file_path!r} does not exist") from None
    except IsADirectoryError:
        raise ToolError(f"{file_path!r} is a directory, not a file; use ListDir or Glob") from None
    except NotADirectoryError:
        raise ToolError(f"{file_path!r} does not exist (a parent is a file)") from None
    except OSError as exc:
        if exc.errno == errno.EINVAL:  # a fifo or a device, refused before it was read
            raise ToolError(f"{file_path!r} is {exc.strerror}") from None
        if exc.errno == errno.EFBIG:  # refused before it was read
            raise ToolError(
                f"{file_path!r} is {exc.strerror}; Edit and MultiEdit take files up to "
                f"{TEXT_SIZE_LIMIT >> 20} MiB (Read shows any part of a larger one: pass offset "
                f"and limit)"
            ) from None
        raise ToolError(f"can't read {file_path!r}: {exc.strerror or exc}") from None


def _refuse_binary(data: bytes, file_path: str) -> None:
    if b"\x00" in data[:BINARY_PROBE]:
        raise ToolError(f"{file_path!r} is a binary file; it can't be shown as text")


def _decoded(data: bytes, file_path: str, before: int = 0) -> str:
    """``data`` decoded, or a ToolError naming the bad byte (``before`` bytes precede it)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(file_path, before + exc.start) from None


def _not_utf8(file_path: str, offset: int) -> ToolError:
    return ToolError(
        f"{file_path!r} is not UTF-8 text (bad byte at offset {offset}); it can't be edited as text"
    )


# -- Read / Write / Edit / MultiEdit -----------------------------------------------------------


@tool(reads=["file_path"], name="Read", ahead=True)
async def read(
    ctx: ToolContext, file_path: str, offset: int | None = None, limit: int | None = None
) -> str:
    """Read a text file; lines come numbered like `cat -n`.

    Args:
        file_path: The file to read, relative to the workspace root (or absolute inside it).
        offset: The line number to start at (1-based). Defaults to the first line.
        limit: How many lines to read. Defaults to 2000.
    """
    if offset is not None and offset < 1:
        raise ToolError(f"offset must be a line number from 1, not {offset}")
    if limit is not None and limit < 1:
        raise ToolError(f"limit must be at least 1, not {limit}")
    start = min(offset or 1, LINE_NUMBER_LIMIT) - 1
    count = min(limit or READ_LINE_LIMIT, LINE_NUMBER_LIMIT)
    head = await _read_head(fs_of(ctx), file_path, start, start + count)
    data, whole, before = head.data, head.whole, head.lines_before
    if head.bad is not None:
        raise _not_utf8(file_path, head.bad)
    # ASCII is decoded at the speed of a copy (no check of each byte), and is valid UTF-8.
    text = data.decode("ascii") if data.isascii() else _decoded(data, file_path, head.bytes_before)
    lines, total = _line_window(text, start - before, count)
    total += before
    if not total:
        return f"(file {file_path!r} is empty)"
    if start >= total:
        raise ToolError(f"offset {offset} is past the end of {file_path!r} ({total} lines)")
    shown = _numbered(lines, start + 1)
    if not whole:
        shown += f"\n... (more lines follow; use offset={start + count + 1} to read on)"
    elif start + count < total:
        shown += f"\n... ({total - start - count} more lines; use offset to read on)"
    return shown


def _line_window(text: AnyStr, start: int, count: int) -> tuple[list[AnyStr], int]:
    """Lines ``start`` to ``start + count`` of ``text`` (0-based, as :func:`text_lines` splits
    them), and how many lines it has in all.

    Only the lines shown are split off; the others are counted where they lie, a chunk at a
    time (:func:`_skip_lines`): splitting a 16 MiB log into its lines took 30 times as long as
    ``head`` takes to show 2,000 of them, and splitting off the 100,000 lines before a window
    four times as long as ``sed`` takes to show it.
    """
    newline = "\n" if isinstance(text, str) else b"\n"
    carriage = "\r" if isinstance(text, str) else b"\r"
    size = len(text)
    begin, skipped = _skip_lines(text, 0, start, newline)
    if skipped < start:  # the text ends before the window
        return [], skipped + (1 if text and not text.endswith(newline) else 0)
    stop = min(begin + _SKIP_CHUNK, size)
    shown = text[begin:stop].split(newline, count)
    if len(shown) > count:  # the window ends in the first chunk (most do): split once
        end = stop - len(shown.pop())
    else:
        end, taken = _skip_lines(text, begin, count, newline)
        if taken < count:
            end = size  # the window runs to the end (a last line may have no line end)
        shown = text[begin:end].split(newline)
        if shown[-1] == text[:0]:
            shown.pop()  # after the last line end
    total = start + len(shown)
    if end < size:
        total += text.count(newline, end) + (0 if text.endswith(newline) else 1)
    if text.find(carriage, begin, end) < 0:
        return shown, total
    return [line[:-1] if line.endswith(carriage) else line for line in shown], total


_SKIP_CHUNK: Final = 1 << 18


def _skip_lines(text: AnyStr, position: int, lines: int, newline: AnyStr) -> tuple[int, int]:
    """Where the text after ``lines`` line ends from ``position`` starts, and ``lines``; or, if
    it has fewer, the end of ``text`` and how many it has. Counted a chunk at a time, in C."""
    size, passed = len(text), 0
    while passed < lines and position < size:
        stop = min(position + _SKIP_CHUNK, size)
        found = text.count(newline, position, stop)
        if passed + found >= lines:
            # The last line end wanted is in this chunk: one split finds it.
            rest = text[position:stop].split(newline, lines - passed)[-1]
            return stop - len(rest), lines
        passed += found
        position = stop
    return (position if passed == lines else size), passed


def _numbered(lines: list[str], first: int) -> str:
    """``lines`` numbered from ``first`` as ``cat -n`` numbers them, each cut at
    :data:`READ_LINE_WIDTH` characters; built in C loops (a Python loop a line was a third of
    a Read of 2,000 lines)."""
    if lines and max(map(len, lines)) > READ_LINE_WIDTH:
        lines = [
            line[:READ_LINE_WIDTH] + " [line cut]" if len(line) > READ_LINE_WIDTH else line
            for line in lines
        ]
    return "\n".join(map(operator.add, _numbers(first, len(lines)), lines))


@functools.lru_cache(maxsize=4)
def _numbers(first: int, count: int) -> tuple[str, ...]:
    """The line numbers ``first`` to ``first + count`` as ``cat -n`` shows them (``     1\t``),
    kept for the next Read of the same window (most are of the first 2,000 lines)."""
    numbers = map(str.rjust, map(str, range(first, first + count)), itertools.repeat(6))
    return tuple(map(operator.add, numbers, itertools.repeat("\t")))


@tool(writes=["file_path"], name="Write")
async def write(ctx: ToolContext, file_path: str, content: str) -> str:
    """Create or overwrite a file with the given content (atomically).

    Args:
        file_path: The file to write, relative to the workspace root.
        content: The whole new content of the file.
    """
    fs = fs_of(ctx)
    _a_file(file_path)
    existed = await fs.exists(file_path)
    await _write_text(fs, file_path, content, parents=True)
    verb = "overwrote" if existed else "created"
    return f"{verb} {file_path} ({len(text_lines(content))} lines)"


async def _write_text(fs: FileAccess, file_path: str, text: str | bytes, *, parents: bool) -> None:
    """Write a text file (``text``, or it encoded by :func:`_encoded`) atomically, only over the
    file as the agent last saw it (see ``_views``), or raise a ToolError saying plainly why not;
    an error the file system reports for other reasons (permissions, a full disk) is left to
    name itself."""
    _a_file(file_path)
    try:
        if isinstance(text, bytes):
            await fs.write_bytes(file_path, text, parents=parents, fresh=True)
        else:
            await fs.write_text(file_path, text, parents=parents, fresh=True)
    except IsADirectoryError:
        raise ToolError(f"{file_path!r} is a directory; give a file path") from None
    except (NotADirectoryError, FileExistsError):  # mkdir of the parents meets a file
        raise ToolError(f"can't create {file_path!r}: a parent of it is a file") from None
    except UnicodeEncodeError as exc:
        raise _unencodable(file_path, exc) from None
    except OSError as exc:
        if exc.errno == errno.EINVAL and exc.strerror and "regular file" in exc.strerror:
            raise ToolError(f"{file_path!r} is {exc.strerror}; Delete it first") from None
        raise


def _encoded(text: str, file_path: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _unencodable(file_path, exc) from None


def _unencodable(file_path: str, exc: UnicodeEncodeError) -> ToolError:
    bad = exc.object[exc.start : exc.end]
    return ToolError(
        f"the text for {file_path!r} holds {bad!r} at position {exc.start}, a lone surrogate "
        f"that is not a character and can't be written as UTF-8; send the character itself"
    )


async def _edit_file(fs: FileAccess, file_path: str, edits: Sequence[EditSpec], tool: str) -> int:
    """Make ``edits`` to a file, in order, all or none, and return how many occurrences the
    last one replaced; or raise a ToolError saying why not (nothing written).

    Three thread hops: the read (only of the file as the agent last saw it), the edits, the
    write. The edits run in a worker thread, as the I/O does, so a big file never holds up the
    event loop (300 edits to 15 MiB took 5.6 s); a cancelled call (its deadline passed) stops
    between two edits, and the file is left as it was.
    """
    data = await _read_data(fs, file_path, fresh=True)
    updated, count = await anyio.to_thread.run_sync(
        _edited, data, file_path, edits, tool, anyio.from_thread.check_cancelled
    )
    await _write_text(fs, file_path, updated, parents=False)
    return count


def _edited(
    data: bytes,
    file_path: str,
    edits: Sequence[EditSpec],
    tool: str,
    checkpoint: Callable[[], None] = _no_check,
) -> tuple[bytes, int]:
    """``data`` decoded, with ``edits`` made in order and encoded again, and how many
    occurrences the last edit replaced; ``checkpoint`` is called before each edit."""
    text = _decoded(data, file_path)
    # Read shows CRLF lines without their \r, so a model's new_string has bare \n: in a file
    # whose every line ends with \r\n, both strings end their lines as the file does.
    crlf = "\r\n" in text and text.count("\n") == text.count("\r\n")
    count = 0
    for number, spec in enumerate(edits, 1):
        checkpoint()
        text, count = _apply_edit(
            text,
            file_path,
            spec["old_string"],
            spec["new_string"],
            spec.get("replace_all", False),
            which=f"edit {number} of {len(edits)}: " if tool == "MultiEdit" else "",
            crlf=crlf,
        )
    checkpoint()
    return _encoded(text, file_path), count


def _apply_edit(
    text: str,
    file_path: str,
    old: str,
    new: str,
    replace_all: bool,
    which: str = "",
    *,
    crlf: bool = False,
) -> tuple[str, int]:
    """``text`` with the edit made, and how many occurrences it replaced; with ``crlf`` (every
    line of the file ends with ``\\r\\n``), ``old`` and ``new`` end their lines so too."""
    if old == "":
        raise ToolError(f"{which}old_string is empty; to create a file use Write")
    if old == new:
        raise ToolError(f"{which}old_string and new_string are the same; nothing would change")
    if crlf:
        old, new = _crlf(old), _crlf(new)
    at = text.find(old)
    if at < 0 and "\n" in old and "\r\n" in text:
        # A file with some CRLF lines: an old_string spanning lines (with bare \n, as Read
        # shows them) may match as the file spells them, keeping them in new_string.
        old, new = _crlf(old), _crlf(new)
        at = text.find(old)
    if at < 0:
        raise ToolError(
            f"{which}old_string was not found in {file_path}; it must match the file exactly, "
            f"including whitespace and indentation (Read the file first)"
        )
    if replace_all:
        return text.replace(old, new), text.count(old)  # what str.replace replaces: no overlaps
    places = _places(text, old, at)
    if places > 1:
        times = (
            f"{places} times" if places <= _PLACES_COUNTED else f"more than {_PLACES_COUNTED} times"
        )
        raise ToolError(
            f"{which}old_string occurs {times} in {file_path}; add surrounding lines to make "
            f"it unique, or set replace_all to change every occurrence"
        )
    return text.replace(old, new, 1), 1


_PLACES_COUNTED: Final = 1000


def _places(text: str, old: str, first: int) -> int:
    """How many places in ``text`` ``old`` starts at from ``first`` (where it is first found,
    or -1), overlapping ones too (``"}\\n}\\n"`` twice in ``"}\\n}\\n}\\n"``; ``str.count``
    counts none that overlap), counted up to one more than :data:`_PLACES_COUNTED`. Of a
    unique ``old``, one search of the text after ``first``."""
    places, at = 0, first
    while at >= 0 and places <= _PLACES_COUNTED:
        places += 1
        at = text.find(old, at + 1)
    return places


def _crlf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


@tool(writes=["file_path"], name="Edit")
async def edit(
    ctx: ToolContext, file_path: str, old_string: str, new_string: str, replace_all: bool = False
) -> str:
    """Replace exact text in a file. old_string must be unique unless replace_all is set.

    Args:
        file_path: The file to edit.
        old_string: The exact text to replace.
        new_string: The text to put in its place.
        replace_all: Replace every occurrence instead of exactly one.
    """
    spec: EditSpec = {
        "old_string": old_string,
        "new_string": new_string,
        "replace_all": replace_all,
    }
    count = await _edit_file(fs_of(ctx), file_path, [spec], "Edit")
    return f"edited {file_path}: replaced {count} occurrence{'s' if count > 1 else ''}"


class _EditRequired(TypedDict):
    old_string: str
    new_string: str


class EditSpec(_EditRequired, total=False):
    # total=False rather than NotRequired: it survives postponed annotations.
    replace_all: bool


@tool(writes=["file_path"], name="MultiEdit")
async def multi_edit(ctx: ToolContext, file_path: str, edits: list[EditSpec]) -> str:
    """Apply several exact-text edits to one file, in order: all of them or none.

    Args:
        file_path: The file to edit.
        edits: The edits, each {old_string, new_string, replace_all?}, applied one after another.
    """
    if not edits:
        raise ToolError("edits is empty; give at least one edit")
    await _edit_file(fs_of(ctx), file_path, edits, "MultiEdit")
    return f"applied {len(edits)} edits to {file_path}"


# -- ListDir ---------------------------------------------------------------------------------------


@tool(reads=["path"], name="ListDir", ahead=True)
async def list_dir(ctx: ToolContext, path: str = ".") -> str:
    """List a directory; subdirectories end with `/`, symbolic links show `-> target`.

    Args:
        path: The directory. Defaults to the workspace root.
    """
    try:
        # Links are shown, never followed: their targets may lie outside what this call holds.
        entries, total = await fs_of(ctx).list_first_entries(path, LIST_LIMIT)
    except FileNotFoundError:
        raise ToolError(f"directory {path!r} does not exist") from None
    except NotADirectoryError:
        raise ToolError(f"{path!r} is a file, not a directory; use Read") from None
    if not entries:
        return f"(directory {path} is empty)"
    shown = "\n".join(_shown(entry) for entry in entries)
    more = total - LIST_LIMIT
    if more > 0:
        shown += f"\n... ({more} more entries; use Glob with a pattern to narrow the listing)"
    return shown


def _shown(entry: Entry) -> str:
    if entry.kind == "directory":
        return entry.name + "/"
    if entry.kind == "symlink":
        return f"{entry.name} -> {entry.link_target or '?'}"
    return entry.name


# -- Move / Delete ------------------------------------------------------------------------------


class _EntryTool(FunctionTool):
    """A tool changing the directory entries its ``writes`` arguments name (Delete, Move): a
    symbolic link is claimed, and changed, itself (``entry_keys``), not only its target, as
    ``rm`` and ``mv`` change the link."""

    def claims(self, arguments: Mapping[str, Any], key: KeyFunction) -> Sequence[Claim] | None:
        return [
            exclusive(found)
            for argument in self.writes
            for found in entry_keys(key, arguments[argument])
        ]


async def _move(ctx: ToolContext, source: str, destination: str) -> str:
    """Move or rename a file or directory.

    Args:
        source: What to move.
        destination: Its new path (not a directory to move it into).
    """
    fs = fs_of(ctx)
    if not await fs.exists(source, follow_links=False):
        raise ToolError(f"can't move {source!r}: it does not exist")
    src_key, dst_key = fs.entry_key(source), fs.entry_key(destination)
    if dst_key == src_key:
        raise ToolError(f"can't move {source!r} to {destination!r}: they are the same file")
    if await fs.exists(destination, follow_links=False):
        raise ToolError(f"can't move to {destination!r}: it already exists; Delete it first")
    if dst_key.is_relative_to(src_key):
        raise ToolError(f"can't move {source!r} into itself")
    try:
        # No replace: something created there since the check (by another process) is kept.
        await fs.move(source, destination, parents=True, replace=False)
    except FileExistsError:
        raise ToolError(
            f"can't move to {destination!r}: it already exists; Delete it first"
        ) from None
    return f"moved {source} to {destination}"


async def _delete(ctx: ToolContext, path: str) -> str:
    """Delete a file, or a directory with everything in it.

    Args:
        path: What to delete.
    """
    fs = fs_of(ctx)
    if not await fs.exists(path, follow_links=False):
        raise ToolError(f"can't delete {path!r}: it does not exist")
    if path.endswith("/") and path.strip("/") and not await fs.is_dir(path):
        raise ToolError(f"can't delete {path!r}: it is not a directory, which '/' at its end names")
    if not fs.entry_key(path).parts:
        raise ToolError("can't delete the workspace root")
    await fs.delete(path)
    return f"deleted {path}"


move = _EntryTool(_move, writes=["source", "destination"], name="Move")
delete = _EntryTool(_delete, writes=["path"], name="Delete")

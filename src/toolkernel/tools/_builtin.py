"""The built-in coding tools, named and shaped like the tools models are trained on.

Each declares its claims from its arguments, and touches files only through ``ctx.fs``, which
checks every access against those claims. Failures raise :class:`ToolError` with a message the
model can act on (the kernel turns it into an ERROR result).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import stat
import subprocess
from collections.abc import Mapping
from typing import Any, Literal, TypedDict

import trio

from .._errors import InvalidClaimError, ToolError
from ..kernel import ToolContext
from ..locks import Claim, device, exclusive, path, shared, writes
from ._declare import Tool, tool
from ._fs import FileAccess

__all__ = ["builtin_tools", "is_read_only_command", "glob_to_regex"]

READ_LINE_LIMIT = 2000
READ_LINE_WIDTH = 2000
RESULT_LIMIT = 1000
BASH_OUTPUT_LIMIT = 30_000
BASH_DEFAULT_TIMEOUT_MS = 120_000
BASH_MAX_TIMEOUT_MS = 600_000


def _fs(ctx: ToolContext) -> FileAccess:
    if not isinstance(ctx.fs, FileAccess):
        raise ToolError(f"{ctx.tool_name} needs a workspace: open the kernel with root=...")
    return ctx.fs


async def _read_text(fs: FileAccess, file_path: str) -> str:
    """Read a text file or raise a ToolError saying plainly why not."""
    try:
        # A pipe or a device would block the worker thread for good (and the kernel's close).
        mode = (await fs.stat(file_path)).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise ToolError(f"{file_path!r} is not a regular file (a pipe, socket or device)")
        data = await fs.read_bytes(file_path)
    except FileNotFoundError:
        raise ToolError(f"file {file_path!r} does not exist") from None
    except IsADirectoryError:
        raise ToolError(f"{file_path!r} is a directory, not a file; use ListDir or Glob") from None
    except NotADirectoryError:
        raise ToolError(f"{file_path!r} does not exist (a parent is a file)") from None
    if b"\x00" in data[:8192]:
        raise ToolError(f"{file_path!r} is a binary file; it can't be shown as text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{file_path!r} is not UTF-8 text (bad byte at offset {exc.start}); it can't be edited "
            f"as text"
        ) from None


# -- Read / Write / Edit / MultiEdit -----------------------------------------------------------


@tool(reads=["file_path"], name="Read")
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
    text = await _read_text(_fs(ctx), file_path)
    lines = text.splitlines()
    start = (offset or 1) - 1
    count = limit or READ_LINE_LIMIT
    if not lines:
        return f"(file {file_path!r} is empty)"
    if start >= len(lines):
        raise ToolError(f"offset {offset} is past the end of {file_path!r} ({len(lines)} lines)")
    shown = []
    for number, line in enumerate(lines[start : start + count], start + 1):
        if len(line) > READ_LINE_WIDTH:
            line = line[:READ_LINE_WIDTH] + " [line cut]"
        shown.append(f"{number:>6}\t{line}")
    if start + count < len(lines):
        shown.append(f"... ({len(lines) - start - count} more lines; use offset to read on)")
    return "\n".join(shown)


@tool(writes=["file_path"], name="Write")
async def write(ctx: ToolContext, file_path: str, content: str) -> str:
    """Create or overwrite a file with the given content (atomically).

    Args:
        file_path: The file to write, relative to the workspace root.
        content: The whole new content of the file.
    """
    fs = _fs(ctx)
    if await fs.is_dir(file_path):
        raise ToolError(f"{file_path!r} is a directory; give a file path")
    existed = await fs.exists(file_path)
    try:
        await fs.write_text(file_path, content, parents=True)
    except (NotADirectoryError, FileExistsError):  # mkdir of the parents meets a file
        raise ToolError(f"can't create {file_path!r}: a parent of it is a file") from None
    verb = "overwrote" if existed else "created"
    return f"{verb} {file_path} ({len(content.splitlines())} lines)"


def _apply_edit(
    text: str, file_path: str, old: str, new: str, replace_all: bool, which: str = ""
) -> str:
    if old == "":
        raise ToolError(f"{which}old_string is empty; to create a file use Write")
    if old == new:
        raise ToolError(f"{which}old_string and new_string are the same; nothing would change")
    found = text.count(old)
    if found == 0:
        raise ToolError(
            f"{which}old_string was not found in {file_path}; it must match the file exactly, "
            f"including whitespace and indentation (Read the file first)"
        )
    if found > 1 and not replace_all:
        raise ToolError(
            f"{which}old_string occurs {found} times in {file_path}; add surrounding lines to make "
            f"it unique, or set replace_all to change every occurrence"
        )
    return text.replace(old, new) if replace_all else text.replace(old, new, 1)


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
    fs = _fs(ctx)
    text = await _read_text(fs, file_path)
    updated = _apply_edit(text, file_path, old_string, new_string, replace_all)
    await fs.write_text(file_path, updated)
    count = text.count(old_string) if replace_all else 1
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
    fs = _fs(ctx)
    text = await _read_text(fs, file_path)
    for number, spec in enumerate(edits, 1):
        text = _apply_edit(
            text,
            file_path,
            spec["old_string"],
            spec["new_string"],
            spec.get("replace_all", False),
            which=f"edit {number} of {len(edits)}: ",
        )
    await fs.write_text(file_path, text)
    return f"applied {len(edits)} edits to {file_path}"


# -- Glob / Grep / ListDir ------------------------------------------------------------------


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob: ``**`` (any directories), ``*``, ``?``, ``[...]``, ``{a,b}``."""
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end
        elif c == "{":
            end = pattern.find("}", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                options = pattern[i + 1 : end].split(",")
                # Each option's body, without the "(?s:" ... ")\Z" wrapper its regex comes in.
                out.append("(?:" + "|".join(glob_to_regex(o).pattern[4:-3] for o in options) + ")")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("(?s:" + "".join(out) + r")\Z")


def _compile_glob(pattern: str) -> re.Pattern[str]:
    try:
        return glob_to_regex(pattern)
    except re.error as exc:
        raise ToolError(f"glob {pattern!r} is not a valid pattern: {exc.msg}") from None


def _relative_to(base: str, file: str) -> str:
    if base in ("", "."):
        return file
    return file[len(base) + 1 :] if file.startswith(base + "/") else file


def _base_key(fs: FileAccess, given: str) -> str:
    return fs.workspace.display(fs.workspace.key(given))


async def _files_under(fs: FileAccess, given: str) -> tuple[str, list[str]]:
    try:
        files = await fs.walk(given)
    except FileNotFoundError:
        raise ToolError(f"path {given!r} does not exist") from None
    return _base_key(fs, given), files


@tool(reads=["path"], name="Glob")
async def glob(ctx: ToolContext, pattern: str, path: str = ".") -> str:
    """Find files by glob pattern (`**/*.py`, `src/*.{js,ts}`) under a directory.

    Args:
        pattern: The glob, matched against paths relative to `path`.
        path: The directory to search. Defaults to the workspace root.
    """
    fs = _fs(ctx)
    base, files = await _files_under(fs, path)
    matcher = _compile_glob(pattern)
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
    output_mode: Literal["files_with_matches", "content", "count"] = "files_with_matches",
) -> str:
    """Search file contents with a regular expression.

    Args:
        pattern: A Python regular expression.
        path: The file or directory to search. Defaults to the workspace root.
        glob: Only search files whose path (or name) matches this glob, e.g. `*.py`.
        output_mode: `files_with_matches` (paths), `content` (matching lines), or `count`.
    """
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None
    fs = _fs(ctx)
    base, files = await _files_under(fs, path)
    if glob is not None:
        matcher = _compile_glob(glob)
        files = [
            f
            for f in files
            if matcher.match(_relative_to(base, f)) or matcher.match(f.rsplit("/", 1)[-1])
        ]
    lines: list[str] = []
    for file in files:
        try:
            data = await fs.read_bytes(file)
        except OSError:
            continue  # vanished or unreadable: not a match
        if b"\x00" in data[:8192]:
            continue
        text = data.decode("utf-8", errors="replace")
        if output_mode == "files_with_matches":
            if regex.search(text):
                lines.append(file)
        elif output_mode == "count":
            count = sum(1 for line in text.splitlines() if regex.search(line))
            if count:
                lines.append(f"{file}:{count}")
        else:
            for number, line in enumerate(text.splitlines(), 1):
                if regex.search(line):
                    lines.append(f"{file}:{number}:{line[:READ_LINE_WIDTH]}")
        if len(lines) > RESULT_LIMIT:
            break
    if not lines:
        return f"no matches for {pattern!r} under {path}"
    more = len(lines) > RESULT_LIMIT
    return "\n".join(lines[:RESULT_LIMIT]) + ("\n... (more results cut)" if more else "")


@tool(reads=["path"], name="ListDir")
async def list_dir(ctx: ToolContext, path: str = ".") -> str:
    """List a directory; subdirectories end with `/`.

    Args:
        path: The directory. Defaults to the workspace root.
    """
    fs = _fs(ctx)
    try:
        names = await fs.listdir(path)
    except FileNotFoundError:
        raise ToolError(f"directory {path!r} does not exist") from None
    except NotADirectoryError:
        raise ToolError(f"{path!r} is a file, not a directory; use Read") from None
    if not names:
        return f"(directory {path} is empty)"
    base = _base_key(fs, path)
    shown = []
    for name in names:
        child = name if base == "." else f"{base}/{name}"
        try:
            shown.append(name + "/" if await fs.is_dir(child) else name)
        except InvalidClaimError:
            shown.append(f"{name} (a link that leads outside the workspace)")
    return "\n".join(shown)


# -- Move / Delete ---------------------------------------------------------------------------


@tool(writes=["source", "destination"], name="Move")
async def move(ctx: ToolContext, source: str, destination: str) -> str:
    """Move or rename a file or directory.

    Args:
        source: What to move.
        destination: Its new path (not a directory to move it into).
    """
    fs = _fs(ctx)
    if not await fs.exists(source):
        raise ToolError(f"can't move {source!r}: it does not exist")
    if await fs.exists(destination):
        raise ToolError(f"can't move to {destination!r}: it already exists; Delete it first")
    src_key, dst_key = fs.workspace.key(source), fs.workspace.key(destination)
    if dst_key.is_relative_to(src_key):
        raise ToolError(f"can't move {source!r} into itself")
    await fs.move(source, destination, parents=True)
    return f"moved {source} to {destination}"


@tool(writes=["path"], name="Delete")
async def delete(ctx: ToolContext, path: str) -> str:
    """Delete a file, or a directory with everything in it.

    Args:
        path: What to delete.
    """
    fs = _fs(ctx)
    if not await fs.exists(path):
        raise ToolError(f"can't delete {path!r}: it does not exist")
    if not fs.workspace.key(path).parts:
        raise ToolError("can't delete the workspace root")
    await fs.delete(path)
    return f"deleted {path}"


# -- TodoWrite --------------------------------------------------------------------------------


class _TodoRequired(TypedDict):
    content: str
    status: Literal["pending", "in_progress", "completed"]


class TodoItem(_TodoRequired, total=False):
    activeForm: str
    id: str
    priority: str


class TodoWrite(Tool):
    """Replace the session's todo list (what is pending, in progress, completed)."""

    name = "TodoWrite"

    def __init__(self) -> None:
        super().__init__()
        self.todos: list[TodoItem] = []

    def declare(self, arguments: Mapping[str, Any]) -> list[Claim]:
        return [exclusive(device("todo"))]

    async def run(self, ctx: ToolContext, todos: list[TodoItem]) -> str:  # type: ignore[override]
        """Replace the todo list.

        Args:
            todos: The whole new list; each {content, status: pending|in_progress|completed}.
        """
        self.todos = list(todos)
        counts = {
            s: sum(1 for t in todos if t["status"] == s)
            for s in ("pending", "in_progress", "completed")
        }
        return (
            f"todo list updated: {counts['pending']} pending, {counts['in_progress']} in "
            f"progress, {counts['completed']} completed"
        )


# -- Bash -----------------------------------------------------------------------------------

_READ_ONLY_COMMANDS = frozenset(
    "ls cat head tail wc grep egrep fgrep rg pwd echo which file stat du df tree basename "
    "dirname realpath true false printf env date whoami uname".split()
)
_READ_ONLY_GIT = frozenset(
    "status log diff show rev-parse ls-files blame shortlog describe".split()
)
_FIND_WRITES = frozenset("-delete -exec -execdir -ok -okdir -fprint -fprint0 -fprintf -fls".split())
# Options of allowed programs that write a file or run another program.
_WRITING_OPTIONS = {"tree": ("-o",), "rg": ("--pre",), "file": ("-C", "--compile")}
_SHELL_META = re.compile(r"[;&><`$()\n\\{}]|\|\|")


def is_read_only_command(command: str) -> bool:
    """True only for commands this parser is sure do not write: a conservative allow-list.

    Pipelines of read-only commands pass; redirection, substitution, sequencing, subshells,
    variables and anything unknown do not.
    """
    if not command.strip() or _SHELL_META.search(command):
        return False
    for segment in command.split("|"):
        try:
            words = shlex.split(segment)
        except ValueError:
            return False
        if not words:
            return False
        program, args = words[0], words[1:]
        if "=" in program:
            return False  # VAR=value prefixes could change what runs
        if program == "env" and args:
            return False  # env runs its arguments as a command
        if any(a.startswith(_WRITING_OPTIONS.get(program, ())) for a in args):
            return False
        if program == "git":
            if not args or args[0] not in _READ_ONLY_GIT or "--output" in " ".join(args):
                return False
        elif program == "find":
            if any(a in _FIND_WRITES for a in args):
                return False
        elif program not in _READ_ONLY_COMMANDS:
            return False
    return True


def _bash_claims(arguments: Mapping[str, Any]) -> list[Claim]:
    if is_read_only_command(arguments["command"]):
        return [shared(path())]
    return [writes(path())]


def _kill_group(process: trio.Process) -> None:
    with contextlib.suppress(ProcessLookupError):  # it already ended
        os.killpg(process.pid, signal.SIGKILL)


def _cap(text: str) -> str:
    if len(text) <= BASH_OUTPUT_LIMIT:
        return text
    cut = len(text) - BASH_OUTPUT_LIMIT
    return text[:BASH_OUTPUT_LIMIT] + f"\n... ({cut} more characters cut)"


@tool(claims=_bash_claims, name="Bash")
async def bash_tool(
    ctx: ToolContext,
    command: str,
    timeout: int | None = None,  # noqa: ASYNC109 - the argument models are trained to send
) -> str:
    """Run a shell command in the workspace root.

    Args:
        command: The command line (run by /bin/sh).
        timeout: Milliseconds before the command and all its children are killed
            (default 120000, at most 600000).
    """
    fs = _fs(ctx)
    limit = BASH_DEFAULT_TIMEOUT_MS if timeout is None else timeout
    if not 0 < limit <= BASH_MAX_TIMEOUT_MS:
        raise ToolError(f"timeout must be between 1 and {BASH_MAX_TIMEOUT_MS} ms, not {timeout}")

    async def deliver_cancel(process: trio.Process) -> None:
        _kill_group(process)

    completed: subprocess.CompletedProcess[bytes] | None = None
    with trio.move_on_after(limit / 1000):
        completed = await trio.run_process(
            ["/bin/sh", "-c", command],
            cwd=str(fs.workspace.root),
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            stderr=subprocess.STDOUT,
            check=False,
            start_new_session=True,
            deliver_cancel=deliver_cancel,
        )
    if completed is None:
        raise ToolError(f"command timed out after {limit} ms and was killed: {command}")
    output = _cap(completed.stdout.decode("utf-8", errors="replace"))
    if completed.returncode != 0:
        raise ToolError(f"exit code {completed.returncode}\n{output}".rstrip())
    return output


def builtin_tools(bash: bool = False) -> list[Tool]:
    """The built-in coding tools (Bash only with ``bash=True``), ready for ``open_kernel``.

    Each call returns fresh tool objects, so a ``TodoWrite`` list belongs to one kernel.
    """
    tools: list[Tool] = [
        read,
        write,
        edit,
        multi_edit,
        glob,
        grep,
        list_dir,
        move,
        delete,
        TodoWrite(),
    ]
    if bash:
        tools.append(bash_tool)
    return tools

"""Bad inputs: each gives its call a clear ERROR result and harms nothing else.

Every case is run in one batch between good calls: the bad call must end ERROR with a message
that says what is wrong, the good calls of the same batch must succeed, and the kernel must go on
serving the next batch.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
from collections.abc import Callable
from typing import Any

import anyio
import attrs
import pytest

import toolkernel as tk
from toolkernel.tools import builtin_tools


@attrs.frozen
class Bad:
    call: Callable[[pathlib.Path], tk.ToolCall]
    """Makes the bad call, given the workspace root."""
    fragment: str
    """A part of the error message that says what is wrong."""


def bad(name: str, arguments: dict[str, Any] | str, fragment: str, **options: Any) -> Bad:
    return Bad(lambda root: tk.ToolCall("bad", name, arguments, **options), fragment)


def bad_at(name: str, make: Callable[[pathlib.Path], dict[str, Any]], fragment: str) -> Bad:
    return Bad(lambda root: tk.ToolCall("bad", name, make(root)), fragment)


def read(file_path: Any, **more: Any) -> dict[str, Any]:
    return {"file_path": file_path, **more}


def edit(old: str, new: str, file_path: str = "good.txt", **more: Any) -> dict[str, Any]:
    return {"file_path": file_path, "old_string": old, "new_string": new, **more}


CASES: dict[str, Bad] = {
    # -- calls that are not calls ----------------------------------------------------------------
    "unknown tool": bad("Reed", read("good.txt"), "there is no tool named 'Reed'"),
    "malformed JSON": bad(
        "Read", '{"file_path": "good.txt"', "arguments of Read are not valid JSON"
    ),
    "JSON array": bad("Read", '["good.txt"]', "must be a JSON object, not an array"),
    "JSON string": bad("Read", '"good.txt"', "must be a JSON object, not a string"),
    "duplicate call id": Bad(
        lambda root: tk.ToolCall("good-read", "Read", read("good.txt")),
        "call id 'good-read' is used twice in this batch",
    ),
    "after= an unknown id": bad(
        "Read", read("good.txt"), "must run after 'ghost', which is not a known call", after="ghost"
    ),
    "after= itself": bad(
        "Read", read("good.txt"), "must run after 'bad', which is itself", after="bad"
    ),
    # -- argument shapes -------------------------------------------------------------------------
    "int for a path": bad("Read", read(3), "'file_path' must be string, not integer (3)"),
    "list for a path": bad("Read", read(["a", "b"]), "'file_path' must be string, not array"),
    "str for limit": bad("Read", read("good.txt", limit="10"), "not string ('10')"),
    "bool for an int": bad("Read", read("good.txt", offset=True), "not boolean (True)"),
    "float for an int": bad("Read", read("good.txt", limit=2.5), "not number (2.5)"),
    "int for content": bad(
        "Write", {"file_path": "x.txt", "content": 7}, "'content' must be string"
    ),
    "str for a bool": bad(
        "Edit", edit("hello", "bye", replace_all="yes"), "'replace_all' must be boolean"
    ),
    "missing argument": bad(
        "Edit", {"file_path": "good.txt", "old_string": "a"}, "missing required argument"
    ),
    "no arguments": bad("Bash", {}, "Bash is missing required argument 'command'"),
    "extra argument": bad(
        "Read", read("good.txt", path="good.txt"), "got unexpected argument 'path'"
    ),
    # -- paths -----------------------------------------------------------------------------------
    "'..' escape": bad("Read", read("../outside.txt"), "PathEscapeError: path '../outside.txt'"),
    "'..' escape inside a path": bad(
        "Write", {"file_path": "dir/../../x", "content": ""}, "PathEscapeError"
    ),
    "absolute path outside": bad("Read", read("/etc/passwd"), "PathEscapeError"),
    "absolute path outside for Glob": bad(
        "Glob", {"pattern": "*", "path": "/etc"}, "PathEscapeError"
    ),
    "symlink pointing outside": bad("Read", read("link-out"), "outside the workspace root"),
    "write through a symlink pointing outside": bad(
        "Write", {"file_path": "link-out", "content": "pwned"}, "outside the workspace root"
    ),
    "symlink loop": bad("Read", read("loop"), "more than 40 symbolic links"),
    "NUL byte in a path": bad("Read", read("good\x00.txt"), "contains a NUL byte"),
    "empty path": bad("Read", read(""), "InvalidClaimError"),
    "huge path": bad("Read", read("a/" * 2499 + "ab"), "5000 bytes long; the limit is 4096"),
    "component over 255 bytes": bad(
        "Write", {"file_path": "d/" + "é" * 200, "content": ""}, "component of 400 bytes"
    ),
    # -- files and directories of the wrong kind -------------------------------------------------
    "Read on a directory": bad("Read", read("dir"), "'dir' is a directory, not a file"),
    "Edit on a directory": bad("Edit", edit("a", "b", "dir"), "'dir' is a directory, not a file"),
    "Write onto a directory": bad(
        "Write", {"file_path": "dir", "content": ""}, "'dir' is a directory; give a file path"
    ),
    "ListDir on a file": bad("ListDir", {"path": "good.txt"}, "is a file, not a directory"),
    "Write under a file": bad(
        "Write", {"file_path": "good.txt/x.txt", "content": ""}, "a parent of it is a file"
    ),
    "Read under a file": bad("Read", read("good.txt/x"), "(a parent is a file)"),
    "Read a missing file": bad("Read", read("missing.txt"), "'missing.txt' does not exist"),
    "Read a non-UTF-8 file": bad("Read", read("latin1.txt"), "is not UTF-8 text"),
    "Edit a non-UTF-8 file": bad("Edit", edit("caf", "CAF", "latin1.txt"), "is not UTF-8 text"),
    "Read a binary file": bad("Read", read("image.png"), "is a binary file"),
    "Read a fifo": bad("Read", read("pipe"), "is not a regular file"),
    # -- Read ------------------------------------------------------------------------------------
    "offset past the end": bad("Read", read("good.txt", offset=99), "offset 99 is past the end"),
    "offset zero": bad("Read", read("good.txt", offset=0), "offset must be a line number from 1"),
    "negative limit": bad("Read", read("good.txt", limit=-5), "limit must be at least 1, not -5"),
    # -- Edit / MultiEdit ------------------------------------------------------------------------
    "Edit text not found": bad("Edit", edit("absent", "x"), "old_string was not found"),
    "Edit text not unique": bad(
        "Edit", edit("twice", "x", "twice.txt"), "old_string occurs 2 times"
    ),
    "Edit old == new": bad("Edit", edit("hello", "hello"), "are the same; nothing would change"),
    "Edit empty old_string": bad("Edit", edit("", "x"), "old_string is empty"),
    "MultiEdit empty edits": bad(
        "MultiEdit", {"file_path": "good.txt", "edits": []}, "edits is empty"
    ),
    "MultiEdit edit missing a key": bad(
        "MultiEdit",
        {"file_path": "good.txt", "edits": [{"old_string": "hello"}]},
        "is missing the key 'new_string'",
    ),
    "MultiEdit edit with an unknown key": bad(
        "MultiEdit",
        {"file_path": "good.txt", "edits": [{"old_string": "h", "new_string": "j", "all": 1}]},
        "has an unknown key 'all'",
    ),
    "MultiEdit edits not a list": bad(
        "MultiEdit",
        {"file_path": "good.txt", "edits": {"old_string": "h", "new_string": "j"}},
        "'edits' must be array",
    ),
    "MultiEdit failing second edit": bad(
        "MultiEdit",
        {
            "file_path": "good.txt",
            "edits": [
                {"old_string": "hello", "new_string": "bye"},
                {"old_string": "absent", "new_string": "x"},
            ],
        },
        "edit 2 of 2: old_string was not found",
    ),
    # -- Glob / Grep -----------------------------------------------------------------------------
    "Grep bad regex": bad("Grep", {"pattern": "(unclosed"}, "is not a valid regular expression"),
    "Grep bad output_mode": bad(
        "Grep", {"pattern": "x", "output_mode": "lines"}, "must be one of 'files_with_matches'"
    ),
    "Grep bad glob": bad(
        "Grep", {"pattern": "x", "glob": "{1..5000}"}, "glob '{1..5000}' is not a valid pattern"
    ),
    "Glob on a missing dir": bad(
        "Glob", {"pattern": "*", "path": "missing"}, "path 'missing' does not exist"
    ),
    "Glob bad pattern": bad("Glob", {"pattern": "{1..5000}.py"}, "is not a valid pattern"),
    # -- Move / Delete ---------------------------------------------------------------------------
    "Move onto an existing file": bad(
        "Move", {"source": "good.txt", "destination": "twice.txt"}, "it already exists"
    ),
    "Move of a missing file": bad(
        "Move", {"source": "missing.txt", "destination": "z.txt"}, "'missing.txt': it does not"
    ),
    "Move into itself": bad("Move", {"source": "dir", "destination": "dir/sub"}, "into itself"),
    "Delete missing": bad("Delete", {"path": "missing.txt"}, "'missing.txt': it does not exist"),
    "Delete the root": bad("Delete", {"path": "."}, "can't delete the workspace root"),
    # -- TodoWrite / Bash ------------------------------------------------------------------------
    "TodoWrite bad status": bad(
        "TodoWrite",
        {"todos": [{"content": "x", "status": "done"}]},
        "['status'] must be one of 'pending', 'in_progress', 'completed'",
    ),
    "TodoWrite item without content": bad(
        "TodoWrite", {"todos": [{"status": "pending"}]}, "is missing the key 'content'"
    ),
    "TodoWrite todos not a list": bad("TodoWrite", {"todos": "x"}, "'todos' must be array"),
    "Bash zero timeout": bad(
        "Bash", {"command": "ls", "timeout": 0}, "timeout must be between 1 and 600000 ms, not 0"
    ),
    "Bash huge timeout": bad(
        "Bash", {"command": "ls", "timeout": 10**9}, "timeout must be between 1 and 600000 ms"
    ),
    "Bash str timeout": bad(
        "Bash", {"command": "ls", "timeout": "5000"}, "'timeout' must be integer or null"
    ),
    "Bash failing command": bad("Bash", {"command": "cat missing.txt"}, "exit code 1"),
    # -- a file's path ending in '/': a directory's, as every system call reads it -------------
    "Read of a file's path with '/'": bad("Read", read("good.txt/"), "so it names a directory"),
    "Write of a new path with '/'": bad(
        "Write", {"file_path": "new.txt/", "content": "x"}, "names a directory, not a file"
    ),
    "Edit of a file's path with '/'": bad(
        "Edit", edit("hello", "bye", "good.txt/"), "give the file's path without the '/'"
    ),
    "Delete of a file's path with '/'": bad(
        "Delete", {"path": "good.txt/"}, "it is not a directory, which '/' at its end names"
    ),
    "Glob leaving out": bad("Glob", {"pattern": "!*.txt"}, "Grep's glob takes '!'"),
}


@pytest.fixture
def root(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "root"
    (root / "dir").mkdir(parents=True)
    (root / "dir" / "inner.txt").write_text("inner\n")
    (root / "good.txt").write_text("hello\nworld\n")
    (root / "twice.txt").write_text("twice\ntwice\n")
    (root / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    os.mkfifo(root / "pipe")
    (tmp_path / "outside.txt").write_text("secret\n")
    os.symlink(tmp_path / "outside.txt", root / "link-out")
    os.symlink("loop", root / "loop")
    return root


def snapshot(root: pathlib.Path) -> dict[str, bytes | str]:
    """Every entry under ``root`` (and the file outside it) with its content or kind."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.parent.rglob("*")):
        name = str(path.relative_to(root.parent))
        if path.is_symlink():
            found[name] = "link to " + os.readlink(path)
        elif path.is_dir():
            found[name] = "dir"
        elif path.is_file():
            found[name] = path.read_bytes()
        else:
            found[name] = "special"
    return found


TODOS = [{"content": "stay calm", "status": "in_progress"}]


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
async def test_a_bad_call_fails_alone_and_clearly(root: pathlib.Path, case: Bad) -> None:
    before = snapshot(root)
    async with tk.open_kernel(builtin_tools(bash=True), root=root) as kernel:
        try:
            with anyio.fail_after(20):
                await check_batches(kernel, root, case, before)
        finally:
            # A worker thread stuck opening the fifo can't be cancelled and would keep the kernel
            # from closing: give it a writer, so the test fails instead of hanging.
            with contextlib.suppress(OSError):
                os.close(os.open(root / "pipe", os.O_WRONLY | os.O_NONBLOCK))


async def check_batches(
    kernel: tk.Kernel, root: pathlib.Path, case: Bad, before: dict[str, bytes | str]
) -> None:
    results = await kernel.run(
        [
            tk.ToolCall("good-read", "Read", read("good.txt")),
            tk.ToolCall("good-glob", "Glob", {"pattern": "**/*.txt", "path": "dir"}),
            case.call(root),
            tk.ToolCall("good-write", "Write", {"file_path": "out/new.txt", "content": "new"}),
            tk.ToolCall("good-todo", "TodoWrite", {"todos": TODOS}),
        ]
    )
    good_read, good_glob, bad_result, good_write, good_todo = results
    assert bad_result.status is tk.Status.ERROR, bad_result
    assert bad_result.error is not None and case.fragment in bad_result.error
    assert bad_result.output is None
    for result in (good_read, good_glob, good_write, good_todo):
        assert result.status is tk.Status.OK, result.error
    assert good_read.output == "     1\thello\n     2\tworld"
    assert good_glob.output == "dir/inner.txt"
    assert good_todo.output == "todo list updated: 0 pending, 1 in progress, 0 completed"

    # The bad call changed nothing: only the good Write made a difference.
    after = snapshot(root)
    assert after.pop("root/out/new.txt") == b"new"
    assert after.pop("root/out") == "dir"
    assert after == before

    # And the kernel goes on serving.
    follow_up = await kernel.run(
        [
            tk.ToolCall("next-edit", "Edit", edit("hello", "bye")),
            tk.ToolCall("next-read", "Read", read("good.txt"), after="next-edit"),
        ]
    )
    assert [r.status for r in follow_up] == [tk.Status.OK, tk.Status.OK]
    assert follow_up[1].output == "     1\tbye\n     2\tworld"
    statistics = kernel.statistics()
    assert (statistics.pending, statistics.queued, statistics.running) == (0, 0, 0)


def test_there_are_at_least_thirty_distinct_bad_inputs() -> None:
    assert len(CASES) >= 30
    assert len({case.fragment for case in CASES.values()}) >= 30

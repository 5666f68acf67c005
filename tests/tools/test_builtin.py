"""The built-in tools, each driven through a real kernel on a real temporary workspace."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import stat
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.to_thread
import pytest

import toolkernel as tk
from toolkernel.tools import builtin_tools

from .processes import running_with, wait_none_running

# -- helpers --------------------------------------------------------------------------------------


@pytest.fixture
async def kernel(tmp_path: pathlib.Path) -> AsyncIterator[tk.Kernel]:
    async with tk.open_kernel(builtin_tools(bash=True), root=tmp_path) as k:
        yield k


async def run1(k: tk.Kernel, name: str, **arguments: Any) -> tk.ToolResult:
    (result,) = await k.run([tk.ToolCall("c1", name, arguments)])
    return result


async def ok(k: tk.Kernel, name: str, **arguments: Any) -> str:
    result = await run1(k, name, **arguments)
    assert result.status is tk.Status.OK, result.error
    assert isinstance(result.output, str)
    return result.output


async def error(k: tk.Kernel, name: str, **arguments: Any) -> str:
    result = await run1(k, name, **arguments)
    assert result.status is tk.Status.ERROR, result.output
    assert result.error
    return result.error


def temp_leftovers(root: pathlib.Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.name.endswith(".tktmp"))


def write(root: pathlib.Path, relative: str, content: str | bytes) -> pathlib.Path:
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content)
    return target


# -- Read -----------------------------------------------------------------------------------------


async def test_read_numbers_lines_like_cat_n(kernel: tk.Kernel, tmp_path: pathlib.Path) -> None:
    write(tmp_path, "a.txt", "alpha\nbeta\n\tgamma\n")
    assert await ok(kernel, "Read", file_path="a.txt") == (
        "     1\talpha\n     2\tbeta\n     3\t\tgamma"
    )


async def test_read_offset_and_limit_pick_a_window(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    write(tmp_path, "ten.txt", "".join(f"line {n}\n" for n in range(1, 11)))
    assert await ok(kernel, "Read", file_path="ten.txt", offset=3, limit=2) == (
        "     3\tline 3\n     4\tline 4\n... (6 more lines; use offset to read on)"
    )
    assert await ok(kernel, "Read", file_path="ten.txt", offset=9) == (
        "     9\tline 9\n    10\tline 10"
    )
    assert await ok(kernel, "Read", file_path="ten.txt", limit=1) == (
        "     1\tline 1\n... (9 more lines; use offset to read on)"
    )


async def test_read_of_an_empty_file_says_so(kernel: tk.Kernel, tmp_path: pathlib.Path) -> None:
    write(tmp_path, "empty.txt", "")
    assert "is empty" in await ok(kernel, "Read", file_path="empty.txt")


async def test_read_errors_say_why(kernel: tk.Kernel, tmp_path: pathlib.Path) -> None:
    (tmp_path / "dir").mkdir()
    write(tmp_path, "image.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    write(tmp_path, "latin1.txt", "café\n".encode("latin-1"))
    assert "'dir' is a directory, not a file" in await error(kernel, "Read", file_path="dir")
    assert "'image.png' is a binary file" in await error(kernel, "Read", file_path="image.png")
    assert "file 'nope.txt' does not exist" in await error(kernel, "Read", file_path="nope.txt")
    message = await error(kernel, "Read", file_path="latin1.txt")
    assert "'latin1.txt' is not UTF-8 text (bad byte at offset 3)" in message


async def test_read_of_a_fifo_fails_instead_of_hanging(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    os.mkfifo(tmp_path / "pipe")
    try:
        with anyio.fail_after(5):
            message = await error(kernel, "Read", file_path="pipe")
    finally:
        # If a worker thread is stuck opening the fifo, give it a writer (and so an end of file):
        # threads can't be cancelled, and the kernel could not close.
        with contextlib.suppress(OSError):
            os.close(os.open(tmp_path / "pipe", os.O_WRONLY | os.O_NONBLOCK))
    assert "'pipe' is not a regular file" in message


# -- Write ----------------------------------------------------------------------------------------


async def test_write_creates_a_file_and_its_parents(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    output = await ok(kernel, "Write", file_path="deep/er/new.txt", content="one\ntwo\n")
    assert output == "created deep/er/new.txt (2 lines)"
    assert (tmp_path / "deep" / "er" / "new.txt").read_bytes() == b"one\ntwo\n"


async def test_write_overwrites_by_renaming_a_new_file_over_the_old(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    target = write(tmp_path, "a.txt", "old content\n")
    target.chmod(0o640)
    inode = target.stat().st_ino
    output = await ok(kernel, "Write", file_path="a.txt", content="new\r\ncontent")
    assert output == "overwrote a.txt (2 lines)"
    assert target.read_bytes() == b"new\r\ncontent"  # no newline translation
    # A fresh inode renamed into place: readers of the old file never saw a half-written one.
    assert target.stat().st_ino != inode
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert temp_leftovers(tmp_path) == []


# -- Edit / MultiEdit -----------------------------------------------------------------------------


async def test_edit_replaces_exact_text(kernel: tk.Kernel, tmp_path: pathlib.Path) -> None:
    target = write(tmp_path, "m.py", "def f():\n    return 1\n")
    output = await ok(
        kernel, "Edit", file_path="m.py", old_string="return 1", new_string="return 2"
    )
    assert output == "edited m.py: replaced 1 occurrence"
    assert target.read_text() == "def f():\n    return 2\n"


async def test_edit_errors_name_why(kernel: tk.Kernel, tmp_path: pathlib.Path) -> None:
    target = write(tmp_path, "m.py", "x = 1\nx = 1\ny = 2\n")
    missing = await error(kernel, "Edit", file_path="m.py", old_string="z = 3", new_string="z")
    assert "old_string was not found in m.py" in missing
    assert "including whitespace and indentation" in missing
    twice = await error(kernel, "Edit", file_path="m.py", old_string="x = 1", new_string="x = 9")
    assert "old_string occurs 2 times in m.py" in twice
    assert "replace_all" in twice
    assert target.read_text() == "x = 1\nx = 1\ny = 2\n"


async def test_edit_replace_all_changes_every_occurrence(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    target = write(tmp_path, "m.py", "a a\na\n")
    output = await ok(
        kernel, "Edit", file_path="m.py", old_string="a", new_string="bb", replace_all=True
    )
    assert output == "edited m.py: replaced 3 occurrences"
    assert target.read_text() == "bb bb\nbb\n"


async def test_multiedit_applies_edits_in_order(kernel: tk.Kernel, tmp_path: pathlib.Path) -> None:
    target = write(tmp_path, "m.py", "one two three\n")
    edits = [
        {"old_string": "one", "new_string": "1"},
        {"old_string": "1 two", "new_string": "12"},  # sees the first edit's result
        {"old_string": "e", "new_string": "E", "replace_all": True},
    ]
    output = await ok(kernel, "MultiEdit", file_path="m.py", edits=edits)
    assert output == "applied 3 edits to m.py"
    assert target.read_text() == "12 thrEE\n"


async def test_multiedit_is_all_or_none(kernel: tk.Kernel, tmp_path: pathlib.Path) -> None:
    target = write(tmp_path, "m.py", "one two three\n")
    edits = [
        {"old_string": "one", "new_string": "1"},
        {"old_string": "four", "new_string": "4"},
    ]
    message = await error(kernel, "MultiEdit", file_path="m.py", edits=edits)
    assert "edit 2 of 2: old_string was not found in m.py" in message
    assert target.read_bytes() == b"one two three\n"
    assert temp_leftovers(tmp_path) == []


# -- Glob / Grep / ListDir ------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> pathlib.Path:
    write(tmp_path, "top.py", "import os\n")
    write(tmp_path, "src/a.py", "def alpha():\n    return 1\n")
    write(tmp_path, "src/pkg/b.py", "def beta():\n    return 2\n\ndef gamma(): pass\n")
    write(tmp_path, "src/c.txt", "def not_python():\n")
    write(tmp_path, "docs/d.md", "# alpha\n")
    return tmp_path


async def test_glob_matches_double_star_and_braces(kernel: tk.Kernel, tree: pathlib.Path) -> None:
    assert (await ok(kernel, "Glob", pattern="**/*.py")).splitlines() == [
        "src/a.py",
        "src/pkg/b.py",
        "top.py",
    ]
    assert (await ok(kernel, "Glob", pattern="src/*.{py,txt}")).splitlines() == [
        "src/a.py",
        "src/c.txt",
    ]
    assert (await ok(kernel, "Glob", pattern="{docs,src/pkg}/*")).splitlines() == [
        "docs/d.md",
        "src/pkg/b.py",
    ]


async def test_glob_pattern_is_relative_to_path(kernel: tk.Kernel, tree: pathlib.Path) -> None:
    assert await ok(kernel, "Glob", pattern="*.py", path="src") == "src/a.py"
    assert (await ok(kernel, "Glob", pattern="**/*.py", path="./src/")).splitlines() == [
        "src/a.py",
        "src/pkg/b.py",
    ]
    assert "no files match '*.rs'" in await ok(kernel, "Glob", pattern="*.rs")


async def test_grep_output_modes(kernel: tk.Kernel, tree: pathlib.Path) -> None:
    pattern = r"^def \w+\("
    assert (await ok(kernel, "Grep", pattern=pattern)).splitlines() == [
        "src/a.py",
        "src/c.txt",
        "src/pkg/b.py",
    ]
    assert (await ok(kernel, "Grep", pattern=pattern, output_mode="content")).splitlines() == [
        "src/a.py:1:def alpha():",
        "src/c.txt:1:def not_python():",
        "src/pkg/b.py:1:def beta():",
        "src/pkg/b.py:4:def gamma(): pass",
    ]
    assert (await ok(kernel, "Grep", pattern=pattern, output_mode="count")).splitlines() == [
        "src/a.py:1",
        "src/c.txt:1",
        "src/pkg/b.py:2",
    ]


async def test_grep_glob_and_path_filter_files(kernel: tk.Kernel, tree: pathlib.Path) -> None:
    assert (await ok(kernel, "Grep", pattern="def", glob="*.py")).splitlines() == [
        "src/a.py",
        "src/pkg/b.py",
    ]
    assert await ok(kernel, "Grep", pattern="alpha", path="docs") == "docs/d.md"
    assert await ok(kernel, "Grep", pattern="gamma", path="src/pkg/b.py") == "src/pkg/b.py"
    assert "no matches for 'zeta'" in await ok(kernel, "Grep", pattern="zeta")


async def test_grep_rejects_a_bad_regex(kernel: tk.Kernel, tree: pathlib.Path) -> None:
    message = await error(kernel, "Grep", pattern="def (")
    assert "pattern 'def (' is not a valid regular expression" in message


async def test_listdir_marks_directories(kernel: tk.Kernel, tree: pathlib.Path) -> None:
    assert (await ok(kernel, "ListDir")).splitlines() == ["docs/", "src/", "top.py"]
    assert (await ok(kernel, "ListDir", path="src")).splitlines() == ["a.py", "c.txt", "pkg/"]
    (tree / "void").mkdir()
    assert "is empty" in await ok(kernel, "ListDir", path="void")


# -- Move / Delete --------------------------------------------------------------------------------


async def test_move_renames_files_and_directories(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    write(tmp_path, "a.txt", "A")
    write(tmp_path, "d1/x.txt", "X")
    assert (
        await ok(kernel, "Move", source="a.txt", destination="b/b.txt") == "moved a.txt to b/b.txt"
    )
    assert not (tmp_path / "a.txt").exists()
    assert (tmp_path / "b" / "b.txt").read_text() == "A"
    await ok(kernel, "Move", source="d1", destination="d2")
    assert not (tmp_path / "d1").exists()
    assert (tmp_path / "d2" / "x.txt").read_text() == "X"


async def test_move_refuses_to_replace_an_existing_destination(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    write(tmp_path, "a.txt", "A")
    write(tmp_path, "b.txt", "B")
    message = await error(kernel, "Move", source="a.txt", destination="b.txt")
    assert "can't move to 'b.txt': it already exists" in message
    assert (tmp_path / "a.txt").read_text() == "A"
    assert (tmp_path / "b.txt").read_text() == "B"


async def test_delete_removes_a_file_or_a_tree(kernel: tk.Kernel, tmp_path: pathlib.Path) -> None:
    write(tmp_path, "a.txt", "A")
    write(tmp_path, "d/e/f.txt", "F")
    write(tmp_path, "keep.txt", "K")
    assert await ok(kernel, "Delete", path="a.txt") == "deleted a.txt"
    assert await ok(kernel, "Delete", path="d") == "deleted d"
    assert sorted(os.listdir(tmp_path)) == ["keep.txt"]


# -- TodoWrite ------------------------------------------------------------------------------------


async def test_todowrite_replaces_the_list(kernel: tk.Kernel) -> None:
    todos = [
        {"content": "read the code", "status": "completed"},
        {"content": "fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
        {"content": "write a test", "status": "pending"},
        {"content": "ship it", "status": "pending"},
    ]
    output = await ok(kernel, "TodoWrite", todos=todos)
    assert output == "todo list updated: 2 pending, 1 in progress, 1 completed"
    tool = kernel.tools["TodoWrite"]
    assert tool.todos == todos  # type: ignore[attr-defined]
    await ok(kernel, "TodoWrite", todos=[])
    assert tool.todos == []  # type: ignore[attr-defined]


async def test_each_builtin_tools_call_has_its_own_todo_list() -> None:
    first = next(t for t in builtin_tools() if t.name == "TodoWrite")
    second = next(t for t in builtin_tools() if t.name == "TodoWrite")
    assert first is not second


# -- Bash -----------------------------------------------------------------------------------------


async def test_bash_runs_in_the_workspace_root(kernel: tk.Kernel, tmp_path: pathlib.Path) -> None:
    assert await ok(kernel, "Bash", command="pwd") == f"{await anyio.Path(tmp_path).resolve()}\n"
    await ok(kernel, "Bash", command="echo made > made.txt")
    assert (tmp_path / "made.txt").read_text() == "made\n"


# The command's process group (the launcher's, which the shell joins; not the shell's pid).


def marked_sleep() -> tuple[str, str]:
    """A ``sleep`` whose command line no other process has, and that line."""
    marker = f"30.{uuid.uuid4().int % 10**9:09d}"
    return f"sleep {marker}", marker


async def test_bash_nonzero_exit_is_an_error_with_the_output(kernel: tk.Kernel) -> None:
    message = await error(kernel, "Bash", command="echo oops; echo bad >&2; exit 3")
    assert message == "exit code 3\noops\nbad"


@pytest.mark.skipif(not pathlib.Path("/proc").is_dir(), reason="needs /proc")
async def test_bash_timeout_kills_the_whole_process_group(kernel: tk.Kernel) -> None:
    sleep, marker = marked_sleep()
    with anyio.fail_after(10):
        message = await error(kernel, "Bash", command=f"{sleep} & {sleep}", timeout=300)
    assert "timed out after 300 ms and was killed" in message
    await wait_none_running(marker)


@pytest.mark.skipif(not pathlib.Path("/proc").is_dir(), reason="needs /proc")
async def test_cancelling_bash_kills_the_whole_process_group(kernel: tk.Kernel) -> None:
    sleep, marker = marked_sleep()
    with anyio.fail_after(10):
        handle = kernel.submit(tk.ToolCall("c1", "Bash", {"command": f"{sleep} & {sleep}"}))
        while len(running_with(marker)) < 2:  # noqa: ASYNC110 - other processes: nothing to await
            await anyio.sleep(0.01)
        handle.cancel()
        result = await handle.wait_finished()
    assert result.status is tk.Status.CANCELLED
    await wait_none_running(marker)


async def test_bash_output_is_capped(kernel: tk.Kernel) -> None:
    output = await ok(kernel, "Bash", command="head -c 50000 /dev/zero | tr '\\0' x")
    assert output == (
        "x"
        * 15_000
        + "\n... (20000 bytes of output cut here, of 50000; send long output to a file and read "
        "parts of it) ...\n" + "x" * 15_000
    )


async def test_a_read_only_bash_call_and_a_read_run_concurrently(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    write(tmp_path, "a.txt", "A\n")
    with anyio.fail_after(10):
        bash, read = kernel.submit_batch(
            [
                tk.ToolCall("bash", "Bash", {"command": "sleep 0.5; cat a.txt"}),
                tk.ToolCall("read", "Read", {"file_path": "a.txt"}),
            ]
        )
        assert kernel.snapshot().queued == ()
        # The Read finishes while the command still sleeps: the two overlapped.
        assert (await read.wait_finished()).status is tk.Status.OK
        assert not bash.finished
        result = await bash.wait_finished()
    assert result.status is tk.Status.OK
    assert result.output == "A\n"


async def test_a_bash_call_writing_a_file_excludes_an_edit_of_it(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    target = write(tmp_path, "copy.txt", "old\n")
    with anyio.fail_after(10):
        bash, edit = kernel.submit_batch(
            [
                tk.ToolCall("bash", "Bash", {"command": "sleep 0.3; echo copied > copy.txt"}),
                tk.ToolCall(
                    "edit",
                    "Edit",
                    {"file_path": "copy.txt", "old_string": "copied", "new_string": "edited"},
                ),
            ]
        )
        (waiting,) = kernel.snapshot().queued
        assert (waiting.call_id, waiting.waits_for) == ("edit", ("bash",))
        bash_result = await bash.wait_finished()
        edit_result = await edit.wait_finished()
    assert bash_result.status is tk.Status.OK
    assert edit_result.status is tk.Status.OK, edit_result.error
    assert edit_result.started_at is not None
    assert edit_result.started_at >= bash_result.finished_at
    assert target.read_text() == "edited\n"


async def test_a_bash_call_writing_one_file_runs_beside_an_edit_of_another(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    target = write(tmp_path, "a.txt", "A\n")
    with anyio.fail_after(10):
        bash, edit = kernel.submit_batch(
            [
                tk.ToolCall("bash", "Bash", {"command": "sleep 0.5; echo copied > copy.txt"}),
                tk.ToolCall(
                    "edit", "Edit", {"file_path": "a.txt", "old_string": "A", "new_string": "B"}
                ),
            ]
        )
        # Before, any command that redirected held the whole workspace, and the Edit waited.
        assert kernel.snapshot().queued == ()
        assert (await edit.wait_finished()).status is tk.Status.OK
        assert not bash.finished
        assert (await bash.wait_finished()).status is tk.Status.OK
    assert target.read_text() == "B\n"
    assert (tmp_path / "copy.txt").read_text() == "copied\n"


# -- schemas --------------------------------------------------------------------------------------

EXPECTED_PARAMETERS = {
    "Read": (["file_path"], ["file_path", "offset", "limit"]),
    "Write": (["file_path", "content"], ["file_path", "content"]),
    "Edit": (
        ["file_path", "old_string", "new_string"],
        ["file_path", "old_string", "new_string", "replace_all"],
    ),
    "MultiEdit": (["file_path", "edits"], ["file_path", "edits"]),
    "Glob": (["pattern"], ["pattern", "path"]),
    "Grep": (
        ["pattern"],
        [
            *("pattern", "path", "glob", "output_mode", "type", "ignore_case", "context"),
            *("before_context", "after_context", "line_numbers", "multiline", "head_limit"),
            "offset",
        ],
    ),
    "ListDir": ([], ["path"]),
    "Move": (["source", "destination"], ["source", "destination"]),
    "Delete": (["path"], ["path"]),
    "Bash": (["command"], ["command", "timeout"]),
    "TodoWrite": (["todos"], ["todos"]),
}

_JSON_TYPES = {"object", "array", "string", "integer", "number", "boolean", "null"}
_SCHEMA_KEYS = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "anyOf",
    "description",
    "default",
}


def check_schema(schema: object, where: str = "schema") -> None:
    """Check ``schema`` is a well-formed JSON Schema, for the keywords tool schemas use."""
    assert isinstance(schema, dict), where
    assert set(schema) <= _SCHEMA_KEYS, f"{where}: unknown keywords {set(schema) - _SCHEMA_KEYS}"
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        assert kinds and set(kinds) <= _JSON_TYPES, f"{where}: bad type {schema['type']!r}"
        assert len(set(kinds)) == len(kinds), where
    if "properties" in schema:
        assert isinstance(schema["properties"], dict), where
        for name, sub in schema["properties"].items():
            check_schema(sub, f"{where}.{name}")
    if "required" in schema:
        required = schema["required"]
        assert isinstance(required, list) and len(set(required)) == len(required), where
        assert set(required) <= set(schema.get("properties", {})), where
    if "additionalProperties" in schema and not isinstance(schema["additionalProperties"], bool):
        check_schema(schema["additionalProperties"], f"{where}.additionalProperties")
    if "items" in schema:
        check_schema(schema["items"], f"{where}[]")
    if "enum" in schema:
        assert isinstance(schema["enum"], list) and schema["enum"], where
    if "anyOf" in schema:
        for sub in schema["anyOf"]:
            check_schema(sub, where)
    if "description" in schema:
        assert isinstance(schema["description"], str) and schema["description"], where
    if "default" in schema:
        assert matches(schema, schema["default"]), f"{where}: default does not fit its schema"


def matches(schema: dict[str, Any], value: Any) -> bool:
    """Whether ``value`` validates against ``schema`` (the keywords ``check_schema`` allows)."""
    kinds = schema.get("type")
    if kinds is not None:
        kinds = kinds if isinstance(kinds, list) else [kinds]
        python = {
            "object": dict,
            "array": list,
            "string": str,
            "boolean": bool,
            "null": type(None),
        }

        def fits(kind: str) -> bool:
            if kind == "integer":
                return isinstance(value, int) and not isinstance(value, bool)
            if kind == "number":
                return isinstance(value, int | float) and not isinstance(value, bool)
            return isinstance(value, python[kind])

        if not any(fits(kind) for kind in kinds):
            return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    if "anyOf" in schema and not any(matches(sub, value) for sub in schema["anyOf"]):
        return False
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        if any(name not in value for name in schema.get("required", [])):
            return False
        for name, item in value.items():
            if name in properties:
                if not matches(properties[name], item):
                    return False
            elif schema.get("additionalProperties") is False:
                return False
    if isinstance(value, list) and "items" in schema:
        return all(matches(schema["items"], item) for item in value)
    return True


@pytest.mark.parametrize("name", sorted(EXPECTED_PARAMETERS))
def test_tool_schemas_are_valid_and_name_the_parameters(name: str) -> None:
    tool = next(t for t in builtin_tools(bash=True) if t.name == name)
    schema = tool.parameters_schema()
    json.dumps(schema)  # it must travel as JSON
    check_schema(schema)
    required, names = EXPECTED_PARAMETERS[name]
    assert schema["type"] == "object"
    assert list(schema["properties"]) == names
    assert schema["required"] == required
    assert schema["additionalProperties"] is False
    assert tool.description
    for parameter in schema["properties"].values():
        assert parameter.get("description"), f"{name}: every parameter is described"


def test_builtin_tools_only_include_bash_when_asked() -> None:
    assert [t.name for t in builtin_tools()] == [
        "Read",
        "Write",
        "Edit",
        "MultiEdit",
        "Glob",
        "Grep",
        "ListDir",
        "Move",
        "Delete",
        "TodoWrite",
    ]
    assert [t.name for t in builtin_tools(bash=True)][-1] == "Bash"


def test_schemas_describe_the_nested_shapes_models_must_send() -> None:
    tools = {t.name: t.parameters_schema() for t in builtin_tools(bash=True)}
    edit_item = tools["MultiEdit"]["properties"]["edits"]["items"]
    assert edit_item["required"] == ["old_string", "new_string"]
    assert set(edit_item["properties"]) == {"old_string", "new_string", "replace_all"}
    assert matches(
        tools["MultiEdit"], {"file_path": "a", "edits": [{"old_string": "x", "new_string": "y"}]}
    )
    assert not matches(tools["MultiEdit"], {"file_path": "a", "edits": [{"old_string": "x"}]})
    todo_item = tools["TodoWrite"]["properties"]["todos"]["items"]
    assert todo_item["properties"]["status"]["enum"] == ["pending", "in_progress", "completed"]
    assert not matches(tools["TodoWrite"], {"todos": [{"content": "x", "status": "done"}]})
    grep_mode = tools["Grep"]["properties"]["output_mode"]
    assert grep_mode["enum"] == ["files_with_matches", "content", "count"]
    assert grep_mode["default"] == "files_with_matches"
    assert matches(tools["Read"], {"file_path": "a", "offset": None, "limit": 5})
    assert not matches(tools["Read"], {"file_path": "a", "limit": "5"})
    assert not matches(tools["Read"], {"file_path": "a", "limit": True})
    assert not matches(tools["Read"], {"path": "a"})

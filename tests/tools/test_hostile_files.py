"""The file tools against files a hostile or careless environment puts in the workspace: huge
files, special files where a regular one is expected, line separators other than ``\\n``, and
CRLF files edited from what Read showed."""

from __future__ import annotations

import errno
import os
import pathlib
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import pytest

import toolkernel as tk
from toolkernel import _beneath
from toolkernel.locks import writes
from toolkernel.tools import FileAccess, FileAccessed, Workspace, _fileops, builtin_tools
from toolkernel.tools._file_tools import LIST_LIMIT, TEXT_SIZE_LIMIT
from toolkernel.tools._search import SEARCH_SIZE_LIMIT

from .privileges import as_a_user


@pytest.fixture
async def kernel(tmp_path: pathlib.Path) -> AsyncIterator[tk.Kernel]:
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as k:
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


def sparse(path: pathlib.Path, size: int) -> pathlib.Path:
    """A file of ``size`` bytes that takes no room on disk (all zeros but a text head)."""
    with path.open("wb") as file:
        file.write(b"head line\n")
        file.truncate(size)
    return path


def temp_leftovers(root: pathlib.Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.endswith(".tktmp"))


# -- huge files --------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["Edit", "MultiEdit"])
async def test_a_file_over_the_text_limit_is_refused_before_it_is_read(
    kernel: tk.Kernel, tmp_path: pathlib.Path, tool: str
) -> None:
    # Read shows any window of it (test_read_window.py); this one is binary past its head.
    sparse(tmp_path / "huge.log", TEXT_SIZE_LIMIT + 1)
    arguments: dict[str, Any] = {"file_path": "huge.log"}
    if tool == "Edit":
        arguments |= {"old_string": "head", "new_string": "tail"}
    else:
        arguments |= {"edits": [{"old_string": "head", "new_string": "tail"}]}
    message = await error(kernel, tool, **arguments)
    assert "'huge.log' is too large" in message
    assert f"{TEXT_SIZE_LIMIT + 1} bytes" in message
    assert (tmp_path / "huge.log").stat().st_size == TEXT_SIZE_LIMIT + 1


async def test_a_file_at_the_text_limit_is_still_read(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "big.log").write_bytes(b"x\n" * (TEXT_SIZE_LIMIT // 2))
    assert (await ok(kernel, "Read", file_path="big.log", limit=1)).startswith("     1\tx")


async def test_grep_skips_files_over_its_limit_and_says_so(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    sparse(tmp_path / "huge.log", SEARCH_SIZE_LIMIT + 1)
    (tmp_path / "small.txt").write_text("head line\n")
    output = await ok(kernel, "Grep", pattern="head")
    assert output.splitlines()[0] == "small.txt"
    assert "1 file over" in output and "huge.log" in output


def test_reading_with_a_limit_never_returns_more(tmp_path: pathlib.Path) -> None:
    # A file whose size grows after fstat (or lies, like /proc files) is still cut at the limit.
    (tmp_path / "f").write_bytes(b"a" * 100)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert _fileops.read_regular(fd, ("f",), max_bytes=100) == b"a" * 100
        with pytest.raises(OSError, match="too large") as caught:
            _fileops.read_regular(fd, ("f",), max_bytes=99)
    finally:
        os.close(fd)
    assert caught.value.errno == 27  # EFBIG


# -- special files where a regular one is expected --------------------------------------------


@pytest.fixture
def specials(tmp_path: pathlib.Path) -> Iterator[list[str]]:
    os.mkfifo(tmp_path / "pipe")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "sock"))
    try:
        yield ["pipe", "sock"]
    finally:
        server.close()


@pytest.mark.parametrize("name", ["pipe", "sock"])
async def test_write_refuses_to_replace_a_special_file(
    kernel: tk.Kernel, tmp_path: pathlib.Path, specials: list[str], name: str
) -> None:
    before = (tmp_path / name).lstat()
    message = await error(kernel, "Write", file_path=name, content="data\n")
    assert f"{name!r} is not a regular file" in message
    after = (tmp_path / name).lstat()
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert temp_leftovers(tmp_path) == []


# -- lines are split on \n only ---------------------------------------------------------------


async def test_read_numbers_lines_as_editors_do_whatever_else_a_line_holds(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    # Form feeds (Python's own sources hold them), \x1c-\x1e, NEL and U+2028 are not line ends.
    (tmp_path / "f.py").write_text("a\n\x0cb\nc\u2028d\x85e\n", newline="")
    assert await ok(kernel, "Read", file_path="f.py") == (
        "     1\ta\n     2\t\x0cb\n     3\tc\u2028d\x85e"
    )
    output = await ok(kernel, "Grep", pattern="e", path="f.py", output_mode="content")
    assert output == "f.py:3:c\u2028d\x85e"


async def test_read_hides_the_carriage_return_of_crlf_lines(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    assert await ok(kernel, "Read", file_path="w.txt") == "     1\tone\n     2\ttwo"


# -- CRLF files edited from what Read showed ----------------------------------------------------


async def test_edit_of_a_crlf_file_matches_lines_as_read_showed_them_and_keeps_crlf(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await ok(kernel, "Edit", file_path="w.txt", old_string="one\ntwo", new_string="1\n2\n2b")
    assert (tmp_path / "w.txt").read_bytes() == b"1\r\n2\r\n2b\r\nthree\r\n"


async def test_multiedit_of_a_crlf_file_keeps_crlf(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    edits = [
        {"old_string": "two\nthree", "new_string": "2\n3"},
        {"old_string": "one\r\n", "new_string": "1\r\n"},
    ]
    await ok(kernel, "MultiEdit", file_path="w.txt", edits=edits)
    assert (tmp_path / "w.txt").read_bytes() == b"1\r\n2\r\n3\r\n"


async def test_edit_of_an_lf_file_leaves_its_line_ends_alone(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "u.txt").write_bytes(b"one\ntwo\n")
    await ok(kernel, "Edit", file_path="u.txt", old_string="one\ntwo", new_string="1\n2")
    assert (tmp_path / "u.txt").read_bytes() == b"1\n2\n"


# -- huge directories and trees ---------------------------------------------------------------


async def test_listdir_of_a_huge_directory_shows_the_first_entries_and_counts_the_rest(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "many").mkdir()
    for number in range(LIST_LIMIT + 5):
        (tmp_path / "many" / f"f{number:05}").touch()
    lines = (await ok(kernel, "ListDir", path="many")).splitlines()
    assert len(lines) == LIST_LIMIT + 1
    assert lines[0] == "f00000" and lines[-2] == f"f{LIST_LIMIT - 1:05}"
    assert lines[-1].startswith("... (5 more entries")


async def test_a_walk_stops_at_the_next_directory_once_its_call_is_cancelled(
    tmp_path: pathlib.Path,
) -> None:
    # A Glob or Grep over a huge tree must honour its run timeout: the walk runs in a worker
    # thread, which cancellation cannot interrupt unless the walk checks for it.
    (tmp_path / "f").touch()
    for number in range(20):
        (tmp_path / f"d{number:02}").mkdir()
        (tmp_path / f"d{number:02}" / "l").symlink_to("../f")
    links_seen: list[str] = []
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with anyio.CancelScope() as scope:

            def linked_file(link: str) -> bool:
                links_seen.append(link)
                anyio.from_thread.run_sync(scope.cancel)
                return True

            await anyio.to_thread.run_sync(_fileops.walk, fd, (), linked_file)
    finally:
        os.close(fd)
    assert scope.cancelled_caught
    assert len(links_seen) == 1


async def test_a_delete_of_a_tree_cancelled_before_it_is_moved_aside_leaves_it_whole(
    tmp_path: pathlib.Path,
) -> None:
    # Deleting a tree runs in a worker thread: a cancellation that comes before the tree is
    # moved aside (here, at the first access checked) changes nothing; one after it lets the
    # removal finish (tests/tools/test_cancelled_delete.py). Never half.
    root = tmp_path / "root"
    for number in range(20):
        (root / "tree" / f"d{number:02}").mkdir(parents=True)
        (root / "tree" / f"d{number:02}" / "f").touch()
    with Workspace(root) as workspace, anyio.CancelScope() as scope:

        def cancel_when_checked(access: FileAccessed) -> None:
            anyio.from_thread.run_sync(scope.cancel)

        fs = FileAccess(workspace, [writes("tree")], observer=cancel_when_checked)
        await fs.delete("tree")
    assert scope.cancelled_caught
    assert len(list((root / "tree").iterdir())) == 20


# -- what a write keeps, and what it can't write ---------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
@pytest.mark.parametrize("tool", ["Write", "Edit"])
async def test_a_write_as_root_keeps_the_files_owner_and_group(
    kernel: tk.Kernel, tmp_path: pathlib.Path, tool: str
) -> None:
    target = tmp_path / "owned.txt"
    target.write_text("old\n")
    os.chown(target, 1234, 5678)
    target.chmod(0o640)
    if tool == "Write":
        await ok(kernel, "Write", file_path="owned.txt", content="new\n")
    else:
        await ok(kernel, "Edit", file_path="owned.txt", old_string="old", new_string="new")
    status = target.stat()
    assert (status.st_uid, status.st_gid, status.st_mode & 0o7777) == (1234, 5678, 0o640)
    assert target.read_text() == "new\n"


@pytest.mark.parametrize("tool", ["Write", "Edit", "MultiEdit"])
async def test_text_with_a_lone_surrogate_is_refused_clearly_and_writes_nothing(
    kernel: tk.Kernel, tmp_path: pathlib.Path, tool: str
) -> None:
    (tmp_path / "a.txt").write_text("old\n")
    arguments: dict[str, Any] = {"file_path": "a.txt"}
    if tool == "Write":
        arguments["content"] = "bad \ud800 text"
    elif tool == "Edit":
        arguments |= {"old_string": "old", "new_string": "\ud800"}
    else:
        arguments["edits"] = [{"old_string": "old", "new_string": "\ud800"}]
    message = await error(kernel, tool, **arguments)
    assert "a lone surrogate" in message and "'a.txt'" in message
    assert (tmp_path / "a.txt").read_text() == "old\n"
    assert temp_leftovers(tmp_path) == []


async def test_a_move_onto_itself_says_so(kernel: tk.Kernel, tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / "to-a").symlink_to("a.txt")
    for destination in ("a.txt", "./a.txt"):
        message = await error(kernel, "Move", source="a.txt", destination=destination)
        assert "they are the same file" in message
    # A link to it is an entry of its own (Move acts on links, as mv does), and it is there.
    message = await error(kernel, "Move", source="a.txt", destination="to-a")
    assert "'to-a': it already exists" in message
    assert (tmp_path / "a.txt").read_text() == "a\n"
    assert (tmp_path / "to-a").is_symlink()


# -- file systems that fold case and Unicode ----------------------------------------------------


@pytest.fixture
async def folding_kernel(tmp_path: pathlib.Path) -> AsyncIterator[tk.Kernel]:
    workspace = Workspace(tmp_path, fold_case=True, unicode_form="NFC")
    async with tk.open_kernel(builtin_tools(), root=workspace) as k:
        yield k


async def test_glob_and_grep_match_relative_to_a_directory_spelled_in_another_case(
    folding_kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "Src" / "Sub").mkdir(parents=True)
    (tmp_path / "Src" / "Sub" / "Cafe\u0301.txt").write_text("needle\n")  # NFD on disk
    found = "Src/Sub/Cafe\u0301.txt"
    assert await ok(folding_kernel, "Glob", pattern="Sub/*.txt", path="SRC") == found
    assert await ok(folding_kernel, "Glob", pattern="*.txt", path="src/sub") == found
    output = await ok(folding_kernel, "Grep", pattern="needle", path="sRC", glob="Sub/*.txt")
    assert output == found


# -- Move never replaces what appeared at its destination ----------------------------------------


@pytest.mark.parametrize("atomic", [True, False], ids=["renameat2", "checked"])
async def test_a_move_without_replace_keeps_a_destination_created_after_the_check(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, atomic: bool
) -> None:
    # The Move tool checks that the destination is free, then renames; another process creating
    # the destination in between must not have its file silently replaced.
    if not atomic:
        monkeypatch.setattr(_beneath, "renameat2", None)
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("source\n")

    def create_destination(access: FileAccessed) -> None:
        if access.verb == "move to":
            (root / "b.txt").write_text("someone else's\n")

    with Workspace(root) as workspace:
        fs = FileAccess(workspace, [writes("a.txt"), writes("b.txt")], observer=create_destination)
        with pytest.raises(FileExistsError):
            await fs.move("a.txt", "b.txt", replace=False)
    assert (root / "a.txt").read_text() == "source\n"
    assert (root / "b.txt").read_text() == "someone else's\n"


async def test_a_move_without_replace_moves_files_and_directories(tmp_path: pathlib.Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("f\n")
    (tmp_path / "a.txt").write_text("a\n")
    with Workspace(tmp_path) as workspace:
        fs = FileAccess(workspace, [writes(".")])
        await fs.move("a.txt", "new/b.txt", parents=True, replace=False)
        await fs.move("d", "e", replace=False)
        (tmp_path / "x").mkdir()
        with pytest.raises(FileExistsError):
            await fs.move("e", "x", replace=False)
    assert (tmp_path / "new" / "b.txt").read_text() == "a\n"
    assert (tmp_path / "e" / "f").read_text() == "f\n"


# -- a search goes on past files it can't read ---------------------------------------------------


async def test_grep_and_glob_skip_a_file_too_deep_to_be_named(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    # A path longer than PATH_MAX can't be keyed; one such file must not fail the whole search.
    (tmp_path / "a.txt").write_text("needle\n")
    directory = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(30):
            os.mkdir("d" * 200, dir_fd=directory)
            child = os.open("d" * 200, os.O_RDONLY | os.O_DIRECTORY, dir_fd=directory)
            os.close(directory)
            directory = child
        deep = os.open("deep.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=directory)
        os.write(deep, b"needle\n")
        os.close(deep)
    finally:
        os.close(directory)
    assert await ok(kernel, "Grep", pattern="needle") == "a.txt"
    assert await ok(kernel, "Glob", pattern="**/*.txt") == "a.txt"


class SwapForOutsideLink:
    """A listener that, when a call reads ``trigger``, swaps ``victim`` for a link out of the
    workspace: another process changing the tree while a search walks it."""

    def __init__(self, trigger: str, victim: pathlib.Path, outside: pathlib.Path) -> None:
        self.trigger, self.victim, self.outside = trigger, victim, outside

    def __call__(self, event: object) -> None:
        pass

    def file_accessed(self, access: FileAccessed) -> None:
        if str(access.path) == self.trigger and not self.victim.is_symlink():
            self.victim.unlink()
            self.victim.symlink_to(self.outside)


async def test_grep_skips_a_file_turned_into_a_link_out_of_the_workspace_during_the_search(
    tmp_path: pathlib.Path,
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("needle: secret\n")
    (root / "a.txt").write_text("needle\n")
    (root / "b.txt").write_text("needle\n")
    async with tk.open_kernel(builtin_tools(), root=root) as kernel:
        kernel.add_listener(SwapForOutsideLink("a.txt", root / "b.txt", tmp_path / "secret.txt"))
        output = await ok(kernel, "Grep", pattern="needle", output_mode="content")
    assert output == "a.txt:1:needle"


@pytest.mark.parametrize("pattern", ["/etc/*", "../*", "src/../../**", ".."])
async def test_a_glob_that_could_never_match_says_how_to_search_there(
    kernel: tk.Kernel, tmp_path: pathlib.Path, pattern: str
) -> None:
    (tmp_path / "a.txt").write_text("needle\n")
    message = await error(kernel, "Glob", pattern=pattern)
    assert f"glob {pattern!r}" in message and "as path" in message
    message = await error(kernel, "Grep", pattern="needle", glob=pattern)
    assert f"glob {pattern!r}" in message


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
@pytest.mark.parametrize("code", [errno.EPERM, errno.EINVAL])
async def test_a_write_goes_on_when_the_owner_can_not_be_kept(
    kernel: tk.Kernel, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    # EPERM: not root. EINVAL: in a user namespace, an owner the namespace does not map.
    target = tmp_path / "a.txt"
    target.write_text("old\n")
    os.chown(target, 1234, 5678)

    def refuse(fd: int, uid: int, gid: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fchown", refuse)
    await ok(kernel, "Write", file_path="a.txt", content="new\n")
    assert target.read_text() == "new\n"
    assert temp_leftovers(tmp_path) == []


# -- a read-only file stays unwritten ---------------------------------------------------------

READ_ONLY_SCENARIO = """
import pathlib, sys, trio
import toolkernel as tk
from toolkernel.tools import builtin_tools

EDIT = {"old_string": "old", "new_string": ""}

async def main(root):
    async with tk.open_kernel(builtin_tools(), root=root) as kernel:
        for name, arguments in [
            ("Write", {"file_path": "ro.txt", "content": "new\\\\n"}),
            ("Edit", {"file_path": "ro.txt", "old_string": "old", "new_string": "new"}),
            ("MultiEdit", {"file_path": "ro.txt", "edits": [EDIT]}),
        ]:
            (result,) = await kernel.run([tk.ToolCall("c1", name, arguments)])
            print(name, result.status.name, result.error)

trio.run(main, pathlib.Path(sys.argv[1]))
"""


def test_a_read_only_file_is_not_replaced_by_write_or_edit(shared_directory: pathlib.Path) -> None:
    # The atomic rename could replace a file its mode forbids writing, since only the directory's
    # permissions matter to a rename; as a user (not root), Write and Edit must refuse, as
    # `echo >` would. Run as an unprivileged user when the tests run as root.
    prefix = as_a_user()
    target = shared_directory / "ro.txt"
    target.write_text("old\n")
    target.chmod(0o444)
    completed = subprocess.run(
        [*prefix, sys.executable, "-c", READ_ONLY_SCENARIO, str(shared_directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = completed.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["Write", "ERROR"],
        ["Edit", "ERROR"],
        ["MultiEdit", "ERROR"],
    ], completed.stdout + completed.stderr
    assert all("read-only" in line for line in lines)
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in shared_directory.iterdir()) == ["ro.txt"]


# -- a link that changes while a key is computed -------------------------------------------------


@pytest.mark.parametrize("becomes", ["a directory", "nothing", "a file"])
def test_a_key_is_computed_when_a_link_changes_between_its_lstat_and_its_readlink(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, becomes: str
) -> None:
    # Another process replacing a link at the wrong moment made the key computation (and so the
    # call's claims) fail with a raw FileNotFoundError or EINVAL from readlink.
    (tmp_path / "elsewhere").mkdir()
    link = tmp_path / "d"
    link.symlink_to("elsewhere")
    real_readlink = os.readlink

    def replace_then_readlink(path: Any, *args: Any, **kwargs: Any) -> str:
        if pathlib.Path(path) == link and link.is_symlink():
            link.unlink()
            if becomes == "a directory":
                link.mkdir()
            elif becomes == "a file":
                link.write_text("")
        return real_readlink(path, *args, **kwargs)

    with Workspace(tmp_path) as workspace:
        monkeypatch.setattr(os, "readlink", replace_then_readlink)
        assert str(workspace.key("d/f.txt")) == "d/f.txt"

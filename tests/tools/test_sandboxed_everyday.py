"""Everyday commands through the sandboxed Bash tool do what they do in a plain shell: each runs
on one copy of a tree through the tool, and on another in a plain ``bash -c``, and the two trees
must end the same (contents, modes, links, which names are one file).

Real processes, so the real clock. The commands are the ones that rename, link, replace and
remove (the overlay's copy-ups and whiteouts, links leading out of the workspace, trees deeper
than a path may be long).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest

import toolkernel as tk
from toolkernel import sandbox
from toolkernel._beneath import remove_tree
from toolkernel.tools import builtin_tools

from ..trees import snapshot

pytestmark = pytest.mark.skipif(
    sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}"
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def deep_trees_removed(tmp_path: pathlib.Path) -> Iterator[None]:
    """Remove what a test left, one directory at a time: a tree deeper than a path may be
    long is more than pytest's own clean-up can remove."""
    yield
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in os.listdir(fd):
            remove_tree(fd, name, force=True)
    finally:
        os.close(fd)


def seed(root: pathlib.Path) -> None:
    """A small project: files, a directory, links inside and out, a virtual environment's
    kind of link to an interpreter outside."""
    (root / "a.txt").write_text("alpha\n")
    (root / "d" / "sub").mkdir(parents=True)
    (root / "d" / "x.txt").write_text("x\n")
    (root / "d" / "sub" / "y.txt").write_text("y\n")
    (root / "newdir").mkdir()
    (root / "inside").symlink_to("a.txt")
    (root / "result").symlink_to(sys.executable)  # a build's link out of the workspace
    (root / "dangling").symlink_to("/nonexistent/place")


def plain(root: pathlib.Path, command: str) -> subprocess.CompletedProcess[str]:
    """``command`` in a plain shell, with a temporary directory of its own beside ``root``
    (on its file system, as /tmp often is)."""
    temporary = root.parent / f"{root.name}-tmp"
    temporary.mkdir(exist_ok=True)
    environment = {**os.environ, "TMPDIR": str(temporary)}
    return subprocess.run(
        ["bash", "-c", command],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        env=environment,
    )


async def ends_as_in_a_plain_shell(
    place: pathlib.Path, command: str, make: Callable[[pathlib.Path], None]
) -> None:
    """Run ``command`` on a tree ``make`` makes in a plain shell, and on another through the
    Bash tool: both succeed and leave the same tree."""
    shell_root, tool_root = place / "plain", place / "tool"
    for root in (shell_root, tool_root):
        root.mkdir()
        make(root)
    done = plain(shell_root, command)
    assert done.returncode == 0, done.stderr
    result = await through_the_tool(tool_root, command)
    assert result.status is tk.Status.OK, result.error
    assert snapshot(tool_root) == snapshot(shell_root)


async def through_the_tool(root: pathlib.Path, command: str) -> tk.ToolResult:
    async with tk.open_kernel(builtin_tools(bash=True), root=root) as kernel:
        (result,) = await kernel.run([tk.ToolCall("b", "Bash", {"command": command})])
    return result


RENAME = 'python3 -c "import os; os.rename({}, {})"'
TMP = "os.environ['TMPDIR']"
DEEP = "$(printf 'level/%.0s' $(seq 1200))"
"""A path 1,200 directories deep: 7,200 bytes, longer than a path may be (``PATH_MAX``)."""
HALF = "$(printf 'level/%.0s' $(seq 600))"

COMMANDS = [
    "mv a.txt b.txt",
    "mv a.txt newdir/",
    "mv a.txt d/sub/z.txt && mv d/x.txt d/sub/",
    "ln a.txt b.txt",
    "ln -s a.txt b.txt && ln d/x.txt d/sub/x2.txt",
    "rm result",
    "ln -sf /bin/sh result",
    "rm dangling inside",
    "find . -type l -delete",
    "mv result renamed-link",
    "cp -a d e && rm -r d",
    "rm -r d && mkdir d && echo new > d/n.txt",
    "echo more >> a.txt && chmod 600 a.txt",
    # Renames overlayfs refuses: a directory of the lower layer, across mounts ($TMPDIR).
    RENAME.format("'d'", "'e'"),
    RENAME.format("'d/sub'", "'newdir/sub2'"),
    "mv d newdir/ && mv newdir/d/sub newdir/sub",
    "echo hi > $TMPDIR/f && " + RENAME.format(TMP + " + '/f'", "'f.txt'"),
    "mkdir -p $TMPDIR/t/u && echo y > $TMPDIR/t/u/y && " + RENAME.format(TMP + " + '/t'", "'t'"),
    RENAME.format("'a.txt'", TMP + " + '/a'"),
    RENAME.format("'d'", "'newdir'"),  # onto an empty directory
    "git init -q && git init -q --separate-git-dir=gitdir && git status --short",
    f"mkdir -p {DEEP}",
    f"mkdir -p {HALF} && echo bottom > {HALF}/bottom.txt",
]


@pytest.mark.parametrize("command", COMMANDS)
async def test_an_everyday_command_ends_as_in_a_plain_shell(
    tmp_path: pathlib.Path, command: str
) -> None:
    await ends_as_in_a_plain_shell(tmp_path, command, seed)


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ("d", "d/sub/inside"),  # a directory into itself: EINVAL
        ("d", "newdir2"),  # onto a directory that is not empty: ENOTEMPTY
        ("d", "a.txt"),  # a directory onto a file: ENOTDIR
        ("a.txt", "d"),  # a file onto a directory: EISDIR
        ("missing", "x"),  # ENOENT
    ],
)
async def test_a_rename_that_fails_fails_as_in_a_plain_shell(
    tmp_path: pathlib.Path, source: str, target: str
) -> None:
    command = (
        f"python3 -c \"import os\ntry: os.rename('{source}', '{target}')\n"
        f'except OSError as e: print(e.errno)"'
    )
    shell_root, tool_root = tmp_path / "plain", tmp_path / "tool"
    for root in (shell_root, tool_root):
        root.mkdir()
        seed(root)
        (root / "newdir2").mkdir()
        (root / "newdir2" / "kept").write_text("kept\n")
    done = plain(shell_root, command)
    result = await through_the_tool(tool_root, command)
    assert result.status is tk.Status.OK, result.error
    assert result.text() == done.stdout and done.stdout.strip().isdigit()
    assert snapshot(tool_root) == snapshot(shell_root)


def make_deep(root: pathlib.Path, depth: int) -> None:
    """Directories ``depth`` deep below ``root``, made one at a time (no path is spelled
    whole), a file at the bottom."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("level", dir_fd=fd)
            child = os.open("level", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        with open(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
            f.write("bottom\n")
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    "command", ["rm -rf level", "find level -name bottom.txt -delete", "mv level moved"]
)
async def test_a_tree_deeper_than_a_path_may_be_long_is_removed_or_moved_as_in_a_plain_shell(
    tmp_path: pathlib.Path, command: str
) -> None:
    await ends_as_in_a_plain_shell(tmp_path, command, lambda root: make_deep(root, 1200))


async def test_what_a_command_leaves_in_its_temporary_directory_is_removed_however_deep(
    tmp_path: pathlib.Path,
) -> None:
    command = f'cd "$TMPDIR" && mkdir -p {DEEP} && chmod 000 level && echo "$TMPDIR"'
    result = await through_the_tool(tmp_path, command)
    assert result.status is tk.Status.OK, result.error
    temporary = pathlib.Path(result.text().strip().splitlines()[-1])
    assert temporary.is_absolute()
    assert not await anyio.Path(temporary).exists()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
async def test_a_local_clone_into_the_workspace_ends_as_in_a_plain_shell(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A local clone hard-links the objects of the repository it clones: copied up in the
    # overlay, linked to new names; it used to fail as "kept changing" three runs in a row.
    for name, value in {
        "GIT_AUTHOR_NAME": "T",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "T",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_AUTHOR_DATE": "2001-02-03T04:05:06Z",
        "GIT_COMMITTER_DATE": "2001-02-03T04:05:06Z",
    }.items():
        monkeypatch.setenv(name, value)
    shell_root, tool_root = tmp_path / "plain", tmp_path / "tool"
    for root in (shell_root, tool_root):
        root.mkdir()
        (root / "f.txt").write_text("f\n")
        made = plain(root, "git init -q -b main && git add f.txt && git commit -qm first")
        assert made.returncode == 0, made.stderr
    command = "git clone -q . sub/copy && git -C sub/copy log --format=%s"
    done = plain(shell_root, command)
    assert done.returncode == 0, done.stderr
    result = await through_the_tool(tool_root, command)
    assert result.status is tk.Status.OK, result.error
    assert result.text().splitlines()[0] == "first"  # its output first, then the notes

    def without_indexes(root: pathlib.Path) -> dict[str, Any]:
        # An index caches each file's status (times, inode numbers): one of its own per tree.
        return {k: v for k, v in snapshot(root).items() if not k.endswith(".git/index")}

    assert without_indexes(tool_root) == without_indexes(shell_root)


# -- a batch whose earlier call changes a link its later calls' paths pass through ------------


def with_a_link(root: pathlib.Path) -> None:
    seed(root)
    (root / "L").symlink_to("d")


@pytest.mark.parametrize(
    "calls",
    [
        [("Bash", "rm L"), ("Bash", "echo 1 > L/x.txt; echo $?"), ("Bash", "cat d/x.txt")],
        [("Bash", "ln -sfn newdir L"), ("Bash", "echo 1 > L/x.txt"), ("Read", "d/x.txt")],
        [("Bash", "mv L M"), ("Bash", "cat L/x.txt; echo $?")],
        [("Bash", "rm L"), ("Read", "L/x.txt")],
        [("Bash", "ln -sfn newdir L"), ("Read", "L/x.txt"), ("Bash", "cd L && echo w > w")],
    ],
)
async def test_a_later_call_through_a_link_an_earlier_one_changed_goes_where_it_points_now(
    tmp_path: pathlib.Path, calls: list[tuple[str, str]]
) -> None:
    """Its paths were keyed through the link as it was when the batch came: it ran beside
    the earlier call, on the old link, and what it did was kept (a write through a removed
    link landed in its old target). It claims the link it passes through, so it comes after."""
    shell_root, tool_root = tmp_path / "plain", tmp_path / "tool"
    for root in (shell_root, tool_root):
        root.mkdir()
        with_a_link(root)
    expected: list[tuple[bool, str]] = []
    for tool, argument in calls:
        if tool == "Bash":
            done = plain(shell_root, argument)
            expected.append((done.returncode == 0, done.stdout))
        else:
            target = shell_root / argument
            found = target.exists()
            expected.append((found, target.read_text().strip() if found else ""))
    batch = [
        tk.ToolCall(f"c{i}", tool, {"command" if tool == "Bash" else "file_path": argument})
        for i, (tool, argument) in enumerate(calls)
    ]
    async with tk.open_kernel(builtin_tools(bash=True), root=tool_root) as kernel:
        results = await kernel.run(batch)
    for result, (ok, said) in zip(results, expected, strict=True):
        assert result.ok is ok, result
        assert said in (result.text() if result.ok else result.error or ""), result
    assert snapshot(tool_root) == snapshot(shell_root)

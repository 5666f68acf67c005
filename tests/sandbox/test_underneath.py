"""What another writer changed while a command ran on its overlay: a change to what the commit
would touch is found (the run is not committed), and nothing else is (the run commits, as the
command did it).

Each scenario runs a real command on a real overlay (``scenario.py``); the other writer is a
shell snippet run on the workspace itself, before the change set is read or before it is
checked. As this process's user, and as an unprivileged one (the sandbox then makes a user
namespace) where the tests run as root.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
from typing import Any

import pytest

from toolkernel import sandbox

from ..tools.privileges import as_a_user
from .scenario import run_as

pytestmark = pytest.mark.skipif(
    sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}"
)


@pytest.fixture(params=["this user", "unprivileged"])
def user(request: pytest.FixtureRequest) -> list[str]:
    """The command prefix the scenario runs with."""
    return as_a_user() if request.param == "unprivileged" else []


@pytest.fixture
def root(shared_directory: pathlib.Path, user: list[str]) -> pathlib.Path:
    """A workspace owned by the user the scenario runs as (a user namespace maps that user
    alone: a file of another owner could not even be copied up)."""
    (shared_directory / "a.txt").write_text("a\n")
    (shared_directory / "d" / "sub").mkdir(parents=True)
    (shared_directory / "d" / "x").write_text("x\n")
    (shared_directory / "d" / "sub" / "deep.txt").write_text("deep\n")
    if user:
        for place in [shared_directory, *shared_directory.rglob("*")]:
            os.chown(place, 65534, 65534)
    return shared_directory


def run(
    user: list[str],
    root: pathlib.Path,
    command: str,
    *,
    before_read: str | None = None,
    before_check: str | None = None,
) -> dict[str, Any]:
    return run_as(user, root, command, before_read=before_read, before_check=before_check)


def tree(root: pathlib.Path) -> dict[str, str]:
    found = {}
    for place in sorted(root.rglob("*")):
        name = place.relative_to(root).as_posix()
        found[name] = "dir" if place.is_dir() else place.read_text()
    return found


# -- renames and links: nothing else changed, so they commit -----------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("mv a.txt b.txt", {"b.txt": "a\n"}),
        ("mv a.txt d/", {"d/a.txt": "a\n"}),
        ("mv a.txt b.txt; mv b.txt c.txt", {"c.txt": "a\n"}),
        ("ln a.txt b.txt", {"a.txt": "a\n", "b.txt": "a\n"}),
    ],
)
@pytest.mark.parametrize("other", [None, "echo o > other.txt; echo o > d/other.txt"])
def test_a_rename_or_a_link_commits_even_beside_another_writer(
    user: list[str],
    root: pathlib.Path,
    command: str,
    expected: dict[str, str],
    other: str | None,
) -> None:
    # The entry renamed or linked carries the origin of the file it came from: its path held
    # nothing, and files made beside it by someone else are no conflict.
    before = tree(root)
    found = run(user, root, command, before_check=other)
    assert found["underneath"] == []
    after = tree(root)
    for name in ("a.txt", "d/a.txt", "b.txt", "c.txt"):
        before.pop(name, None)
    if other:
        before.update({"other.txt": "o\n", "d/other.txt": "o\n"})
    assert after == {**before, **expected}


def test_a_hard_link_the_command_made_stays_one_file(user: list[str], root: pathlib.Path) -> None:
    run(user, root, "ln a.txt b.txt")
    assert os.stat(root / "a.txt").st_ino == os.stat(root / "b.txt").st_ino


# -- conflicts: the commit would undo what the other writer did --------------------------------


@pytest.mark.parametrize("when", ["before_read", "before_check"])
@pytest.mark.parametrize(
    ("command", "other", "changed"),
    [
        # The source of a rename deleted meanwhile: the command's mv would have failed.
        ("mv a.txt b.txt", "rm a.txt", "a.txt"),
        # A file appended to, deleted meanwhile: the commit would bring it back.
        ("echo more >> a.txt", "rm a.txt", "a.txt"),
        ("echo more >> a.txt", "echo other > a.txt", "a.txt"),
        # A file made in a directory deleted meanwhile: the commit would bring the directory
        # back, holding only that file (a lost delete).
        ("echo new > d/new.txt", "rm -r d", "d"),
        # ... or made a link to elsewhere.
        ("echo new > d/new.txt", "mv d d2; ln -s d2 d", "d"),
        # A tree deleted or replaced, with a file deep inside it changed meanwhile.
        ("rm -r d", "echo changed > d/sub/deep.txt", "d"),
        ("rm -r d; echo file > d", "echo changed > d/sub/deep.txt", "d"),
        ("rm -r d; mkdir d", "echo new > d/sub/new.txt", "d"),
        # A file made where another writer made one too.
        ("echo mine > new.txt", "echo theirs > new.txt", "new.txt"),
    ],
)
def test_what_another_writer_changed_of_what_the_commit_touches_is_found(
    user: list[str],
    root: pathlib.Path,
    tmp_path: pathlib.Path,
    command: str,
    other: str,
    changed: str,
    when: str,
) -> None:
    del changed  # what the parameters name, for the reader
    # What the other writer alone leaves, on a copy: the run must commit nothing over it.
    alone = tmp_path / "alone"
    shutil.copytree(root, alone, symlinks=True)
    subprocess.run(["/bin/sh", "-c", other], cwd=alone, check=True)
    found = run(user, root, command, **{when: other})
    # Found where the change set holds it: ``changed`` itself, or what the command changed in
    # it (a directory the command did not change is no change of its own), or another of its
    # changes (read after the other writer, a whiteout over nothing is no change).
    assert found["underneath"], found
    assert tree(root) == tree(alone)


def test_a_file_made_beside_another_writers_is_no_conflict(
    user: list[str], root: pathlib.Path
) -> None:
    found = run(user, root, "echo new > d/new.txt", before_check="echo theirs > d/theirs.txt")
    assert found["underneath"] == []
    assert (root / "d" / "new.txt").read_text() == "new\n"
    assert (root / "d" / "theirs.txt").read_text() == "theirs\n"


# -- directories shut to their owner: the commit writes in them as the command did -------------


def modes(root: pathlib.Path) -> dict[str, tuple[str, int]]:
    found = {}
    for place in sorted(root.rglob("*")):
        mode = place.lstat().st_mode & 0o7777
        found[place.relative_to(root).as_posix()] = ("dir" if place.is_dir() else "file", mode)
    return found


@pytest.mark.parametrize(
    "command",
    [
        "cp -r ro ro2",
        "mv ro moved",
        "mkdir -p n/sub && echo y > n/sub/g && chmod 555 n/sub",
        "chmod 755 ro && echo new > ro/h && chmod 555 ro",
        "chmod -R u+w ro && rm -r ro",
        "chmod 700 ro && mkdir ro/deep && echo z > ro/deep/z && chmod 500 ro/deep ro",
    ],
)
def test_a_directory_shut_to_its_owner_is_committed_whole_as_the_command_left_it(
    user: list[str], root: pathlib.Path, tmp_path: pathlib.Path, command: str
) -> None:
    """A commit that gave a directory its final mode first could not write in it after (not
    as an unprivileged user: root passes), and left the tree half committed."""
    (root / "ro").mkdir()
    (root / "ro" / "f").write_text("f\n")
    if user:
        os.chown(root / "ro", 65534, 65534)
        os.chown(root / "ro" / "f", 65534, 65534)
    (root / "ro").chmod(0o555)
    alone = tmp_path / "alone"
    shutil.copytree(root, alone, symlinks=True)
    subprocess.run(["/bin/bash", "-c", command], cwd=alone, check=True)
    try:
        found = run(user, root, command)
        assert found["underneath"] == []
        assert modes(root) == modes(alone)
        assert tree(root) == tree(alone)
    finally:
        for place in (root, alone):
            subprocess.run(["chmod", "-R", "u+w", place], check=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="gives files to other users: needs root")
def test_a_change_of_owner_is_committed(shared_directory: pathlib.Path) -> None:
    """A file or a directory given to another user kept its old owner: only its mode was
    committed (a file made by the command kept its new one, moved in whole)."""
    (shared_directory / "own").write_text("own\n")
    (shared_directory / "d").mkdir()
    command = "chown 1000:1000 own; chown 1001 d; mkdir dd; chown 1002:1003 dd; touch new"
    found = run([], shared_directory, command + "; chown 1004 new")
    assert found["underneath"] == []
    owners = {p.name: (p.lstat().st_uid, p.lstat().st_gid) for p in shared_directory.iterdir()}
    assert owners == {"own": (1000, 1000), "d": (1001, 0), "dd": (1002, 1003), "new": (1004, 0)}


@pytest.mark.parametrize(
    ("command", "kept"),
    [
        ("echo more >> d/x", ["d"]),  # nothing made or removed in it: a plain shell leaves it
        ("echo more >> d/sub/deep.txt && chmod 700 d/sub", ["d", "d/sub"]),
        ("cp -a d e", ["d", "e", "e/sub"]),  # its times kept, as cp -a keeps them
        ("mv d e && echo more >> e/x", ["e", "e/sub"]),  # a rename keeps a directory's times
    ],
)
def test_a_directory_keeps_the_times_the_command_left_it(
    user: list[str], root: pathlib.Path, command: str, kept: list[str]
) -> None:
    """The commit's own renames into a directory gave it the commit's time."""
    old = 978_307_200  # 2001-01-01
    for place in (root / "d", root / "d" / "sub"):
        os.utime(place, (old, old))
    found = run(user, root, command)
    assert found["underneath"] == []
    assert {name: (root / name).stat().st_mtime for name in kept} == dict.fromkeys(kept, old)

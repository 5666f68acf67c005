"""The rename supervisor's move (``_moves``), loaded as the launcher loads it: beside a script
run with ``python -I -S``, where the package can't be imported and ``_moves`` takes the no-follow
walk from ``_nofollow`` alone. Needs no namespaces: the move itself is plain file system work.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from toolkernel.sandbox import _launcher

SANDBOX = pathlib.Path(_launcher.__file__).resolve().parent
# What the supervisor does (``_launcher._supervisor``, then ``_renames._moves``), then one move.
MOVE = f"""
import os, sys
sys.path.insert(0, {str(SANDBOX)!r})
import _renames
moves = _renames._moves()
old, new = (os.open(place, os.O_RDONLY | os.O_DIRECTORY) for place in sys.argv[1:3])
print(moves.move(old, b"tree", new, b"tree", replace=False))
print("toolkernel" in sys.modules, moves.remove_tree.__module__)
"""
DEPTH = 300  # of 20-character names: a path to the bottom is longer than PATH_MAX (4096)


def _make_deep(top: int) -> None:
    fd = os.dup(top)
    try:
        for _ in range(DEPTH):
            os.mkdir("d" * 20, dir_fd=fd)
            child = os.open("d" * 20, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        with open(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as out:
            out.write("bottom\n")
        os.symlink("/etc/passwd", "link", dir_fd=fd)
    finally:
        os.close(fd)


def _bottom(top: int) -> tuple[str, str, list[str]]:
    """The file at the bottom, the link beside it, and the bottom's entries."""
    fd = os.dup(top)
    try:
        for _ in range(DEPTH):
            child = os.open("d" * 20, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        with open(os.open("bottom.txt", os.O_RDONLY, dir_fd=fd)) as stream:
            content = stream.read()
        return content, os.readlink("link", dir_fd=fd), sorted(os.listdir(fd))
    finally:
        os.close(fd)


def test_a_tree_deeper_than_a_path_may_be_long_is_moved_by_the_script(
    tmp_path: pathlib.Path,
) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    (source / "tree").mkdir(parents=True)
    target.mkdir()
    top = os.open(source / "tree", os.O_RDONLY | os.O_DIRECTORY)
    try:
        _make_deep(top)
    finally:
        os.close(top)
    argv = [sys.executable, "-I", "-S", "-c", MOVE, str(source), str(target)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    # Moved (0), without the package, by the walk of the package's own directory.
    assert done.stdout.split("\n")[:2] == ["0", "False _nofollow"]
    assert os.listdir(source) == []  # the source is removed, however deep
    top = os.open(target / "tree", os.O_RDONLY | os.O_DIRECTORY)
    try:
        # The link is copied as a link, and what it points to is never entered.
        assert _bottom(top) == ("bottom\n", "/etc/passwd", ["bottom.txt", "link"])
    finally:
        os.close(top)

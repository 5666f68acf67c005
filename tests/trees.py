"""Snapshots of file trees for the tests that compare a command's tree with a plain shell's."""

from __future__ import annotations

import os
import pathlib
import stat
from typing import Any


def snapshot(root: pathlib.Path) -> dict[str, Any]:
    """Every entry: a link's target, a directory's mode, a file's content (the root's path in
    it spelled ``ROOT``) and mode, and, for files with several names, which of the names are
    one file. Walked a directory at a time (a tree may be deeper than a path may be long)."""
    found: dict[str, Any] = {}
    inodes: dict[int, list[str]] = {}
    pending = [("", os.open(root, os.O_RDONLY | os.O_DIRECTORY))]
    while pending:
        prefix, fd = pending.pop()
        try:
            for name in sorted(os.listdir(fd)):
                path = f"{prefix}{name}"
                status = os.lstat(name, dir_fd=fd)
                if stat.S_ISLNK(status.st_mode):
                    found[path] = ("link", os.readlink(name, dir_fd=fd))
                elif stat.S_ISDIR(status.st_mode):
                    found[path] = ("dir", stat.S_IMODE(status.st_mode))
                    child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                    pending.append((f"{path}/", child))
                else:
                    with open(os.open(name, os.O_RDONLY, dir_fd=fd), "rb") as stream:
                        content = stream.read().replace(os.fsencode(root), b"ROOT")
                    found[path] = ("file", content, stat.S_IMODE(status.st_mode))
                    inodes.setdefault(status.st_ino, []).append(path)
        finally:
            os.close(fd)
    found["(linked)"] = sorted(sorted(names) for names in inodes.values() if len(names) > 1)
    return found

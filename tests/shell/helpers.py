"""Helpers of the shell tests: file-tree snapshots, and running one Bash command."""

from __future__ import annotations

import hashlib
import os
import pathlib
import stat

import pytest

import toolkernel as tk
from toolkernel.shell import _confine

needs_landlock = pytest.mark.skipif(
    _confine.landlock_abi() <= 0, reason="needs Landlock (Linux 5.13 or later, enabled)"
)

Snapshot = dict[str, tuple[str, str]]


def snapshot(root: pathlib.Path) -> Snapshot:
    """Every file and directory under ``root``: its kind, and a file's content and mode."""
    found: Snapshot = {}
    for place in sorted(root.rglob("*")):
        relative = place.relative_to(root).as_posix()
        status = place.lstat()
        if stat.S_ISDIR(status.st_mode):
            found[relative] = ("dir", "")
        elif stat.S_ISLNK(status.st_mode):
            found[relative] = ("link", os.readlink(place))
        else:
            digest = hashlib.sha256(place.read_bytes()).hexdigest()
            found[relative] = ("file", f"{digest} {stat.S_IMODE(status.st_mode):o}")
    return found


def changed(before: Snapshot, after: Snapshot) -> set[str]:
    """Paths created, removed, or whose content or mode changed."""
    return {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}


async def run_bash(kernel: tk.Kernel, command: str) -> tk.ToolResult:
    (result,) = await kernel.run([tk.ToolCall("b", "Bash", {"command": command})])
    return result

"""Helpers for tests that check no process of a shell command outlives its call."""

from __future__ import annotations

import os
import pathlib

import anyio


def group_alive(pgid: int) -> bool:
    """True iff some process of group ``pgid`` is still alive (zombies do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            return True
    return False


async def wait_group_gone(pgid: int) -> None:
    """SIGKILL is delivered asynchronously: allow the group a moment to vanish."""
    with anyio.move_on_after(2):
        while group_alive(pgid):  # noqa: ASYNC110 - another process's state: nothing to wait on
            await anyio.sleep(0.01)
    assert not group_alive(pgid), f"a process of group {pgid} survived"


def running_with(marker: str) -> list[int]:
    """The live processes (zombies do not count) whose command line holds ``marker``."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            text = (entry / "stat").read_text()
        except OSError:
            continue
        if marker in line and text[text.rindex(")") + 2] != "Z":
            found.append(int(entry.name))
    return found


async def wait_none_running(marker: str) -> None:
    """SIGKILL is delivered asynchronously: allow the processes a moment to vanish."""
    with anyio.move_on_after(2):
        while running_with(marker):  # noqa: ASYNC110 - other processes' state: nothing to wait on
            await anyio.sleep(0.01)
    assert not running_with(marker), f"a process running {marker!r} survived"

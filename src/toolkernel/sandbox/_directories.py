"""Descriptors of the directories a change set names, opened without following links.

A change set lists parents before their children (``_changes.read_changes``), so consecutive
changes share most of their directories. :class:`Directories` keeps the chain of directories
last asked for open, from the root down, and opens only what the next path does not share:
each directory is opened once however deep the tree, and no path is ever spelled whole (a tree
may be deeper than ``PATH_MAX`` allows a path to be long).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["Directories"]


class Directories:
    """The directories beneath ``root_fd``, each opened relative to its parent with ``flags``
    (which should hold ``O_DIRECTORY | O_NOFOLLOW``). The caller closes ``root_fd``; the
    descriptors this opened are closed by :meth:`close`, or as the next path moves away."""

    def __init__(self, root_fd: int, flags: int) -> None:
        self._root = root_fd
        self._flags = flags
        self._names: list[str] = []
        self._fds: list[int] = []

    def open(self, parts: Sequence[str]) -> int:
        """A descriptor of directory ``parts`` (the caller must not close it; it stays valid
        until the next call). Raises what ``open`` raises: ``FileNotFoundError``,
        ``NotADirectoryError``, ``ELOOP`` for a link."""
        names, fds = self._names, self._fds
        shared = 0
        while shared < len(names) and shared < len(parts) and names[shared] == parts[shared]:
            shared += 1
        self._drop(shared)
        fd = fds[-1] if fds else self._root
        for name in parts[shared:]:
            fd = os.open(name, self._flags, dir_fd=fd)
            names.append(name)
            fds.append(fd)
        return fd

    def forget(self, parts: Sequence[str]) -> None:
        """Close what is open at or below ``parts``: that directory was removed or replaced."""
        names = self._names
        if len(names) >= len(parts) and names[: len(parts)] == list(parts):
            self._drop(len(parts))

    def close(self) -> None:
        self._drop(0)

    def _drop(self, keep: int) -> None:
        while len(self._fds) > keep:
            os.close(self._fds.pop())
            self._names.pop()

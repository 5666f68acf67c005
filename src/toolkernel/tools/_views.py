"""Each agent's view of the files: no write from a stale view.

An agent (a kernel, or a named agent on a shared kernel: ``ToolCall(..., agent="reviewer")``)
remembers, for each file it read with ``Read`` or wrote with ``Write``, ``Edit`` or
``MultiEdit``, the file's :class:`FileVersion` as it was then: its device, inode, size,
modification and change times, taken with ``fstat`` from the descriptor that read or wrote it.
Not a copy: a version is five integers. ``Write``, ``Edit`` and ``MultiEdit`` then refuse a file
whose version is not the one the agent saw, whoever changed it (another agent, a Bash command, a
person, a formatter), with a :class:`~toolkernel.StaleViewError` telling the model to read it
again. That is Claude Code's rule ("File has been modified since read ... Read it again before
attempting to write it") and opencode's (``FileTime.assert``), kept per agent as theirs are per
session.

The rules, as Claude Code decides them:

- ``changed``: the file differs from the version this agent last read or wrote: refused.
- ``not read``: the file exists and this agent never read it: refused only where calls are made
  by a model (``ToolCall.read_first``, set by the agent loop and the framework adapters);
  a program calling ``kernel.run`` may overwrite a file it never read.
- Creating a file never needs a read; nor does writing over a file gone since it was read.
- A partial ``Read`` (``offset``/``limit``) counts as a read, as in Claude Code: the model saw
  real lines of that version, and any later change makes it stale.
- The agent's own writes update its view, so successive edits need no read between them; so
  do its own moves (``Move``): what it saw of a file, or of the files below a directory, moves
  to the new path, as long as the file is the one it saw (:meth:`FileView.moved`). A
  Bash command's changes do not: the model saw the command's output, not the file, so a file a
  command changed must be read again before it is edited, as in Claude Code.

Where the check is made: a write compares the version of the file it is about to replace, taken
with ``lstat`` inside the same beneath-the-root operation, under the call's lease, just before
the rename over it; ``Edit`` also compares what it read first. A writer that holds no lease (a
person, another program) can still change the file between that ``lstat`` and the rename,
a window of one system call. The new file's version is its ``lstat`` just after the rename
(which changes its ctime), recorded only if it is still the file as written (the device,
inode, size and modification time of an ``fstat`` taken before its descriptor was closed);
if not, the file as written is recorded, so a change in that second window reads as a change.

Bounded: a view keeps the :data:`VIEW_LIMIT` files used last (about 200 bytes each); a file
that falls out reads as never read (refused where ``read_first`` is set, allowed elsewhere).
"""

from __future__ import annotations

import enum
import os
import threading
from collections.abc import Sequence
from typing import Final, NamedTuple

import attrs

from .._errors import StaleViewError

__all__ = ["VIEW_LIMIT", "FileVersion", "FileView", "StaleRule", "version_of"]

VIEW_LIMIT: Final = 16384
"""The most files one view remembers; the least recently used fall out first."""


class FileVersion(NamedTuple):
    """A file as ``fstat`` saw it: any write, rename over it or ``touch`` changes it."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int


def version_of(status: os.stat_result) -> FileVersion:
    """The version of the file ``status`` describes."""
    return FileVersion(
        status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns
    )


class StaleRule(enum.Enum):
    """Which rule refused a write (``StaleViewError.rule``)."""

    CHANGED = "changed"
    """The file changed since this agent last read or wrote it."""
    NOT_READ = "not read"
    """The file exists and this agent never read it (only with ``read_first``)."""


@attrs.define(eq=False)
class FileView:
    """One agent's view: the version of each file it last read or wrote, by workspace key.

    Thread-safe (file access runs in worker threads). ::

        view = FileView()
        view.saw(("a.py",), version)       # after a Read, or a write of its own
        view.check(("a.py",), current, read_first=True, shown="a.py")  # raises if stale
    """

    limit: int = VIEW_LIMIT
    _seen: dict[tuple[str, ...], FileVersion] = attrs.field(init=False, factory=dict)
    _lock: threading.Lock = attrs.field(init=False, factory=threading.Lock, repr=False)

    def saw(self, key: Sequence[str], version: FileVersion) -> None:
        """Remember ``version`` as what this agent last saw of ``key``."""
        key = tuple(key)
        with self._lock:
            seen = self._seen
            seen.pop(key, None)  # re-inserted last: the dict's order is the use order
            seen[key] = version
            if len(seen) > self.limit:
                del seen[next(iter(seen))]

    def moved(
        self,
        source: Sequence[str],
        target: Sequence[str],
        before: FileVersion,
        after: FileVersion | None,
        *,
        directory: bool,
    ) -> None:
        """Follow this agent's own move of ``source`` to ``target``.

        A file: ``before`` and ``after`` are its versions just before and after the rename
        (which changes its ctime; ``after`` None if what is at ``target`` is not it). If this
        agent last saw it as ``before``, it has seen it as ``after`` at ``target``; if it saw
        another version, that stays what it saw (so the file reads as changed, not as never
        read). A directory (``directory``): what it saw below ``source`` is now below
        ``target``, versions unchanged (renaming a directory changes none of its files).
        Whatever it saw at ``target`` (and below) before is forgotten: that was replaced.
        """
        source, target = tuple(source), tuple(target)
        with self._lock:
            seen = self._seen
            if directory:
                below = len(source)
                carried = {
                    key: version
                    for key, version in seen.items()
                    if len(key) > below and key[:below] == source
                }
                for key in carried:
                    del seen[key]
            else:
                carried = {}
                last = seen.pop(source, None)
                if last is not None:
                    carried[source] = after if last == before and after is not None else last
            depth = len(target)
            for key in [key for key in seen if key[:depth] == target]:
                del seen[key]
            for key, version in carried.items():
                seen[target + key[len(source) :]] = version
            while len(seen) > self.limit:
                del seen[next(iter(seen))]

    def version(self, key: Sequence[str]) -> FileVersion | None:
        """What this agent last saw of ``key``, or None if it never saw it (or forgot)."""
        return self._seen.get(tuple(key))

    def __len__(self) -> int:
        return len(self._seen)

    def check(
        self,
        key: Sequence[str],
        current: FileVersion | None,
        *,
        read_first: bool,
        shown: str,
    ) -> None:
        """Raise :class:`StaleViewError` if this agent may not write over ``current`` (None:
        no file there) at ``key``; ``shown`` is the path as messages spell it."""
        if current is None:
            return  # creating a file never needs a read
        seen = self._seen.get(tuple(key))
        if seen is None:
            if read_first:
                raise StaleViewError(
                    f"can't write {shown!r}: this agent has not read it yet (rule: "
                    f"{StaleRule.NOT_READ.value}); Read it first before writing to it",
                    rule=StaleRule.NOT_READ,
                )
            return
        if seen != current:
            raise StaleViewError(
                f"can't write {shown!r}: it has been modified since this agent last read or "
                f"wrote it, by another agent, a command or a person (rule: "
                f"{StaleRule.CHANGED.value}); Read it again before writing to it. Nothing "
                f"was written",
                rule=StaleRule.CHANGED,
            )

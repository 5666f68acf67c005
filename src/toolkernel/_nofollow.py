"""The no-follow walk in the standard library alone: the part of ``_beneath`` that needs nothing
else, so that a script can load it without the package.

The rename supervisor (``sandbox._renames``, and ``sandbox._moves`` under it) runs beside the
sandbox's launcher as a plain script (``python -I -S``), where the package can't be imported:
its ``__init__`` needs attrs and trio, which the isolated interpreter does not see, and would
cost an import of the core besides. So this module imports only the standard library, and
nothing relative; the supervisor puts the package's directory on its path and imports it as
``_nofollow`` (``_renames._moves``), and everything else reaches it through ``_beneath``, which
re-exports it and adds what needs the package or ``ctypes`` (``openat2``, ``renameat2``,
:class:`~toolkernel.errors.PathChangedError`).

Here: the flag sets every no-follow open uses; :class:`Directories`, a chain of directories each
opened relative to its parent (no path spelled whole, so a tree deeper than ``PATH_MAX`` allows
is reached); :func:`remove_tree` and :func:`remove_opened_tree`, which delete a tree without
entering a link.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Sequence

__all__ = [
    "CREATE_FLAGS",
    "DIRECTORY_FLAGS",
    "LINK_ERRNOS",
    "LOOK_FLAGS",
    "READ_FLAGS",
    "READ_NONBLOCK_FLAGS",
    "Directories",
    "remove_opened_tree",
    "remove_tree",
]

# Not typing.Final: importing typing costs more than the rest of this module.
DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""How a directory on the way is opened: never through a link."""
_O_PATH: int = getattr(os, "O_PATH", os.O_RDONLY)  # Linux's
LOOK_FLAGS = _O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""A directory only looked into (its entries' status, their links, files opened by name):
``O_PATH`` needs no read permission on it, as a path through it needs none."""
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
"""A file read by name, never through a link."""
READ_NONBLOCK_FLAGS = READ_FLAGS | os.O_NONBLOCK
"""A file read by name that may turn out to be a fifo: the open never waits for a writer (the
caller refuses what is not a regular file right after, by ``fstat``)."""
CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
"""A new file made by name: anything there already, a link included, is ``EEXIST``."""
LINK_ERRNOS = frozenset({errno.ELOOP, errno.ENOTDIR, errno.EMLINK})
"""What ``O_NOFOLLOW`` (with or without ``O_DIRECTORY``) answers for a link, by platform: Linux
says ``ENOTDIR`` with ``O_DIRECTORY`` and ``ELOOP`` without, FreeBSD says ``EMLINK``."""


class Directories:
    """The directories beneath ``root_fd``, each opened relative to its parent with ``flags``
    (:data:`DIRECTORY_FLAGS` or :data:`LOOK_FLAGS`). The caller closes ``root_fd``; the
    descriptors this opened are closed by :meth:`close`, or as the next path moves away.

    Paths asked for in order, parents before children (as a change set lists them), share most
    of their directories: the chain last asked for stays open, and only what the next path does
    not share is opened, so each directory is opened once however deep the tree.
    """

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


def remove_opened_tree(
    top: int,
    parent_fd: int,
    name: str,
    gate: contextlib.AbstractContextManager[object],
    *,
    force: bool = False,
) -> None:
    """Delete directory ``top`` and everything in it, never following a link; ``top`` is a
    descriptor of it (this function closes it), ``name`` its entry in ``parent_fd``.

    Each directory below is opened with ``O_NOFOLLOW`` relative to its parent, so a link inside
    the tree (or a directory swapped for one while the tree is deleted) is removed as a link and
    what it points to is never entered. Every ``unlink`` and ``rmdir`` runs inside ``gate``.
    Iterative, so a deep tree cannot exhaust the recursion limit; at most one descriptor per
    level is open.

    With ``force``, for a tree of this process's own (a scratch directory, an overlay's layers):
    each directory is made readable, writable and searchable by its owner before it is emptied
    (overlayfs leaves its work directory mode 000; a command may leave one so).

    Not atomic: stopped part-way, it leaves part of the tree. ``_fileops.delete`` first moves
    the tree aside under a hidden name, so what it leaves is never half a tree under its name.
    """
    # Each frame: a directory's descriptor, its name, and the entries still to delete.
    frames: list[tuple[int, str, list[os.DirEntry[str]]]] = []
    try:
        if force:
            os.fchmod(top, stat.S_IRWXU)
        frames.append((top, name, _entries(top)))
    except BaseException:
        os.close(top)
        raise
    try:
        while frames:
            fd, directory, entries = frames[-1]
            if not entries:
                frames.pop()
                os.close(fd)
                parent = frames[-1][0] if frames else parent_fd
                with contextlib.suppress(FileNotFoundError), gate:  # gone already: as wanted
                    os.rmdir(directory, dir_fd=parent)
                continue
            entry = entries.pop()
            if entry.is_dir(follow_symlinks=False):
                child = _open_subdirectory(fd, entry.name, gate, force)
                if child is not None:
                    frames.append((child, entry.name, _entries(child)))
                continue
            try:
                with gate:
                    os.unlink(entry.name, dir_fd=fd)
            except FileNotFoundError:
                pass  # already gone: what we wanted
            except IsADirectoryError:
                # A file swapped for a directory since the listing: delete it as one.
                child = _open_subdirectory(fd, entry.name, gate, force)
                if child is not None:
                    frames.append((child, entry.name, _entries(child)))
    finally:
        for fd, _, _ in frames:
            os.close(fd)


def remove_tree(parent_fd: int, name: str, *, force: bool = False) -> None:
    """Delete ``name`` in ``parent_fd`` and, if it is a directory, everything in it, never
    following a link (:func:`remove_opened_tree`); nothing there is nothing to do."""
    try:
        top = os.open(name, DIRECTORY_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        return
    except PermissionError:
        if not force:
            raise
        os.chmod(name, stat.S_IRWXU, dir_fd=parent_fd)
        top = os.open(name, DIRECTORY_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno not in LINK_ERRNOS:
            raise
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=parent_fd)
        return
    remove_opened_tree(top, parent_fd, name, contextlib.nullcontext(), force=force)


def _open_subdirectory(
    fd: int, name: str, gate: contextlib.AbstractContextManager[object], force: bool = False
) -> int | None:
    """Open subdirectory ``name`` to empty it; a link found there instead is just unlinked.
    With ``force``, one its owner may not enter is opened up first (and then to its owner)."""
    try:
        child = os.open(name, DIRECTORY_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        return None
    except PermissionError:
        if not force:
            raise
        os.chmod(name, stat.S_IRWXU, dir_fd=fd)  # a directory: the listing said so
        return os.open(name, DIRECTORY_FLAGS, dir_fd=fd)
    except OSError as exc:
        if exc.errno not in LINK_ERRNOS:
            raise
    else:
        if force:
            os.fchmod(child, stat.S_IRWXU)
        return child
    # Swapped for a link or a file since the listing: remove that entry, follow nothing.
    with contextlib.suppress(FileNotFoundError), gate:
        os.unlink(name, dir_fd=fd)
    return None


def _entries(fd: int) -> list[os.DirEntry[str]]:
    # os.scandir works on a duplicate of ``fd``, which shares its offset: ``fd`` is ours alone.
    with os.scandir(fd) as iterator:
        return list(iterator)

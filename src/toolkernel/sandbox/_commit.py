"""Make a command's changes real: apply them to the workspace from its overlay's upper layer.

Each change is applied relative to directory descriptors opened without following links, so a
link swapped into the workspace meanwhile is never written through. A file is moved into place
with one ``rename`` (atomic: a reader sees the old file or the new one), from the upper layer
where it is on the same file system, else through a temporary copy beside it; a link likewise.
A directory is made, or has its mode set; one that replaces what was there has the entries the
command did not keep removed. A deletion removes the file, or the whole tree.

Which changes to apply, and under which leases, is the caller's business (the Bash tool commits
what its call holds, after taking leases for the rest); this module only applies.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import uuid
from collections.abc import Callable, Iterable

from ._changes import Change, ChangeKind

__all__ = ["apply_changes", "open_parent"]

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_parent(root_fd: int, parts: tuple[str, ...]) -> int:
    """A descriptor of the directory holding ``parts`` (every component opened without
    following a link); the caller closes it."""
    fd = os.dup(root_fd)
    try:
        for part in parts[:-1]:
            child = os.open(part, _DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def apply_changes(root: str, upper: str, changes: Iterable[Change]) -> None:
    """Apply ``changes`` (parents before children, as ``read_changes`` lists them) from
    ``upper`` to ``root``. Synchronous; run it in a worker thread."""
    root_fd = os.open(root, _DIRECTORY)
    try:
        for change in changes:
            parent = open_parent(root_fd, change.parts)
            try:
                _apply(parent, change, os.path.join(upper, change.path))
            finally:
                os.close(parent)
    finally:
        os.close(root_fd)


def _apply(parent: int, change: Change, source: str) -> None:
    name = change.parts[-1]
    kind = change.kind
    if kind is ChangeKind.DELETED:
        _remove(parent, name)
        return
    found = os.lstat(source)
    if change.metadata_only:
        os.chmod(name, stat.S_IMODE(found.st_mode), dir_fd=parent, follow_symlinks=False)
        if kind is ChangeKind.FILE:
            os.utime(
                name,
                ns=(found.st_atime_ns, found.st_mtime_ns),
                dir_fd=parent,
                follow_symlinks=False,
            )
        return
    if kind is ChangeKind.DIRECTORY:
        _make_directory(parent, name, found, keep=_names(source) if change.replaces else None)
        return
    current = _lstat(parent, name)
    if current is not None and stat.S_ISDIR(current.st_mode):
        _remove(parent, name)  # a file, a link or a fifo where a directory was
    if kind is ChangeKind.FILE:
        _move_file(parent, name, source)
    elif kind is ChangeKind.SYMLINK:
        target = os.readlink(source)
        _replace(parent, name, lambda temporary: os.symlink(target, temporary, dir_fd=parent))
    elif stat.S_ISFIFO(found.st_mode):
        mode = stat.S_IMODE(found.st_mode)
        _replace(parent, name, lambda temporary: os.mkfifo(temporary, mode, dir_fd=parent))
    # A socket has no life outside the process that made it: nothing to commit.


def _lstat(parent: int, name: str) -> os.stat_result | None:
    try:
        return os.lstat(name, dir_fd=parent)
    except FileNotFoundError:
        return None


def _names(directory: str) -> set[str]:
    with os.scandir(directory) as entries:
        return {entry.name for entry in entries}


def _remove(parent: int, name: str) -> None:
    current = _lstat(parent, name)
    if current is None:
        return
    if stat.S_ISDIR(current.st_mode):
        shutil.rmtree(name, dir_fd=parent)
    else:
        os.unlink(name, dir_fd=parent)


def _make_directory(
    parent: int, name: str, found: os.stat_result, *, keep: set[str] | None
) -> None:
    current = _lstat(parent, name)
    if current is not None and not stat.S_ISDIR(current.st_mode):
        os.unlink(name, dir_fd=parent)
        current = None
    if current is None:
        os.mkdir(name, 0o700, dir_fd=parent)
    os.chmod(name, stat.S_IMODE(found.st_mode), dir_fd=parent, follow_symlinks=False)
    if keep is None or current is None:
        return
    fd = os.open(name, _DIRECTORY, dir_fd=parent)
    try:
        for entry in os.listdir(fd):
            if entry not in keep:
                _remove(fd, entry)
    finally:
        os.close(fd)


def _temporary_name(name: str) -> str:
    return f".{name[:40]}.{uuid.uuid4().hex[:12]}.tktmp"


def _replace(parent: int, name: str, make: Callable[[str], None]) -> None:
    """Make the entry ``name`` with ``make`` under a temporary name, then rename it over."""
    temporary = _temporary_name(name)
    make(temporary)
    try:
        os.rename(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=parent)
        raise


def _move_file(parent: int, name: str, source: str) -> None:
    """Put the file ``source`` at ``name`` in one rename: from where it is when it is on the
    same file system, else through a copy beside its place."""
    try:
        os.rename(source, name, dst_dir_fd=parent)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise

    def copy(temporary: str) -> None:
        found = os.lstat(source)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        fd = os.open(temporary, flags, 0o600, dir_fd=parent)
        try:
            with open(source, "rb") as stream, os.fdopen(os.dup(fd), "wb") as out:
                shutil.copyfileobj(stream, out)
            os.fchmod(fd, stat.S_IMODE(found.st_mode))
            with contextlib.suppress(PermissionError):
                os.fchown(fd, found.st_uid, found.st_gid)
            os.utime(fd, ns=(found.st_atime_ns, found.st_mtime_ns))
        finally:
            os.close(fd)

    _replace(parent, name, copy)

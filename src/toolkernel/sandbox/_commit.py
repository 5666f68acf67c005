"""Make a command's changes real: apply them to the workspace from its overlay's upper layer.

Each change is applied relative to directory descriptors opened without following links, so a
link swapped into the workspace meanwhile is never written through. A file is moved into place
with one ``rename`` (atomic: a reader sees the old file or the new one), from the upper layer
where it is on the same file system, else through a temporary copy beside it; a link likewise.
A directory is made, or has its mode set; one that replaces what was there has the entries the
command did not keep removed. A deletion removes the file, or the whole tree.

Which changes to apply, and under which leases, is the caller's business (the Bash tool commits
what its call holds, after taking leases for the rest); this module only applies. With shared
leases every visible step goes through the call's fence (``_Steps``): a file moved from the
upper layer is one published rename from there, a tree is moved aside (published) before it is
removed, and a call whose grant was lost changes nothing more.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
import uuid
from collections.abc import Callable, Iterable

import attrs

from ..leases._backend import Chmod, Fence, MakeDirectory, Rename, SetTimes, Unlink
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


def apply_changes(
    root: str, upper: str, changes: Iterable[Change], *, fence: Fence | None = None
) -> None:
    """Apply ``changes`` (parents before children, as ``read_changes`` lists them) from
    ``upper`` to ``root``; with ``fence``, each visible step through it. Synchronous; run it
    in a worker thread."""
    # A fenced rename from the upper layer names its source relative to a descriptor of it.
    upper_fd = None if fence is None else os.open(upper, _DIRECTORY)
    steps = _Steps(fence, upper_fd)
    root_fd = os.open(root, _DIRECTORY)
    try:
        for change in changes:
            parent = open_parent(root_fd, change.parts)
            try:
                source = os.path.join(upper, change.path)
                _apply(parent, change, source, steps)
            finally:
                os.close(parent)
    finally:
        os.close(root_fd)
        if upper_fd is not None:
            os.close(upper_fd)


@attrs.frozen
class _Steps:
    """The visible steps of a commit: each the system call itself (``fence`` None), or
    described as an op on the path's components from the root and published through
    ``fence``, which makes it only while the call's grant is held."""

    fence: Fence | None
    upper_fd: int | None
    """The upper layer, open, when ``fence`` is: where a published rename takes a file from."""

    def rename(
        self,
        parent: int,
        source: tuple[str, ...],
        target: tuple[str, ...],
        *,
        replace: bool = True,
    ) -> None:
        """Rename ``source`` to ``target``, both in ``parent``."""
        if self.fence is None:
            os.rename(source[-1], target[-1], src_dir_fd=parent, dst_dir_fd=parent)
        else:
            self.fence.publish(Rename(source, target, replace))

    def move_in(self, parent: int, parts: tuple[str, ...], source: str) -> None:
        """Rename the file ``source`` of the upper layer to ``parts``."""
        if self.fence is None or self.upper_fd is None:
            os.rename(source, parts[-1], dst_dir_fd=parent)
        else:
            self.fence.publish(Rename(parts, parts, source_dir=self.upper_fd))

    def unlink(self, parent: int, parts: tuple[str, ...]) -> None:
        if self.fence is None:
            os.unlink(parts[-1], dir_fd=parent)
        else:
            self.fence.publish(Unlink(parts))

    def mkdir(self, parent: int, parts: tuple[str, ...], mode: int) -> None:
        if self.fence is None:
            os.mkdir(parts[-1], mode, dir_fd=parent)
        else:
            self.fence.publish(MakeDirectory(parts, mode))

    def chmod(self, parent: int, parts: tuple[str, ...], mode: int) -> None:
        if self.fence is None:
            os.chmod(parts[-1], mode, dir_fd=parent, follow_symlinks=False)
        else:
            self.fence.publish(Chmod(parts, mode))

    def set_times(self, parent: int, parts: tuple[str, ...], ns: tuple[int, int]) -> None:
        if self.fence is None:
            os.utime(parts[-1], ns=ns, dir_fd=parent, follow_symlinks=False)
        else:
            self.fence.publish(SetTimes(parts, ns))


def _apply(parent: int, change: Change, source: str, steps: _Steps) -> None:
    parts = change.parts
    name = parts[-1]
    kind = change.kind
    if kind is ChangeKind.DELETED:
        _remove(parent, parts, steps)
        return
    found = os.lstat(source)
    if change.metadata_only:
        steps.chmod(parent, parts, stat.S_IMODE(found.st_mode))
        if kind is ChangeKind.FILE:
            steps.set_times(parent, parts, (found.st_atime_ns, found.st_mtime_ns))
        return
    if kind is ChangeKind.DIRECTORY:
        keep = _names(source) if change.replaces else None
        _make_directory(parent, parts, found, keep=keep, steps=steps)
        return
    current = _lstat(parent, name)
    if current is not None and stat.S_ISDIR(current.st_mode):
        _remove(parent, parts, steps)  # a file, a link or a fifo where a directory was
    if kind is ChangeKind.FILE:
        _move_file(parent, parts, source, steps)
    elif kind is ChangeKind.SYMLINK:
        target = os.readlink(source)

        def link(temporary: str) -> None:
            os.symlink(target, temporary, dir_fd=parent)

        _replace(parent, parts, link, steps)
    elif stat.S_ISFIFO(found.st_mode):
        mode = stat.S_IMODE(found.st_mode)

        def fifo(temporary: str) -> None:
            os.mkfifo(temporary, mode, dir_fd=parent)

        _replace(parent, parts, fifo, steps)
    # A socket has no life outside the process that made it: nothing to commit.


def _lstat(parent: int, name: str) -> os.stat_result | None:
    try:
        return os.lstat(name, dir_fd=parent)
    except FileNotFoundError:
        return None


def _names(directory: str) -> set[str]:
    with os.scandir(directory) as entries:
        return {entry.name for entry in entries}


def _remove(parent: int, parts: tuple[str, ...], steps: _Steps) -> None:
    name = parts[-1]
    current = _lstat(parent, name)
    if current is None:
        return
    if not stat.S_ISDIR(current.st_mode):
        steps.unlink(parent, parts)
    elif steps.fence is None:
        shutil.rmtree(name, dir_fd=parent)
    else:
        # Moved aside by one published rename (the name ``tools._fileops`` gives a tree it
        # deletes: listings hide it), then removed where nobody looks.
        aside = f".{name[:32]}.toolkernel-deleted-{secrets.token_hex(6)}"
        steps.rename(parent, parts, (*parts[:-1], aside), replace=False)
        shutil.rmtree(aside, dir_fd=parent)


def _make_directory(
    parent: int,
    parts: tuple[str, ...],
    found: os.stat_result,
    *,
    keep: set[str] | None,
    steps: _Steps,
) -> None:
    name = parts[-1]
    mode = stat.S_IMODE(found.st_mode)
    current = _lstat(parent, name)
    if current is not None and not stat.S_ISDIR(current.st_mode):
        steps.unlink(parent, parts)
        current = None
    if steps.fence is None:
        if current is None:
            os.mkdir(name, 0o700, dir_fd=parent)
        os.chmod(name, mode, dir_fd=parent, follow_symlinks=False)
    else:
        # Made with its mode, and set again only where the umask changed it: a directory made
        # on the way to a held path may be made, not changed (``leases._fencing``).
        if current is None:
            steps.mkdir(parent, parts, mode)
            current_mode = _lstat(parent, name)
            if current_mode is None or stat.S_IMODE(current_mode.st_mode) != mode:
                steps.chmod(parent, parts, mode)
            return
        if stat.S_IMODE(current.st_mode) != mode:
            steps.chmod(parent, parts, mode)
    if keep is None or current is None:
        return
    fd = os.open(name, _DIRECTORY, dir_fd=parent)
    try:
        for entry in os.listdir(fd):
            if entry not in keep:
                _remove(fd, (*parts, entry), steps)
    finally:
        os.close(fd)


def _temporary_name(name: str) -> str:
    return f".{name[:40]}.{uuid.uuid4().hex[:12]}.tktmp"


def _replace(
    parent: int, parts: tuple[str, ...], make: Callable[[str], None], steps: _Steps
) -> None:
    """Make the entry ``parts`` with ``make`` under a temporary name, then rename it over."""
    temporary = _temporary_name(parts[-1])
    make(temporary)
    try:
        steps.rename(parent, (*parts[:-1], temporary), parts)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=parent)
        raise


def _move_file(parent: int, parts: tuple[str, ...], source: str, steps: _Steps) -> None:
    """Put the file ``source`` at ``parts`` in one rename: from where it is when it is on the
    same file system, else through a copy beside its place."""
    try:
        steps.move_in(parent, parts, source)
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

    _replace(parent, parts, copy, steps)

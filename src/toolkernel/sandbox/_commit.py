"""Make a command's changes real: apply them to the workspace from its overlay's upper layer.

Each change is applied relative to directory descriptors opened without following links, so a
link swapped into the workspace meanwhile is never written through. A file is moved into place
with one ``rename`` (atomic: a reader sees the old file or the new one), from the upper layer
where it is on the same file system, else through a temporary copy beside it; a link likewise.
A directory is made, or has its mode set; one that replaces what was there has the entries the
command did not keep removed. A deletion removes the file, or the whole tree.

A directory whose mode would shut its owner out (no write or search: ``chmod 555``) is given
that mode last, deepest first, once everything beneath it is in place, and a directory already
so that the commit must write in is opened to its owner meanwhile: an unprivileged user's
``cp -r`` of a read-only directory commits whole, as it ran (root's writes pass anyway).

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
from typing import Final

import attrs

from .._beneath import CREATE_FLAGS, DIRECTORY_FLAGS, READ_FLAGS, Directories, remove_tree
from ..leases._backend import Chmod, Fence, MakeDirectory, Rename, SetTimes, Unlink
from ._changes import Change, ChangeKind

__all__ = ["apply_changes"]


def apply_changes(
    root: str,
    upper: str,
    changes: Iterable[Change],
    *,
    fence: Fence | None = None,
    restamp: tuple[int, int] | None = None,
) -> None:
    """Apply ``changes`` (parents before children, as ``read_changes`` lists them) from
    ``upper`` to ``root``; with ``fence``, each visible step through it. Synchronous; run it
    in a worker thread. Each directory on the way is opened once, relative to its parent
    (``Directories``): a tree of any depth.

    ``restamp`` is ``(since, now)``, file system times (ns): a file the run modified at
    ``since`` or later is given ``now`` as its modification time. A run may end before an
    earlier call's commit and commit after it, so the times of its writes would put them
    before that call's; a build deciding what is out of date by them (``make``, ``ninja``)
    would then see the order the runs ran in, not the order the commits came in. A time set
    before the run (``touch -d``, ``cp -p``, an archive's) is kept."""
    changes = list(changes)
    root_fd = os.open(root, DIRECTORY_FLAGS)
    try:
        upper_fd = os.open(upper, DIRECTORY_FLAGS)
    except BaseException:
        os.close(root_fd)
        raise
    workspace = Directories(root_fd, DIRECTORY_FLAGS)
    layer = Directories(upper_fd, DIRECTORY_FLAGS)
    # Not through a fence: a lease service makes its changes itself, as itself.
    modes = _ShutModes() if fence is None and os.geteuid() != 0 else None
    times = _DirectoryTimes() if fence is None else None
    try:
        if restamp is not None:
            _restamp(layer, changes, *restamp)
        for change in changes:
            parts = change.parts
            parent = workspace.open(parts[:-1])
            source = layer.open(parts[:-1])
            if times is not None:
                times.note(parent, source, change)
            if modes is not None:
                modes.open_up(parent, parts[:-1])
                modes.open_up(source, parts[:-1], layer=True)  # files are moved out of it
            _apply(parent, change, _Steps(fence, source, modes))
            if change.kind is not ChangeKind.FILE or not change.metadata_only:
                workspace.forget(parts)  # made, replaced or removed: opened afresh if needed
    finally:
        try:
            if modes is not None:
                modes.settle(workspace)
            if times is not None:
                times.settle(workspace)
        finally:
            workspace.close()
        layer.close()
        os.close(upper_fd)
        os.close(root_fd)


def _restamp(layer: Directories, changes: list[Change], since: int, now: int) -> None:
    """Give the files of ``changes`` modified at ``since`` or later the time ``now``, in the
    upper layer (``apply_changes``)."""
    for change in changes:
        if change.kind is not ChangeKind.FILE:
            continue
        parts = change.parts
        source = layer.open(parts[:-1])
        found = os.lstat(parts[-1], dir_fd=source)
        if stat.S_ISREG(found.st_mode) and found.st_mtime_ns >= since:
            os.utime(parts[-1], ns=(found.st_atime_ns, now), dir_fd=source, follow_symlinks=False)


_OWNER_ENTERS: Final = stat.S_IWUSR | stat.S_IXUSR


class _ShutModes:
    """The modes of directories that shut their owner out, set once the commit is done
    (``apply_changes``): each directory's final mode, by its path from the root."""

    def __init__(self) -> None:
        self._final: dict[tuple[str, ...], int] = {}
        self._looked: set[tuple[str, ...]] = set()
        self._looked_in_layer: set[tuple[str, ...]] = set()

    def working(self, parts: tuple[str, ...], mode: int) -> int:
        """The mode to give directory ``parts`` now, for ``mode`` later."""
        if mode & _OWNER_ENTERS == _OWNER_ENTERS:
            self._final.pop(parts, None)
            return mode
        self._final[parts] = mode
        return mode | _OWNER_ENTERS

    def open_up(self, fd: int, parts: tuple[str, ...], *, layer: bool = False) -> None:
        """The commit writes in directory ``parts`` (open as ``fd``) of the workspace, or of
        the upper layer (``layer``, which is thrown away after): open it to its owner (this
        process) if it is shut, for now."""
        looked = self._looked_in_layer if layer else self._looked
        if parts in looked:
            return
        looked.add(parts)
        found = os.fstat(fd)
        mode = stat.S_IMODE(found.st_mode)
        if mode & _OWNER_ENTERS != _OWNER_ENTERS and found.st_uid == os.geteuid():
            os.fchmod(fd, mode | _OWNER_ENTERS)
            if not layer:
                self._final.setdefault(parts, mode)

    def settle(self, workspace: Directories) -> None:
        """Give every directory its final mode, the deepest first."""
        for parts in sorted(self._final, key=len, reverse=True):
            mode = self._final[parts]
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                if not parts:
                    os.fchmod(workspace.open(()), mode)
                    continue
                parent = workspace.open(parts[:-1])
                found = os.lstat(parts[-1], dir_fd=parent)
                if stat.S_ISDIR(found.st_mode):
                    os.chmod(parts[-1], mode, dir_fd=parent, follow_symlinks=False)


class _DirectoryTimes:
    """The times of the directories a commit writes in, as the command left them, set once
    it is done, the deepest first (``apply_changes``). Each rename into a directory gives it
    the commit's time: an append to ``d/e/f`` would change ``d/e``'s, which a plain shell
    leaves, and a directory ``cp -a`` or an archive made would lose the time it kept.

    A directory the command made, replaced or changed (one of its changes, under its
    leases) gets the time the upper layer held before the commit moved anything out of it;
    one it only wrote in gets its own time back, if the upper layer's is still that
    (overlayfs copies a directory up with its times): what another writer did to it meanwhile
    is theirs to keep. Not the root's: its upper copy is the layer itself, whose times are
    the run's."""

    def __init__(self) -> None:
        self._changed: set[tuple[str, ...]] = set()
        self._before: dict[tuple[str, ...], int] = {}  # the workspace's modification time
        self._kept: dict[tuple[str, ...], tuple[int, int]] = {}  # the upper layer's times

    def note(self, parent: int, source: int, change: Change) -> None:
        """``change`` is about to be applied in ``parent``, from ``source`` in the layer."""
        where = change.parts[:-1]
        if where and where not in self._kept:
            self._before[where] = os.fstat(parent).st_mtime_ns
            self._kept[where] = _times(os.fstat(source))
        if change.kind is ChangeKind.DIRECTORY and change.parts not in self._kept:
            self._changed.add(change.parts)
            self._kept[change.parts] = _times(os.lstat(change.parts[-1], dir_fd=source))

    def settle(self, workspace: Directories) -> None:
        for parts in sorted(self._kept, key=len, reverse=True):
            times = self._kept[parts]
            if parts not in self._changed and self._before.get(parts) != times[1]:
                continue  # the command changed what is in it, or another writer did
            with contextlib.suppress(FileNotFoundError, NotADirectoryError, PermissionError):
                parent = workspace.open(parts[:-1])
                if stat.S_ISDIR(os.lstat(parts[-1], dir_fd=parent).st_mode):
                    os.utime(parts[-1], ns=times, dir_fd=parent, follow_symlinks=False)


def _times(found: os.stat_result) -> tuple[int, int]:
    return found.st_atime_ns, found.st_mtime_ns


@attrs.frozen
class _Steps:
    """The visible steps of a commit: each the system call itself (``fence`` None), or
    described as an op on the path's components from the root and published through
    ``fence``, which makes it only while the call's grant is held."""

    fence: Fence | None
    source: int
    """The directory of the upper layer holding the change: where its file comes from."""
    modes: _ShutModes | None = None
    """Where the modes that shut a directory's owner out wait to be set, if they wait."""

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

    def move_in(self, parent: int, parts: tuple[str, ...]) -> None:
        """Rename the file ``parts`` names in the upper layer to ``parts``."""
        name = parts[-1]
        if self.fence is None:
            os.rename(name, name, src_dir_fd=self.source, dst_dir_fd=parent)
        else:
            self.fence.publish(Rename((name,), parts, source_dir=self.source))

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


def _apply(parent: int, change: Change, steps: _Steps) -> None:
    parts = change.parts
    name = parts[-1]
    kind = change.kind
    if kind is ChangeKind.DELETED:
        _remove(parent, parts, steps)
        return
    found = os.lstat(name, dir_fd=steps.source)
    if change.metadata_only:
        mode = stat.S_IMODE(found.st_mode)
        if steps.modes is not None and stat.S_ISDIR(found.st_mode):
            mode = steps.modes.working(parts, mode)
        _own_as(parent, name, found, steps)  # first: a change of owner clears a set-id bit
        steps.chmod(parent, parts, mode)
        if kind is ChangeKind.FILE:
            steps.set_times(parent, parts, (found.st_atime_ns, found.st_mtime_ns))
        return
    if kind is ChangeKind.DIRECTORY:
        keep = _names(steps.source, name) if change.replaces else None
        _make_directory(parent, parts, found, keep=keep, steps=steps)
        return
    current = _lstat(parent, name)
    if current is not None and stat.S_ISDIR(current.st_mode):
        _remove(parent, parts, steps)  # a file, a link or a fifo where a directory was
    if kind is ChangeKind.FILE:
        _move_file(parent, parts, found, steps)
    elif kind is ChangeKind.SYMLINK:
        target = os.readlink(name, dir_fd=steps.source)

        def link(temporary: str) -> None:
            os.symlink(target, temporary, dir_fd=parent)

        _replace(parent, parts, link, steps)
    elif stat.S_ISFIFO(found.st_mode):
        mode = stat.S_IMODE(found.st_mode)

        def fifo(temporary: str) -> None:
            os.mkfifo(temporary, mode, dir_fd=parent)

        _replace(parent, parts, fifo, steps)
    # A socket has no life outside the process that made it: nothing to commit.


def _own_as(parent: int, name: str, found: os.stat_result, steps: _Steps) -> None:
    """Give ``name`` the owner and group of ``found``, its upper layer's entry, where they
    differ (``chown``; a file moved in by a rename has them already). What this process may
    not give (another user's, unless it is root) is left, as the lease service leaves every
    owner: its wire has no change of owner."""
    if steps.fence is not None:
        return
    current = os.lstat(name, dir_fd=parent)
    if (current.st_uid, current.st_gid) != (found.st_uid, found.st_gid):
        with contextlib.suppress(PermissionError):
            os.chown(name, found.st_uid, found.st_gid, dir_fd=parent, follow_symlinks=False)


def _lstat(parent: int, name: str) -> os.stat_result | None:
    try:
        return os.lstat(name, dir_fd=parent)
    except FileNotFoundError:
        return None


def _names(parent: int, name: str) -> set[str]:
    fd = os.open(name, DIRECTORY_FLAGS, dir_fd=parent)
    try:
        return set(os.listdir(fd))
    finally:
        os.close(fd)


def _remove(parent: int, parts: tuple[str, ...], steps: _Steps) -> None:
    name = parts[-1]
    current = _lstat(parent, name)
    if current is None:
        return
    if not stat.S_ISDIR(current.st_mode):
        steps.unlink(parent, parts)
        return
    if steps.fence is not None:
        # Moved aside by one published rename (the name ``tools._fileops`` gives a tree it
        # deletes: listings hide it), then removed where nobody looks.
        aside = f".{name[:32]}.toolkernel-deleted-{secrets.token_hex(6)}"
        steps.rename(parent, parts, (*parts[:-1], aside), replace=False)
        name = aside
    # Forced: a directory in it shut to its owner is opened to be emptied (the command
    # removed the tree, so it could; its own way through is not the commit's to repeat).
    remove_tree(parent, name, force=True)


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
    if steps.modes is not None:
        mode = steps.modes.working(parts, mode)
    current = _lstat(parent, name)
    if current is not None and not stat.S_ISDIR(current.st_mode):
        steps.unlink(parent, parts)
        current = None
    if steps.fence is None:
        if current is None:
            os.mkdir(name, 0o700, dir_fd=parent)
        _own_as(parent, name, found, steps)
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
    fd = os.open(name, DIRECTORY_FLAGS, dir_fd=parent)
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


def _move_file(parent: int, parts: tuple[str, ...], found: os.stat_result, steps: _Steps) -> None:
    """Put the upper layer's file ``parts`` (``found``) at ``parts`` in one rename: from where
    it is when it is on the same file system, else through a copy beside its place."""
    try:
        steps.move_in(parent, parts)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    name = parts[-1]

    def copy(temporary: str) -> None:
        source = os.open(name, READ_FLAGS, dir_fd=steps.source)
        with open(source, "rb") as stream:
            fd = os.open(temporary, CREATE_FLAGS, 0o600, dir_fd=parent)
            try:
                with os.fdopen(os.dup(fd), "wb") as out:
                    shutil.copyfileobj(stream, out)
                os.fchmod(fd, stat.S_IMODE(found.st_mode))
                with contextlib.suppress(PermissionError):
                    os.fchown(fd, found.st_uid, found.st_gid)
                os.utime(fd, ns=(found.st_atime_ns, found.st_mtime_ns))
            finally:
                os.close(fd)

    _replace(parent, parts, copy, steps)

"""What something else changed, while a command ran, of what its commit would touch.

overlayfs leaves changes to the lower layer during a mount undefined (a file replaced there may
go on showing its old content, and a ``chmod`` inside copies the old content up), so a change
set can't be committed blindly over what another process wrote meanwhile. Committing is safe
when every entry the commit touches (writes, creates, replaces, removes) is as it was when the
run began: the batch then ends as if the command had run after the other writers, for what it
changed. :func:`changed_underneath` names the changes for which that does not hold. "Began" is
the file system's time when the overlay was made (``started``: the change time of a file made
then); an entry changed since has a later change time.

For each change, looking at the real workspace (the lower layer) now:

- **Its directory.** Unless the directory holding it is itself a change that is new or
  replaced (whose own check then covers it), that directory must still be there, a directory:
  a parent removed (or replaced by a file or a link) meanwhile would come back with the commit,
  holding only what the command made in it: a lost delete.
- **The entry.** One there now must not have changed since the run began. One that is gone
  was there when the command changed it only if the command changed it in place (overlayfs
  copied it up: ``Change.copied_up``) and its directory changed since (removing an entry
  changes its directory): committing then would bring back what another writer deleted (a
  link or a fifo carries no mark of a copy-up: one gone whose directory changed counts as
  one that may have been copied up). An
  entry the command renamed or linked here is copied up too, from another path: its origin
  (the lower file it was copied from, by file handle: ``_handles``) is the file at a path the
  command changed, whose own check covers it.
- **What the commit removes.** Deleting a directory, or replacing one (by a file, a link, or
  a directory that does not keep its entries), removes everything in it: every entry of that
  tree must be as it was (a file changed deep inside it would be lost with the tree).

A change to a directory's *other* entries is not a conflict: two commands making files side
by side in one directory both commit. The file system's clock may be coarse (a few ms): a
change in the same tick as the overlay is made has the same time and is not counted; it came
before the command started (the launcher's start-up, tens of ms, comes between), and the
overlay, mounted then, shows it.

Walked with directory descriptors, never following a link, iteratively: a tree of any depth.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping, Sequence

from .._beneath import DIRECTORY_FLAGS, LOOK_FLAGS, Directories
from ._changes import ORIGIN, Change, ChangeKind
from ._handles import file_handle, origin_handle

__all__ = ["changed_underneath"]

_GONE = (FileNotFoundError, NotADirectoryError)
_UNMARKED = frozenset({ChangeKind.SYMLINK, ChangeKind.SPECIAL})


def changed_underneath(
    root: str,
    upper: str,
    changes: Sequence[Change],
    started: int,
    renamed: Mapping[str, str] | None = None,
) -> list[str]:
    """The paths of ``changes`` (as ``read_changes`` lists them, parents first, from the
    upper layer ``upper``) whose commit would overwrite something another process changed in
    ``root`` after ``started`` (the file system's time, in ns): see the module docstring.
    ``renamed``: where the run renamed entries to, and from where (``Overlay.renamed``).
    Synchronous."""
    check = _Check(root, upper, changes, started, renamed or {})
    try:
        return [change.path for change in changes if check.changed(change)]
    finally:
        check.close()


class _Check:
    def __init__(
        self,
        root: str,
        upper: str,
        changes: Sequence[Change],
        started: int,
        renamed: Mapping[str, str],
    ) -> None:
        self.by_path = {change.path: change for change in changes}
        self.renamed = renamed
        self.changes = changes
        self.started = started
        self.upper = upper
        self.root_fd = os.open(root, LOOK_FLAGS)
        self.lower = Directories(self.root_fd, LOOK_FLAGS)
        self._layer: Directories | None = None
        self._upper_fd: int | None = None
        self._sources: dict[tuple[int, bytes], str] | None = None
        self._names: dict[int, list[str]] | None = None  # the change set's names of each file

    def close(self) -> None:
        self.lower.close()
        os.close(self.root_fd)
        if self._layer is not None:
            self._layer.close()
        if self._upper_fd is not None:
            os.close(self._upper_fd)

    def changed(self, change: Change) -> bool:
        parts = change.parts
        parent = self.by_path.get("/".join(parts[:-1])) if len(parts) > 1 else None
        if parent is not None and not parent.metadata_only:
            return False  # in a directory the command made or replaced: checked with it
        try:
            directory = self.lower.open(parts[:-1])
        except _GONE:
            return True  # its directory went away
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return True  # its directory is a link now
            raise
        name = parts[-1]
        try:
            entry = os.lstat(name, dir_fd=directory)
        except _GONE:
            if change.kind is ChangeKind.DELETED:
                return True  # another writer deleted it first: the command's rm would fail
            # Changed in place (copied up), and deleted since: its directory changed then.
            # A link or a fifo copied up is not marked (no extended attribute can be set on
            # one): one may have been.
            copied = change.copied_up or change.kind in _UNMARKED
            if not copied or os.fstat(directory).st_ctime_ns <= self.started:
                return False
            return not self._renamed_here(change)
        if entry.st_ctime_ns > self.started:
            return True
        removes_tree = stat.S_ISDIR(entry.st_mode) and (
            change.kind is not ChangeKind.DIRECTORY or change.replaces
        )
        return removes_tree and _tree_changed(directory, name, self.started)

    def _renamed_here(self, change: Change) -> bool:
        """Whether ``change``, a copied-up entry gone from the lower layer, came from the file
        at another path: the command renamed it here (the rename supervisor's log says so:
        whatever was here before is replaced by it), or its origin (the lower file overlayfs
        copied up, by file handle) is the file at a path the command changed (a rename's
        source, or a file it linked here). Then nothing was deleted here: had this path been a
        name of that file at the start, its removal would have changed the file (its link
        count), which that path's own check sees."""
        source = self.renamed.get(change.path)
        if source is not None:
            # The rename supervisor saw it made (``_renames``) from a lower entry, which the
            # command's whiteout (a change, checked) replaces; unless that is gone too.
            return source in self.by_path or self._in_lower(source)
        if self._linked(change):
            return True
        origin = self._origin(change.parts)
        if origin is None:
            return False
        sources = self._sources
        if sources is None:
            sources = self._sources = {}
            for other in self.changes:
                handle = self._lower_handle(other.parts)
                if handle is not None:
                    sources[handle] = other.path
        return origin in sources

    def _linked(self, change: Change) -> bool:
        """Whether ``change`` is, in the upper layer, one file with another path the command
        changed that the lower layer still holds (``ln a b``: ``a``), whose own check sees a
        change of that file's links: where overlayfs records no file handle, the upper
        layer's inodes tell."""
        found = self._upper_status(change.parts)
        if found is None or found.st_nlink < 2 or change.kind is not ChangeKind.FILE:
            return False
        names = self._names
        if names is None:  # once, and only if asked: the files of the change set, by inode
            names = self._names = {}
            for other in self.changes:
                if other.kind is ChangeKind.FILE:
                    status = self._upper_status(other.parts)
                    if status is not None and status.st_nlink > 1:
                        names.setdefault(status.st_ino, []).append(other.path)
        return any(
            path != change.path and self._in_lower(path) for path in names.get(found.st_ino, ())
        )

    def _in_lower(self, path: str) -> bool:
        parts = tuple(path.split("/"))
        try:
            os.lstat(parts[-1], dir_fd=self.lower.open(parts[:-1]))
        except OSError:
            return False
        return True

    def _upper_status(self, parts: tuple[str, ...]) -> os.stat_result | None:
        try:
            return os.lstat(parts[-1], dir_fd=self._upper_directory(parts))
        except OSError:
            return None

    def _upper_directory(self, parts: tuple[str, ...]) -> int:
        if self._layer is None:
            self._upper_fd = os.open(self.upper, LOOK_FLAGS)
            self._layer = Directories(self._upper_fd, LOOK_FLAGS)
        return self._layer.open(parts[:-1])

    def _origin(self, parts: tuple[str, ...]) -> tuple[int, bytes] | None:
        try:
            directory = self._upper_directory(parts)
            found = os.getxattr(
                f"/proc/self/fd/{directory}/{parts[-1]}", ORIGIN, follow_symlinks=False
            )
        except OSError:
            return None
        return origin_handle(found)

    def _lower_handle(self, parts: tuple[str, ...]) -> tuple[int, bytes] | None:
        try:
            directory = self.lower.open(parts[:-1])
        except OSError:
            return None
        return file_handle(directory, parts[-1])


def _tree_changed(directory: int, name: str, started: int) -> bool:
    """Whether any entry below directory ``name`` (in ``directory``) changed after
    ``started``; the directory's own status is the caller's."""
    try:
        top = os.open(name, DIRECTORY_FLAGS, dir_fd=directory)
    except _GONE:
        return True
    pending = [top]
    try:
        while pending:
            fd = pending.pop()
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        status = entry.stat(follow_symlinks=False)
                        if status.st_ctime_ns > started:
                            return True
                        if stat.S_ISDIR(status.st_mode):
                            pending.append(os.open(entry.name, DIRECTORY_FLAGS, dir_fd=fd))
            finally:
                os.close(fd)
        return False
    except _GONE:
        return True  # went away while looked at
    finally:
        for fd in pending:
            os.close(fd)

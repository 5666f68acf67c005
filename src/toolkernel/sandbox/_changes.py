"""What a command changed: its overlay's upper layer, read against the lower layer.

overlayfs writes every change of the merged view to the upper directory:

- a new or changed file, link, fifo or directory is there as itself (a file copied up keeps
  its owner, mode and times);
- a deleted entry is a *whiteout*: a character device numbered 0:0 with the deleted name;
- a directory that replaced the lower one (``rm -r d; mkdir d``) is *opaque*: the extended
  attribute ``user.overlay.opaque`` is ``y`` (the launcher mounts with ``userxattr``), and the
  lower directory's entries are gone.

Copy-up also puts unchanged files in the upper layer (a file opened for writing and left as
it was, a ``chmod`` to the mode it had), so each is compared with the lower file, content,
mode and times, and only what differs is a change. A directory's own times are not compared:
they move whenever an entry of it changes, which the entry's own change says.
"""

from __future__ import annotations

import enum
import os
import stat

import attrs

from .._beneath import DIRECTORY_FLAGS, LOOK_FLAGS, READ_FLAGS

__all__ = ["ORIGIN", "Change", "ChangeKind", "read_changes"]

_OPAQUE = "user.overlay.opaque"
ORIGIN = "user.overlay.origin"
"""Set on a copy-up: the file handle of the lower entry it came from (``_handles``)."""
_CHUNK = 1 << 16


class ChangeKind(enum.Enum):
    """What a path is once the change is made."""

    FILE = "file"
    DIRECTORY = "directory"
    SYMLINK = "symlink"
    SPECIAL = "special"
    """A fifo or a socket."""
    DELETED = "deleted"


@attrs.frozen
class Change:
    """One path a command changed, relative to the root, ``/``-separated, as on disk."""

    path: str
    kind: ChangeKind
    replaces: bool = False
    """For a directory: it replaces what was there (the lower entries not in it are gone)."""
    metadata_only: bool = False
    """Only its mode or times changed: the content (or the link's target) is the same."""
    copied_up: bool = False
    """It is a lower entry, copied up to be changed (overlayfs marks it with its origin): an
    entry was there when the command began changing it, at this path or, for one it renamed
    or linked here, at another."""

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.path.split("/"))


def read_changes(lower: str, upper: str) -> list[Change]:
    """The changes in ``upper`` (an overlay's upper directory) over ``lower``, parents before
    their children, in name order.

    Walked iteratively, each directory opened relative to its parent without following a link,
    so a tree of any depth is read (its paths may be longer than ``PATH_MAX``)."""
    found: list[Change] = []
    upper_top = os.open(upper, DIRECTORY_FLAGS)
    try:
        # The lower layer is only looked into: a directory there needs no read permission.
        lower_top: int | None = os.open(lower, LOOK_FLAGS)
    except BaseException:
        os.close(upper_top)
        raise
    # Each frame: a directory of the upper layer, the lower one under it (None where there is
    # none, or it was replaced), its path, and its names not yet read, last first.
    frames = [_Frame(upper_top, lower_top, "", _names(upper_top))]
    try:
        while frames:
            frame = frames[-1]
            if not frame.names:
                frames.pop()
                frame.close()
                continue
            name = frame.names.pop()
            path = f"{frame.path}/{name}" if frame.path else name
            descend = _read(frame, name, path, found)
            if descend is not None:
                frames.append(descend)
    finally:
        for frame in frames:
            frame.close()
    return found


@attrs.define
class _Frame:
    upper: int
    lower: int | None
    path: str
    names: list[str]

    def close(self) -> None:
        os.close(self.upper)
        if self.lower is not None:
            os.close(self.lower)


def _names(fd: int) -> list[str]:
    with os.scandir(fd) as entries:  # a duplicate of ``fd``: it keeps its own offset
        return sorted((entry.name for entry in entries), reverse=True)


def _read(frame: _Frame, name: str, path: str, found: list[Change]) -> _Frame | None:
    """Append what ``name`` (in ``frame``) is a change of, if anything; the frame to read next
    if it is a directory whose entries are changes too."""
    upper = frame.upper
    entry = os.lstat(name, dir_fd=upper)
    below = None if frame.lower is None else _lstat(frame.lower, name)
    mode = entry.st_mode
    if stat.S_ISCHR(mode) and entry.st_rdev == 0:
        if below is not None:
            found.append(Change(path, ChangeKind.DELETED))
        return None
    if stat.S_ISDIR(mode):
        child = os.open(name, DIRECTORY_FLAGS, dir_fd=upper)
        try:
            opaque = _attribute(child, _OPAQUE) == b"y"
            merged = below is not None and stat.S_ISDIR(below.st_mode) and not opaque
            if merged:
                assert below is not None and frame.lower is not None
                if _permissions(entry) != _permissions(below):
                    found.append(
                        Change(path, ChangeKind.DIRECTORY, metadata_only=True, copied_up=True)
                    )
            else:
                copied = _attribute(child, ORIGIN) is not None
                found.append(
                    Change(path, ChangeKind.DIRECTORY, replaces=below is not None, copied_up=copied)
                )
            names = _names(child)
            lower = os.open(name, LOOK_FLAGS, dir_fd=frame.lower) if merged else None
        except BaseException:
            os.close(child)
            raise
        return _Frame(child, lower, path, names)
    if stat.S_ISREG(mode):
        same_content = False
        if below is not None and stat.S_ISREG(below.st_mode):
            assert frame.lower is not None
            same_content = _same_content(upper, frame.lower, name, entry, below)
            # Copied up and left as it was; unless it was linked to (``ln a b``): committed
            # with its new names, it stays one file with them.
            if same_content and _same_metadata(entry, below) and entry.st_nlink == 1:
                return None
        copied = _entry_attribute(upper, name, ORIGIN) is not None
        metadata_only = same_content and entry.st_nlink == 1
        found.append(Change(path, ChangeKind.FILE, metadata_only=metadata_only, copied_up=copied))
        return None
    if stat.S_ISLNK(mode):
        target = os.readlink(name, dir_fd=upper)
        if (
            below is not None
            and stat.S_ISLNK(below.st_mode)
            and frame.lower is not None
            and os.readlink(name, dir_fd=frame.lower) == target
        ):
            return None
        found.append(Change(path, ChangeKind.SYMLINK))
        return None
    found.append(Change(path, ChangeKind.SPECIAL))
    return None


def _lstat(directory: int, name: str) -> os.stat_result | None:
    try:
        return os.lstat(name, dir_fd=directory)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _attribute(fd: int, attribute: str) -> bytes | None:
    """The extended attribute ``attribute`` of the file open as ``fd``, or None."""
    try:
        return os.getxattr(fd, attribute)
    except OSError:
        return None


def _entry_attribute(directory: int, name: str, attribute: str) -> bytes | None:
    """The extended attribute ``attribute`` of entry ``name`` of ``directory`` (not followed
    if a link), or None. Named through ``/proc/self/fd``, so a path of any length is reached
    without opening the file (which its mode may not allow)."""
    try:
        return os.getxattr(f"/proc/self/fd/{directory}/{name}", attribute, follow_symlinks=False)
    except OSError:
        return None


def _permissions(found: os.stat_result) -> tuple[int, int, int]:
    return (stat.S_IMODE(found.st_mode), found.st_uid, found.st_gid)


def _same_metadata(found: os.stat_result, below: os.stat_result) -> bool:
    return _permissions(found) == _permissions(below) and found.st_mtime_ns == below.st_mtime_ns


def _same_content(
    upper: int, lower: int, name: str, found: os.stat_result, below: os.stat_result
) -> bool:
    if found.st_size != below.st_size:
        return False
    try:
        new = os.open(name, READ_FLAGS, dir_fd=upper)
    except OSError:
        return False
    try:
        old = os.open(name, READ_FLAGS, dir_fd=lower)
    except OSError:
        os.close(new)
        return False
    with open(new, "rb") as new_stream, open(old, "rb") as old_stream:
        try:
            while True:
                chunk = new_stream.read(_CHUNK)
                if chunk != old_stream.read(_CHUNK):
                    return False
                if not chunk:
                    return True
        except OSError:
            return False

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
from collections.abc import Iterator

import attrs

__all__ = ["Change", "ChangeKind", "read_changes"]

_OPAQUE = "user.overlay.opaque"
_ORIGIN = "user.overlay.origin"  # set on a copy-up: where in the lower layer it came from
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
    """It is the lower entry, copied up to be changed (overlayfs marks it): the path was there
    when the command began changing it."""

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.path.split("/"))


def read_changes(lower: str, upper: str) -> list[Change]:
    """The changes in ``upper`` (an overlay's upper directory) over ``lower``, parents before
    their children, in name order."""
    return list(_walk(lower, upper, "", replaced=False))


def _walk(lower: str, upper: str, relative: str, *, replaced: bool) -> Iterator[Change]:
    directory = os.path.join(upper, relative) if relative else upper
    with os.scandir(directory) as entries:
        names = sorted(entry.name for entry in entries)
    for name in names:
        path = f"{relative}/{name}" if relative else name
        found = os.lstat(os.path.join(upper, path))
        below = None if replaced else _lstat(os.path.join(lower, path))
        mode = found.st_mode
        if stat.S_ISCHR(mode) and found.st_rdev == 0:
            if below is not None:
                yield Change(path, ChangeKind.DELETED)
            continue
        if stat.S_ISDIR(mode):
            opaque = _is_opaque(os.path.join(upper, path))
            if below is not None and stat.S_ISDIR(below.st_mode) and not opaque:
                if _permissions(found) != _permissions(below):
                    yield Change(path, ChangeKind.DIRECTORY, metadata_only=True, copied_up=True)
                yield from _walk(lower, upper, path, replaced=False)
            else:
                yield Change(path, ChangeKind.DIRECTORY, replaces=below is not None)
                yield from _walk(lower, upper, path, replaced=True)
            continue
        if stat.S_ISREG(mode):
            same_content = False
            if below is not None and stat.S_ISREG(below.st_mode):
                same_content = _same_content(os.path.join(upper, path), found, lower, path, below)
                if same_content and _same_metadata(found, below):
                    continue  # copied up, left as it was
            copied = _has(os.path.join(upper, path), _ORIGIN)
            yield Change(path, ChangeKind.FILE, metadata_only=same_content, copied_up=copied)
            continue
        if stat.S_ISLNK(mode):
            target = os.readlink(os.path.join(upper, path))
            if (
                below is not None
                and stat.S_ISLNK(below.st_mode)
                and os.readlink(os.path.join(lower, path)) == target
            ):
                continue
            yield Change(path, ChangeKind.SYMLINK)
            continue
        yield Change(path, ChangeKind.SPECIAL)


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _is_opaque(path: str) -> bool:
    try:
        return os.getxattr(path, _OPAQUE, follow_symlinks=False) == b"y"
    except OSError:
        return False


def _has(path: str, attribute: str) -> bool:
    try:
        os.getxattr(path, attribute, follow_symlinks=False)
    except OSError:
        return False
    return True


def _permissions(found: os.stat_result) -> tuple[int, int, int]:
    return (stat.S_IMODE(found.st_mode), found.st_uid, found.st_gid)


def _same_metadata(found: os.stat_result, below: os.stat_result) -> bool:
    return _permissions(found) == _permissions(below) and found.st_mtime_ns == below.st_mtime_ns


def _same_content(
    upper_path: str, found: os.stat_result, lower: str, path: str, below: os.stat_result
) -> bool:
    if found.st_size != below.st_size:
        return False
    try:
        with open(upper_path, "rb") as new, open(os.path.join(lower, path), "rb") as old:
            while True:
                chunk = new.read(_CHUNK)
                if chunk != old.read(_CHUNK):
                    return False
                if not chunk:
                    return True
    except OSError:
        return False

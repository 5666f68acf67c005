"""The file operations behind ``ctx.fs``, each relative to the workspace's root descriptor.

Every function here takes the root directory descriptor and ``parts``, the components of a path
already resolved and checked by :class:`FileAccess` (plain names, no link among those that
existed), and reaches the file through :func:`open_directory`, so a directory swapped for a link
since the check is refused (:class:`PathChangedError`), never followed. The last component is used
with ``dir_fd=`` and without following a link either.

Each mutating system call (creating the temporary file, the final rename, ``mkdir``, ``unlink``,
``rmdir``) runs inside ``gate``, a context manager that refuses once the call has ended. They run
in worker threads; blocking is expected.

What changes files is whole or nothing: a write is a temporary file renamed over the old one, a
tree's deletion a rename aside followed by a removal that a cancellation does not stop.

The step that makes a change visible (the final rename, ``mkdir``, ``unlink``, the rename of a
tree aside, a move) goes through one seam (``_rename``, ``_unlink``, ``_mkdir``): without a
``fence`` it is the system call itself, inside ``gate``; with one (shared leases), it is described
as a ``leases.Op`` on the path's components from the root and published through the call's fence,
which makes it only while the call's grant is held (else ``FencedOutError``, nothing changed),
beneath its own root descriptor, following no link. The gate is then entered for its checks and left
before the round trip: the fence may need the event loop, whose thread can be the one closing
the access, and holding the lock across it could deadlock both. What keeps a late change out is
the fence: the access is closed in the step of the loop that releases the grant, and the backend
refuses whatever reaches it after the release. Preparing (the temporary file, removing a tree
moved aside under its scratch name) needs no fence.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import operator
import os
import re
import secrets
import stat
from collections.abc import Callable, Sequence
from typing import Final, Literal

import anyio
import anyio.from_thread
import anyio.to_thread
import attrs

from .._beneath import (
    CREATE_FLAGS,
    DIRECTORY_FLAGS,
    LINK_ERRNOS,
    READ_NONBLOCK_FLAGS,
    changed,
    not_a_directory,
    open_directory,
    remove_opened_tree,
    rename_no_replace,
)
from .._errors import PathChangedError
from ..leases._backend import Fence, MakeDirectory, Rename, Unlink
from ._workspace import MAX_PATH_BYTES

__all__ = [
    "Entry",
    "Gate",
    "delete",
    "entries",
    "listdir",
    "make_directory",
    "Moved",
    "entry_exists",
    "move",
    "moved_aside",
    "open_regular",
    "read_at_most",
    "read_regular",
    "replace_atomically",
    "status",
    "walk",
]

Gate = contextlib.AbstractContextManager[object]

CHUNK: Final = 1 << 20
"""Bytes written between cancellation checks, so a big write can still be cancelled."""
TEMP_SUFFIX: Final = ".tktmp"
_ASIDE_INFIX: Final = ".toolkernel-deleted-"
# What delete() names a tree it moved aside: ".<up to 32 characters of its name>" + infix + hex.
_MOVED_ASIDE: Final = re.compile(r"\..*" + re.escape(_ASIDE_INFIX) + r"[0-9a-f]{12}", re.DOTALL)

# Ask with the effective ids, as open() would, where the platform can.
_EFFECTIVE_IDS: Final = os.access in os.supports_effective_ids

EntryKind = Literal["file", "directory", "symlink", "other"]


@attrs.frozen
class Entry:
    """One name in a directory, seen without following links (``FileAccess.list_entries``)."""

    name: str
    """The name, as the directory holds it."""
    kind: EntryKind
    """``"file"`` (regular), ``"directory"``, ``"symlink"``, or ``"other"`` (fifo, socket,
    device)."""
    link_target: str | None = None
    """For a symbolic link, the text it holds (never resolved); else None."""


def kind_of(mode: int) -> str:
    """A short name for the type of file ``mode`` describes, for messages."""
    for test, name in (
        (stat.S_ISFIFO, "fifo (named pipe)"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISLNK, "symbolic link"),
        (stat.S_ISDIR, "directory"),
    ):
        if test(mode):
            return name
    return "special file"


def not_regular(parts: Sequence[str], mode: int, doing: str = "read") -> OSError:
    """The error for reading (or ``doing``) what is not a regular file (``strerror`` reads after
    "it is")."""
    return OSError(
        errno.EINVAL,
        f"not a regular file but a {kind_of(mode)}; only regular files can be {doing}",
        "/".join(parts) or ".",
    )


def _unreadable(parent: int, parts: Sequence[str]) -> OSError | None:
    """Why the last component can't be opened as a file: a link now, or no regular file."""
    try:
        mode = os.lstat(parts[-1], dir_fd=parent).st_mode
    except OSError:
        return None
    if stat.S_ISLNK(mode):
        return changed(parts, len(parts) - 1)
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return not_regular(parts, mode)
    return None


# -- reading ---------------------------------------------------------------------------------------


def too_large(parts: Sequence[str], size: int | None, limit: int) -> OSError:
    """The error for a file over a read limit (``EFBIG``; ``strerror`` reads after "it is")."""
    how_big = f"{size} bytes" if size is not None else "over the limit"
    return OSError(
        errno.EFBIG,
        f"too large ({how_big}; the limit is {limit} bytes)",
        "/".join(parts) or ".",
    )


def read_regular(root: int, parts: Sequence[str], max_bytes: int | None = None) -> bytes:
    """The content of regular file ``parts``; anything else is refused before it is read.

    Opened as :func:`open_regular` opens it. With ``max_bytes``, a file larger than that is
    refused (``EFBIG``) before it is read, and at most ``max_bytes + 1`` bytes are ever read (a
    file growing since the ``fstat``, or one whose size lies, is cut there and refused too): a
    sparse terabyte must not be pulled into memory.
    """
    with open_regular(root, parts, max_bytes) as file:
        if max_bytes is None:
            return file.readall()
        return read_at_most(file, parts, max_bytes)


def open_regular(root: int, parts: Sequence[str], max_bytes: int | None = None) -> io.FileIO:
    """Regular file ``parts``, open for reading (unbuffered); anything else is refused first.

    Opened with ``O_NONBLOCK | O_NOFOLLOW`` and checked with ``fstat``: a fifo or a device would
    block the thread for good, and a link here means the path changed. With ``max_bytes``, a
    file larger than that is refused (``EFBIG``).
    """
    if not parts:
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), ".")
    parent = open_directory(root, parts[:-1])
    try:
        fd = os.open(parts[-1], READ_NONBLOCK_FLAGS, dir_fd=parent)
    except OSError as exc:
        problem = _unreadable(parent, parts) if exc.errno != errno.ENOENT else None
        if problem is not None:
            raise problem from None
        raise
    finally:
        os.close(parent)
    file = io.FileIO(fd, "r")  # the caller closes it
    try:
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), parts[-1])
        if not stat.S_ISREG(status.st_mode):
            raise not_regular(parts, status.st_mode)
        if max_bytes is not None and status.st_size > max_bytes:
            raise too_large(parts, status.st_size, max_bytes)
    except BaseException:
        file.close()
        raise
    return file


def read_at_most(file: io.FileIO, parts: Sequence[str], limit: int) -> bytes:
    """All of ``file`` if it holds at most ``limit`` bytes; else ``EFBIG``, having read
    ``limit + 1``."""
    chunks: list[bytes] = []
    left = limit + 1
    while left > 0:
        chunk = file.read(min(left, CHUNK))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        left -= len(chunk)
    raise too_large(parts, None, limit)


def status(root: int, parts: Sequence[str]) -> os.stat_result:
    """``stat`` of ``parts``; a link where the resolution saw none is a changed path."""
    if not parts:
        return os.stat(".", dir_fd=root)
    parent = open_directory(root, parts[:-1])
    try:
        result = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
    finally:
        os.close(parent)
    if stat.S_ISLNK(result.st_mode):
        raise changed(parts, len(parts) - 1)
    return result


def entry_exists(root: int, parts: Sequence[str], link: bool) -> bool:
    """True iff the entry ``parts`` is there (a link whatever it points to); ``link`` is
    whether the check found a link there (a link found where none was is a changed path)."""
    if not parts:
        return True
    try:
        parent = open_directory(root, parts[:-1])
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        _entry_mode(parent, parts, link)
    except (FileNotFoundError, NotADirectoryError):
        return False
    finally:
        os.close(parent)
    return True


def _entry_mode(parent: int, parts: Sequence[str], link: bool) -> int:
    """The ``lstat`` mode of entry ``parts`` in ``parent``, which must be a symbolic link iff
    ``link`` (the check found one there), else the path changed: :class:`PathChangedError`."""
    mode = os.lstat(parts[-1], dir_fd=parent).st_mode
    if stat.S_ISLNK(mode) and not link:
        raise changed(parts, len(parts) - 1)
    if link and not stat.S_ISLNK(mode):
        raise PathChangedError(f"{'/'.join(parts)!r} is no longer a symbolic link")
    return mode


def listdir(root: int, parts: Sequence[str]) -> list[str]:
    """The sorted names in directory ``parts``, but trees being deleted (:func:`moved_aside`)."""
    fd = open_directory(root, parts)
    try:
        return sorted(name for name in os.listdir(fd) if not moved_aside(name))
    finally:
        os.close(fd)


def entries(root: int, parts: Sequence[str], limit: int | None = None) -> tuple[list[Entry], int]:
    """The entries of directory ``parts``, sorted by name, no link followed, and how many
    there are; trees being deleted (:func:`moved_aside`) are left out.

    With ``limit``, only the first ``limit`` become :class:`Entry` values (a link's target is
    read only for those): a directory of 100,000 names is sorted, not described in full.
    """
    fd = open_directory(root, parts)
    try:
        with os.scandir(fd) as iterator:
            items = [item for item in iterator if not moved_aside(item.name)]
        items.sort(key=_name)
        shown = items if limit is None else items[:limit]
        return [_entry(fd, item) for item in shown], len(items)
    finally:
        os.close(fd)


_name = operator.attrgetter("name")


def _entry(fd: int, item: os.DirEntry[str]) -> Entry:
    if item.is_symlink():
        try:
            target: str | None = os.readlink(item.name, dir_fd=fd)
        except OSError:
            target = None  # replaced since the listing
        return Entry(item.name, "symlink", target)
    if item.is_dir(follow_symlinks=False):
        return Entry(item.name, "directory")
    if item.is_file(follow_symlinks=False):
        return Entry(item.name, "file")
    return Entry(item.name, "other")


def walk(root: int, parts: Sequence[str], linked_file: Callable[[str], bool]) -> list[str]:
    """The root-relative paths of the regular files in and below ``parts``, sorted.

    Directories are entered with ``O_NOFOLLOW``, so a link never leads the walk out of the tree;
    a symbolic link is listed iff ``linked_file(its path)`` says so. A regular file ``parts``
    gives itself; a fifo or device gives nothing. Paths too long to be a key
    (``MAX_PATH_BYTES``) and trees being deleted (:func:`moved_aside`) are left out. Must run
    in a worker thread (``anyio.to_thread``): it checks for cancellation before entering each
    directory.
    """
    base = "/".join(parts)
    try:
        top = open_directory(root, parts)
    except NotADirectoryError:
        return [base] if stat.S_ISREG(status(root, parts).st_mode) else []
    found: list[str] = []
    # Each frame: an open directory, its root-relative prefix, the entries still to look at.
    frames: list[tuple[int, str, list[os.DirEntry[str]]]] = []
    try:
        frames.append((top, base + "/" if base else "", _scan(top)))
        while frames:
            fd, prefix, pending = frames[-1]
            if not pending:
                frames.pop()
                os.close(fd)
                continue
            item = pending.pop()
            relative = prefix + item.name
            if len(os.fsencode(relative)) > MAX_PATH_BYTES:
                # No key can name it (nor anything below it), so no call could read it: skip
                # it, which also bounds the descriptors a deep tree holds open.
                continue
            if moved_aside(item.name):
                continue  # deleted: a Grep must not find what a Delete removed
            if item.is_dir(follow_symlinks=False):
                # A tree can be huge: the call's cancellation (its run timeout) stops the walk.
                anyio.from_thread.check_cancelled()
                try:
                    child = os.open(item.name, DIRECTORY_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # vanished, unreadable, or swapped for a link: skip it, like os.walk
                frames.append((child, relative + "/", _scan(child)))
            elif item.is_symlink():
                if linked_file(relative):
                    found.append(relative)
            elif item.is_file(follow_symlinks=False):
                found.append(relative)
    finally:
        for fd, _, _ in frames:
            os.close(fd)
    found.sort()
    return found


def _scan(fd: int) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(fd) as iterator:
            return list(iterator)
    except OSError:
        return []  # unreadable: skip it, like os.walk


# -- writing ---------------------------------------------------------------------------------------


def maker(gate: Gate) -> Callable[[int, str], None]:
    """A ``make`` for :func:`open_directory` that creates missing directories inside ``gate``."""

    def make(parent: int, name: str) -> None:
        with contextlib.suppress(FileExistsError), gate:
            os.mkdir(name, 0o777, dir_fd=parent)

    return make


def _open_parent(
    root: int, parts: Sequence[str], gate: Gate, fence: Fence | None, *, parents: bool
) -> int:
    """Open the directory holding ``parts``, making its missing ancestors with ``parents``."""
    directory = parts[:-1]
    if not parents:
        return open_directory(root, directory)
    if fence is None:
        return open_directory(root, directory, make=maker(gate))
    try:
        return open_directory(root, directory)
    except FileNotFoundError:
        pass
    # Fenced: each missing ancestor is published by its key, from the top down.
    for depth in range(1, len(directory) + 1):
        try:
            os.close(open_directory(root, directory[:depth]))
            continue
        except FileNotFoundError:
            pass
        with contextlib.suppress(FileExistsError):
            _mkdir(fence, gate, -1, directory[:depth])
    return open_directory(root, directory)


# The visible steps: the system call (``fence`` None), or the op published through the fence.


def _rename(
    fence: Fence | None,
    gate: Gate,
    source_dir: int,
    source: Sequence[str],
    target_dir: int,
    target: Sequence[str],
    *,
    replace: bool = True,
    before: Callable[[], object] | None = None,
) -> None:
    """Rename ``source`` to ``target``; ``before`` runs inside ``gate`` just before."""
    if fence is None:
        with gate:
            if before is not None:
                before()
            if replace:
                os.replace(source[-1], target[-1], src_dir_fd=source_dir, dst_dir_fd=target_dir)
            else:
                rename_no_replace(source_dir, source[-1], target_dir, target[-1])
        return
    with gate:
        if before is not None:
            before()
    fence.publish(Rename(tuple(source), tuple(target), replace))


def _unlink(fence: Fence | None, gate: Gate, parent: int, parts: Sequence[str]) -> None:
    if fence is None:
        with gate:
            os.unlink(parts[-1], dir_fd=parent)
        return
    with gate:
        pass  # its checks: the access is open, the call not cancelled
    fence.publish(Unlink(tuple(parts)))


def _mkdir(fence: Fence | None, gate: Gate, parent: int, parts: Sequence[str]) -> None:
    if fence is None:
        with gate:
            os.mkdir(parts[-1], 0o777, dir_fd=parent)
        return
    with gate:
        pass
    fence.publish(MakeDirectory(tuple(parts)))


Check = Callable[[os.stat_result | None], object]


def replace_atomically(
    root: int,
    parts: Sequence[str],
    data: bytes,
    gate: Gate,
    *,
    parents: bool,
    check: Check | None = None,
    fence: Fence | None = None,
) -> os.stat_result:
    """Write ``data`` to a temporary sibling of ``parts``, then rename it over ``parts``; return
    the new file's status as renamed into place (see :func:`_placed`).

    Must run in a worker thread (``anyio.to_thread``): it polls for cancellation between chunks
    and once more just before the rename, the last moment at which backing out leaves the old
    content.
    An existing file keeps its permission bits. ``check``, if given, is called inside ``gate``
    just before the rename with the ``lstat`` of what is about to be replaced (None if
    nothing is): raising there refuses the write, the old file untouched.
    """
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "can't write over the workspace root", ".")
    parent = _open_parent(root, parts, gate, fence, parents=parents)
    try:
        return _replace_in(parent, parts, data, gate, check, fence)
    finally:
        os.close(parent)


def _replace_in(
    parent: int,
    parts: Sequence[str],
    data: bytes,
    gate: Gate,
    check: Check | None,
    fence: Fence | None,
) -> os.stat_result:
    name = parts[-1]
    current: os.stat_result | None = None
    try:
        current = os.lstat(name, dir_fd=parent)
    except FileNotFoundError:
        pass
    else:
        if stat.S_ISLNK(current.st_mode):
            raise changed(parts, len(parts) - 1)
        if stat.S_ISDIR(current.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
        if not stat.S_ISREG(current.st_mode):
            # A fifo, socket or device is not content to replace: whoever made it uses it.
            raise not_regular(parts, current.st_mode, doing="written over")
        # The rename would replace a file its mode forbids us to write, as ``sed -i`` does;
        # ``echo >`` would refuse, and so do we (root may write anything, as ever).
        if not os.access(name, os.W_OK, dir_fd=parent, effective_ids=_EFFECTIVE_IDS):
            raise PermissionError(
                errno.EACCES,
                "read-only: its permission bits forbid this process to write it (make it "
                "writable first, e.g. chmod u+w)",
                "/".join(parts),
            )
    # A short prefix of the name helps whoever finds a leftover after a power cut, and stays far
    # below NAME_MAX whatever the target's name is.
    temporary = f".{name[:32]}.{secrets.token_hex(6)}{TEMP_SUFFIX}"
    with gate:
        # 0o666 through the umask, like any new file; O_EXCL so we never write into someone's.
        fd = os.open(temporary, CREATE_FLAGS, 0o666, dir_fd=parent)
    try:
        try:
            view = memoryview(data)
            written = 0
            while written < len(view):
                if written:
                    anyio.from_thread.check_cancelled()
                written += os.write(fd, view[written : written + CHUNK])
            os.fsync(fd)
            if current is not None:
                _keep_owner(fd, current)
                # After the chown, which clears set-user-ID bits.
                os.fchmod(fd, stat.S_IMODE(current.st_mode))
            as_written = os.fstat(fd)
        finally:
            # Closed before the rename: a failure the close reports leaves the old content.
            os.close(fd)
        anyio.from_thread.check_cancelled()

        def last_look() -> None:
            if check is not None:
                # Looked at again now, not at the start: the narrowest window left to a
                # writer holding no lease is this lstat and the rename.
                check(_present(parent, name))

        source = (*parts[:-1], temporary)
        _rename(fence, gate, parent, source, parent, parts, before=last_look)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=parent)
        raise
    return _placed(parent, name, as_written)


def _placed(parent: int, name: str, as_written: os.stat_result) -> os.stat_result:
    """The status of the file just renamed to ``name``, ``as_written`` its ``fstat`` before
    the rename: its ``lstat`` now (the rename changed its ctime) if it is still that file as
    written (same device, inode, size and modification time); else ``as_written``, which no file
    there matches, so that whatever replaced or changed it since reads as a change."""
    placed = _present(parent, name)
    if placed is None or _identity(placed) != _identity(as_written):
        return as_written
    return placed


def _identity(status: os.stat_result) -> tuple[int, int, int, int]:
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


def _present(parent: int, name: str) -> os.stat_result | None:
    try:
        return os.lstat(name, dir_fd=parent)
    except FileNotFoundError:
        return None


def _keep_owner(fd: int, current: os.stat_result) -> None:
    """Give the new file ``fd`` the owner and group of the file it replaces, as far as allowed:
    a kernel run as root must not hand the project's files to root, one edit at a time."""
    mine = os.fstat(fd)
    if (mine.st_uid, mine.st_gid) == (current.st_uid, current.st_gid):
        return
    # Best effort, never a reason to fail the write: only root gives a file away (EPERM; the
    # owner may still set a group they belong to), and in a user namespace an unmapped owner
    # (the overflow id 65534) can't be given at all (EINVAL).
    try:
        os.fchown(fd, current.st_uid, current.st_gid)
    except OSError:
        with contextlib.suppress(OSError):
            os.fchown(fd, -1, current.st_gid)


def make_directory(
    root: int,
    parts: Sequence[str],
    gate: Gate,
    *,
    parents: bool,
    exist_ok: bool,
    fence: Fence | None = None,
) -> None:
    """``mkdir`` of ``parts`` (and its missing parents, with ``parents``)."""
    if not parts:
        if exist_ok:
            return
        raise FileExistsError(errno.EEXIST, "the workspace root exists", ".")
    parent = _open_parent(root, parts, gate, fence, parents=parents)
    try:
        try:
            _mkdir(fence, gate, parent, parts)
        except FileExistsError:
            if not exist_ok:
                raise
            existing = os.lstat(parts[-1], dir_fd=parent).st_mode
            if stat.S_ISLNK(existing):
                raise changed(parts, len(parts) - 1) from None
            if not stat.S_ISDIR(existing):
                raise
    finally:
        os.close(parent)


def delete(
    root: int,
    parts: Sequence[str],
    gate: Gate,
    committed: Gate,
    fence: Fence | None = None,
    *,
    link: bool = False,
) -> None:
    """Delete file ``parts``, or directory ``parts`` with everything in it (no link followed).

    A file is one ``unlink``, and so is a symbolic link: ``link`` says the check found one
    there, which is deleted itself (a link where the check saw none, or none where it saw one,
    is a changed path). A directory is old or gone, never half: see :func:`_delete_tree`.
    ``committed`` guards the removals made once that deletion is committed: like ``gate`` it
    refuses once the call has ended, but it does not stop for the call's cancellation.
    """
    if not parts:
        raise PermissionError(errno.EPERM, "can't delete the workspace root", ".")
    parent = open_directory(root, parts[:-1])
    try:
        mode = _entry_mode(parent, parts, link)
        if stat.S_ISDIR(mode):
            _delete_tree(parent, parts, gate, committed, fence)
        else:
            _unlink(fence, gate, parent, parts)
    finally:
        os.close(parent)


def moved_aside(name: str) -> bool:
    """True iff ``name`` is a tree :func:`delete` moved aside to remove it (listings skip it)."""
    return _ASIDE_INFIX in name and _MOVED_ASIDE.fullmatch(name) is not None


def _delete_tree(
    parent: int, parts: Sequence[str], gate: Gate, committed: Gate, fence: Fence | None
) -> None:
    """Delete directory ``parts`` (in ``parent``): rename it aside, then remove it.

    The rename to a hidden unique name in the same directory is atomic, and it is the commit
    point. A cancellation (or the call's end) before it leaves the tree as it was. After it, the
    removal finishes in this worker thread whatever the cancellation, and returns as done: the
    tree is deleted, and the call says so (a result tells the truth about the files, as a
    Write whose rename was made does). Finishing, not rolling back: once a file is unlinked
    nothing can bring it back, and the call still holds its lease while the thread runs (the
    kernel waits for it), so no call ordered against this one sees the tree aside. The cost is
    that a cancelled or timed-out Delete of a huge tree returns when the removal is done. Only
    the call's end stops the removal (no write after it): the tree is gone from its name, and
    its remains wait aside, hidden, like a crash's.

    A tree left aside (by a crash, or by a call that ended mid-removal) is removed by the next
    directory deletion in the same directory. A deletion under way holds ``flock`` on its
    tree, so a sweep never races it, in this process or another. Sweeping a name no call holds
    a lease on is safe: the listings hide such names, and any call whose lease covers the
    directory conflicts with this one's.

    Before anything is touched, every directory in the tree is checked to be one this process
    may empty (:func:`_tree_contents`): one that is not (``chmod a-w``) makes the deletion fail
    with nothing deleted. The check can't foresee all (an immutable file, permissions changed
    by another process since): a failure during the removal is not a cancellation, what is left
    is put back under its name, where the model will look for it, and the error raised says
    what was deleted before it, since that can't be undone.
    """
    name = parts[-1]
    _sweep_moved_aside(parent, gate)
    try:
        top = os.open(name, DIRECTORY_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in LINK_ERRNOS:
            raise not_a_directory(parent, parts, len(parts) - 1) from None
        raise
    try:
        # Held until it is gone, so no sweep touches it. Where the file system has no flock,
        # no sweep can lock anything either, and none is made.
        with contextlib.suppress(OSError):
            fcntl.flock(top, fcntl.LOCK_EX)
        contents = _tree_contents(top, parent, parts)
        aside = f".{name[:32]}{_ASIDE_INFIX}{secrets.token_hex(6)}"
        aside_parts = (*parts[:-1], aside)
        # The gate is the last point at which a cancellation leaves the tree as it was.
        _rename(fence, gate, parent, parts, parent, aside_parts, replace=False)
        if not _same_directory(top, parent, aside):
            # Another process swapped the entry between the open and the rename: put back
            # what was moved, delete nothing.
            with contextlib.suppress(OSError):
                _rename(fence, committed, parent, aside_parts, parent, parts, replace=False)
            where = "/".join(parts)
            raise PathChangedError(f"{where!r} is another directory now")
        try:
            remove_opened_tree(os.dup(top), parent, aside, committed)
        except OSError as exc:
            put_back = True
            try:
                _rename(fence, committed, parent, aside_parts, parent, parts, replace=False)
            except OSError:
                put_back = False
            raise _removal_failed(exc, top, parts, contents, put_back) from exc
    finally:
        os.close(top)


def _tree_contents(top: int, parent: int, parts: Sequence[str]) -> list[str]:
    """The paths of everything in the tree ``top`` (named ``parts`` in ``parent``), relative to
    it, after checking that this process may empty every directory in it; else
    ``PermissionError`` naming the first that it may not, with nothing touched.

    May empty: read, write and search permission (``access`` with the effective ids: root and
    ACLs answer as they would for the removal), and in a sticky directory (``chmod +t``) owned
    by someone else, own each entry. Walked as :func:`remove_opened_tree` walks it, each
    directory opened relative to its parent without following a link.
    """
    contents: list[str] = []
    me = os.geteuid()
    frames: list[tuple[int, str]] = []
    try:
        frames.append((os.dup(top), ""))
        _may_empty(parent, parts[-1], top, parts, "")
        while frames:
            fd, prefix = frames.pop()
            try:
                sticky_owner = _sticky_owner(fd, me)
                for entry in _scan(fd):
                    relative = prefix + entry.name
                    contents.append(relative)
                    if sticky_owner is not None and entry.stat(follow_symlinks=False).st_uid != me:
                        raise _may_not_remove(parts, relative, "it is in a sticky directory")
                    if not entry.is_dir(follow_symlinks=False):
                        continue
                    try:
                        child = os.open(entry.name, DIRECTORY_FLAGS, dir_fd=fd)
                    except OSError:
                        continue  # gone or swapped since the listing: the removal copes
                    try:
                        _may_empty(fd, entry.name, child, parts, relative)
                    except BaseException:
                        os.close(child)
                        raise
                    frames.append((child, relative + "/"))
            finally:
                os.close(fd)
    finally:
        for fd, _ in frames:
            os.close(fd)
    return contents


def _may_empty(parent: int, name: str, fd: int, parts: Sequence[str], relative: str) -> None:
    """Raise ``PermissionError`` unless this process may list and remove what is in the
    directory ``fd`` (``name`` in ``parent``)."""
    wanted = os.R_OK | os.W_OK | os.X_OK
    allowed = os.access(name, wanted, dir_fd=parent, effective_ids=_EFFECTIVE_IDS)
    if not allowed and _same_directory(fd, parent, name):  # not swapped since it was opened
        raise _may_not_remove(parts, relative, "its permission bits forbid this process")


def _sticky_owner(fd: int, me: int) -> int | None:
    """The owner of directory ``fd`` if it is sticky and neither ours nor are we root: only
    the entries we own may then be removed from it."""
    status = os.fstat(fd)
    if me == 0 or not status.st_mode & stat.S_ISVTX or status.st_uid == me:
        return None
    return status.st_uid


def _may_not_remove(parts: Sequence[str], relative: str, why: str) -> PermissionError:
    where = "/".join((*parts, relative)) if relative else "/".join(parts)
    return PermissionError(
        errno.EACCES,
        f"can't delete the tree: {where!r} can't be emptied ({why}; make it writable first, "
        f"e.g. chmod -R u+rwx); nothing was deleted",
        "/".join(parts),
    )


def _removal_failed(
    error: OSError, top: int, parts: Sequence[str], contents: list[str], put_back: bool
) -> OSError:
    """The error for a removal that failed part-way: ``error``, saying what was deleted (what
    was in the tree, ``contents``, and is no more under ``top``) and where the rest is."""
    left = set(_tree_contents_unchecked(top))
    deleted = [relative for relative in contents if relative not in left]
    where = "/".join(parts)
    shown = ", ".join(repr(f"{where}/{relative}") for relative in deleted[:_SHOWN_DELETED])
    if len(deleted) > _SHOWN_DELETED:
        shown += f" and {len(deleted) - _SHOWN_DELETED} more"
    done = "deleted none of it"
    if deleted:
        done = f"deleted {len(deleted)} of its {len(contents)} entries ({shown})"
    rest = f"the rest is back under {where!r}" if put_back else "the rest is hidden beside it"
    message = f"{error.strerror or error}; {done} before that failed, and {rest}"
    return type(error)(error.errno, message, where)


_SHOWN_DELETED: Final = 10
"""How many deleted paths the error for a removal that failed part-way names."""


def _tree_contents_unchecked(top: int) -> list[str]:
    """The paths of what is left in the tree ``top``, relative to it (no link followed;
    whatever can't be listed counts as gone)."""
    found: list[str] = []
    frames: list[tuple[int, str]] = [(os.dup(top), "")]
    try:
        while frames:
            fd, prefix = frames.pop()
            try:
                for entry in _scan(fd):
                    found.append(prefix + entry.name)
                    if entry.is_dir(follow_symlinks=False):
                        with contextlib.suppress(OSError):
                            child = os.open(entry.name, DIRECTORY_FLAGS, dir_fd=fd)
                            frames.append((child, prefix + entry.name + "/"))
            finally:
                os.close(fd)
    finally:
        for fd, _ in frames:
            os.close(fd)
    return found


def _sweep_moved_aside(parent: int, gate: Gate) -> None:
    """Finish the removal of the trees left aside in ``parent`` that no deletion is removing."""
    with os.scandir(parent) as iterator:
        names = [item.name for item in iterator if moved_aside(item.name)]
    for name in names:
        try:
            fd = os.open(name, DIRECTORY_FLAGS, dir_fd=parent)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # Still there under that name once locked: its deletion did not just finish.
            if _same_directory(fd, parent, name):
                remove_opened_tree(os.dup(fd), parent, name, gate)
        except OSError:
            pass  # being removed (BlockingIOError), no flock here, or can't be: leave it
        finally:
            os.close(fd)


def _same_directory(fd: int, parent: int, name: str) -> bool:
    """True iff ``name`` in ``parent`` is the directory ``fd`` has open."""
    try:
        there = os.lstat(name, dir_fd=parent)
    except OSError:
        return False
    mine = os.fstat(fd)
    return (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino)


def move(
    root: int,
    source: Sequence[str],
    target: Sequence[str],
    gate: Gate,
    *,
    parents: bool,
    replace: bool = True,
    fence: Fence | None = None,
    link: bool = False,
) -> Moved:
    """Rename ``source`` to ``target`` (``os.replace``), relative to their parents' descriptors.

    With ``replace=False`` an existing ``target`` is never replaced (``FileExistsError``).
    ``link`` says the check found a symbolic link at ``source``: it is moved itself (a link
    where the check saw none, or none where it saw one, is a changed path). Returns the
    ``lstat`` of what was moved, just before and just after the rename (see :class:`Moved`).
    """
    if not source or not target:
        raise PermissionError(errno.EPERM, "can't move the workspace root", ".")
    source_parent = open_directory(root, source[:-1])
    try:
        target_parent = _open_parent(root, target, gate, fence, parents=parents)
        try:
            _entry_mode(source_parent, source, link)
            before: list[os.stat_result] = []

            def last_look() -> None:
                before.append(_entry_status(source_parent, source, link))

            _rename(
                fence,
                gate,
                source_parent,
                source,
                target_parent,
                target,
                replace=replace,
                before=last_look,
            )
            placed = _present(target_parent, target[-1])
            if placed is not None and _identity(placed)[:2] != _identity(before[0])[:2]:
                placed = None  # replaced since the rename, by a writer holding no lease
            return Moved(before[0], placed)
        finally:
            os.close(target_parent)
    finally:
        os.close(source_parent)


@attrs.frozen
class Moved:
    """What :func:`move` moved, as ``lstat`` saw it (so the views can follow it)."""

    before: os.stat_result
    """At its old name, just before the rename (inside the gate)."""
    after: os.stat_result | None
    """At its new name, just after the rename (which changes a file's ctime); None if what
    is there now is not what was moved."""


def _entry_status(parent: int, parts: Sequence[str], link: bool) -> os.stat_result:
    status = os.lstat(parts[-1], dir_fd=parent)
    if stat.S_ISLNK(status.st_mode) != link:
        _entry_mode(parent, parts, link)  # raises why
    return status

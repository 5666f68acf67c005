"""Moving what can't be renamed, as ``mv`` does: the rename supervisor's answer to ``EXDEV``
(``_renames``). Standard library only; loaded only when a rename needs it.

:func:`move` copies the entry (a tree one directory at a time, whatever its depth: modes, owners
where allowed, times, links, fifos) under a temporary name beside the destination, renames the
copy into place, and removes the source; a failure part-way removes the copy and leaves the
source whole. It answers with the error number the rename would have given: ``EEXIST``,
``ENOTDIR``, ``EISDIR``, ``ENOTEMPTY``, ``EINVAL`` (a directory into itself), ``EXDEV`` (a device
or a socket, which can't be copied).

Inside what is moved, every entry is reached relative to its directory's descriptor and never
through a link, with the package's no-follow primitives: ``_nofollow``, the part of
``_beneath`` that is standard library only. Beside the launcher, a script that can't import
the package, it is imported from the package's directory, which ``_renames._moves`` puts on
the path.
"""

from __future__ import annotations

import os
import stat

if __package__:
    from .._nofollow import CREATE_FLAGS, DIRECTORY_FLAGS, READ_FLAGS, remove_tree
else:  # loaded by the rename supervisor, beside the launcher: a script
    from _nofollow import (  # type: ignore[import-not-found,no-redef]
        CREATE_FLAGS,
        DIRECTORY_FLAGS,
        READ_FLAGS,
        remove_tree,
    )

EXDEV = 18


def move(old_fd: int, old: bytes, new_fd: int, new: bytes, *, replace: bool) -> int:
    """Move ``old`` to ``new`` where they can't be renamed: copy, rename the copy into place,
    remove the source. 0, or the error number the rename would have given."""
    old_parent, old_name = _split(old_fd, old)
    try:
        new_parent, new_name = _split(new_fd, new)
    except BaseException:
        os.close(old_parent)
        raise
    try:
        return _move(old_parent, old_name, new_parent, new_name, replace)
    finally:
        os.close(old_parent)
        os.close(new_parent)


def _split(directory: int, path: bytes) -> tuple[int, str]:
    """A descriptor of the directory holding ``path``'s last component, and that component."""
    text = os.fsdecode(path).rstrip("/") or "/"
    parent, name = os.path.split(text)
    if name in ("", ".", ".."):
        raise OSError(16, "Device or resource busy")  # EBUSY: renaming . or .. or /
    return os.open(parent or ".", DIRECTORY_FLAGS, dir_fd=directory), name


def _move(old_parent: int, old: str, new_parent: int, new: str, replace: bool) -> int:
    source = os.lstat(old, dir_fd=old_parent)
    try:
        target: os.stat_result | None = os.lstat(new, dir_fd=new_parent)
    except FileNotFoundError:
        target = None
    if target is not None:
        if (target.st_dev, target.st_ino) == (source.st_dev, source.st_ino):
            return 0  # the same file: rename(2) does nothing
        if not replace:
            return 17  # EEXIST
        if stat.S_ISDIR(source.st_mode) and not stat.S_ISDIR(target.st_mode):
            return 20  # ENOTDIR
        if not stat.S_ISDIR(source.st_mode) and stat.S_ISDIR(target.st_mode):
            return 21  # EISDIR
        if stat.S_ISDIR(target.st_mode) and _has_entries(new_parent, new):
            return 39  # ENOTEMPTY
    if stat.S_ISDIR(source.st_mode) and _within(new_parent, source):
        return 22  # EINVAL: a directory moved into itself
    kind = stat.S_IFMT(source.st_mode)
    if kind not in (stat.S_IFREG, stat.S_IFDIR, stat.S_IFLNK, stat.S_IFIFO):
        return EXDEV  # a device or a socket: nothing to copy
    temporary = f".{new[:40]}.{os.getpid()}.{os.urandom(6).hex()}.tkmove"
    try:
        _copy(old_parent, old, source, new_parent, temporary)
        if target is not None and stat.S_ISDIR(target.st_mode):
            os.rmdir(new, dir_fd=new_parent)  # empty: a directory may replace it
        os.rename(temporary, new, src_dir_fd=new_parent, dst_dir_fd=new_parent)
    except BaseException:
        remove_tree(new_parent, temporary)
        raise
    remove_tree(old_parent, old)
    return 0


def _has_entries(parent: int, name: str) -> bool:
    fd = os.open(name, DIRECTORY_FLAGS, dir_fd=parent)
    try:
        return bool(os.listdir(fd))
    finally:
        os.close(fd)


def _within(directory: int, ancestor: os.stat_result) -> bool:
    """Whether ``directory`` is ``ancestor`` or below it."""
    fd = os.dup(directory)
    try:
        while True:
            status = os.fstat(fd)
            if (status.st_dev, status.st_ino) == (ancestor.st_dev, ancestor.st_ino):
                return True
            parent = os.open("..", DIRECTORY_FLAGS, dir_fd=fd)
            above = os.fstat(parent)
            os.close(fd)
            fd = parent
            if (above.st_dev, above.st_ino) == (status.st_dev, status.st_ino):
                return False  # the root
    finally:
        os.close(fd)


def _copy(from_dir: int, name: str, found: os.stat_result, to_dir: int, copy: str) -> None:
    """Copy entry ``name`` of ``from_dir`` (``found`` its status) to ``copy`` in ``to_dir``:
    a directory with everything in it, one directory at a time, whatever the depth."""
    if not stat.S_ISDIR(found.st_mode):
        _copy_entry(from_dir, name, found, to_dir, copy)
        return
    os.mkdir(copy, 0o700, dir_fd=to_dir)
    # Each frame: the source and copy directories, the copy's name in its parent, the
    # source's status (set on the copy once it is full), and the names still to copy.
    frames = []
    try:
        source = os.open(name, DIRECTORY_FLAGS, dir_fd=from_dir)
        target = os.open(copy, DIRECTORY_FLAGS, dir_fd=to_dir)
        frames.append((source, target, found, os.listdir(source)))
        while frames:
            source, target, status, names = frames[-1]
            if not names:
                frames.pop()
                _set_status(target, None, status)
                os.close(source)
                os.close(target)
                continue
            entry = names.pop()
            inner = os.lstat(entry, dir_fd=source)
            if stat.S_ISDIR(inner.st_mode):
                os.mkdir(entry, 0o700, dir_fd=target)
                child = os.open(entry, DIRECTORY_FLAGS, dir_fd=source)
                made = os.open(entry, DIRECTORY_FLAGS, dir_fd=target)
                frames.append((child, made, inner, os.listdir(child)))
            else:
                _copy_entry(source, entry, inner, target, entry)
    finally:
        for source, target, _, _ in frames:
            os.close(source)
            os.close(target)


def _copy_entry(from_dir: int, name: str, found: os.stat_result, to_dir: int, copy: str) -> None:
    mode = found.st_mode
    if stat.S_ISLNK(mode):
        os.symlink(os.readlink(name, dir_fd=from_dir), copy, dir_fd=to_dir)
        _set_status(to_dir, copy, found)
        return
    if stat.S_ISFIFO(mode):
        os.mkfifo(copy, 0o600, dir_fd=to_dir)
        _set_status(to_dir, copy, found)
        return
    if not stat.S_ISREG(mode):
        raise OSError(EXDEV, "can't copy a device or a socket")
    reading = os.open(name, READ_FLAGS, dir_fd=from_dir)
    try:
        writing = os.open(copy, CREATE_FLAGS, 0o600, dir_fd=to_dir)
        try:
            left = found.st_size
            while left > 0:
                try:
                    done = os.copy_file_range(reading, writing, left)
                except OSError:
                    done = os.write(writing, os.read(reading, 1 << 20))
                if done <= 0:
                    break
                left -= done
            _set_status(writing, None, found)
        finally:
            os.close(writing)
    finally:
        os.close(reading)


def _set_status(where: int, name: str | None, found: os.stat_result) -> None:
    """Give the copy ``name`` in ``where`` (or the file open as ``where``) the owner, mode and
    times of ``found``, as far as allowed (an owner only root may give is kept as it is)."""
    link = stat.S_ISLNK(found.st_mode)
    try:
        if name is None:
            os.chown(where, found.st_uid, found.st_gid)
        else:
            os.chown(name, found.st_uid, found.st_gid, dir_fd=where, follow_symlinks=False)
    except OSError:
        pass
    if not link:
        if name is None:
            os.chmod(where, stat.S_IMODE(found.st_mode))
        else:
            os.chmod(name, stat.S_IMODE(found.st_mode), dir_fd=where)
    times = (found.st_atime_ns, found.st_mtime_ns)
    if name is None:
        os.utime(where, ns=times)
    else:
        os.utime(name, ns=times, dir_fd=where, follow_symlinks=False)

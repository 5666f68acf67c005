"""Opening paths beneath a directory descriptor without ever following a symbolic link.

A lease protects a key, and a key names a path *as it was resolved*. If the I/O then reopened the
path by name, another process could swap a directory for a symbolic link in between (a
``rename`` is enough) and the read or the write would land outside the workspace. So every file
operation of :class:`FileAccess` starts from the workspace's root directory descriptor and opens
each directory of the resolved path relative to its parent, refusing links:

- where the kernel has ``openat2`` (Linux 5.6+), the whole directory chain is opened in one system
  call with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS``;
- everywhere else, and whenever that call fails (so the error can be told precisely), one
  component at a time with ``O_DIRECTORY | O_NOFOLLOW`` relative to the previous one.

The last component is then used relative to its parent's descriptor (``dir_fd=``) with
``O_NOFOLLOW`` or ``follow_symlinks=False``. A component that turns out to be a link at that
moment, where the resolution saw none, means the path changed meaning under the call: this module
raises :class:`PathChangedError` and touches nothing.

Mutations (``mkdir``, ``unlink``, ``rmdir``) made here run inside a *gate*, a context manager the
caller passes in: :class:`FileAccess` uses it to refuse any mutation once its call has ended.

``probe_no_links`` is the cheap check behind :meth:`Workspace.key`'s fast path: one ``openat2``
that fails without creating a descriptor for anything but a directory.

This is the one home of the package's no-follow primitives: every module that opens beneath a
descriptor takes its flag sets from here, and the walks it shares with others (a chain of open
directories, the removal of a tree), so no copy can drift from the rules above
(``tests/test_layers.py`` checks that no other module names a no-follow flag set of its own).
What needs only the standard library (the flag sets, :class:`Directories`, :func:`remove_tree`)
is defined in ``_nofollow`` and re-exported here: the sandbox's rename supervisor, a script that
can't import the package, loads that module by itself.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
import sys
from collections.abc import Callable, Sequence
from typing import Final

from ._errors import PathChangedError
from ._nofollow import CREATE_FLAGS as CREATE_FLAGS
from ._nofollow import DIRECTORY_FLAGS as DIRECTORY_FLAGS
from ._nofollow import LINK_ERRNOS as LINK_ERRNOS
from ._nofollow import LOOK_FLAGS as LOOK_FLAGS
from ._nofollow import READ_FLAGS as READ_FLAGS
from ._nofollow import READ_NONBLOCK_FLAGS as READ_NONBLOCK_FLAGS
from ._nofollow import Directories as Directories
from ._nofollow import remove_opened_tree as remove_opened_tree
from ._nofollow import remove_tree as remove_tree

__all__ = [
    "CREATE_FLAGS",
    "DIRECTORY_FLAGS",
    "LINK_ERRNOS",
    "LOOK_FLAGS",
    "READ_FLAGS",
    "READ_NONBLOCK_FLAGS",
    "Directories",
    "changed",
    "not_a_directory",
    "open_directory",
    "probe_no_links",
    "remove_opened_tree",
    "remove_tree",
    "rename_no_replace",
]

_O_PATH: Final = getattr(os, "O_PATH", 0)
_RESOLVE_NO_SYMLINKS: Final = 0x04
_RESOLVE_BENEATH: Final = 0x08
_SYS_OPENAT2: Final = 437
# openat2 has number 437 on the architectures that share the generic syscall table (and x86);
# elsewhere (alpha, mips) it is another number, and a wrong one could be another call.
_SHARED_TABLE_MACHINES: Final = frozenset(
    {"x86_64", "amd64", "i386", "i686", "aarch64", "arm64", "armv7l", "armv6l", "riscv64"}
    | {"ppc64", "ppc64le", "s390x", "loongarch64"}
)


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


Openat2 = Callable[[int, bytes, int], int]
"""``openat2(dir_fd, path, how)``: the new descriptor, or -1 with ``ctypes.get_errno()`` set."""


def _load_openat2() -> Openat2 | None:
    if sys.platform != "linux" or platform.machine().lower() not in _SHARED_TABLE_MACHINES:
        return None
    try:
        syscall = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    syscall.restype = ctypes.c_long
    syscall.argtypes = (ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
    syscall.argtypes += (ctypes.c_size_t,)

    def openat2(dir_fd: int, path: bytes, how: int) -> int:
        return int(syscall(_SYS_OPENAT2, dir_fd, path, how, ctypes.sizeof(_OpenHow)))

    # Old kernels answer ENOSYS, some sandboxes EPERM: then the walk does all the work.
    fd = openat2(-100, b".", _PROBE_HOW_ADDRESS)  # AT_FDCWD
    if fd < 0:
        return None
    os.close(fd)
    return openat2


def _how(flags: int) -> tuple[_OpenHow, int]:
    how = _OpenHow(flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS)
    return how, ctypes.addressof(how)


# The structures live as long as the module: openat2 only reads them, from any thread.
_PROBE_HOW, _PROBE_HOW_ADDRESS = _how((_O_PATH or os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC)
_DIRECTORY_HOW, _DIRECTORY_HOW_ADDRESS = _how(os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
openat2: Openat2 | None = _load_openat2()
"""The ``openat2`` system call, or None where the kernel lacks it (tests set it to None to
exercise the component walk)."""


Renameat2 = Callable[[int, bytes, int, bytes, int], int]
_RENAME_NOREPLACE: Final = 1


def _load_renameat2() -> Renameat2 | None:
    if sys.platform != "linux":
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2  # glibc 2.28+, musl 1.2.3+
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_int
    function.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p)
    function.argtypes += (ctypes.c_uint,)
    return function


renameat2: Renameat2 | None = _load_renameat2()
"""The ``renameat2`` function, or None where the C library lacks it (tests set it to None to
exercise the fallback)."""


def rename_no_replace(source_fd: int, source: str, target_fd: int, target: str) -> None:
    """Rename ``source`` (in ``source_fd``) to ``target`` (in ``target_fd``), never replacing
    anything: ``FileExistsError`` if ``target`` exists, and the target is untouched.

    Atomic where the kernel can (``renameat2`` with ``RENAME_NOREPLACE``, Linux 3.15+ on most
    file systems); elsewhere ``target`` is checked just before an ordinary rename, which leaves
    another process a narrow window.
    """
    call = renameat2
    if call is not None:
        if call(source_fd, os.fsencode(source), target_fd, os.fsencode(target), _RENAME_NOREPLACE):
            code = ctypes.get_errno()
            # EINVAL or ENOSYS: this file system or kernel has no RENAME_NOREPLACE (EINVAL is
            # also a directory moved into itself, which the plain rename reports again).
            if code not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
                raise OSError(code, os.strerror(code), source, None, target)
        else:
            return
    try:
        os.lstat(target, dir_fd=target_fd)
    except FileNotFoundError:
        os.rename(source, target, src_dir_fd=source_fd, dst_dir_fd=target_fd)
    else:
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), source, None, target)


def probe_no_links(dir_fd: int, relative: bytes) -> int:
    """Resolve ``relative`` beneath ``dir_fd`` refusing links; return 0 or the ``errno``.

    0: every component exists and is a directory. ``ENOTDIR``: the components before a
    non-directory exist and none of them is a link (the path names a file, or goes on through
    one). ``ENOENT``: one is missing, none before it is a link. ``ELOOP``: a link was met.
    ``-1`` when ``openat2`` is not available. Anything else: ask the slow way.
    """
    call = openat2
    if call is None:
        return -1
    fd = call(dir_fd, relative, _PROBE_HOW_ADDRESS)
    if fd < 0:
        return ctypes.get_errno()
    os.close(fd)
    return 0


def changed(parts: Sequence[str], index: int) -> PathChangedError:
    """The error for component ``parts[index]`` found to be a symbolic link at I/O time."""
    where = "/".join(parts[: index + 1])
    return PathChangedError(f"{where!r} is a symbolic link now")


def not_a_directory(dir_fd: int, parts: Sequence[str], index: int) -> OSError:
    """Why ``parts[index]`` (in ``dir_fd``) could not be opened as a directory."""
    try:
        status = os.lstat(parts[index], dir_fd=dir_fd)
    except OSError as exc:
        return exc
    if stat.S_ISLNK(status.st_mode):
        return changed(parts, index)
    where = "/".join(parts[: index + 1])
    return NotADirectoryError(errno.ENOTDIR, f"{where!r} is not a directory")


def open_directory(
    root_fd: int,
    parts: Sequence[str],
    *,
    make: Callable[[int, str], None] | None = None,
) -> int:
    """Open directory ``parts`` beneath ``root_fd`` without following links; a new descriptor.

    With ``make``, missing directories are created by ``make(parent_fd, name)`` (which should
    tolerate ``FileExistsError``) and then opened like the others. The descriptor returned is a
    fresh open file description, safe to list (``os.scandir``) while other threads use theirs.

    Raises :class:`PathChangedError` if a component is a symbolic link, ``NotADirectoryError`` if
    one is a file, ``FileNotFoundError`` if one is missing (and ``make`` is None).
    """
    call = openat2
    if call is not None and parts:
        fd = call(root_fd, os.fsencode("/".join(parts)), _DIRECTORY_HOW_ADDRESS)
        if fd >= 0:
            return fd
        # Let the walk find out what went wrong (or make what is missing).
    fd = os.open(".", DIRECTORY_FLAGS, dir_fd=root_fd)
    try:
        for index, name in enumerate(parts):
            try:
                child = os.open(name, DIRECTORY_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if make is None:
                    raise
                make(fd, name)
                try:
                    child = os.open(name, DIRECTORY_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in LINK_ERRNOS:
                        raise not_a_directory(fd, parts, index) from None
                    raise
            except OSError as exc:
                if exc.errno in LINK_ERRNOS:
                    raise not_a_directory(fd, parts, index) from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd

"""Where the lease service for a workspace root listens, and who may talk to it.

The default socket is ``$XDG_RUNTIME_DIR/toolkernel/<dev>-<ino>.sock`` (or
``/tmp/toolkernel-<uid>/<dev>-<ino>.sock`` without ``XDG_RUNTIME_DIR``), keyed by the root
directory's device and inode numbers: every spelling of the root (relative, through a link, a
bind mount of the same file system) finds the same service, the path stays far below the 108
bytes ``sun_path`` holds, and nothing is written inside the workspace (a socket there would show
up in listings and ``git status``). The directory is made ``0700`` and refused if another user
owns it or others may write it; the socket itself is ``0600``; and the service checks each
peer's credentials (``SO_PEERCRED``): the same user as the service, or root.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import struct

__all__ = ["default_socket_path", "find_service", "peer_allowed", "SUN_PATH_MAX"]

SUN_PATH_MAX = 107  # sockaddr_un.sun_path is 108 bytes, with a terminating NUL


def _private_directory(path: str) -> str:
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    found = os.lstat(path)
    if not stat.S_ISDIR(found.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", path)
    if found.st_uid != os.getuid() or found.st_mode & 0o022:
        raise PermissionError(
            errno.EACCES,
            "the lease service's directory must be owned by this user and writable by no other",
            path,
        )
    return path


def _runtime_directory(create: bool) -> str:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime) and os.path.isdir(runtime):
        path = os.path.join(runtime, "toolkernel")
    else:
        path = os.path.join("/tmp", f"toolkernel-{os.getuid()}")
    return _private_directory(path) if create else path


def default_socket_path(root: str | os.PathLike[str], *, create: bool = False) -> str:
    """The socket the lease service for ``root`` listens on unless told otherwise.

    With ``create``, make its directory (``0700``) if missing and check it is private.
    """
    found = os.stat(root)
    if not stat.S_ISDIR(found.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, "a workspace root must be a directory", root)
    path = os.path.join(_runtime_directory(create), f"{found.st_dev:x}-{found.st_ino:x}.sock")
    if len(os.fsencode(path)) > SUN_PATH_MAX:
        raise OSError(errno.ENAMETOOLONG, "socket path longer than sun_path holds", path)
    return path


def find_service(root: str | os.PathLike[str]) -> str | None:
    """The ``leases=`` URL of the lease service serving ``root``, or None if none is running.

    >>> find_service("/some/repo")            # doctest: +SKIP
    'unix:/run/user/1000/toolkernel/fd01-2a3b.sock'
    """
    path = default_socket_path(root)
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        return None
    finally:
        probe.close()
    return f"unix:{path}"


_UCRED = struct.Struct("3i")


def peer_allowed(sock: socket.socket) -> bool:
    """True iff the process at the other end runs as this user, or as root."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    except (OSError, AttributeError):
        return False  # no way to tell who it is: refuse
    _pid, uid, _gid = _UCRED.unpack(raw)
    return uid in (os.getuid(), 0)

"""Renames overlayfs refuses, made as a plain shell's file system would make them: the rename
supervisor of a sandboxed command. Standard library only, like the launcher that loads it.

Without privilege, overlayfs can't rename a directory that comes from the lower layer (it would
need ``redirect_dir``, which a user namespace's mount can't have) and no file system renames
across mounts: ``rename(2)`` then fails with ``EXDEV``. A plain shell on the same machine renames
both (``os.rename('d', 'e')``, ``git init --separate-git-dir``, a file moved from ``$TMPDIR``
into the workspace, which lies on another mount in the sandbox); ``mv`` gets by only because it
copies when the rename fails. So every rename of the command goes to a supervisor:

- the launcher (``_launcher.confine_renames``), in the command's process before it runs,
  installs a seccomp filter that sends ``rename``, ``renameat`` and ``renameat2`` to a listener
  (``SECCOMP_RET_USER_NOTIF``), and hands the listener over a socket to the namespace's first
  process;
- :class:`Supervisor`, there, reads each call's paths from the caller's memory, makes the
  rename itself, relative to the caller's directories (``/proc/PID/cwd``, ``/proc/PID/fd/N``),
  and answers with its result.
  Where the rename fails with ``EXDEV``, it moves the entry instead, as ``mv`` does
  (``_moves``): it copies it (a tree one directory at a time, whatever its depth: modes, owners
  where allowed, times, links) under a temporary name beside the destination, renames that
  into place (a directory made in the overlay is the overlay's own, and renames), and removes
  the source; a failure part-way removes the copy and leaves the source whole.
  ``RENAME_EXCHANGE`` and ``RENAME_WHITEOUT`` are not emulated (``EXDEV``).

The supervisor runs with the caller's credentials and in its Landlock domain (it is its ancestor
in the same namespaces), so it can rename nothing the caller could not, and may read its memory
(Landlock lets a process trace only those of its own domain or below). Where the system has no
seccomp listener (Linux before 5.0, another architecture than those below), or the caller's
memory can't be read, the call goes on as the kernel makes it, ``EXDEV`` included.

Why this way. overlayfs' own answer, ``redirect_dir=on``, can't be had without privilege (a
mount in a user namespace must use ``userxattr``, which rules redirects out), and it would make
the change set a rename to replay rather than a tree to copy. fuse-overlayfs renames
directories, but it is a program and a device (``/dev/fuse``) the system must have, and moves
every read and write of the command through a user-space server. Interposing the C library
(``LD_PRELOAD``) misses every program that makes its own system calls (Go's, static ones).
A seccomp listener sees every rename of every process of the command, costs nothing on any
other system call, and needs no privilege on Linux 5.0 and later.

A rename costs a round trip to the supervisor: about 50 us more than the same rename on the
overlay (80 against 27 us, 5,000 renames of new files in a command, on the reference machine);
a rename of a file the lower layer holds costs its copy-up either way (about 1 ms). Moving what
can't be renamed costs a copy, as ``mv`` pays.

Each rename inside the workspace is also written to a log (``source NUL target NUL``, paths
from the workspace root): in a user namespace overlayfs records no file handle in a copy-up's
origin, and the log is how the change set tells an entry renamed here from one changed in place.
"""

from __future__ import annotations

import _ctypes
import _signal  # type: ignore[import-not-found]  # no stubs: a C module
import _socket
import os
import select
import sys

TYPE_CHECKING = False  # not typing's: importing typing costs more than the rest of this
if TYPE_CHECKING:
    from typing import Any

NOTIF_RECV = 0xC0502100  # SECCOMP_IOCTL_NOTIF_RECV: _IOWR('!', 0, struct seccomp_notif)
NOTIF_SEND = 0xC0182101  # SECCOMP_IOCTL_NOTIF_SEND: _IOWR('!', 1, struct seccomp_notif_resp)
NOTIF_ID_VALID = 0x40082102  # SECCOMP_IOCTL_NOTIF_ID_VALID: _IOW('!', 2, __u64)
AT_FDCWD = -100
RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT = 1, 2, 4
PATH_MAX = 4096
EXDEV = 18

_SCM_RIGHTS = 1
_NOTIFICATION_SIZE = 80  # struct seccomp_notif


class _Char(_ctypes._SimpleCData):  # type: ignore[type-arg]  # ctypes.c_char
    _type_ = "c"


class _ULong(_ctypes._SimpleCData):  # type: ignore[type-arg]  # ctypes.c_ulong: an ioctl's number
    _type_ = "L"


_BUFFERS: dict[int, Any] = {}


def _buffer(data: bytes | int) -> Any:
    """A C buffer holding ``data``, or of that many zero bytes (``ctypes.c_char * n``)."""
    size = data if isinstance(data, int) else len(data)
    kind: Any = _BUFFERS.get(size)
    if kind is None:
        fields = {"_type_": _Char, "_length_": size}
        kind = _BUFFERS[size] = type("_Buffer", (_ctypes.Array,), fields)
    return kind() if isinstance(data, int) else kind.from_buffer_copy(data)


def socket_pair() -> tuple[Any, Any]:
    """The socket the command's process hands its listener over (raises ``OSError``)."""
    return _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM, 0)


def receive(receiver: Any) -> int | None:
    """In the supervisor: the listener the command's process sent, or None."""
    try:
        _, ancillary, _, _ = receiver.recvmsg(1, _socket.CMSG_SPACE(4))
    except OSError:
        return None
    finally:
        receiver.close()
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _SCM_RIGHTS and len(payload) >= 4:
            return int.from_bytes(payload[:4], sys.byteorder)
    return None


class Supervisor:
    """Answers the rename calls of the command's processes (the module's docstring), in the
    namespace's first process, until the command's own process has exited."""

    def __init__(
        self,
        libc: Any,
        listener: int,
        calls: dict[int, tuple[int | None, ...]],
        root: str,
        log: int | None,
    ) -> None:
        self.libc = libc
        self.listener = listener
        self.proc = os.open("/proc", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        """The ``/proc`` of the namespace: it names the callers as the listener does."""
        self.calls = calls
        """The rename calls the listener gets, by number: where each has its arguments
        (``_launcher.MACHINES``)."""
        self.root = os.path.realpath(root)  # as /proc/self/fd/N spells a directory
        self.log = log

    def serve(self, child: int) -> int:
        """Answer renames, and reap every process left to this one, until ``child`` exits;
        its exit status."""

        wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        _signal.set_wakeup_fd(wake_write)
        _signal.signal(_signal.SIGCHLD, lambda number, frame: None)
        poll = select.poll()
        poll.register(self.listener, select.POLLIN)
        poll.register(wake_read, select.POLLIN)
        status = _reap(child)  # it may have ended before SIGCHLD had a handler to wake us
        if status is not None:
            return status
        while True:
            for fd, events in poll.poll():
                if fd == wake_read:
                    while True:
                        try:
                            if not os.read(wake_read, 512):
                                break
                        except BlockingIOError:
                            break
                    status = _reap(child)
                    if status is not None:
                        return status
                elif events & select.POLLIN:
                    self.answer()
                else:  # every process the filter covers has gone
                    poll.unregister(self.listener)

    def answer(self) -> None:
        """Receive one rename call and answer it."""
        request = _buffer(_NOTIFICATION_SIZE)
        if self.libc.ioctl(self.listener, _ULong(NOTIF_RECV), request) != 0:
            return  # its caller went away meanwhile
        data = bytes(request)
        # struct seccomp_notif: id (u64), pid, flags (u32), then seccomp_data: nr (int), arch
        # (u32), instruction_pointer (u64), args (u64 each).
        identifier, pid, number = _word(data, 0, 8), _word(data, 8, 4), _word(data, 16, 4)
        arguments = tuple(_word(data, 32 + 8 * at, 8) for at in range(6))
        error, go_on = 0, False
        try:
            where = self.calls.get(number)
            if where is None:
                go_on = True
            else:
                error = self.rename(identifier, pid, where, arguments)
        except _Refused:
            go_on = True
        except OSError as exc:
            error = exc.errno or EXDEV
        except BaseException:
            error = EXDEV  # whatever went wrong here, the caller must not wait for ever
        self.respond(identifier, error, go_on)

    def respond(self, identifier: int, error: int, go_on: bool) -> None:
        """Answer: fail with ``error``, succeed (0), or (``go_on``) let the kernel make the
        call itself (``SECCOMP_USER_NOTIF_FLAG_CONTINUE``, Linux 5.5; before it, EXDEV)."""
        sent = self.libc.ioctl(
            self.listener, _ULong(NOTIF_SEND), _response(identifier, error, go_on)
        )
        if sent != 0 and go_on:  # a kernel before 5.5: no CONTINUE; say what it would have
            self.libc.ioctl(self.listener, _ULong(NOTIF_SEND), _response(identifier, EXDEV))

    def rename(
        self, identifier: int, pid: int, where: tuple[int | None, ...], arguments: tuple[int, ...]
    ) -> int:
        """Make the rename call ``arguments`` describe for ``pid``; 0, or the error number."""
        old_dir, old_at, new_dir, new_at, flags_at = where
        assert old_at is not None and new_at is not None
        flags = 0 if flags_at is None else arguments[flags_at] & 0xFFFFFFFF
        opener = self._opener
        with open(f"{pid}/mem", "rb", buffering=0, opener=opener) as memory:
            old = _string(memory, arguments[old_at])
            new = _string(memory, arguments[new_at])
        known = _buffer(identifier.to_bytes(8, sys.byteorder))
        valid = self.libc.ioctl(self.listener, _ULong(NOTIF_ID_VALID), known)
        if valid != 0:
            raise _Refused  # the caller is gone (its pid may be another process's now)
        if os.stat(f"{pid}/root", dir_fd=self.proc) != os.stat("/"):
            raise _Refused  # chrooted: its paths mean something else here
        old_fd = self._directory(pid, None if old_dir is None else arguments[old_dir])
        try:
            new_fd = self._directory(pid, None if new_dir is None else arguments[new_dir])
            try:
                error = self._rename(old_fd, old, new_fd, new, flags)
                if error == 0:
                    self._note(old_fd, old, new_fd, new)
                return error
            finally:
                os.close(new_fd)
        finally:
            os.close(old_fd)

    def _opener(self, path: str, flags: int) -> int:
        return os.open(path, flags, dir_fd=self.proc)

    def _directory(self, pid: int, descriptor: int | None) -> int:
        """A descriptor of the directory the caller's path is relative to."""
        number = None if descriptor is None else _signed32(descriptor & 0xFFFFFFFF)
        place = "cwd" if number is None or number == AT_FDCWD else f"fd/{number}"
        try:
            return os.open(f"{pid}/{place}", os.O_PATH | os.O_CLOEXEC, dir_fd=self.proc)
        except FileNotFoundError:
            raise OSError(9, "Bad file descriptor") from None  # EBADF, as the kernel would say

    def _rename(self, old_fd: int, old: bytes, new_fd: int, new: bytes, flags: int) -> int:
        if self.libc.renameat2(old_fd, old, new_fd, new, flags) == 0:
            return 0
        error = _ctypes.get_errno()
        if error != EXDEV or flags & (RENAME_EXCHANGE | RENAME_WHITEOUT):
            return error
        moved: int = _moves().move(old_fd, old, new_fd, new, replace=not flags & RENAME_NOREPLACE)
        return moved

    def _note(self, old_fd: int, old: bytes, new_fd: int, new: bytes) -> None:
        """Log a rename made inside the workspace."""
        if self.log is None:
            return
        source = self._inside(old_fd, os.fsdecode(old))
        target = self._inside(new_fd, os.fsdecode(new))
        if source is not None and target is not None:
            os.write(self.log, os.fsencode(f"{source}\0{target}\0"))

    def _inside(self, directory: int, path: str) -> str | None:
        """``path`` (relative to ``directory``, or absolute) from the workspace root, its
        directory resolved; None outside the workspace."""
        parent, name = os.path.split(path.rstrip("/"))
        try:
            fd = os.open(parent or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=directory)
        except OSError:
            return None
        try:
            real = os.readlink(f"self/fd/{fd}", dir_fd=self.proc)
        finally:
            os.close(fd)
        if name in ("", ".", ".."):
            return None
        root = self.root
        if real == root:
            return name
        if real.startswith(root + "/"):
            return f"{real[len(root) + 1 :]}/{name}"
        return None


def _moves() -> Any:
    """The module that moves what can't be renamed, beside this one: loaded when first needed
    (as the launcher loads this one)."""
    if __package__:
        from . import _moves as module

        return module
    # Run from a script: ``_moves`` takes the package's no-follow walk (``_nofollow``, standard
    # library only) from the package's directory, one up. Appended, not put first: that
    # directory's subpackages (``trace``) must not hide the standard library's modules.
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if package not in sys.path:
        sys.path.append(package)
    import _moves as module  # type: ignore[import-not-found,no-redef]  # run from a script

    return module


def _word(data: bytes, at: int, size: int) -> int:
    return int.from_bytes(data[at : at + size], sys.byteorder)


def _response(identifier: int, error: int, go_on: bool = False) -> Any:
    """A ``struct seccomp_notif_resp``: id (u64), val (s64), error (s32: the negated errno),
    flags (u32: ``SECCOMP_USER_NOTIF_FLAG_CONTINUE``, 1, lets the kernel make the call)."""
    order = sys.byteorder
    data = identifier.to_bytes(8, order) + bytes(8)
    data += (-error).to_bytes(4, order, signed=True) + (1 if go_on else 0).to_bytes(4, order)
    return _buffer(data)


class _Refused(Exception):
    """The call is not this supervisor's to make: the kernel makes it."""


def _reap(child: int) -> int | None:
    """Reap every exited process; ``child``'s exit status if it was one of them."""
    found = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found
        if pid == 0:
            return found
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            found = 128 - code if code < 0 else code


def _string(memory: Any, address: int) -> bytes:
    """The NUL-terminated string at ``address`` of the process whose memory is open; read a
    page at a time (the next page may not be mapped)."""
    found = b""
    while len(found) < PATH_MAX:
        size = 4096 - (address + len(found)) % 4096
        try:
            chunk = os.pread(memory.fileno(), size, address + len(found))
        except OSError:
            chunk = b""
        if not chunk:  # not mapped: what the kernel says of a bad pointer
            raise OSError(14, "Bad address")  # EFAULT
        end = chunk.find(b"\0")
        if end >= 0:
            return found + chunk[:end]
        found += chunk
    raise OSError(36, "File name too long")  # ENAMETOOLONG, as the kernel would say


def _signed32(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value

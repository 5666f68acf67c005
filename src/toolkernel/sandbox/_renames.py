"""Renames overlayfs refuses, made as a plain shell's file system would make them: the rename
supervisor of a sandboxed command. Standard library only, like the launcher that loads it.

Without privilege, overlayfs can't rename a directory that comes from the lower layer (it would
need ``redirect_dir``, which a user namespace's mount can't have) and no file system renames
across mounts: ``rename(2)`` then fails with ``EXDEV``. A plain shell on the same machine renames
both (``os.rename('d', 'e')``, ``git init --separate-git-dir``, a file moved from ``$TMPDIR``
into the workspace, which lies on another mount in the sandbox); ``mv`` gets by only because it
copies when the rename fails. So every rename of the command goes to a supervisor:

- :func:`confine`, in the command's process before it runs, installs a seccomp filter that sends
  ``rename``, ``renameat`` and ``renameat2`` to a listener (``SECCOMP_RET_USER_NOTIF``), and
  hands the listener to the namespace's first process over a socket;
- :class:`Supervisor`, in that first process, reads each call's paths from the caller's memory,
  makes the rename itself, relative to the caller's directories (``/proc/PID/cwd``,
  ``/proc/PID/fd/N``), and answers with its result. Where the rename fails with ``EXDEV``, it
  moves the entry instead, as ``mv`` does: it copies it (a tree one directory at a time, whatever
  its depth: modes, owners where allowed, times, links) under a temporary name beside the
  destination, renames that into place (a directory made in the overlay is the overlay's own,
  and renames), and removes the source; a failure part-way removes the copy and leaves the
  source whole. ``RENAME_EXCHANGE`` and ``RENAME_WHITEOUT`` are not emulated (``EXDEV``).

The supervisor runs with the caller's credentials and Landlock domain (it is its ancestor in the
same namespaces), so it can rename nothing the caller could not. Where the system has no
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
import _socket
import _struct
import os
import select
import stat
import sys
from typing import Any

SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_USER_NOTIF = 0x7FC00000
NOTIF_RECV = 0xC0502100  # SECCOMP_IOCTL_NOTIF_RECV: _IOWR('!', 0, struct seccomp_notif)
NOTIF_SEND = 0xC0182101  # SECCOMP_IOCTL_NOTIF_SEND: _IOWR('!', 1, struct seccomp_notif_resp)
NOTIF_ID_VALID = 0x40082102  # SECCOMP_IOCTL_NOTIF_ID_VALID: _IOW('!', 2, __u64)
PR_SET_NO_NEW_PRIVS = 38
AT_FDCWD = -100
RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT = 1, 2, 4
PATH_MAX = 4096
EXDEV = 18

# By machine: the audit architecture, seccomp's number, and the rename calls by number, each
# with where its arguments are: (old directory, old path, new directory, new path, flags),
# an index into the call's arguments or None for AT_FDCWD / no flags.
_RENAMEAT2 = (0, 1, 2, 3, 4)
_RENAMEAT = (0, 1, 2, 3, None)
_RENAME = (None, 0, None, 1, None)
MACHINES: dict[str, tuple[int, int, dict[int, tuple[int | None, ...]]]] = {
    "x86_64": (0xC000003E, 317, {82: _RENAME, 264: _RENAMEAT, 316: _RENAMEAT2}),
    "aarch64": (0xC00000B7, 277, {38: _RENAMEAT, 276: _RENAMEAT2}),
    "riscv64": (0xC00000F3, 277, {38: _RENAMEAT, 276: _RENAMEAT2}),
}

_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_RET_K = 0x20, 0x15, 0x06
_SCM_RIGHTS = 1
_INSTRUCTION = _struct.Struct("=HBBI")
_NOTIFICATION = _struct.Struct("=QIIiIQ6Q")  # struct seccomp_notif
_RESPONSE = _struct.Struct("=QqiI")  # struct seccomp_notif_resp
_ID = _struct.Struct("=Q")


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


def machine() -> tuple[int, int, dict[int, tuple[int | None, ...]]] | None:
    """This machine's entry of :data:`MACHINES`, or None."""
    return MACHINES.get(os.uname().machine) if sys.platform.startswith("linux") else None


def _filter(arch: int, calls: dict[int, tuple[int | None, ...]]) -> bytes:
    """The BPF program: this architecture's rename calls go to the listener, all else runs."""
    numbers = sorted(calls)
    program = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_BPF_JEQ_K, 0, len(numbers) + 1, arch),  # another ABI: allow
        (_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    for at, number in enumerate(numbers):
        # Matched: jump past the remaining tests and the allow, to the notify.
        program.append((_BPF_JEQ_K, len(numbers) - at, 0, number))
    program += [(_BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW), (_BPF_RET_K, 0, 0, SECCOMP_RET_USER_NOTIF)]
    return b"".join(_INSTRUCTION.pack(*instruction) for instruction in program)


def socket_pair() -> tuple[Any, Any] | None:
    """The socket the command's process hands its listener over, or None where there is no
    supervisor to be had on this machine."""
    if machine() is None:
        return None
    try:
        return _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM, 0)
    except OSError:
        return None


def confine(libc: Any, sender: Any) -> None:
    """In the command's process, before it runs: send its rename calls to a new listener and
    hand the listener over ``sender`` (nothing, if the system refuses: then the supervisor is
    told so and the renames run as the kernel makes them)."""
    found = machine()
    listener = -1
    if found is not None:
        arch, number, calls = found
        program = _filter(arch, calls)
        code = _buffer(program)
        # struct sock_fprog: the program's length, and its address (aligned as C aligns it).
        header = _buffer(_struct.pack("@HP", len(program) // 8, _ctypes.addressof(code)))
        # Seccomp needs no_new_privs without privilege (Landlock has set it already, if used).
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        result = libc.syscall(
            number, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, header
        )
        listener = int(result)
    try:
        if listener >= 0:
            ancillary = [(_socket.SOL_SOCKET, _SCM_RIGHTS, listener.to_bytes(4, sys.byteorder))]
            sender.sendmsg([b"L"], ancillary)
        else:
            sender.sendmsg([b"-"])
    except OSError:
        pass
    finally:
        if listener >= 0:
            os.close(listener)
        sender.close()


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

    def __init__(self, libc: Any, listener: int, root: str, log: int | None) -> None:
        self.libc = libc
        self.listener = listener
        self.root = os.path.realpath(root)  # as /proc/self/fd/N spells a directory
        self.calls = (machine() or (0, 0, {}))[2]
        self.log = log

    def serve(self, child: int) -> int:
        """Answer renames, and reap every process left to this one, until ``child`` exits;
        its exit status."""
        import _signal  # type: ignore[import-not-found]  # no stubs: a C module

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
        request = _buffer(_NOTIFICATION.size)
        if self.libc.ioctl(self.listener, _ULong(NOTIF_RECV), request) != 0:
            return  # its caller went away meanwhile
        fields = _NOTIFICATION.unpack(bytes(request))
        identifier, pid, number, arguments = fields[0], fields[1], fields[3], fields[6:]
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
        data = _RESPONSE.pack(identifier, 0, -error if error else 0, 1 if go_on else 0)
        if self.libc.ioctl(self.listener, _ULong(NOTIF_SEND), _buffer(data)) != 0 and go_on:
            self.libc.ioctl(
                self.listener, NOTIF_SEND, _buffer(_RESPONSE.pack(identifier, 0, -EXDEV, 0))
            )

    def rename(
        self, identifier: int, pid: int, where: tuple[int | None, ...], arguments: tuple[int, ...]
    ) -> int:
        """Make the rename call ``arguments`` describe for ``pid``; 0, or the error number."""
        old_dir, old_at, new_dir, new_at, flags_at = where
        assert old_at is not None and new_at is not None
        flags = 0 if flags_at is None else arguments[flags_at] & 0xFFFFFFFF
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as memory:
            old = _string(memory, arguments[old_at])
            new = _string(memory, arguments[new_at])
        valid = self.libc.ioctl(
            self.listener, _ULong(NOTIF_ID_VALID), _buffer(_ID.pack(identifier))
        )
        if valid != 0:
            raise _Refused  # the caller is gone (its pid may be another process's now)
        if os.stat(f"/proc/{pid}/root") != os.stat("/"):
            raise _Refused  # chrooted: its paths mean something else here
        old_fd = _directory(pid, None if old_dir is None else arguments[old_dir])
        try:
            new_fd = _directory(pid, None if new_dir is None else arguments[new_dir])
            try:
                error = self._rename(old_fd, old, new_fd, new, flags)
                if error == 0:
                    self._note(old_fd, old, new_fd, new)
                return error
            finally:
                os.close(new_fd)
        finally:
            os.close(old_fd)

    def _rename(self, old_fd: int, old: bytes, new_fd: int, new: bytes, flags: int) -> int:
        if self.libc.renameat2(old_fd, old, new_fd, new, flags) == 0:
            return 0
        error = _ctypes.get_errno()
        if error != EXDEV or flags & (RENAME_EXCHANGE | RENAME_WHITEOUT):
            return error
        return move(old_fd, old, new_fd, new, replace=not flags & RENAME_NOREPLACE)

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
            real = os.readlink(f"/proc/self/fd/{fd}")
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


def _directory(pid: int, descriptor: int | None) -> int:
    """A descriptor of the directory the caller's path is relative to."""
    number = None if descriptor is None else _signed32(descriptor & 0xFFFFFFFF)
    place = "cwd" if number is None or number == AT_FDCWD else f"fd/{number}"
    try:
        return os.open(f"/proc/{pid}/{place}", os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        raise OSError(9, "Bad file descriptor") from None  # EBADF, as the kernel would say


def _signed32(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


# -- moving what can't be renamed ----------------------------------------------------------------

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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
    return os.open(parent or ".", _DIRECTORY, dir_fd=directory), name


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
        _remove(new_parent, temporary)
        raise
    _remove(old_parent, old)
    return 0


def _has_entries(parent: int, name: str) -> bool:
    fd = os.open(name, _DIRECTORY, dir_fd=parent)
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
            parent = os.open("..", _DIRECTORY, dir_fd=fd)
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
        source = os.open(name, _DIRECTORY, dir_fd=from_dir)
        frames.append((source, os.open(copy, _DIRECTORY, dir_fd=to_dir), found, os.listdir(source)))
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
                child = os.open(entry, _DIRECTORY, dir_fd=source)
                frames.append(
                    (child, os.open(entry, _DIRECTORY, dir_fd=target), inner, os.listdir(child))
                )
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
    reading = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=from_dir)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        writing = os.open(copy, flags, 0o600, dir_fd=to_dir)
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


def _remove(parent: int, name: str) -> None:
    """Remove entry ``name`` of ``parent``, a tree one directory at a time (the launcher can't
    import the package's own walk: it imports only the standard library)."""
    try:
        top = os.lstat(name, dir_fd=parent)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(top.st_mode):
        os.unlink(name, dir_fd=parent)
        return
    fd = os.open(name, _DIRECTORY, dir_fd=parent)
    frames = [(fd, name, os.listdir(fd))]
    try:
        while frames:
            fd, directory, names = frames[-1]
            if not names:
                frames.pop()
                os.close(fd)
                os.rmdir(directory, dir_fd=frames[-1][0] if frames else parent)
                continue
            entry = names.pop()
            if stat.S_ISDIR(os.lstat(entry, dir_fd=fd).st_mode):
                child = os.open(entry, _DIRECTORY, dir_fd=fd)
                frames.append((child, entry, os.listdir(child)))
            else:
                os.unlink(entry, dir_fd=fd)
    finally:
        for fd, _, _ in frames:
            os.close(fd)

"""The launcher every shell command starts through: a copy-on-write view of the workspace,
Landlock for the rest of the file system, and nothing left running after the command. Standard
library only.

Run as a script, before the command::

    python -I -S _launcher.py [--overlay ROOT UPPER WORK] [--dir DIR]... [--file FILE]... \
        -- /bin/bash -c COMMAND

- ``--overlay``: the command runs in new user, mount and PID namespaces where ``ROOT`` is an
  overlay: its files as they are (the lower layer), and every change the command makes written
  to ``UPPER`` instead (``WORK`` is overlayfs' scratch directory, on the same file system). The
  caller reads the change set from ``UPPER`` when the command has exited (``_changes``), and
  ``ROOT`` itself is untouched until the caller commits it. The launcher's child is the PID
  namespace's first process: when the command exits, or the launcher is sent SIGTERM, it ends,
  and the kernel kills every process left in the namespace, whoever started it and whatever
  session it moved to.
- ``--dir`` / ``--file``: every write-like access (writing or truncating a file, creating,
  removing or renaming an entry, making a device, socket, fifo or link) fails with ``EACCES``
  except beneath each ``--dir`` and on each ``--file`` (with neither, nothing is restricted).
  Reads and execution stay open. The restriction is inherited and can never be lifted.
- Without ``--overlay`` the launcher is a *child subreaper* (:func:`supervise`): when the command
  exits, or the launcher gets SIGTERM, it kills every process the command left behind, even one
  that left the Bash tool's process group.

It is started as a script, not as ``-m toolkernel...``, so that it costs a Python start-up and
a few system calls, not an import of the package. It imports ``_signal`` and ``_ctypes``, the
C modules under ``signal`` and ``ctypes``: importing those two packages (``enum``, the ctypes
type zoo) cost more than the interpreter's own start-up, on every command. The system calls
(``unshare``, ``mount``, Landlock's; their numbers are the same on every architecture Linux
gives them to) are called through ``_ctypes``, declared here as ``ctypes`` declares them;
``PR_SET_NO_NEW_PRIVS`` comes first, as an unprivileged ``landlock_restrict_self`` requires. The
rights asked for depend on the kernel's Landlock ABI: ``REFER`` from ABI 2, ``TRUNCATE`` from 3,
``IOCTL_DEV`` from 5. Nothing here needs privilege.

:func:`abi_version` is what the caller asks, once, to learn whether Landlock is there; exit
status 125 with a line on stderr starting ``toolkernel sandbox:`` means the namespaces or the
overlay could not be had (the caller then falls back, see ``toolkernel.sandbox``).
"""

from __future__ import annotations

# Not ``signal`` and ``ctypes``: see the module's docstring.
import _ctypes
import _signal as signal  # type: ignore[import-not-found]  # no stubs: a C module
import os
import sys

TYPE_CHECKING = False  # not typing's: this script imports as little as it can
if TYPE_CHECKING:
    import types

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
MS_REC = 1 << 14
MS_PRIVATE = 1 << 18
CANT_ISOLATE = 125  # exit status: no namespaces or no overlay here

SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
PARENT_DIED = signal.SIGUSR1  # the launcher's parent-death signal (:func:`die_with`)

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13
TRUNCATE = 1 << 14
IOCTL_DEV = 1 << 15

_FILE_RIGHTS = WRITE_FILE | TRUNCATE | IOCTL_DEV
_DIR_ONLY_RIGHTS = (
    REMOVE_DIR
    | REMOVE_FILE
    | MAKE_CHAR
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_BLOCK
    | MAKE_SYM
    | REFER
)


class _Long(_ctypes._SimpleCData):  # type: ignore[type-arg]  # ctypes.c_long
    _type_ = "l"


class _Int32(_ctypes._SimpleCData):  # type: ignore[type-arg]  # ctypes.c_int32
    _type_ = "i"


class _UInt64(_ctypes._SimpleCData):  # type: ignore[type-arg]  # ctypes.c_uint64
    _type_ = "Q"


class _Function(_ctypes.CFuncPtr):  # what ctypes.CDLL(..., use_errno=True) makes
    _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
    _restype_ = _Int32


class _Libc:
    """The C library's ``syscall``, ``prctl``, ``unshare``, ``mount``, ``ioctl`` and
    ``renameat2``, as ``ctypes.CDLL(None, use_errno=True)`` gives them (``syscall`` returning a
    long)."""

    def __init__(self) -> None:
        # What CDLL(None) does: dlopen(NULL, RTLD_LOCAL), the program and its libraries. The
        # stubs know only paths, and only CDLL instances as the place to find a function in;
        # any object with the library's ``_handle`` will do.
        self._handle = _ctypes.dlopen(None, 0)  # type: ignore[arg-type]
        self.syscall = _Function(("syscall", self))  # type: ignore[arg-type]
        self.syscall.restype = _Long
        self.prctl = _Function(("prctl", self))  # type: ignore[arg-type]
        self.unshare = _Function(("unshare", self))  # type: ignore[arg-type]
        self.mount = _Function(("mount", self))  # type: ignore[arg-type]
        self.ioctl = _Function(("ioctl", self))  # type: ignore[arg-type]
        self.renameat2 = _Function(("renameat2", self))  # type: ignore[arg-type]


class _RulesetAttr(_ctypes.Structure):
    _fields_ = (("handled_access_fs", _UInt64),)


class _PathBeneathAttr(_ctypes.Structure):
    _pack_ = 1  # the kernel's struct is packed
    _fields_ = (("allowed_access", _UInt64), ("parent_fd", _Int32))


_LIBC: list[_Libc] = []


def _libc() -> _Libc:
    """The C library's functions, found once (each finding is a ``dlsym``)."""
    if not _LIBC:
        _LIBC.append(_Libc())
    return _LIBC[0]


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 where there is none (another OS, an old kernel,
    Landlock not enabled at boot)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        version = _libc().syscall(SYS_CREATE_RULESET, None, 0, CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def handled_rights(abi: int) -> int:
    """Every write-like right this ABI knows."""
    rights = WRITE_FILE | _DIR_ONLY_RIGHTS & ~REFER
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def _check(result: int, doing: str) -> int:
    if result < 0:
        error = _ctypes.get_errno()
        raise OSError(error, f"landlock: can't {doing}: {os.strerror(error)}")
    return result


def restrict(dirs: list[str], files: list[str]) -> None:
    """Allow writes only beneath ``dirs`` and on ``files``, for this process and its children."""
    libc = _libc()
    abi = _check(libc.syscall(SYS_CREATE_RULESET, None, 0, CREATE_RULESET_VERSION), "learn the ABI")
    handled = handled_rights(abi)
    attr = _RulesetAttr(handled)
    ruleset = _check(
        libc.syscall(SYS_CREATE_RULESET, _ctypes.byref(attr), _ctypes.sizeof(attr), 0),
        "create a ruleset",
    )
    try:
        for paths, rights in ((dirs, handled), (files, handled & _FILE_RIGHTS)):
            for path in paths:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                try:
                    rule = _ctypes.byref(_PathBeneathAttr(rights, fd))
                    _check(
                        libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, rule, 0),
                        f"allow writes to {path}",
                    )
                finally:
                    os.close(fd)
        _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "set no_new_privs")
        _check(libc.syscall(SYS_RESTRICT_SELF, ruleset, 0), "restrict the process")
    finally:
        os.close(ruleset)


def _restrict_or_exit(dirs: list[str], files: list[str]) -> None:
    """:func:`restrict`, or say why it can't be and exit with status 126."""
    try:
        restrict(dirs, files)
    except OSError as error:
        print(f"toolkernel sandbox: {error}", file=sys.stderr)
        os._exit(126)


def _children() -> list[int]:
    """The processes whose parent this one is (zombies included)."""
    me = os.getpid()
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{me}/task"):
            with open(f"/proc/{me}/task/{task}/children", encoding="ascii") as stream:
                found.extend(int(pid) for pid in stream.read().split())
        return found
    except OSError:
        pass
    # A kernel without /proc/PID/task/TID/children: read every process's parent.
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as stream:
                text = stream.read()
        except OSError:
            continue
        if int(text[text.rindex(")") + 2 :].split()[1]) == me:
            found.append(int(entry))
    return found


def _exec(command: list[str]) -> None:
    """Become ``command`` as a shell would start it: SIGPIPE and SIGXFSZ at their defaults
    (Python ignores both at start-up, and an ignored signal stays ignored across ``exec``:
    ``yes | head`` would say "Broken pipe" and end 1, not 141), and ``argv[0]`` the program's
    name, not its path (``$0`` is ``bash``, and so is what bash's own messages start with)."""
    for number in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(number, signal.SIG_DFL)
    os.execv(command[0], [os.path.basename(command[0]), *command[1:]])


def _kill_all() -> None:
    """Kill and reap every descendant: those orphaned on the way are reparented here."""
    while True:
        for pid in _children():
            try:  # noqa: SIM105 - no contextlib: this script imports as little as it can
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def supervise(command: list[str]) -> None:
    """Run ``command`` as a child; when it exits, or this process is asked to stop (SIGTERM),
    kill every process it left, even one that left its session (``setsid``), and exit with its
    status.

    This process is a *child subreaper*: a descendant whose parent dies is reparented here, not
    to init, so nothing the command starts can get away. Where that is not possible, the
    command simply replaces this process.
    """
    if not sys.platform.startswith("linux") or _libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0):
        _exec(command)
    child = os.fork()
    if child == 0:
        try:
            _exec(command)
        finally:
            os._exit(127)

    def stop(number: int, frame: object) -> None:
        _kill_all()
        os._exit(128 + number)

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, stop)
    _, status = os.waitpid(child, 0)
    _kill_all()
    code = os.waitstatus_to_exitcode(status)
    os._exit(128 - code if code < 0 else code)


def _fail(what: str, error: OSError | None = None) -> None:
    """Say why the sandbox can't be had, and exit with :data:`CANT_ISOLATE`."""
    number = _ctypes.get_errno() if error is None else (error.errno or 0)
    print(f"toolkernel sandbox: can't {what}: {os.strerror(number)}", file=sys.stderr)
    os._exit(CANT_ISOLATE)


def _escaped(path: str) -> str:
    """``path`` as an overlay mount option spells it: ``,``, ``:`` and ``\\`` escaped."""
    return path.replace("\\", "\\\\").replace(",", "\\,").replace(":", "\\:")


# -- renames: the command's go to the supervisor (``_renames``) -----------------------------------

SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_USER_NOTIF = 0x7FC00000
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_RET_K = 0x20, 0x15, 0x06
_SCM_RIGHTS = 1
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


class _Char(_ctypes._SimpleCData):  # type: ignore[type-arg]  # ctypes.c_char
    _type_ = "c"


class _Bytes(_ctypes.Array):  # type: ignore[type-arg]  # ctypes.c_char * 64
    _type_ = _Char
    _length_ = 64


def rename_filter(arch: int, calls: dict[int, tuple[int | None, ...]]) -> bytes:
    """The BPF program: this architecture's rename calls go to the listener, all else runs.
    Each instruction a ``struct sock_filter``: code (u16), jumps if true and if false (u8),
    value (u32)."""
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
    order = sys.byteorder
    return b"".join(
        code.to_bytes(2, order) + bytes((true, false)) + value.to_bytes(4, order)
        for code, true, false, value in program
    )


def rename_machine() -> tuple[int, int, dict[int, tuple[int | None, ...]]] | None:
    """This machine's entry of :data:`MACHINES`, or None (no supervisor here). The
    supervisor's module must be beside this script too."""
    found = MACHINES.get(os.uname().machine) if sys.platform.startswith("linux") else None
    here = os.path.dirname(os.path.abspath(__file__))
    return found if os.path.exists(os.path.join(here, "_renames.py")) else None


def rename_program(machine: tuple[int, int, dict[int, tuple[int | None, ...]]]) -> _Bytes:
    """The ``struct sock_fprog`` of :func:`rename_filter`: its length (u16, padded to 8
    bytes) and its address. The program lives as long as the returned object: it holds it."""
    arch, _, calls = machine
    program = rename_filter(arch, calls)
    code = _Bytes.from_buffer_copy(program.ljust(_Bytes._length_, b"\0"))
    address = _ctypes.addressof(code).to_bytes(8, sys.byteorder)
    length = (len(program) // 8).to_bytes(8, sys.byteorder)
    header = _Bytes.from_buffer_copy((length + address).ljust(_Bytes._length_, b"\0"))
    header._code = code  # type: ignore[attr-defined]  # kept alive with it
    return header


def confine_renames(sender: object, seccomp: int, program: _Bytes) -> None:
    """Send this process's rename calls, and its children's, to a new seccomp listener
    (``seccomp``: the system call's number; ``program``: :func:`rename_program`), and hand the
    listener over ``sender`` (a socket); if the system refuses, say so instead (the renames
    then run as the kernel makes them)."""
    libc = _libc()
    # Seccomp needs no_new_privs without privilege (Landlock has set it already, if used).
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    listener = int(
        libc.syscall(seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, program)
    )
    try:
        if listener >= 0:
            ancillary = [(1, _SCM_RIGHTS, listener.to_bytes(4, sys.byteorder))]  # SOL_SOCKET
            sender.sendmsg([b"L"], ancillary)  # type: ignore[attr-defined]
        else:
            sender.sendmsg([b"-"])  # type: ignore[attr-defined]
    except OSError:
        pass
    finally:
        if listener >= 0:
            os.close(listener)
        sender.close()  # type: ignore[attr-defined]


def isolate(root: str, upper: str, work: str) -> None:
    """Enter new user, mount and PID namespaces (the PID one for the next child) and mount an
    overlay of ``root`` over ``root``, its changes going to ``upper``. Exits with
    :data:`CANT_ISOLATE` if the system refuses any of it."""
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    # Root needs no user namespace (and could map only itself in one, making files of other
    # owners read-only); anyone else gets one that maps their own ids.
    flags = CLONE_NEWNS | CLONE_NEWPID | (0 if uid == 0 else CLONE_NEWUSER)
    if libc.unshare(flags) != 0:
        _fail("make namespaces")
    if uid != 0:
        try:
            with open("/proc/self/setgroups", "w") as stream:
                stream.write("deny")
            with open("/proc/self/uid_map", "w") as stream:
                stream.write(f"{uid} {uid} 1")
            with open("/proc/self/gid_map", "w") as stream:
                stream.write(f"{gid} {gid} 1")
        except OSError as error:
            _fail("map the user's ids", error)
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        _fail("make the mounts private")
    options = (
        f"lowerdir={_escaped(root)},upperdir={_escaped(upper)},workdir={_escaped(work)},userxattr"
    )
    if libc.mount(b"overlay", root.encode(), b"overlay", 0, options.encode()) != 0:
        _fail(f"mount an overlay on {root}")


def run_as_first_process(
    command: list[str],
    cwd: str | None,
    root: str,
    confined: tuple[list[str], list[str]] | None = None,
    renames: str | None = None,
) -> None:
    """Start the PID namespace's first process, which runs ``command`` and ends when it does
    (taking every process of the namespace with it); exit with the command's status. SIGTERM
    ends it at once. With ``confined`` (directories, files), the first process restricts
    itself and everything it starts to writing there (:func:`restrict`), once it has mounted
    the namespace's own ``/proc`` (Landlock forbids mounting after).

    The first process also answers the command's renames (``_renames``: overlayfs refuses
    some a plain shell makes), logging those inside ``root`` to ``renames``: the command's
    process sends them there before it runs (:func:`confine_renames`). (In the command's
    Landlock domain, and in its
    PID namespace, it may read the callers' memory, and names them as they are named.)"""
    # Loaded before any fork: after it, every page the import touches would be copied.
    machine = None if renames is None else rename_machine()
    supervisor = None if machine is None else _supervisor()
    program = None if machine is None else rename_program(machine)
    # Open for as long as the launcher lives: the first process tells from it whether the
    # launcher ended before it could ask to die with it (its parent is not in its namespace,
    # so ``getppid`` says 0 whatever happened).
    alive, held = os.pipe()
    first = os.fork()
    if first == 0:
        try:
            # Dies with the launcher, however it ends: the namespace ends with its first process.
            # (The launcher is one thread: its end is its process's.)
            _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            # Not the launcher's handler: the namespace's first process ignores a signal it
            # has no handler for, whoever inside sends it.
            signal.signal(PARENT_DIED, signal.SIG_DFL)
            os.close(held)
            os.set_blocking(alive, False)
            try:
                if not os.read(alive, 1):
                    os._exit(128 + signal.SIGKILL)  # the launcher is gone already
            except BlockingIOError:
                pass  # it is there, holding its end open
            os.close(alive)
            # Its own /proc: `ps` shows the command's processes only, and the supervisor
            # finds its callers there by the pids this namespace gives them.
            _libc().mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
            # Opened before Landlock: the log is outside everything the command may write.
            log = None if renames is None else os.open(renames, os.O_WRONLY | os.O_APPEND)
            if confined is not None:
                _restrict_or_exit(*confined)
            if cwd is not None:
                os.chdir(cwd)  # the overlay, not the directory under it
            pair = None
            if supervisor is not None:
                try:
                    pair = supervisor.socket_pair()
                except OSError:
                    pair = None
            child = os.fork()
            if child == 0:
                if pair is not None and machine is not None and program is not None:
                    pair[0].close()
                    confine_renames(pair[1], machine[1], program)
                _exec(command)
            if pair is not None and machine is not None and supervisor is not None:
                pair[1].close()
                listener = supervisor.receive(pair[0])
                if listener is not None:
                    calls = machine[2]
                    answering = supervisor.Supervisor(_libc(), listener, calls, root, log)
                    os._exit(answering.serve(child))
            while True:
                pid, status = os.wait()
                if pid == child:
                    code = os.waitstatus_to_exitcode(status)
                    os._exit(128 - code if code < 0 else code)
        finally:
            os._exit(127)

    os.close(alive)  # ``held`` stays open until this process ends

    def stop(number: int, frame: object) -> None:
        try:  # noqa: SIM105 - no contextlib: this script imports as little as it can
            os.kill(first, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(first, 0)
        os._exit(128 + number)

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, stop)
    _, status = os.waitpid(first, 0)
    code = os.waitstatus_to_exitcode(status)
    os._exit(128 - code if code < 0 else code)


def _supervisor() -> types.ModuleType:
    """The rename supervisor's module, ``_renames``, beside this script."""
    if __package__:  # imported as a module of the package (tests)
        from . import _renames

        return _renames
    # Run as a script: -I left its directory off the path.
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import _renames  # type: ignore[import-not-found,no-redef]  # beside this script

    return _renames


def die_with(parent: int) -> None:
    """Stop (as on SIGTERM, which ends the namespace at once: :func:`run_as_first_process`)
    when ``parent``, the process that started this one, ends, however it ends (SIGKILL
    included), so the command dies with it. Exits at once if ``parent`` is gone already.

    Linux sends the parent-death signal when the *thread* that forked this process ends, not
    its process: trio starts processes from worker threads, which end after ten idle seconds.
    So the signal is one of its own, :data:`PARENT_DIED`, not the SIGTERM the caller stops a
    command with, and it stops this process only when its parent process is no longer there:
    a thread's end reparents it to another thread of the same process (``getppid`` unchanged),
    the process's end to someone else."""

    def parent_died(number: int, frame: object) -> None:
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)  # whatever stopping means at this point

    if sys.platform.startswith("linux"):
        signal.signal(PARENT_DIED, parent_died)
        _libc().prctl(PR_SET_PDEATHSIG, PARENT_DIED, 0, 0, 0)
    if os.getppid() != parent:  # it ended before the line above: nobody waits for this run
        os._exit(128 + signal.SIGTERM)


def main(argv: list[str]) -> None:
    dirs: list[str] = []
    files: list[str] = []
    overlay: list[str] = []
    renames: str | None = None
    at = 0
    while at < len(argv) and argv[at] != "--":
        option = argv[at]
        if option == "--overlay":
            overlay = argv[at + 1 : at + 4]
            at += 4
            continue
        if option == "--renames":
            renames = argv[at + 1]
        elif option == "--parent":
            die_with(int(argv[at + 1]))
        else:
            (dirs if option == "--dir" else files).append(argv[at + 1])
        at += 2
    command = argv[at + 1 :]
    confined = (dirs, files) if dirs or files else None
    if overlay:
        isolate(*overlay)
        run_as_first_process(command, os.getcwd(), overlay[0], confined, renames)
    if confined is not None:
        _restrict_or_exit(*confined)
    supervise(command)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Landlock: confine a command's writes to given paths, then run it, and let nothing it starts
outlive it. Standard library only.

Run as a script, before the command::

    python -I -S _sandbox.py --dir DIR... --file FILE... -- /bin/bash -c COMMAND

it makes every write-like access (writing or truncating a file, creating, removing or renaming an
entry, making a device, socket, fifo or link) fail with ``EACCES`` except beneath each ``--dir``
and on each ``--file`` (with neither, nothing is restricted), then runs the command as its child
(:func:`supervise`): every process the command starts inherits the restriction, which can never
be lifted, and when the command exits, or the launcher gets SIGTERM, every process it left behind
is killed, even one that left the Bash tool's process group.
Reads and execution stay open. It is started as a script, not as ``-m toolkernel...``, so that
confining a command costs a Python start-up and three system calls, not an import of the package.

The three Landlock system calls are called through ``ctypes`` (their numbers are the same on
every architecture Linux gives them to); ``PR_SET_NO_NEW_PRIVS`` comes first, as an unprivileged
``landlock_restrict_self`` requires. The rights asked for depend on the kernel's Landlock ABI:
``REFER`` from ABI 2, ``TRUNCATE`` from 3, ``IOCTL_DEV`` from 5. Nothing here needs privilege.

:func:`abi_version` is also what the Bash tool asks, once, to learn whether confinement is there.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36

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


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is packed
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


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
        error = ctypes.get_errno()
        raise OSError(error, f"landlock: can't {doing}: {os.strerror(error)}")
    return result


def restrict(dirs: list[str], files: list[str]) -> None:
    """Allow writes only beneath ``dirs`` and on ``files``, for this process and its children."""
    libc = _libc()
    abi = _check(libc.syscall(SYS_CREATE_RULESET, None, 0, CREATE_RULESET_VERSION), "learn the ABI")
    handled = handled_rights(abi)
    attr = _RulesetAttr(handled)
    ruleset = _check(
        libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0),
        "create a ruleset",
    )
    try:
        for paths, rights in ((dirs, handled), (files, handled & _FILE_RIGHTS)):
            for path in paths:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                try:
                    rule = ctypes.byref(_PathBeneathAttr(rights, fd))
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
        os.execv(command[0], command)
    child = os.fork()
    if child == 0:
        try:
            os.execv(command[0], command)
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


def main(argv: list[str]) -> None:
    dirs: list[str] = []
    files: list[str] = []
    at = 0
    while at < len(argv) and argv[at] != "--":
        option, value = argv[at], argv[at + 1]
        (dirs if option == "--dir" else files).append(value)
        at += 2
    command = argv[at + 1 :]
    if dirs or files:
        try:
            restrict(dirs, files)
        except OSError as error:
            print(f"toolkernel sandbox: {error}", file=sys.stderr)
            os._exit(126)
    supervise(command)


if __name__ == "__main__":
    main(sys.argv[1:])

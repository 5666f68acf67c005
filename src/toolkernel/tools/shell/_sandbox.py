"""Landlock: confine a command's writes to given paths, then run it. Standard library only.

Run as a script, before the command::

    python -I -S _sandbox.py --dir DIR... --file FILE... -- /bin/bash -c COMMAND

it makes every write-like access (writing or truncating a file, creating, removing or renaming an
entry, making a device, socket, fifo or link) fail with ``EACCES`` except beneath each ``--dir``
and on each ``--file``, then ``exec``-s the command: the process keeps its pid (the Bash tool's
process group) and every process it starts inherits the restriction, which can never be lifted.
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
import sys

SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

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


def main(argv: list[str]) -> None:
    dirs: list[str] = []
    files: list[str] = []
    at = 0
    while at < len(argv) and argv[at] != "--":
        option, value = argv[at], argv[at + 1]
        (dirs if option == "--dir" else files).append(value)
        at += 2
    command = argv[at + 1 :]
    try:
        restrict(dirs, files)
    except OSError as error:
        print(f"toolkernel sandbox: {error}", file=sys.stderr)
        os._exit(126)
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Find the lease service of a workspace root, or start one: what ``python -m toolkernel mcp``
does, so that every server process a client starts on one tree shares one lease table.

The service is started as ``python -m toolkernel serve --root DIR --exit-when-idle S``, detached
(a session of its own, reparented away from its starter), so it outlives the process that
started it and ends by itself once its last client has gone for ``S`` seconds. Several
processes starting at once race safely: a service holds ``SOCKET.lock`` while it serves, so a
second one started beside it exits with ``EADDRINUSE`` and everyone finds the first.

Rejected: serving the table inside the first MCP server process (when that process ends, the
others lose the table mid-session); a service per client that elects a leader (a lock table
with a leader is etcd, which ``leases="etcd://..."`` already offers).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time

from .._errors import LeaseServiceError
from ._address import default_socket_path, find_service

__all__ = ["find_or_start_service", "IDLE_EXIT"]

IDLE_EXIT = 30.0
"""Seconds a service started here waits after its last client left before it ends."""

_START_TIMEOUT = 60.0  # an interpreter start on a loaded machine, with room to spare
_RETRY_AFTER = 10.0


def find_or_start_service(
    root: str | os.PathLike[str], *, idle_exit: float = IDLE_EXIT, timeout: float = _START_TIMEOUT
) -> str:
    """The ``leases=`` URL of the lease service serving ``root``, started if none runs.

    Raises :class:`~toolkernel.errors.LeaseServiceError` (with what the service said) if none could
    be found or started within ``timeout`` seconds.
    """
    found = find_service(root)
    if found is not None:
        return found
    socket_path = default_socket_path(root, create=True)  # its directory made and checked
    command = [sys.executable, "-m", "toolkernel", "serve", "--root", os.fspath(root)]
    command += ["--exit-when-idle", str(idle_exit)]
    deadline = time.monotonic() + timeout
    log = socket_path + ".log"  # what the service says, for its user and for the error below
    launcher = None
    # One starter at a time: the others wait here and find what it started. Without it,
    # every server of a burst (a client starting twenty subagents) starts a service of its
    # own, and a hundred interpreters starting on two cores starve the one that serves.
    with open(socket_path + ".start", "a") as starting:
        while True:
            try:
                fcntl.flock(starting, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                found = find_service(root)
                if found is not None:
                    return found
                if time.monotonic() >= deadline:
                    break  # the starter hangs: say what its service said, below
                time.sleep(0.05)
        while time.monotonic() < deadline:
            found = find_service(root)
            if found is not None:
                return found
            said_before = _size(log)
            launcher = _launch(command, log, deadline)
            # A service ending as this one starts (its last client gone) makes this one give
            # up: after a while with none found, start another.
            retry = min(deadline, time.monotonic() + _RETRY_AFTER)
            while time.monotonic() < retry:
                found = find_service(root)
                if found is not None:
                    return found
                refusal = _refusal(log, said_before)
                if refusal is not None and find_service(root) is None:
                    raise _not_started(root, refusal)  # it can't serve this root: say so now
                time.sleep(0.02)
    with open(log, "rb") as said:
        words = said.read()[-2000:].decode(errors="replace").strip().splitlines()
    exited = "" if launcher is None else f"the launcher exited with {launcher.returncode}"
    why = words[-1] if words else exited
    raise _not_started(root, f"none within {timeout:g} s: {why}" if why else f"{timeout:g} s")


def _not_started(root: str | os.PathLike[str], why: str) -> LeaseServiceError:
    return LeaseServiceError(
        f"no lease service for {os.fspath(root)!r} could be started ({why}); start one with "
        "'python -m toolkernel serve --root DIR', or pass --leases none to keep leases in "
        "this process"
    )


def _size(log: str) -> int:
    try:
        return os.path.getsize(log)
    except OSError:
        return 0


def _refusal(log: str, since: int) -> str | None:
    """What a service started here said, since byte ``since`` of its log, when it refused to
    serve (``serve: ...``); not that another service runs (or starts) there already: then
    that one serves."""
    try:
        with open(log, "rb") as said:
            said.seek(since)
            words = said.read(4000).decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in words:
        if line.startswith("serve: ") and "already" not in line:
            return line.removeprefix("serve: ")
    return None


def _launch(command: list[str], log: str, deadline: float) -> subprocess.CompletedProcess[bytes]:
    with open(log, "ab") as said:
        # Started through a parent that exits at once: the service is nobody's child here, so
        # it leaves no zombie behind when it ends, and a session of its own keeps it out of
        # this process's signals (a client's Ctrl-C in the terminal that started it).
        return subprocess.run(
            [sys.executable, "-c", _DETACH, *command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=said,
            timeout=max(deadline - time.monotonic(), 1.0),
            check=False,
        )


# Runs ``argv[1:]`` in a new session (stderr on the log), and exits without waiting for it.
_DETACH = "import subprocess, sys; subprocess.Popen(sys.argv[1:], start_new_session=True)"

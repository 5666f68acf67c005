"""One command's copy-on-write view of a directory: where its changes go, and what they are.

:class:`Overlay` makes the upper and work directories for one run (on the root's file system
where it can, so committing a file is a rename), gives the launcher its options, reads the
change set when the command has exited, tells which changed paths something else changed
meanwhile, commits, and cleans up.

*Leftovers.* A run's layers are removed when it ends; a process killed first (SIGKILL, a
crash) leaves them. Each overlay's ``started`` file names its owner (pid, start time, PID
namespace), and the first overlay a process makes in a directory queues for removal the ones
there whose owner is gone; a live one's, another namespace's and an unnamed one's stay.

*Changed underneath.* A change set can't be committed blindly over what another process wrote
meanwhile; the overlay notes the file system's time as it is made (the change time of a file it
makes), and ``_underneath`` tells, from that, which changes something else got to first.

:func:`unavailable` says once, by running the launcher on a scratch directory, whether this
system gives the namespaces and overlays the sandbox needs (Docker's default seccomp profile
refuses user namespaces, some systems restrict them, some kernels have no overlayfs).
``TOOLKERNEL_SANDBOX=off`` in the environment turns the sandbox off.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path as FilePath
from typing import Final

import attrs

from .._beneath import remove_tree
from ..leases._backend import Fence
from . import _launcher
from ._changes import Change, read_changes
from ._commit import apply_changes
from ._underneath import changed_underneath

__all__ = ["LAUNCHER", "Overlay", "unavailable"]

LAUNCHER: Final = (sys.executable, "-I", "-S", str(FilePath(_launcher.__file__).resolve()))
"""The launcher's command line, before its options."""
_SWITCH: Final = "TOOLKERNEL_SANDBOX"


@functools.cache
def unavailable() -> str | None:
    """Why commands can't run in the sandbox here, or None if they can. Asked once."""
    if os.environ.get(_SWITCH, "").lower() in ("off", "0", "no", "false"):
        return f"the sandbox is turned off ({_SWITCH}={os.environ[_SWITCH]})"
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux namespaces and overlayfs, not {sys.platform}"
    scratch = tempfile.mkdtemp(prefix="toolkernel-probe-")
    try:
        root = os.path.join(scratch, "root")
        os.mkdir(root)
        overlay = Overlay.create(root, base=scratch)
        argv = [*LAUNCHER, *overlay.launcher_options(), "--", "/bin/sh", "-c", "echo > probe"]
        done = subprocess.run(
            argv, cwd=root, capture_output=True, text=True, timeout=30, check=False
        )
        if done.returncode != 0:
            said = done.stderr.strip().splitlines()
            return said[-1] if said else f"the launcher exited with status {done.returncode}"
        if [change.path for change in overlay.changes()] != ["probe"]:
            return "the overlay's upper layer did not hold the probe's change"
        return None
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the sandbox can't be started: {exc}"
    finally:
        _remove_tree(scratch)


def _base_for(root: str) -> str:
    """A directory on ``root``'s file system (outside it) for the upper layers, if there is
    one this process may write; else the temporary directory."""
    temporary = tempfile.gettempdir()
    with contextlib.suppress(OSError):
        device = os.stat(root).st_dev
        if os.stat(temporary).st_dev == device:
            return temporary
        parent = os.path.dirname(os.path.abspath(root))
        if os.stat(parent).st_dev == device and os.access(parent, os.W_OK | os.X_OK):
            return parent
    return temporary


@attrs.define
class Overlay:
    """The upper layer of one run over ``root``. Make it with :meth:`create`; it is removed by
    :meth:`discard`."""

    root: str
    place: str
    """The directory holding ``upper`` and ``work``."""
    started: int
    """The file system's time (ns) when the overlay was made, from a file's change time."""
    _queued: bool = attrs.field(init=False, default=False)

    @classmethod
    def create(cls, root: str | os.PathLike[str], *, base: str | None = None) -> Overlay:
        """An empty upper layer for a run over ``root`` (absolute, a directory)."""
        root = os.path.abspath(os.fspath(root))
        place = tempfile.mkdtemp(prefix=".toolkernel-overlay-", dir=base or _base_for(root))
        try:
            os.mkdir(os.path.join(place, "upper"))
            os.mkdir(os.path.join(place, "work"))
            marker = os.path.join(place, "started")
            with open(marker, "x") as owner:
                owner.write(_owner())  # whose run it is, for the sweep of a dead one's leftovers
            started = os.lstat(marker).st_ctime_ns
            with open(os.path.join(place, "renames"), "x"):
                pass  # the rename supervisor's log (``_renames``)
        except BaseException:
            _remove_tree(place)
            raise
        _sweep_once(os.path.dirname(place))
        return cls(root, place, started)

    @property
    def upper(self) -> str:
        return os.path.join(self.place, "upper")

    def launcher_options(self) -> list[str]:
        """The launcher's ``--overlay`` and ``--renames`` options for this run."""
        work = os.path.join(self.place, "work")
        return ["--overlay", self.root, self.upper, work, "--renames", self._renames_log]

    @property
    def _renames_log(self) -> str:
        return os.path.join(self.place, "renames")

    def changes(self) -> list[Change]:
        """What the command changed, parents first. Synchronous."""
        return read_changes(self.root, self.upper)

    def renamed(self) -> dict[str, str]:
        """Where each entry the run renamed inside the root ended, and the path it came from
        (following it through the renames of its directories and of itself), from the rename
        supervisor's log. Synchronous."""
        try:
            with open(self._renames_log, "rb") as stream:
                words = stream.read().split(b"\0")
        except OSError:
            return {}
        came_from: dict[str, str] = {}
        for at in range(0, len(words) - 1, 2):
            source, target = os.fsdecode(words[at]), os.fsdecode(words[at + 1])
            moved = {}
            for path in list(came_from):
                if path == source or path.startswith(source + "/"):
                    moved[target + path[len(source) :]] = came_from.pop(path)
            came_from.pop(target, None)  # what was there is replaced
            came_from.update(moved)
            came_from.setdefault(target, source)
        return came_from

    def changed_underneath(self, changes: Sequence[Change]) -> list[str]:
        """The paths of ``changes`` whose commit would overwrite what something else changed
        since the run started (``_underneath``). Synchronous."""
        return changed_underneath(self.root, self.upper, changes, self.started, self.renamed())

    def commit(self, changes: Sequence[Change], *, fence: Fence | None = None) -> None:
        """Apply ``changes`` to the root; with ``fence`` (shared leases), each visible step
        through it. What the run wrote is given the file system's time of the commit, so the
        times of files follow the order commits come in (``apply_changes``). Synchronous."""
        apply_changes(
            self.root, self.upper, changes, fence=fence, restamp=(self.started, self._now())
        )

    def _now(self) -> int:
        """The file system's time (ns), as it stamps a file it changes now."""
        marker = os.path.join(self.place, "started")
        os.utime(marker)
        return os.lstat(marker).st_mtime_ns

    def discard(self) -> None:
        """Remove the upper layer, whatever is in it. Synchronous; idempotent."""
        _remove_tree(self.place)

    def discard_later(self) -> None:
        """Have the upper layer removed by a worker thread of this module's, off the caller's
        way (a command's result need not wait for its leftovers to go); what is still queued
        when the interpreter exits is removed then. Idempotent: queued once."""
        if self._queued:
            return
        self._queued = True
        _leftovers.put(self.place)
        _start_remover()


def _process_start(pid: int | str) -> str | None:
    """When process ``pid`` started (clock ticks since boot), or None if there is none: with
    its pid, what tells one process from a later one given the same number."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19].decode() if len(fields) > 19 else None


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _owner() -> str:
    """This process as an overlay's ``started`` file names its owner: its pid, when it started,
    and its PID namespace (a pid means nothing in another one: a container sharing /tmp)."""
    return f"{os.getpid()} {_process_start('self')} {_pid_namespace()}\n"


_swept: set[str] = set()


def _sweep_once(base: str) -> None:
    """Queue for removal the overlays in ``base`` whose process is gone (killed before it could
    remove them: SIGKILL, a crash, a power cut), once a process and a base. An overlay of a
    process still running, or with no owner written (made by an older version), stays."""
    if base in _swept:
        return
    _swept.add(base)
    here = _pid_namespace()
    try:
        names = [n for n in os.listdir(base) if n.startswith(".toolkernel-overlay-")]
    except OSError:
        return
    for name in names:
        place = os.path.join(base, name)
        try:
            if os.lstat(place).st_uid != os.getuid():
                continue
            with open(os.path.join(place, "started"), encoding="ascii") as owner:
                pid, began, namespace = owner.read().split()
        except (OSError, ValueError):
            continue
        if namespace == here and pid.isdigit() and _process_start(pid) != began:
            _leftovers.put(place)
            _start_remover()


_leftovers: queue.SimpleQueue[str] = queue.SimpleQueue()
_remover_lock = threading.Lock()
_remover: threading.Thread | None = None


def _start_remover() -> None:
    global _remover
    with _remover_lock:
        if _remover is not None:
            return
        _remover = threading.Thread(target=_remove_leftovers, name="toolkernel-overlays")
        _remover.daemon = True
        _remover.start()
        atexit.register(_remove_what_is_left)


def _remove_leftovers() -> None:
    while True:
        _remove_tree(_leftovers.get())


def _remove_what_is_left() -> None:
    while True:
        try:
            place = _leftovers.get_nowait()
        except queue.Empty:
            return
        _remove_tree(place)


def _remove_tree(place: str) -> None:
    """Remove ``place`` and everything in it, whatever the modes (overlayfs leaves its work
    directory mode 000, a command may leave a directory so), however deep."""
    parent, name = os.path.split(os.path.abspath(place))
    try:
        parent_fd = os.open(parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        # What is left of a run goes as far as it can: another remover (the interpreter's exit
        # meeting the remover thread) may be taking the same tree away.
        with contextlib.suppress(OSError):
            remove_tree(parent_fd, name, force=True)
    finally:
        os.close(parent_fd)

"""One command's copy-on-write view of a directory: where its changes go, and what they are.

:class:`Overlay` makes the upper and work directories for one run (on the root's file system
where it can, so committing a file is a rename), gives the launcher its options, reads the
change set when the command has exited, tells which changed paths something else changed
meanwhile, commits, and cleans up.

*Changed underneath.* overlayfs leaves changes to the lower layer during a mount undefined (a
file replaced there may go on showing its old content, and a ``chmod`` inside copies the old
content up), so the upper layer can't be committed blindly over what another process wrote
meanwhile. The overlay notes the file system's time as it is made (the change time of a file it
makes); a path the command changed was changed underneath if its lower entry has changed after
that (or appeared), or is gone though it was there when the command changed it (a deletion's
whiteout, or a copy-up, which overlayfs marks with its origin). "After": the file system's clock
may be coarse (a few ms), so a change in the same tick as the overlay is made has the same time
and is not counted; it came before the command started, as the launcher's start-up (tens of ms)
comes between, and the overlay, mounted then, shows it. A change to a
directory's other entries is not a conflict: two commands making files side by side in one
directory both commit.

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
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path as FilePath
from typing import Final

import attrs

from ..leases._backend import Fence
from . import _launcher
from ._changes import Change, ChangeKind, read_changes
from ._commit import apply_changes

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

    @classmethod
    def create(cls, root: str | os.PathLike[str], *, base: str | None = None) -> Overlay:
        """An empty upper layer for a run over ``root`` (absolute, a directory)."""
        root = os.path.abspath(os.fspath(root))
        place = tempfile.mkdtemp(prefix=".toolkernel-overlay-", dir=base or _base_for(root))
        try:
            os.mkdir(os.path.join(place, "upper"))
            os.mkdir(os.path.join(place, "work"))
            marker = os.path.join(place, "started")
            with open(marker, "x"):
                pass
            started = os.lstat(marker).st_ctime_ns
        except BaseException:
            _remove_tree(place)
            raise
        return cls(root, place, started)

    @property
    def upper(self) -> str:
        return os.path.join(self.place, "upper")

    def launcher_options(self) -> list[str]:
        """The launcher's ``--overlay`` option for this run."""
        return ["--overlay", self.root, self.upper, os.path.join(self.place, "work")]

    def changes(self) -> list[Change]:
        """What the command changed, parents first. Synchronous."""
        return read_changes(self.root, self.upper)

    def changed_underneath(self, changes: Iterable[Change]) -> list[str]:
        """The paths of ``changes`` that something else changed since the run started: one
        whose lower entry changed since (or appeared, or, for an entry that was there when the
        command changed it, went away). Synchronous."""
        found = []
        for change in changes:
            try:
                changed = os.lstat(os.path.join(self.root, change.path)).st_ctime_ns
            except (FileNotFoundError, NotADirectoryError):
                if change.kind is ChangeKind.DELETED or change.copied_up:
                    found.append(change.path)  # it was there when the command changed it
                continue
            if changed > self.started:
                found.append(change.path)
        return found

    def commit(self, changes: Sequence[Change], *, fence: Fence | None = None) -> None:
        """Apply ``changes`` to the root; with ``fence`` (shared leases), each visible step
        through it. Synchronous."""
        apply_changes(self.root, self.upper, changes, fence=fence)

    def discard(self) -> None:
        """Remove the upper layer, whatever is in it. Synchronous; idempotent."""
        _remove_tree(self.place)

    def discard_later(self) -> None:
        """Have the upper layer removed by a worker thread of this module's, off the caller's
        way (a command's result need not wait for its leftovers to go); what is still queued
        when the interpreter exits is removed then."""
        _leftovers.put(self.place)
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
    # overlayfs leaves work/work unreadable (mode 000): open it up first, the common case,
    # rather than on rmtree's error path.
    with contextlib.suppress(OSError):
        os.chmod(os.path.join(place, "work", "work"), stat.S_IRWXU)

    def allow(function: object, path: str, info: object) -> None:
        # overlayfs leaves its work directory unreadable (mode 000): open it up and go on.
        with contextlib.suppress(OSError):
            os.chmod(path, stat.S_IRWXU)
            parent = os.path.dirname(path)
            os.chmod(parent, stat.S_IRWXU)
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)

    if os.path.lexists(place):
        shutil.rmtree(place, onerror=allow)

"""Run a command on a copy-on-write view of a directory, and learn what it changed.

- :class:`Overlay`: one run's upper layer; the launcher (``_launcher.py``, started as a script)
  mounts it over the directory in new user, mount and PID namespaces, so the command sees the
  directory and writes only to the upper layer, and nothing it starts outlives it; then
  :meth:`Overlay.changes` is its change set (contents, modes, creations, deletions, links),
  :meth:`Overlay.changed_underneath` what something else changed meanwhile, and
  :meth:`Overlay.commit` makes the chosen changes real.
- :func:`unavailable`: why the sandbox can't be had on this system (None if it can).

The Bash tool runs every command this way and commits what it changed under its call's leases
(``toolkernel.tools``); any tool that runs a subprocess can do the same.
"""

from ._changes import Change as Change
from ._changes import ChangeKind as ChangeKind
from ._overlay import LAUNCHER as LAUNCHER
from ._overlay import Overlay as Overlay
from ._overlay import unavailable as unavailable

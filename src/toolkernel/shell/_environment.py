"""What a command must run with for its predicted claims to hold.

Python writes bytecode caches (``__pycache__/*.pyc``) beside every module it imports: running
the project's tests or a module of the workspace writes into every package directory, which no
rule claims. ``PYTHONPYCACHEPREFIX`` moves them all into one tree outside the workspace (Python
3.8 and later; pytest puts its rewritten test modules there too), so the prediction need not
claim them and they stay cached between commands. A command that sets the variable itself is a
barrier (the walk refuses assignments to ``*PREFIX`` variables).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["command_environment"]


def command_environment(
    environ: Mapping[str, str] | None = None, *, cache: str | os.PathLike[str] | None = None
) -> dict[str, str]:
    """The variables to set in a command's environment (over ``environ``, default this
    process's): bytecode caches in ``cache`` (default ``$XDG_CACHE_HOME/toolkernel/pycache``,
    or ``~/.cache/toolkernel/pycache``), a place outside the workspace."""
    environ = os.environ if environ is None else environ
    if cache is None:
        home = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        cache = os.path.join(home, "toolkernel", "pycache")
    return {"PYTHONPYCACHEPREFIX": os.fspath(cache)}

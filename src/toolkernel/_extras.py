"""Optional features and the extras that bring their packages.

A feature that needs a package the core does not depend on says, when the package is missing,
which extra to install, before anything else fails on it with a bare ``ModuleNotFoundError``.
Whether a package is there is asked of the import system (``find_spec``), which finds it
without importing it, so a check costs nothing at import time.
"""

from __future__ import annotations

import importlib.util

__all__ = ["missing_extra", "require_extra"]


def missing_extra(extra: str, what: str, *modules: str) -> str | None:
    """The message for the first of ``modules`` that is not installed, or None if all are.

    ``what`` names the feature (``"toolkernel.mcp"``, ``"the console"``) and ``extra`` the
    extra of toolkernel that installs ``modules``.
    """
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent missing, or an entry that is not a module
            found = False
        if not found:
            return (
                f"{what} needs the {extra!r} extra ({module} is not installed): "
                f"pip install 'toolkernel[{extra}]' (in a clone of toolkernel: "
                f"pip install -e '.[{extra}]')"
            )
    return None


def require_extra(extra: str, what: str, *modules: str) -> None:
    """Raise ``ImportError`` naming ``extra`` if any of ``modules`` is not installed."""
    message = missing_extra(extra, what, *modules)
    if message is not None:
        raise ImportError(message, name=modules[0])

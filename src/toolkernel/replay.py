"""Deprecated: the replay harness is the command line's (``python -m toolkernel replay``), not
the public API's; it lives in ``toolkernel._replay`` now. Each name still loads from here for one
release, with a ``DeprecationWarning``."""

import importlib as _importlib
import warnings as _warnings


def __getattr__(name: str) -> object:
    replay = _importlib.import_module("toolkernel._replay")
    if name.startswith("__") or not hasattr(replay, name):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    message = (
        f"toolkernel.replay.{name} is deprecated: the replay harness is the command line's "
        "(python -m toolkernel replay)"
    )
    _warnings.warn(message, DeprecationWarning, stacklevel=2)
    return getattr(replay, name)

"""Every module of a rule that needs code (see :mod:`._coded`): importing this registers them.

A new coded rule's module is one more line here; the analysis imports this module before it
walks a command, so no handler is missing when a rule is looked up.
"""

from __future__ import annotations

from . import _curl, _programs, _pytest_rule, _python_rule, _sed

__all__ = ["MODULES"]

MODULES = (_curl, _programs, _pytest_rule, _python_rule, _sed)
"""The registering modules, named so that importing them is not an unused import."""

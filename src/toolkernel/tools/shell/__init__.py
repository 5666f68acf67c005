"""Deprecated: the shell analysis is :mod:`toolkernel.shell`; this path goes in the next release.

Importing it warns once and hands over the new package itself: ``toolkernel.tools.shell`` *is*
``toolkernel.shell``, and each of its modules is there under the old name too
(``toolkernel.tools.shell._rules`` is ``toolkernel.shell._rules``), so the classes are the same
objects whichever path imported them and code written for the old path works unchanged.
"""

import importlib
import pkgutil
import sys
import warnings

from ... import shell

warnings.warn(
    "toolkernel.tools.shell is deprecated: import toolkernel.shell (the same package)",
    DeprecationWarning,
    stacklevel=2,  # the importer (the import system's own frames are skipped)
)
for _module in pkgutil.iter_modules(shell.__path__):
    sys.modules[f"{__name__}.{_module.name}"] = importlib.import_module(
        f"{shell.__name__}.{_module.name}"
    )
sys.modules[__name__] = shell

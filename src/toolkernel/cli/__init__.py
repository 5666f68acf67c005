"""The command line, ``python -m toolkernel ...``: ``demo`` and ``console``."""

from ._main import main as main

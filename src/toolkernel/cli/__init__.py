"""The command line, ``python -m toolkernel ...``: for now, ``demo``."""

from ._main import main as main

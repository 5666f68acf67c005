"""The command line, ``python -m toolkernel ...``: ``demo``, ``replay``, ``console``, ``serve``
and ``mcp``."""

from ._main import main as main

"""The lease service's client (``unix:PATH``)."""

from __future__ import annotations

import os

from ._backend import LeaseBackend

__all__ = ["connect_unix"]


async def connect_unix(path: str, root: str | os.PathLike[str]) -> LeaseBackend:
    """Connect to the lease service at ``path`` serving ``root``."""
    raise NotImplementedError("the lease service's client is being written")

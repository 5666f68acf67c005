"""From a ``leases=`` URL to a backend: ``unix:PATH``, ``etcd://host:port[?ttl=S]``, or None."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import anyio

from ._backend import LeaseBackend
from ._urls import EtcdLeases, LeaseURL, UnixLeases, parse_leases

__all__ = ["UnixLeases", "EtcdLeases", "LeaseURL", "parse_leases", "open_leases", "connect"]


@asynccontextmanager
async def open_leases(
    url: str | LeaseURL | None,
    root: str | os.PathLike[str],
    *,
    pools: Mapping[str, int] | None = None,
) -> AsyncIterator[LeaseBackend | None]:
    """Connect to the backend ``url`` names, for the workspace at ``root``; None for None.

    ``root`` is where the claims' keys are relative to: the lease service must serve the same
    directory. ``pools`` are the capacities this process expects; a backend that knows a pool
    with another capacity refuses the connection (``ValueError``). On the way out the backend
    is closed, and everything it held is released. ::

        async with open_leases("unix:/run/user/1000/toolkernel/fd01-2a.sock", ".") as backend:
            grant = await backend.acquire([writes("a.txt")])
            ...
            backend.release(grant)
    """
    spec = parse_leases(url) if url is None or isinstance(url, str) else url
    if spec is None:
        yield None
        return
    if isinstance(spec, UnixLeases):
        from ._client import open_unix

        async with open_unix(spec.path, root, pools=pools) as client:
            yield client
        return
    from ._etcd import connect as connect_etcd  # on first use: etcd's client is an extra

    backend = await connect_etcd(spec, root, pools=pools)
    try:
        yield backend
    finally:
        with anyio.CancelScope(shield=True):
            await backend.aclose()


async def connect(
    url: str | LeaseURL | None,
    root: str | os.PathLike[str],
    *,
    pools: Mapping[str, int] | None = None,
) -> LeaseBackend | None:
    """Like :func:`open_leases`, for callers that can't nest a block: the caller closes the
    backend with ``await backend.aclose()``, in the task that connected (the lease service's
    client runs tasks until then, as an ``async with`` block would)."""
    spec = parse_leases(url) if url is None or isinstance(url, str) else url
    if spec is None:
        return None
    if isinstance(spec, UnixLeases):
        from ._client import connect_unix

        return await connect_unix(spec.path, root, pools=pools)
    from ._etcd import connect as connect_etcd  # on first use: etcd's client is an extra

    return await connect_etcd(spec, root, pools=pools)

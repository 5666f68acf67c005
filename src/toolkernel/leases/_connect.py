"""From a ``leases=`` URL to a backend: ``unix:PATH``, ``etcd://host:port[?ttl=S]``, or None."""

from __future__ import annotations

import importlib
import os
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager

import anyio
import attrs

from .._checks import check_ttl
from ._backend import LeaseBackend

__all__ = ["UnixLeases", "EtcdLeases", "LeaseURL", "parse_leases", "open_leases", "connect"]

DEFAULT_ETCD_TTL = 10.0


@attrs.frozen
class UnixLeases:
    """The lease service on one machine, at the Unix socket ``path``."""

    path: str


def _ttl(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    check_ttl(attribute.name, value)


@attrs.frozen
class EtcdLeases:
    """Leases kept in etcd at ``host:port``; a silent client's leases return after ``ttl`` s."""

    host: str
    port: int
    ttl: float = attrs.field(default=DEFAULT_ETCD_TTL, validator=_ttl)


LeaseURL = UnixLeases | EtcdLeases


def _parsed(text: str) -> float | str:
    """``text`` as a number if it spells one, else ``text`` itself, for the check to name."""
    try:
        return float(text)
    except ValueError:
        return text


def parse_leases(url: str | None) -> LeaseURL | None:
    """Read a ``leases=`` URL: None (in-process leases), ``unix:PATH`` or ``etcd://host:port``.

    >>> parse_leases("unix:/run/tk.sock")
    UnixLeases(path='/run/tk.sock')
    >>> parse_leases("etcd://127.0.0.1:2379?ttl=5")
    EtcdLeases(host='127.0.0.1', port=2379, ttl=5.0)
    """
    if url is None:
        return None
    if url.startswith("unix:"):
        path = url.removeprefix("unix:")
        if path.startswith("//"):
            path = path.removeprefix("//")  # unix:///run/x.sock
        if not path:
            raise ValueError(f"can't use leases={url!r}: it names no socket path")
        return UnixLeases(os.fspath(path))
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme == "etcd":
        if not parsed.hostname or parsed.port is None:
            raise ValueError(f"can't use leases={url!r}: write etcd://host:port")
        query = urllib.parse.parse_qs(parsed.query, strict_parsing=bool(parsed.query))
        unknown = set(query) - {"ttl"}
        if unknown:
            raise ValueError(f"can't use leases={url!r}: unknown option {sorted(unknown)[0]!r}")
        try:  # the one check EtcdLeases makes too; a URL is text, so a bad ttl is a ValueError
            ttl = (
                check_ttl("ttl", _parsed(query["ttl"][-1])) if "ttl" in query else DEFAULT_ETCD_TTL
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(f"can't use leases={url!r}: {exc}") from None
        return EtcdLeases(parsed.hostname, parsed.port, ttl)
    raise ValueError(
        f"can't use leases={url!r}: write None (in-process), 'unix:PATH' or 'etcd://host:port'"
    )


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
    # Imported only when asked for (etcd's client is an extra). The module offers
    # ``async connect(spec, root, *, pools) -> backend``, closed with ``aclose``.
    etcd = importlib.import_module("._etcd", __package__)
    connect_etcd: Callable[..., Awaitable[LeaseBackend]] = etcd.connect
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
    etcd = importlib.import_module("._etcd", __package__)
    connect_etcd: Callable[..., Awaitable[LeaseBackend]] = etcd.connect
    return await connect_etcd(spec, root, pools=pools)

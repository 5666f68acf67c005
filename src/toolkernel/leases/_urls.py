"""A ``leases=`` URL read: ``unix:PATH``, ``etcd://host:port[?ttl=S]``, or None.

Apart from :mod:`._connect`, which opens the backend a URL names, so a backend's module (etcd's)
can name its spec without importing the module that imports it.
"""

from __future__ import annotations

import os
import urllib.parse

import attrs

from .._checks import check_ttl

__all__ = ["DEFAULT_ETCD_TTL", "EtcdLeases", "LeaseURL", "UnixLeases", "parse_leases"]

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

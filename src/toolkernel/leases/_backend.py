"""What a lease backend is: the interface a kernel uses to take leases from another process.

A backend grants the same leases as :class:`toolkernel.locks.LeaseTable`, decided in one place
for every process sharing a workspace root: the lease service on a Unix socket (``unix:PATH``),
or etcd (``etcd://host:port``). Claims are workspace-relative keys, so they mean the same in
every process using the same root.

Each grant carries a *fencing token*, strictly greater for every later grant from the same
service or cluster. A holder can be presumed dead (its connection lost, its heartbeat silent past
its TTL) while it still runs; what keeps it from writing late is the :class:`Fence`: every change
a write path makes visible (a rename over a target, an unlink, a ``mkdir``...) is described as an
:data:`Op` and published through ``backend.fence(grant).publish(op)``, which makes it visible only
if the grant is still held at that instant, and raises :class:`FencedOutError` otherwise.

Preparing a change (writing a temporary file beside its target, under a scratch name) needs no
fence: nobody reads scratch names. Only the step that makes it visible does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeAlias

import attrs

from .._errors import FencedOutError
from ..locks import Claim

__all__ = [
    "Grant",
    "Fence",
    "LeaseBackend",
    "FencedOutError",
    "Op",
    "Rename",
    "Unlink",
    "MakeDirectory",
    "RemoveDirectory",
    "Chmod",
    "SetTimes",
]

Parts: TypeAlias = tuple[str, ...]
"""A workspace-relative key, as in ``locks.Path.parts``: ``()`` is the root."""


@attrs.frozen
class Grant:
    """Leases granted on ``claims``, all at once, by a backend."""

    id: str
    """The backend's name for the lease (the service's lease id, an etcd key)."""
    token: int
    """The fencing token: strictly greater for every later grant of the same service or cluster."""
    claims: tuple[Claim, ...]
    """What is held, canonical (merged, sorted) as the table holds it."""


# -- the visible steps of a write ---------------------------------------------------------------
#
# Every op names workspace keys; the backend checks that the grant covers each key it changes
# exclusively (a scratch name, see ``_fencing.is_scratch``, needs no lease) and applies it
# beneath the root without following links.


@attrs.frozen
class Rename:
    """Rename ``source`` to ``target`` (``os.replace``; with ``replace=False``, refuse an existing
    target: ``FileExistsError``).

    ``source_dir`` is None when ``source`` is a workspace key; else it is a directory descriptor
    of the caller's process (a sandbox's upper layer), kept open until ``publish`` returns, and
    ``source`` is relative to it (and needs no lease).
    """

    source: Parts
    target: Parts
    replace: bool = True
    source_dir: int | None = None


@attrs.frozen
class Unlink:
    """Remove the file, link or special file ``target`` (not a directory)."""

    target: Parts


@attrs.frozen
class MakeDirectory:
    """``mkdir`` ``target`` with ``mode`` (through the umask); ``FileExistsError`` if it exists."""

    target: Parts
    mode: int = 0o777


@attrs.frozen
class RemoveDirectory:
    """``rmdir`` the empty directory ``target``."""

    target: Parts


@attrs.frozen
class Chmod:
    """Set the permission bits of ``target`` (never through a link)."""

    target: Parts
    mode: int


@attrs.frozen
class SetTimes:
    """Set the access and modification times of ``target`` (nanoseconds; links not followed)."""

    target: Parts
    ns: tuple[int, int]


Op: TypeAlias = Rename | Unlink | MakeDirectory | RemoveDirectory | Chmod | SetTimes
"""One file-system change a write path makes visible."""


class Fence(Protocol):
    """Publishes the changes of one grant's holder, only while the grant is held.

    Blocking: call it from a worker thread (``anyio.to_thread.run_sync``), never from the event
    loop's thread. Raises :class:`FencedOutError` when the grant is no longer held (nothing was
    changed), ``PermissionError`` when the grant does not cover a key the op changes exclusively,
    :class:`toolkernel.errors.PathChangedError` for a link where a directory was, or the ``OSError``
    the change itself raised.
    """

    def publish(self, op: Op) -> None: ...


class LeaseBackend(Protocol):
    """Where a kernel takes its leases when they are shared with other processes.

    ``acquire`` waits until the whole set is granted, in conflict-aware FIFO order of arrival at
    the backend (the rules of ``LeaseTable``); if it is cancelled the request is withdrawn and
    nothing stays held. ``release`` is synchronous and never blocks (the message is queued); a
    grant lost meanwhile (connection, TTL) is released without error. After ``aclose`` every grant
    is gone.
    """

    async def acquire(
        self, claims: Iterable[Claim], *, priority: int = 0, label: str = ""
    ) -> Grant: ...

    def release(self, grant: Grant) -> None: ...

    def fence(self, grant: Grant) -> Fence: ...

    async def aclose(self) -> None: ...

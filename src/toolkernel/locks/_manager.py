"""The async adapter over the lease table: tasks wait for leases; the table decides who gets them.

It runs on trio and on asyncio (through anyio). The manager only acts on what
:class:`LeaseTable` returns ("these requests are now granted"): it wakes their tasks. Whatever
way a waiting task leaves — granted, cancelled, or an exception — it tells the table, so a lease
can never leak (a grant that races with a cancellation is released).

A manager serves one thread at a time (one event loop): the table is not thread-safe, and a
waiter's wake-up must happen on its own loop. While anything is held or waiting, a call from
another thread raises ``RuntimeError`` rather than corrupting the loop that owns the waiters;
once the manager is idle, any thread may take it over (sequential ``trio.run`` calls, tests).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Hashable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import attrs

from .._errors import ForeignLeaseError, LeaseReleaseError
from ._resources import Claim
from ._table import LeaseTable, LeaseTableSnapshot, LeaseTableStatistics

__all__ = ["LockManager", "Lease", "WouldBlock"]

_new_lease = object.__new__


if TYPE_CHECKING:
    from trio import WouldBlock as _TrioWouldBlock
else:
    # trio is optional (the [trio] extra): on asyncio without it, there is no trio code to
    # catch trio's WouldBlock, and anyio's is the one to catch.
    try:
        from trio import WouldBlock as _TrioWouldBlock
    except ImportError:

        class _TrioWouldBlock(Exception):
            """Stands in for ``trio.WouldBlock`` where trio is not installed."""


class WouldBlock(anyio.WouldBlock, _TrioWouldBlock):
    """``LockManager.acquire_nowait`` would have had to wait. Both anyio's ``WouldBlock`` and
    trio's (where trio is installed), so code written for either catches it."""


@attrs.define(eq=False)
class Lease:
    """A granted set of claims. Release it with :meth:`release` (synchronous, not a checkpoint)."""

    id: int
    """The lease id in the manager's table."""
    claims: tuple[Claim, ...]
    """The canonical claims held."""
    _manager: LockManager = attrs.field(repr=False, alias="manager")
    _released: bool = attrs.field(default=False, init=False, repr=False)

    @property
    def held(self) -> bool:
        """True until the lease is released."""
        return not self._released

    def release(self) -> None:
        """Give the claims back; waiters that become grantable get them before this returns.

        Raises :class:`LeaseReleaseError` if already released.
        """
        self._manager.release(self)


class LockManager:
    """Lets tasks wait for leases from a :class:`LeaseTable`, on trio or on asyncio.

    ::

        manager = LockManager(pools={"network": 5})
        async with manager.acquire([reads("a.py"), writes("b.py")]) as lease:
            ...  # everything granted at once; released on exit, however the block exits
    """

    def __init__(self, pools: Mapping[str, int] | None = None) -> None:
        self._table = LeaseTable(pools)
        self._waiters: dict[int, anyio.Event] = {}
        # The thread using the manager (see the module docstring); checked on every change.
        self._thread = threading.get_ident()

    @property
    def table(self) -> LeaseTable:
        """The underlying pure table (for inspection; do not release through it)."""
        return self._table

    @asynccontextmanager
    async def acquire(
        self,
        claims: Iterable[Claim],
        *,
        priority: int = 0,
        group: Hashable = None,
    ) -> AsyncIterator[Lease]:
        """Wait until all of ``claims`` are granted, hold them for the ``async with`` block.

        Always a checkpoint. If the wait is cancelled the request leaves the queue as if it had
        never come; if the grant and the cancellation arrive together, the lease is released
        before the cancellation propagates. For a deadline, wrap it in ``trio.move_on_after``
        (``anyio.move_on_after``, ``asyncio.timeout``).
        """
        lease = await self.acquire_lease(claims, priority=priority, group=group)
        try:
            yield lease
        finally:
            if lease.held:
                lease.release()

    async def acquire_lease(
        self,
        claims: Iterable[Claim],
        *,
        priority: int = 0,
        group: Hashable = None,
    ) -> Lease:
        """Like :meth:`acquire` but return the :class:`Lease`; the caller must release it."""
        await anyio.lowlevel.checkpoint_if_cancelled()
        self._check_thread()
        lease_id = self._table.request(claims, priority=priority, group=group, owner=self)
        lease = Lease(lease_id, self._table.claims(lease_id), manager=self)
        if self._table.is_held(lease_id):
            try:
                await anyio.lowlevel.cancel_shielded_checkpoint()
            except BaseException:  # pragma: no cover - a shielded checkpoint only fails on KI
                lease.release()
                raise
            return lease
        granted = self._waiters[lease_id] = anyio.Event()
        try:
            await granted.wait()
            # Granted; but if a cancellation arrived in the same moment, honour it (and give
            # the lease back) rather than hand out a lease to a cancelled caller.
            await anyio.lowlevel.checkpoint_if_cancelled()
        except BaseException:
            # Cancelled (or worse) while waiting: withdraw the request, or, if it was granted
            # in the same moment, give the lease back; either way nothing leaks.
            self._waiters.pop(lease_id, None)
            lease.release()
            raise
        return lease

    def acquire_nowait(
        self,
        claims: Iterable[Claim],
        *,
        priority: int = 0,
        group: Hashable = None,
    ) -> Lease:
        """Take the lease now or raise :class:`WouldBlock` (a ``trio.WouldBlock`` and an
        ``anyio.WouldBlock``); never blocks, never a checkpoint.

        It fails whenever it would have to wait, including when an earlier waiter has been granted
        the resources but has not resumed yet.
        """
        if threading.get_ident() != self._thread:
            self._check_thread()
        request = self._table._request_nowait(claims, priority, group, self)
        if request is None:
            raise WouldBlock
        # Lease(request.id, request.claims, self) without the call to its __init__: this is the
        # whole cost of a lease besides the table's, and the frame is a sizeable part of it.
        lease = _new_lease(Lease)
        lease.id = request.id
        lease.claims = request.claims
        lease._manager = self
        lease._released = False
        return lease

    def release(self, lease: Lease) -> None:
        """Same as ``lease.release()``; raises if the lease is not this manager's or not held."""
        if lease._manager is not self:
            raise ForeignLeaseError(
                f"can't release lease {lease.id}: it belongs to another manager"
            )
        if lease._released:
            raise LeaseReleaseError(f"can't release lease {lease.id}: it was already released")
        if threading.get_ident() != self._thread:
            self._check_thread()
        granted = self._table.release(lease.id, owner=self)
        lease._released = True
        if granted:
            self._wake(granted)

    def set_capacity(self, pool_name: str, capacity: int) -> None:
        """Change a pool's capacity, waking whoever that lets in."""
        self._check_thread()
        self._wake(self._table.set_capacity(pool_name, capacity))

    def statistics(self) -> LeaseTableStatistics:
        """Cheap counts: leases held and waiting, claims by mode, pool units held."""
        return self._table.statistics()

    def snapshot(self) -> LeaseTableSnapshot:
        """The full state of the table as an immutable value."""
        return self._table.snapshot()

    def _check_thread(self) -> None:
        thread = threading.get_ident()
        if thread == self._thread:
            return
        stats = self._table.statistics()
        if stats.held or stats.waiting:
            raise RuntimeError(
                f"can't use this LockManager here: it is in use in another thread "
                f"({stats.held} held, {stats.waiting} waiting); a LockManager serves one event "
                f"loop at a time, so give each thread its own, or release from the thread that "
                f"acquired"
            )
        self._thread = thread

    def _wake(self, granted: Iterable[int]) -> None:
        for lease_id in granted:
            self._waiters.pop(lease_id).set()

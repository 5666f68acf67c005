"""A kernel's leases: the lease groups calls request in, what each call holds or waits for,
lease-wait limits, and deadlock breaking. Pure: it acts on lease tables and returns what they
granted; the scheduler decides what a grant means (it never hears of one through a callback).

Every top-level call requests in the kernel's own table. A running call gets a table of its own,
lazily, for nested calls its leases cover; nested claims outside it go to the kernel's table at a
raised priority.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from ..locks import Claim, LeaseTable
from . import _waits as waits
from ._deadlines import Deadlines
from ._record import CallRecord, LeaseGroup

__all__ = ["Leasing", "NESTED_PRIORITY_BOOST"]

NESTED_PRIORITY_BOOST = 1_000_000
"""Nested calls are part of a call that already holds leases: they overtake plain waiters."""


class Leasing:
    """What the calls of one kernel hold and wait for."""

    def __init__(
        self,
        pools: Mapping[str, int],
        *,
        clock: Callable[[], float],
    ) -> None:
        self.pools = dict(pools)
        self.main = LeaseGroup(LeaseTable(self.pools), None)  # it checks the pools
        self._now = clock
        self._deadlines: Deadlines[CallRecord] = Deadlines(lambda record: record.wait_token)
        # Waits that may close a wait-for cycle: of nested calls, and of calls a running call
        # awaits (``Batch.awaited_by``). Entries whose wait ended are dropped when checked.
        self._watched: dict[int, CallRecord] = {}

    # -- requesting --------------------------------------------------------------------------------

    def request_top_level(self, record: CallRecord) -> bool:
        """Request a top-level call's claims: True if they are held at once, else it waits.

        A call that claims nothing is requested too: granted at once, it conflicts with
        nobody, but it has its place in line, which it keeps if its tool asks to hold more."""
        claims = record.claims
        assert claims is not None
        return self._request(record, self.main, claims, record.call.priority, record.batch.uid)

    def request_nested(self, record: CallRecord, claims: tuple[Claim, ...], inside: bool) -> bool:
        """Request a nested call's claims: within its parent's lease group (``inside``), or
        from the kernel at a raised priority. True if they are held at once."""
        parent = record.parent
        assert parent is not None
        if inside:
            if parent.own_group is None:
                # With the kernel's pools: a parent holding a whole pool lends its units.
                parent.own_group = LeaseGroup(LeaseTable(self.pools), parent)
            return self._request(record, parent.own_group, claims, record.call.priority, None)
        priority = record.call.priority + NESTED_PRIORITY_BOOST
        return self._request(record, self.main, claims, priority, ("nested", record.uid))

    def _request(
        self,
        record: CallRecord,
        group: LeaseGroup,
        claims: tuple[Claim, ...],
        priority: int,
        table_group: object,
    ) -> bool:
        table = group.table
        lease_id = table.request(claims, priority=priority, group=table_group, owner=record)
        group.records[lease_id] = record
        if record.lease_group is None:
            record.lease_group, record.lease_id = group, lease_id
        elif record.more_leases is None:
            record.more_leases = [(group, lease_id)]
        else:
            record.more_leases.append((group, lease_id))
        if table.is_held(lease_id):
            return True
        self._wait(record, group)
        return False

    def _wait(self, record: CallRecord, group: LeaseGroup) -> None:
        """``record`` waits in ``group`` (its wait limit is the scheduler's to start)."""
        record.waiting_in = group
        if (
            record.parent is not None
            or record.batch.awaited_by is not None
            or record.handle_waiters
        ):
            self._watched[record.uid] = record

    def watch(self, record: CallRecord) -> None:
        """Watch ``record``'s wait, now awaited by a running call, for cycles."""
        if record.waiting_in is not None:
            self._watched[record.uid] = record

    def requeue(
        self, record: CallRecord, claims: tuple[Claim, ...]
    ) -> tuple[bool, list[CallRecord]]:
        """Replace a granted top-level call's claims keeping its place in the queue. Returns
        whether it holds them at once (else it waits afresh), and whom else that let in."""
        group, lease_id = record.lease_group, record.lease_id
        assert group is self.main
        granted = group.table.requeue(lease_id, claims, owner=record)
        held = lease_id in granted
        if not held:
            self._wait(record, group)
        others = [group.records[granted_id] for granted_id in granted if granted_id != lease_id]
        return held, others

    # -- granting and releasing --------------------------------------------------------------------

    def stop_waiting(self, record: CallRecord) -> None:
        """``record`` no longer waits (granted, or withdrawn)."""
        record.waiting_in = None
        self.stop_wait_clock(record)
        if record.parent is not None:
            self._watched.pop(record.uid, None)

    def stop_wait_clock(self, record: CallRecord) -> None:
        if record.wait_token:
            record.wait_token = 0
            self._deadlines.discard()

    def release(self, record: CallRecord) -> list[CallRecord]:
        """Give back every lease of ``record`` and withdraw every request; returns whom that
        let in, in the order the tables granted them. Idempotent."""
        if record.waiting_in is not None:
            self.stop_waiting(record)
        group, lease_id, more = record.lease_group, record.lease_id, record.more_leases
        if group is None:
            return []
        record.lease_group = record.more_leases = None
        granted: list[CallRecord] = []
        for other_group, other_id in reversed(more or ()):
            self._give_back(record, other_group, other_id, granted)
        self._give_back(record, group, lease_id, granted)
        return granted

    @staticmethod
    def _give_back(
        record: CallRecord, group: LeaseGroup, lease_id: int, granted: list[CallRecord]
    ) -> None:
        del group.records[lease_id]
        records = group.records
        granted.extend(
            records[granted_id] for granted_id in group.table.release(lease_id, owner=record)
        )

    # -- waiting limits and deadlocks ------------------------------------------------------------

    def start_wait_clock(self, record: CallRecord, timeout: float | None) -> bool:
        """Start ``record``'s wait limit of ``timeout`` seconds, if it has one (for leases, or
        for a slot). True if that moved the earliest deadline earlier."""
        if timeout is None:
            return False
        deadline = self._now() + timeout
        earliest = self._deadlines.next_deadline()
        record.wait_token = self._deadlines.add(deadline, record)
        return deadline < earliest

    def next_deadline(self) -> float:
        """When the earliest lease wait runs out (``inf`` if none is timed)."""
        return self._deadlines.next_deadline()

    def expired(self, now: float) -> list[CallRecord]:
        """The waiting calls whose limit ran out by ``now``; they still wait (the caller
        finishes them, which withdraws their requests)."""
        due = self._deadlines.expire(now)
        for record in due:
            record.wait_token = 0  # its entry has left the heap
        return due

    def deadlocked(self) -> Iterator[tuple[CallRecord, list[str]]]:
        """Watched waits that close a cycle (see ``_waits.deadlocked``)."""
        watched = self.watched_waits()
        if watched:
            yield from waits.deadlocked(watched)

    def watched_waits(self) -> list[CallRecord]:
        """The waits that may close a cycle (nested calls', awaited calls'), still waiting."""
        watched = self._watched
        if not watched:
            return []
        for uid in [uid for uid, r in watched.items() if r.waiting_in is None]:
            del watched[uid]  # granted, or withdrawn, since
        return list(watched.values())

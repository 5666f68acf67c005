"""What calls hold and wait for: the lease groups calls request in, concurrency slots, the
wait-for graph and its cycles, and the heap of lease-wait limits. Pure: it acts on lease tables
and returns what they granted; the scheduler decides what a grant means (it never hears of one
through a callback). What a call holds and waits for is its record's ``Hold``, which this module
alone writes (the scheduler writes the rest of the record).

Every top-level call requests in the kernel's own table. A running call gets a table of its own,
lazily, for nested calls its leases cover; nested claims outside it go to the kernel's table at a
raised priority.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Generic, TypeVar

from ..locks import Claim, LeaseTable, Pool, claims_conflict
from ._record import FINISHED, CallRecord, LeaseGroup

__all__ = [
    "Leasing",
    "NESTED_PRIORITY_BOOST",
    "Deadlines",
    "waits_for",
    "find_cycle",
    "deadlocked",
    "slot_waiters_behind",
    "contested",
    "contested_alone",
    "slot_wait",
    "describe_waits",
    "Slots",
    "NO_SLOT",
    "WAITING",
    "HOLDING",
]


# -- Concurrency slots: at most ``max_concurrency`` top-level calls run at once. Pure -------------
# A call takes a slot when its leases are granted; if none is free it waits, holding its leases,
# and slots go to waiting calls by priority, then in the order their leases were granted. Holding
# the leases while waiting for a slot loses nothing: a conflicting call could not run before it
# anyway (the lease table hands leases out in order). A running call may wait for those leases,
# though, through a nested call or a batch its tool awaits; the scheduler then runs the waiting
# call in the slot of the call awaiting it (``lend``), as it runs an awaited batch's calls, so no
# cycle forms through a slot.
#
# Slots are kept apart from the lease table (not as a pool every call claims a unit of): a slot is
# a counter and a line, while a pool unit per call would make every call of a large batch a
# waiter in the table, to be scanned and granted one by one (benchmarks/overhead.py measured the
# table's pool at three times the cost of the rest of a call).
NO_SLOT, WAITING, HOLDING = 0, 1, 2
"""``Hold.slot``: none, waiting for one, holding one."""


class Slots:
    """Up to ``limit`` slots (None: as many as asked for)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._free = limit
        # One line per priority (nearly always just 0), highest first; a call that stopped
        # waiting is skipped when it reaches the front.
        self._lines: dict[int, deque[CallRecord]] = {}
        self._priorities: list[int] = []  # the keys of ``_lines``, negated, ascending

    def take(self, record: CallRecord) -> bool:
        """Give ``record`` a slot if one is free (True), else line it up (False)."""
        hold = record.hold
        if self._free is None:
            hold.slot = HOLDING
            return True
        if self._free > 0:
            self._free -= 1
            hold.slot = HOLDING
            return True
        hold.slot = WAITING
        priority = record.call.priority
        line = self._lines.get(priority)
        if line is None:
            line = self._lines[priority] = deque()
            bisect.insort(self._priorities, -priority)
        line.append(record)
        return False

    def has_free(self) -> bool:
        """Whether a slot is free (and so nobody waits for one)."""
        return self._free is None or self._free > 0

    def take_free(self, record: CallRecord) -> bool:
        """Give ``record`` a slot if one is free (True); else leave it be (False), never in
        line. A free slot means nobody waits for one: a freed slot goes to the line first."""
        if self._free is None:
            record.hold.slot = HOLDING
            return True
        if self._free > 0:
            self._free -= 1
            record.hold.slot = HOLDING
            return True
        return False

    def lend(self, record: CallRecord) -> None:
        """``record``, waiting, runs in the slot of a call that awaits it: it leaves the line
        (skipped when reached) and holds no slot of its own."""
        assert record.hold.slot == WAITING
        record.hold.slot = NO_SLOT

    def give_back(self, record: CallRecord) -> CallRecord | None:
        """``record`` is done with its slot or its place in line; returns the call the freed
        slot goes to, if any (it now holds it)."""
        hold = record.hold
        held, hold.slot = hold.slot, NO_SLOT
        if held != HOLDING or self._free is None:
            return None
        while self._priorities:
            priority = -self._priorities[0]
            line = self._lines[priority]
            while line:
                nxt = line.popleft()
                if nxt.hold.slot == WAITING:
                    nxt.hold.slot = HOLDING
                    return nxt
            del self._lines[priority]
            del self._priorities[0]
        self._free += 1
        return None


# -- Who waits for whom: the wait-for graph of calls, its cycles, and how a wait is described -----
# A queued call waits for the calls whose leases (held, or requested earlier) it conflicts with; a
# running call waits for the nested calls it is awaiting, and for the calls of batches its tool
# submitted to its own kernel and awaits. Top-level calls alone can never deadlock (a waiting
# request holds nothing), so every cycle passes through a running call awaiting one of those, and
# a cycle means nobody in it can ever move. A call waiting for a slot holds its leases but waits
# for no call in particular: the scheduler runs it in the slot of an awaiting call whose wait
# reaches it (``slot_waiters_behind``), so it closes no cycle. Pure: it reads the lease tables.
def waits_for(record: CallRecord) -> list[CallRecord]:
    """The calls ``record`` waits for right now (none if it waits for nothing)."""
    group = record.hold.waiting_in
    if group is not None:
        lease_id = next(i for g, i in record.hold.leases() if g is group)
        return [group.records[i] for i in group.table.waits_for(lease_id)]
    return sorted(record.awaiting or (), key=lambda r: r.uid)


def find_cycle(start: CallRecord) -> list[CallRecord] | None:
    """A chain ``start -> ... -> (back to start)`` of waits-for edges, if one exists."""
    visited: set[int] = set()
    stack: list[tuple[CallRecord, list[CallRecord]]] = [(start, [start])]
    while stack:
        record, trail = stack.pop()
        for nxt in waits_for(record):
            if nxt is start:
                return trail
            if nxt.uid not in visited:
                visited.add(nxt.uid)
                stack.append((nxt, [*trail, nxt]))
    return None


def deadlocked(
    waiting_nested: Iterable[CallRecord],
) -> Iterator[tuple[CallRecord, list[str]]]:
    """The waiting nested calls whose wait closes a cycle, newest first, each with the chain
    of calls (``c1 (Edit)``) around it. The caller fails each as it comes: breaking one cycle
    may break others, so each is checked only when reached."""
    for record in sorted(waiting_nested, key=lambda r: -r.uid):
        if record.hold.waiting_in is None or record.stage is FINISHED:
            continue
        cycle = find_cycle(record)
        if cycle is not None:
            yield record, [f"{r.call.id} ({r.name})" for r in [*cycle, record]]


def slot_waiters_behind(record: CallRecord) -> list[CallRecord]:
    """The calls waiting for a slot, holding leases, that ``record``'s wait reaches through the
    calls it waits for: it can't go on before they run."""
    found: list[CallRecord] = []
    visited = {record.uid}
    stack = [record]
    while stack:
        for nxt in waits_for(stack.pop()):
            if nxt.uid not in visited:
                visited.add(nxt.uid)
                if nxt.hold.slot == WAITING:
                    found.append(nxt)
                else:
                    stack.append(nxt)
    return found


def contested(
    record: CallRecord,
    max_concurrency: int | None,
    behind: Iterable[CallRecord] | None = None,
) -> tuple[str, ...]:
    """The resources ``record`` waits for, spelled for people (``behind``: the calls it waits
    for, if the caller has them already)."""
    mine = record.table_claims or ()
    found: list[str] = []
    for other in waits_for(record) if behind is None else behind:
        for claim in mine:
            for theirs in other.table_claims or ():
                if claims_conflict(claim, theirs) or _pool_units_both(claim, theirs):
                    text = _spelled(claim)
                    if text not in found:
                        found.append(text)
    if not found and record.parent is None:
        return slot_wait(max_concurrency)
    return _shared(tuple(found))


def slot_wait(max_concurrency: int | None) -> tuple[str, ...]:
    """:func:`contested` for a top-level call that waits for nothing but a slot."""
    if max_concurrency is None:
        return ()
    return _shared((f"one of {max_concurrency} concurrency slots",))


def contested_alone(claim: Claim) -> tuple[str, ...]:
    """:func:`contested` for a call waiting in a lease table with this one claim: whoever it
    waits behind is there for it (the table makes a request wait only behind requests that
    conflict with it, or take units of its pool), so it need not be asked who."""
    return _shared((_spelled(claim),))


def _spelled(claim: Claim) -> str:
    return str(claim.resource) if claim.node != ("path",) else "workspace"


def _shared(spelled: tuple[str, ...]) -> tuple[str, ...]:
    """Calls queued on one file wait on the same thing: one tuple for them all."""
    shared = _RECENT_SPELLINGS.get(spelled)
    if shared is not None:
        return shared
    if len(_RECENT_SPELLINGS) >= 1024:
        _RECENT_SPELLINGS.clear()
    _RECENT_SPELLINGS[spelled] = spelled
    return spelled


_RECENT_SPELLINGS: dict[tuple[str, ...], tuple[str, ...]] = {}


def _pool_units_both(mine: Claim, theirs: Claim) -> bool:
    """Both take units of one pool: whether they fit together is the pool's capacity's say, so
    a wait between them may be on it. (Two shared claims on anything else never wait.)"""
    return mine.node == theirs.node and isinstance(mine.resource, Pool)


def describe_waits(record: CallRecord, max_concurrency: int | None) -> str:
    """`` behind c1 (Edit), c2 (Read) on src/a.py`` — or nothing if it waits behind nobody."""
    others = waits_for(record)
    if not others:
        return ""
    names = ", ".join(f"{r.call.id} ({r.name})" for r in others[:5])
    resources = ", ".join(contested(record, max_concurrency)[:5])
    on = f" on {resources}" if resources else ""
    return f" behind {names}{on}"


# -- Lease-wait deadlines: a heap with lazy deletion, the shape of trio's own ``Deadlines`` -------
# A queued call may have a limit on how long it waits for its leases. Thousands of calls can wait
# at once, and most of them are granted (or cancelled) long before their deadline, so removing a
# deadline must be cheap and finding the next one must not scan every waiting call. An entry is
# never taken out of the heap when its call stops waiting: each entry carries a token, the item
# keeps the token of its one live entry, and an entry whose token the item no longer holds is
# *stale* and skipped when it reaches the top. When more than half the heap is stale it is
# rebuilt, so the heap stays within about twice the number of live deadlines. Pure: no clock, no
# trio.
T = TypeVar("T")


class Deadlines(Generic[T]):
    """Deadlines of items; ``token_of(item)`` is the token of the item's live entry (or 0).

    ::

        deadlines = Deadlines(lambda hold: hold.wait_token)
        hold.wait_token = deadlines.add(5.0, hold)
        deadlines.next_deadline()              # 5.0
        hold.wait_token = 0; deadlines.discard()   # it was granted: the entry goes stale
        deadlines.expire(6.0)                  # [] (or [record] had it still waited)
    """

    def __init__(self, token_of: Callable[[T], int]) -> None:
        self._token_of = token_of
        # (deadline, token, item): tokens increase, so items sharing a deadline expire in the
        # order they were added, and the heap never compares items themselves.
        self._heap: list[tuple[float, int, T]] = []
        self._last_token = 0
        self._live = 0

    def __len__(self) -> int:
        """The number of live deadlines (stale entries not counted)."""
        return self._live

    def add(self, deadline: float, item: T) -> int:
        """Add a deadline for ``item``; return the token the item must keep while it is live."""
        self._last_token += 1
        heapq.heappush(self._heap, (deadline, self._last_token, item))
        self._live += 1
        return self._last_token

    def discard(self) -> None:
        """Note that one live entry went stale (its item dropped its token)."""
        self._live -= 1
        if len(self._heap) > 2 * self._live + 64:
            self._heap = [e for e in self._heap if self._token_of(e[2]) == e[1]]
            heapq.heapify(self._heap)

    def next_deadline(self) -> float:
        """The earliest live deadline, or ``inf``."""
        heap = self._heap
        while heap:
            _, token, item = heap[0]
            if self._token_of(item) == token:
                return heap[0][0]
            heapq.heappop(heap)  # stale
        return math.inf

    def expire(self, now: float) -> list[T]:
        """Remove and return the items whose live deadline is at or before ``now``, earliest
        first (ties in the order they were added). Their entries are no longer live: the caller
        drops their tokens."""
        heap = self._heap
        due: list[T] = []
        while heap and heap[0][0] <= now:
            _, token, item = heapq.heappop(heap)
            if self._token_of(item) == token:
                due.append(item)
                self._live -= 1
        return due


NESTED_PRIORITY_BOOST = 1_000_000
"""Nested calls are part of a call that already holds leases: they overtake plain waiters."""


# -- The leases calls hold and wait for, in the kernel's table and their parents' -----------------
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
        self._deadlines: Deadlines[CallRecord] = Deadlines(lambda record: record.hold.wait_token)
        # Waits that may close a wait-for cycle: of nested calls, and of calls a running call
        # awaits (``Batch.awaited_by``). Entries whose wait ended are dropped when checked. Read
        # by the scheduler too: while it is empty, nobody's wait can need a lent slot.
        self.watched: dict[int, CallRecord] = {}

    # -- requesting --------------------------------------------------------------------------------

    def request_top_level(self, record: CallRecord) -> bool:
        """Request a top-level call's claims: True if they are held at once, else it waits.

        A call that claims nothing is requested too: granted at once, it conflicts with
        nobody, but it has its place in line, which it keeps if its tool asks to hold more."""
        # ``record.table_claims``, read only where it adds to the claims (every call asks here)
        claims = record.claims if record.ahead is None else record.table_claims
        hold = record.hold
        assert claims is not None and hold.group is None  # its first request, and only one
        # ``_request``, written out: every top-level call asks here.
        group = self.main
        table = group.table
        lease_id = table.request(
            claims, priority=record.call.priority, group=record.batch.uid, owner=record
        )
        group.records[lease_id] = record
        hold.group, hold.lease_id = group, lease_id
        if table.is_held(lease_id):
            return True
        self._wait(record, group)
        return False

    def request_nested(self, record: CallRecord, claims: tuple[Claim, ...], inside: bool) -> bool:
        """Request a nested call's claims: within its parent's lease group (``inside``), or
        from the kernel at a raised priority. True if they are held at once."""
        parent = record.parent
        assert parent is not None
        if inside:
            return self.request_within(record, parent, claims, None)
        priority = record.call.priority + NESTED_PRIORITY_BOOST
        return self._request(record, self.main, claims, priority, ("nested", record.uid))

    def request_within(
        self, record: CallRecord, owner: CallRecord, claims: tuple[Claim, ...], table_group: object
    ) -> bool:
        """Request ``claims``, which ``owner``'s leases cover, in ``owner``'s own lease group:
        ``record`` runs inside those leases, excluding only the others in that group. True if
        they are held at once."""
        own = owner.hold.own_group
        if own is None:
            # With the kernel's pools: an owner holding a whole pool lends its units.
            own = owner.hold.own_group = LeaseGroup(LeaseTable(self.pools), owner)
        return self._request(record, own, claims, record.call.priority, table_group)

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
        hold = record.hold
        if hold.group is None:
            hold.group, hold.lease_id = group, lease_id
        elif hold.more is None:
            hold.more = [(group, lease_id)]
        else:
            hold.more.append((group, lease_id))
        if table.is_held(lease_id):
            return True
        self._wait(record, group)
        return False

    def _wait(self, record: CallRecord, group: LeaseGroup) -> None:
        """``record`` waits in ``group`` (its wait limit is the scheduler's to start)."""
        record.hold.waiting_in = group
        if (
            record.parent is not None
            or record.batch.awaited_by is not None
            or record.handle_waiters
        ):
            self.watched[record.uid] = record

    def watch(self, record: CallRecord) -> None:
        """Watch ``record``'s wait, now awaited by a running call, for cycles."""
        if record.hold.waiting_in is not None:
            self.watched[record.uid] = record

    def requeue(self, record: CallRecord) -> tuple[bool, list[CallRecord]]:
        """Request a granted top-level call's claims again, changed, keeping its place in the
        queue. Returns whether it holds them at once (else it waits afresh), and whom else
        that let in."""
        group, lease_id, claims = record.hold.group, record.hold.lease_id, record.table_claims
        assert group is not None and record.hold.more is None and claims is not None
        granted = group.table.requeue(lease_id, claims, owner=record)
        held = lease_id in granted
        if not held:
            self._wait(record, group)
        others = [group.records[granted_id] for granted_id in granted if granted_id != lease_id]
        return held, others

    # -- granting and releasing --------------------------------------------------------------------

    def stop_waiting(self, record: CallRecord, *, keep_clock: bool = False) -> None:
        """``record`` no longer waits (granted, or withdrawn); ``keep_clock``: its wait limit
        runs on (a granted call may wait for a slot next, within the same limit)."""
        record.hold.waiting_in = None
        if not keep_clock:
            self.stop_wait_clock(record)
        if record.parent is not None:
            self.watched.pop(record.uid, None)

    def stop_wait_clock(self, record: CallRecord) -> None:
        hold = record.hold
        if hold.wait_token:
            hold.wait_token = 0
            self._deadlines.discard()

    def release(self, record: CallRecord) -> list[CallRecord]:
        """Give back every lease of ``record`` and withdraw every request; returns whom that
        let in, in the order the tables granted them. Idempotent."""
        hold = record.hold
        if hold.waiting_in is not None:
            self.stop_waiting(record)
        group, lease_id, more = hold.group, hold.lease_id, hold.more
        if group is None:
            return []
        hold.group = hold.more = None
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
        for granted_id in group.table.release(lease_id, owner=record):
            granted.append(records[granted_id])

    # -- waiting limits and deadlocks ------------------------------------------------------------

    def start_wait_clock(self, record: CallRecord, timeout: float | None) -> bool:
        """Start ``record``'s wait limit of ``timeout`` seconds, if it has one (for leases, or
        for a slot). True if that moved the earliest deadline earlier."""
        if timeout is None:
            return False
        deadline = self._now() + timeout
        earliest = self._deadlines.next_deadline()
        record.hold.wait_token = self._deadlines.add(deadline, record)
        return deadline < earliest

    def next_deadline(self) -> float:
        """When the earliest lease wait runs out (``inf`` if none is timed)."""
        return self._deadlines.next_deadline()

    def expired(self, now: float) -> list[CallRecord]:
        """The waiting calls whose limit ran out by ``now``; they still wait (the caller
        finishes them, which withdraws their requests)."""
        due = self._deadlines.expire(now)
        for record in due:
            record.hold.wait_token = 0  # its entry has left the heap
        return due

    def deadlocked(self) -> Iterator[tuple[CallRecord, list[str]]]:
        """Watched waits that close a cycle (see ``deadlocked``)."""
        watched = self.watched_waits()
        if watched:
            yield from deadlocked(watched)

    def watched_waits(self) -> list[CallRecord]:
        """The waits that may close a cycle (nested calls', awaited calls'), still waiting."""
        watched = self.watched
        if not watched:
            return []
        for uid in [uid for uid, r in watched.items() if r.hold.waiting_in is None]:
            del watched[uid]  # granted, or withdrawn, since
        return list(watched.values())

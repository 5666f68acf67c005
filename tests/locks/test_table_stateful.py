"""LeaseTable under random operation sequences, judged by a reference oracle written here.

The oracle has its own conflict relation (over resources and modes, and its own pool-unit
arithmetic) and reads only public data: the claims each request was made with, ``snapshot()``
and ``statistics()``. It never calls the table's private helpers. The rules request (alone, in
batches, or without waiting), release held leases, withdraw waiting requests, requeue either with
new claims, and change the pool's capacity; bursts of one claim set make deep queues, and
withdrawals from the middle of the queue thin them. After every step the oracle checks:

- safety: no two granted leases conflict, and pool units held never exceed the capacity;
- no lost wake-up: every waiting request is blocked by a held lease or by an earlier waiting
  request (for a pool: held units + units of earlier waiting requests + its own > capacity);
- fairness: nothing granted in this step overtook an earlier, conflicting request still waiting;
- wait-for edges: ``waits_for`` names only conflicting holders and earlier waiters, and following
  it from a waiting request reaches every holder and earlier waiter it conflicts with;
- all-or-nothing: ``statistics()`` counts exactly the held set, so waiting requests hold nothing
  (and its count of requests examined never goes down);
- priorities: effective priority is capped by the latest waiting request of the same group;
- errors (wrong owner, double release, unknown id, unknown pool, too many units, a capacity
  below what is held or wanted) change nothing; and at the end, replaying the operations on a
  fresh table gives the same results and the same final snapshot (determinism).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import attrs
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from toolkernel._errors import (
    CapacityError,
    ForeignLeaseError,
    InvalidClaimError,
    LeaseReleaseError,
    UnknownPoolError,
)
from toolkernel.locks import (
    EVERYTHING,
    Claim,
    Device,
    Everything,
    LeaseInfo,
    LeaseTable,
    LeaseTableSnapshot,
    Mode,
    Path,
    Pool,
    canonical_claims,
    exclusive,
    pool,
    units,
)

from ..strategies import NET, claim_lists, groups, owner_indexes, priorities, request_args

MAX_LIVE = 16


# -- the reference oracle ------------------------------------------------------------------------


def resources_overlap(r1: object, r2: object) -> bool:
    if isinstance(r1, Everything) or isinstance(r2, Everything):
        return True
    if isinstance(r1, Path) and isinstance(r2, Path):
        n = min(len(r1.parts), len(r2.parts))
        return r1.parts[:n] == r2.parts[:n]
    if isinstance(r1, Device) and isinstance(r2, Device):
        return r1.name == r2.name
    if isinstance(r1, Pool) and isinstance(r2, Pool):
        return r1.name == r2.name
    return False


def claim_pair_conflicts(c1: Claim, c2: Claim) -> bool:
    """Overlap and one is exclusive. (Two unit claims on one pool conflict only by counts.)"""
    either_exclusive = c1.mode is Mode.EXCLUSIVE or c2.mode is Mode.EXCLUSIVE
    return either_exclusive and resources_overlap(c1.resource, c2.resource)


def requests_conflict(a: Iterable[Claim], b: Iterable[Claim]) -> bool:
    b = tuple(b)
    return any(claim_pair_conflicts(x, y) for x in a for y in b)


def units_wanted(claims: Iterable[Claim], pool_name: str) -> int:
    """Units of ``pool_name`` a request counts against the capacity.

    An exclusive claim on the pool (or on everything) holds the pool as a whole, not units.
    """
    claims = tuple(claims)
    target = Pool(pool_name)
    if any(
        c.mode is Mode.EXCLUSIVE and (isinstance(c.resource, Everything) or c.resource == target)
        for c in claims
    ):
        return 0
    return sum(c.units for c in claims if c.resource == target and c.mode is Mode.SHARED)


def waits_conflict(a: Iterable[Claim], b: Iterable[Claim]) -> bool:
    """Does one request have to wait for the other, whatever the counts: a conflict, or unit
    claims on the same pool (which are counted against each other)?"""
    a, b = tuple(a), tuple(b)
    return requests_conflict(a, b) or bool(units_wanted(a, NET) and units_wanted(b, NET))


def queue_key(info: LeaseInfo) -> tuple[int, int]:
    return (-info.effective_priority, info.id)


@attrs.define
class Request:
    raw_claims: tuple[Claim, ...]
    owner: object
    priority: int
    group: Hashable


OWNERS: tuple[object, ...] = (None, object(), object())


class LeaseTableMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.table = LeaseTable()
        self.initial_capacity = 0
        self.capacity = 0
        self.requests: dict[int, Request] = {}
        self.last_id = 0
        self.prev: LeaseTableSnapshot | None = None
        self.expected_effective: dict[int, int] = {}
        self.requeued: int | None = None
        self.requeued_held: set[int] = set()
        self.examined = 0
        # For the determinism replay: (operation, arguments, outcome).
        self.log: list[tuple[str, tuple[Any, ...], object]] = []

    # -- helpers ---------------------------------------------------------------------------------

    def held_units(self, snap: LeaseTableSnapshot) -> int:
        return sum(units_wanted(self.requests[i.id].raw_claims, NET) for i in snap.held)

    def blocked(
        self, claims: Sequence[Claim], held: Sequence[LeaseInfo], earlier: Sequence[LeaseInfo]
    ) -> bool:
        """Would a request for ``claims`` have to wait behind ``held`` and ``earlier`` waiters?"""
        raw = self.requests
        if any(requests_conflict(claims, raw[h.id].raw_claims) for h in held):
            return True
        if any(requests_conflict(claims, raw[w.id].raw_claims) for w in earlier):
            return True
        own = units_wanted(claims, NET)
        if own:
            in_use = sum(units_wanted(raw[h.id].raw_claims, NET) for h in held)
            reserved = sum(units_wanted(raw[w.id].raw_claims, NET) for w in earlier)
            if in_use + reserved + own > self.capacity:
                return True
        return False

    def expected_request_error(self, claims: Sequence[Claim]) -> type[Exception] | None:
        if units_wanted(claims, NET) > self.capacity:
            return CapacityError
        return None

    def record(self, op: str, args: tuple[Any, ...], outcome: object) -> None:
        self.log.append((op, args, outcome))

    def assert_unchanged(self, before: LeaseTableSnapshot) -> None:
        assert self.table.snapshot() == before, "a refused operation changed the table"

    def expected_effective_priority(self, priority: int, group: Hashable) -> int:
        assert self.prev is not None
        if group is None:
            return priority
        same_group = [w for w in self.prev.waiting if w.group == group]
        if not same_group:
            return priority
        latest = max(same_group, key=lambda w: w.id)
        return min(priority, latest.effective_priority)

    # -- rules -----------------------------------------------------------------------------------

    @initialize(capacity=st.integers(min_value=1, max_value=4))
    def start(self, capacity: int) -> None:
        self.table = LeaseTable(pools={NET: capacity})
        self.initial_capacity = self.capacity = capacity

    def _request(
        self, nowait: bool, claims: list[Claim], priority: int, group: Hashable, owner: int
    ) -> None:
        assert self.prev is not None
        claims_t = tuple(claims)
        args = (claims_t, priority, group, owner)
        op = "request_nowait" if nowait else "request"
        method = self.table.request_nowait if nowait else self.table.request
        error = self.expected_request_error(claims_t)
        if error is not None:
            with pytest.raises(error):
                method(claims_t, priority=priority, group=group, owner=OWNERS[owner])
            self.assert_unchanged(self.prev)
            self.record(op, args, error)
            return
        expected_eff = self.expected_effective_priority(priority, group)
        key = (-expected_eff, self.last_id + 1)
        earlier = [w for w in self.prev.waiting if queue_key(w) < key]
        must_wait = self.blocked(claims_t, self.prev.held, earlier)
        lease_id = method(claims_t, priority=priority, group=group, owner=OWNERS[owner])
        self.record(op, args, lease_id)
        if nowait and must_wait:
            assert lease_id is None, "request_nowait granted a request that must wait"
            self.assert_unchanged(self.prev)
            return
        assert lease_id is not None and lease_id > self.last_id, "ids are arrival numbers"
        assert self.table.is_held(lease_id) is not must_wait
        assert self.table.claims(lease_id) == canonical_claims(claims_t)
        self.last_id = lease_id
        self.requests[lease_id] = Request(claims_t, OWNERS[owner], priority, group)
        self.expected_effective[lease_id] = expected_eff

    # A dozen live requests over this small universe make long enough queues; more would only
    # make each step slower.
    @precondition(lambda self: len(self.requests) < MAX_LIVE)
    @rule(group=groups, batch=st.lists(request_args, min_size=1, max_size=4))
    def request_batch(
        self, group: Hashable, batch: list[tuple[list[Claim], int, int, bool]]
    ) -> None:
        """Requests arriving one after another, like the calls of one model turn."""
        for n, (claims, priority, owner, unknown_pool) in enumerate(batch):
            if n:
                self.check_against_oracle()
            if unknown_pool:
                self._request_unknown_pool(claims, owner)
            else:
                self._request(False, claims, priority, group, owner)

    @precondition(lambda self: len(self.requests) < MAX_LIVE)
    @rule(
        claims=claim_lists,
        priority=priorities,
        group=groups,
        count=st.integers(min_value=2, max_value=8),
    )
    def request_burst(
        self, claims: list[Claim], priority: int, group: Hashable, count: int
    ) -> None:
        """The same claims requested again and again: a deep queue on their resources."""
        for n in range(count):
            if n:
                self.check_against_oracle()
            self._request(False, claims, priority, group, n % len(OWNERS))

    @precondition(lambda self: len(self.requests) < MAX_LIVE)
    @rule(claims=claim_lists, priority=priorities, group=groups, owner=owner_indexes)
    def request_nowait(
        self, claims: list[Claim], priority: int, group: Hashable, owner: int
    ) -> None:
        self._request(True, claims, priority, group, owner)

    def _request_unknown_pool(self, claims: list[Claim], owner: int) -> None:
        assert self.prev is not None
        # Keep only claims that cannot raise on their own or hide the unknown pool.
        kept = [c for c in claims if c.resource != Pool(NET) and c != exclusive(EVERYTHING)]
        claims_t = (*kept, units(pool("gpu"), 1))
        with pytest.raises(UnknownPoolError):
            self.table.request(claims_t, owner=OWNERS[owner])
        self.assert_unchanged(self.prev)
        self.record("request", (claims_t, 0, None, owner), UnknownPoolError)

    def _release(self, lease_id: int, wrong_owner: int) -> None:
        assert self.prev is not None
        owner = OWNERS.index(self.requests[lease_id].owner)

        # Someone else's release is refused and changes nothing.
        other = (owner + wrong_owner) % len(OWNERS)
        with pytest.raises(ForeignLeaseError):
            self.table.release(lease_id, owner=OWNERS[other])
        self.assert_unchanged(self.prev)
        self.record("release", (lease_id, other), ForeignLeaseError)

        granted = self.table.release(lease_id, owner=OWNERS[owner])
        self.record("release", (lease_id, owner), granted)
        del self.requests[lease_id]
        self.expected_effective.pop(lease_id)
        after = self.table.snapshot()
        newly = {h.id for h in after.held} - {h.id for h in self.prev.held}
        assert len(set(granted)) == len(granted)
        assert set(granted) == newly, "release returns exactly the requests it granted"
        for lease in granted:
            assert self.table.is_held(lease), "granted before release returns"

        # A second release, or one of an id never handed out, is refused and changes nothing.
        for bad_id in (lease_id, self.last_id + 1):
            with pytest.raises(LeaseReleaseError) as info:
                self.table.release(bad_id, owner=OWNERS[owner])
            assert type(info.value) is LeaseReleaseError
            self.assert_unchanged(after)
            self.record("release", (bad_id, owner), LeaseReleaseError)

    @precondition(lambda self: bool(self.requests))
    @rule(data=st.data(), claims=claim_lists, wrong_owner=st.integers(min_value=1, max_value=2))
    def requeue(self, data: st.DataObject, claims: list[Claim], wrong_owner: int) -> None:
        """New claims for a held or waiting request, keeping its id and place in the queue."""
        assert self.prev is not None
        lease_id = data.draw(st.sampled_from(sorted(self.requests)), label="lease")
        request = self.requests[lease_id]
        owner = OWNERS.index(request.owner)
        claims_t = tuple(claims)

        other = (owner + wrong_owner) % len(OWNERS)
        with pytest.raises(ForeignLeaseError):
            self.table.requeue(lease_id, claims_t, owner=OWNERS[other])
        self.assert_unchanged(self.prev)
        self.record("requeue", (lease_id, claims_t, other), ForeignLeaseError)

        error = self.expected_request_error(claims_t)
        if error is not None:
            with pytest.raises(error):
                self.table.requeue(lease_id, claims_t, owner=OWNERS[owner])
            self.assert_unchanged(self.prev)
            self.record("requeue", (lease_id, claims_t, owner), error)
            return
        granted = self.table.requeue(lease_id, claims_t, owner=OWNERS[owner])
        self.record("requeue", (lease_id, claims_t, owner), granted)
        if lease_id in {h.id for h in self.prev.held}:
            self.requeued_held.add(lease_id)
        self.requests[lease_id] = attrs.evolve(request, raw_claims=claims_t)
        assert self.table.claims(lease_id) == canonical_claims(claims_t)
        # Granted again at once, or waiting: either way it is judged like a fresh grant.
        self.requeued = lease_id
        after = self.table.snapshot()
        newly = {h.id for h in after.held} - {h.id for h in self.prev.held}
        assert len(set(granted)) == len(granted)
        assert set(granted) - {lease_id} == newly - {lease_id}
        assert (lease_id in granted) is self.table.is_held(lease_id)

    @precondition(lambda self: self.prev is not None and self.prev.held)
    @rule(data=st.data(), wrong_owner=st.integers(min_value=1, max_value=2))
    def release_held(self, data: st.DataObject, wrong_owner: int) -> None:
        assert self.prev is not None
        lease_id = data.draw(st.sampled_from([h.id for h in self.prev.held]), label="lease")
        self._release(lease_id, wrong_owner)

    @precondition(lambda self: self.prev is not None and self.prev.waiting)
    @rule(data=st.data(), wrong_owner=st.integers(min_value=1, max_value=2))
    def withdraw_waiting(self, data: st.DataObject, wrong_owner: int) -> None:
        assert self.prev is not None
        lease_id = data.draw(st.sampled_from([w.id for w in self.prev.waiting]), label="lease")
        self._release(lease_id, wrong_owner)

    @precondition(lambda self: self.prev is not None and len(self.prev.waiting) >= 3)
    @rule(data=st.data())
    def withdraw_from_the_middle(self, data: st.DataObject) -> None:
        """Withdraw a request with waiting requests both ahead of it and behind it."""
        assert self.prev is not None
        waiting = self.prev.waiting
        lease_id = data.draw(st.sampled_from([w.id for w in waiting[1:-1]]), label="lease")
        self._release(lease_id, 1)

    # Only worth a step while someone holds or wants units of the pool.
    @precondition(lambda self: any(units_wanted(r.raw_claims, NET) for r in self.requests.values()))
    @rule(change=st.sampled_from([1, -1, 2, -2, 0]))
    def set_capacity(self, change: int) -> None:
        assert self.prev is not None
        capacity = min(max(self.capacity + change, 1), 6)
        in_use = self.held_units(self.prev)
        largest_waiting = max(
            (units_wanted(self.requests[w.id].raw_claims, NET) for w in self.prev.waiting),
            default=0,
        )
        if capacity < in_use or capacity < largest_waiting:
            with pytest.raises(CapacityError):
                self.table.set_capacity(NET, capacity)
            self.assert_unchanged(self.prev)
            assert self.table.capacity(NET) == self.capacity
            self.record("set_capacity", (capacity,), CapacityError)
            return
        granted = self.table.set_capacity(NET, capacity)
        self.capacity = capacity
        self.record("set_capacity", (capacity,), granted)
        assert self.table.capacity(NET) == capacity
        snap = self.table.snapshot()
        newly = {h.id for h in snap.held} - {h.id for h in self.prev.held}
        assert len(set(granted)) == len(granted)
        assert set(granted) == newly

    # -- the oracle's checks ---------------------------------------------------------------------

    @invariant()
    def check_against_oracle(self) -> None:
        snap = self.table.snapshot()
        raw = self.requests
        held, waiting = snap.held, snap.waiting

        # Bookkeeping: exactly the live requests, each with its canonical claims.
        assert {i.id for i in held} | {i.id for i in waiting} == set(raw)
        assert not {i.id for i in held} & {i.id for i in waiting}
        assert [i.id for i in held] == sorted(i.id for i in held)
        for info in (*held, *waiting):
            request = raw[info.id]
            assert info.claims == canonical_claims(request.raw_claims)
            assert info.priority == request.priority
            assert info.group == request.group
            assert info.held is (info in held)
            assert info.effective_priority == self.expected_effective[info.id]
            assert self.table.is_held(info.id) is info.held
            assert self.table.is_waiting(info.id) is not info.held
        assert snap.capacities == ((NET, self.capacity),)

        # Queue order is by (-effective priority, arrival), and a group keeps its arrival order.
        # (Except for a request requeued after its grant: it keeps the key it arrived with, and
        # later members of its group, which it did not cap while it held, may be ahead of it.)
        assert [queue_key(w) for w in waiting] == sorted(queue_key(w) for w in waiting)
        for group in ("g1", "g2"):
            ids = [w.id for w in waiting if w.group == group and w.id not in self.requeued_held]
            assert ids == sorted(ids)

        # 1. Safety.
        for n, a in enumerate(held):
            for b in held[n + 1 :]:
                assert not requests_conflict(raw[a.id].raw_claims, raw[b.id].raw_claims), (a, b)
        in_use = self.held_units(snap)
        assert in_use <= self.capacity

        # 2. All-or-nothing: the counts describe the held set alone.
        stats = self.table.statistics()
        held_claims = [c for i in held for c in i.claims]
        assert stats.held == len(held)
        assert stats.waiting == len(waiting)
        assert stats.shared_claims_held == sum(c.mode is Mode.SHARED for c in held_claims)
        assert stats.exclusive_claims_held == sum(c.mode is Mode.EXCLUSIVE for c in held_claims)
        assert stats.pool_units_held == ((NET, in_use),)
        assert stats.requests_examined >= self.examined, "the count of work went down"
        self.examined = stats.requests_examined

        # 3a. No lost wake-up: whoever waits is blocked by a holder or by an earlier waiter.
        for n, w in enumerate(waiting):
            assert self.blocked(raw[w.id].raw_claims, held, waiting[:n]), (
                f"request {w.id} waits although nothing blocks it"
            )
            assert w.waits_for, f"request {w.id} waits for nobody"
            earlier_ids = {e.id for e in waiting[:n]} | {h.id for h in held}
            assert set(w.waits_for) <= earlier_ids
        self.check_wait_for_edges(held, waiting)

        # 3b. Fairness: what was granted in this step overtook no earlier conflicting waiter.
        before = set() if self.prev is None else {h.id for h in self.prev.held}
        before.discard(self.requeued)  # a requeued request is granted afresh, or waits
        self.requeued = None
        if self.prev is not None:
            assert not before & {w.id for w in waiting}, "a held lease went back to waiting"
        granted = sorted((h for h in held if h.id not in before), key=queue_key)
        for n, g in enumerate(granted):
            earlier = [w for w in waiting if queue_key(w) < queue_key(g)]
            claims = raw[g.id].raw_claims
            for w in earlier:
                assert not requests_conflict(claims, raw[w.id].raw_claims), (
                    f"{g.id} was granted ahead of the earlier conflicting request {w.id}"
                )
            own = units_wanted(claims, NET)
            if own:
                later_grants = sum(
                    units_wanted(raw[x.id].raw_claims, NET) for x in granted[n + 1 :]
                )
                reserved = sum(units_wanted(raw[w.id].raw_claims, NET) for w in earlier)
                assert in_use - later_grants + reserved <= self.capacity, (
                    f"{g.id} took pool units reserved by earlier waiting requests"
                )

        self.prev = snap

    def check_wait_for_edges(self, held: Sequence[LeaseInfo], waiting: Sequence[LeaseInfo]) -> None:
        """Each waiter names only requests it must wait for, and reaches every one of them."""
        raw = self.requests
        edges = {info.id: info.waits_for for info in (*held, *waiting)}
        for n, w in enumerate(waiting):
            claims = raw[w.id].raw_claims
            must_wait_for = {
                other.id
                for other in (*held, *waiting[:n])
                if waits_conflict(claims, raw[other.id].raw_claims)
            }
            assert set(w.waits_for) <= must_wait_for, (
                f"request {w.id} names {set(w.waits_for) - must_wait_for}, which it does not "
                f"have to wait for"
            )
            reached: set[int] = set()
            frontier = list(w.waits_for)
            while frontier:
                other = frontier.pop()
                if other not in reached:
                    reached.add(other)
                    frontier.extend(edges[other])
            assert must_wait_for <= reached, (
                f"request {w.id} waits for {must_wait_for - reached}, which its waits_for "
                f"does not lead to"
            )

    def teardown(self) -> None:
        # 7. Determinism: the same operations on a fresh table give the same results and state.
        if not self.log:
            return
        table = LeaseTable(pools={NET: self.initial_capacity})
        for op, args, outcome in self.log:
            result: object
            try:
                if op in ("request", "request_nowait"):
                    claims, priority, group, owner = args
                    method = table.request if op == "request" else table.request_nowait
                    result = method(claims, priority=priority, group=group, owner=OWNERS[owner])
                elif op == "requeue":
                    lease_id, claims, owner = args
                    result = table.requeue(lease_id, claims, owner=OWNERS[owner])
                elif op == "release":
                    lease_id, owner = args
                    result = table.release(lease_id, owner=OWNERS[owner])
                else:
                    result = table.set_capacity(NET, *args)
            except (LeaseReleaseError, InvalidClaimError) as exc:
                result = type(exc)
            assert result == outcome, (op, args)
        assert table.snapshot() == self.table.snapshot()


TestLeaseTableStateful = LeaseTableMachine.TestCase
# Deep queues need many runs, so this test gets twice the profile's budget.
TestLeaseTableStateful.settings = settings(max_examples=2 * settings().max_examples)

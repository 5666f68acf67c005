"""LeaseTable under random operation sequences, judged by a reference oracle written here.

The oracle has its own conflict relation (over resources and modes, and its own pool-unit
arithmetic) and reads only public data: the claims each request was made with, ``snapshot()``
and ``statistics()``. It never calls the table's private helpers. After every step it checks:

- safety: no two granted leases conflict, and pool units held never exceed the capacity;
- no lost wake-up: every waiting request is blocked by a held lease or by an earlier waiting
  request (for a pool: held units + units of earlier waiting requests + its own > capacity);
- fairness: nothing granted in this step overtook an earlier, conflicting request still waiting;
- all-or-nothing: ``statistics()`` counts exactly the held set, so waiting requests hold nothing;
- priorities: effective priority is capped by the latest waiting request of the same group;
- errors change nothing; and at the end, replaying the operations on a fresh table gives the
  same results and the same snapshots (determinism).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import attrs
import pytest
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
    device,
    exclusive,
    pool,
    reads,
    shared,
    units,
    writes,
)

NET = "net"

# The universe is small on purpose, so that requests collide often.
CLAIM_CHOICES: tuple[Claim, ...] = (
    *(reads(p) for p in ("a", "a/b", "a/b/c", "a/bc", "b")),
    *(writes(p) for p in ("a", "a/b", "a/b/c", "a/bc", "b")),
    shared(device("phone")),
    exclusive(device("phone")),
    exclusive(device("browser")),
    units(pool(NET), 1),
    units(pool(NET), 1),
    units(pool(NET), 2),
    units(pool(NET), 3),
    exclusive(pool(NET)),
    shared(EVERYTHING),
    exclusive(EVERYTHING),
)

claim_lists = st.lists(st.sampled_from(CLAIM_CHOICES), min_size=1, max_size=3)
priorities = st.integers(min_value=-1, max_value=2)
groups = st.sampled_from([None, "g1", "g2"])
owner_indexes = st.integers(min_value=0, max_value=2)


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
        # For the determinism replay: (operation, arguments, outcome) and the snapshot after it.
        self.log: list[tuple[str, tuple[Any, ...], object]] = []
        self.snapshots: list[LeaseTableSnapshot] = []

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
        self.snapshots.append(self.table.snapshot())

    def assert_unchanged(self) -> None:
        assert self.prev is not None
        assert self.table.snapshot() == self.prev

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

    def _request(self, claims: list[Claim], priority: int, group: Hashable, owner: int) -> None:
        claims_t = tuple(claims)
        args = (claims_t, priority, group, owner)
        error = self.expected_request_error(claims_t)
        if error is not None:
            with pytest.raises(error):
                self.table.request(claims_t, priority=priority, group=group, owner=OWNERS[owner])
            self.assert_unchanged()
            self.record("request", args, error)
            return
        expected_eff = self.expected_effective_priority(priority, group)
        lease_id = self.table.request(claims_t, priority=priority, group=group, owner=OWNERS[owner])
        assert lease_id > self.last_id, "ids are arrival numbers"
        self.last_id = lease_id
        self.requests[lease_id] = Request(claims_t, OWNERS[owner], priority, group)
        self.expected_effective[lease_id] = expected_eff
        assert self.table.claims(lease_id) == canonical_claims(claims_t)
        self.record("request", args, lease_id)

    # Requests are what make queues, so they get two rules out of seven.
    request = rule(claims=claim_lists, priority=priorities, group=groups, owner=owner_indexes)(
        _request
    )
    request_again = rule(
        claims=claim_lists, priority=priorities, group=groups, owner=owner_indexes
    )(_request)

    @rule(claims=claim_lists, priority=priorities, group=groups, owner=owner_indexes)
    def request_nowait(
        self, claims: list[Claim], priority: int, group: Hashable, owner: int
    ) -> None:
        claims_t = tuple(claims)
        args = (claims_t, priority, group, owner)
        error = self.expected_request_error(claims_t)
        if error is not None:
            with pytest.raises(error):
                self.table.request_nowait(
                    claims_t, priority=priority, group=group, owner=OWNERS[owner]
                )
            self.assert_unchanged()
            self.record("request_nowait", args, error)
            return
        assert self.prev is not None
        expected_eff = self.expected_effective_priority(priority, group)
        key = (-expected_eff, self.last_id + 1)
        earlier = [w for w in self.prev.waiting if queue_key(w) < key]
        must_wait = self.blocked(claims_t, self.prev.held, earlier)
        lease_id = self.table.request_nowait(
            claims_t, priority=priority, group=group, owner=OWNERS[owner]
        )
        self.record("request_nowait", args, lease_id)
        if must_wait:
            assert lease_id is None
            self.assert_unchanged()
            return
        assert lease_id is not None and lease_id > self.last_id
        assert self.table.is_held(lease_id)
        self.last_id = lease_id
        self.requests[lease_id] = Request(claims_t, OWNERS[owner], priority, group)
        self.expected_effective[lease_id] = expected_eff

    def _release(self, lease_id: int) -> None:
        owner = self.requests[lease_id].owner
        granted = self.table.release(lease_id, owner=owner)
        del self.requests[lease_id]
        self.expected_effective.pop(lease_id)
        self.record("release", (lease_id, OWNERS.index(owner)), granted)
        snap = self.table.snapshot()
        assert self.prev is not None
        newly = {h.id for h in snap.held} - {h.id for h in self.prev.held}
        assert len(set(granted)) == len(granted)
        assert set(granted) == newly, "release returns exactly the requests it granted"
        for lease in granted:
            assert self.table.is_held(lease), "granted before release returns"

    @precondition(lambda self: self.prev is not None and self.prev.held)
    @rule(data=st.data())
    def release_held(self, data: st.DataObject) -> None:
        assert self.prev is not None
        lease_id = data.draw(st.sampled_from([h.id for h in self.prev.held]))
        self._release(lease_id)

    @precondition(lambda self: self.prev is not None and self.prev.waiting)
    @rule(data=st.data())
    def withdraw_waiting(self, data: st.DataObject) -> None:
        assert self.prev is not None
        lease_id = data.draw(st.sampled_from([w.id for w in self.prev.waiting]))
        self._release(lease_id)

    @rule(capacity=st.integers(min_value=1, max_value=5))
    def set_capacity(self, capacity: int) -> None:
        assert self.prev is not None
        in_use = self.held_units(self.prev)
        largest_waiting = max(
            (units_wanted(self.requests[w.id].raw_claims, NET) for w in self.prev.waiting),
            default=0,
        )
        if capacity < in_use or capacity < largest_waiting:
            with pytest.raises(CapacityError):
                self.table.set_capacity(NET, capacity)
            self.assert_unchanged()
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
        assert [queue_key(w) for w in waiting] == sorted(queue_key(w) for w in waiting)
        for group in ("g1", "g2"):
            ids = [w.id for w in waiting if w.group == group]
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

        # 3a. No lost wake-up: whoever waits is blocked by a holder or by an earlier waiter.
        for n, w in enumerate(waiting):
            assert self.blocked(raw[w.id].raw_claims, held, waiting[:n]), (
                f"request {w.id} waits although nothing blocks it"
            )
            assert w.waits_for, f"request {w.id} waits for nobody"
            earlier_ids = {e.id for e in waiting[:n]} | {h.id for h in held}
            assert set(w.waits_for) <= earlier_ids

        # 3b. Fairness: what was granted in this step overtook no earlier conflicting waiter.
        before = set() if self.prev is None else {h.id for h in self.prev.held}
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

    def teardown(self) -> None:
        # 7. Determinism: the same operations on a fresh table give the same results and states.
        if not self.log:
            return
        table = LeaseTable(pools={NET: self.initial_capacity})
        for (op, args, outcome), expected_snapshot in zip(self.log, self.snapshots, strict=True):
            result: object
            try:
                if op in ("request", "request_nowait"):
                    claims, priority, group, owner = args
                    method = table.request if op == "request" else table.request_nowait
                    result = method(claims, priority=priority, group=group, owner=OWNERS[owner])
                elif op == "release":
                    lease_id, owner = args
                    result = table.release(lease_id, owner=OWNERS[owner])
                else:
                    result = table.set_capacity(NET, *args)
            except (LeaseReleaseError, InvalidClaimError) as exc:
                result = type(exc)
            assert result == outcome, (op, args)
            assert table.snapshot() == expected_snapshot


TestLeaseTableStateful = LeaseTableMachine.TestCase

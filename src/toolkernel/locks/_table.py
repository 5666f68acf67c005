"""The lease table: who holds what, who waits, and who is granted next. Pure: no trio, no I/O.

What it guarantees
------------------
A *request* is a set of claims (see ``_resources``) that is granted whole or not at all. Two
claims *conflict* iff their resources overlap (one node of the resource hierarchy is a prefix of
the other: ``a`` overlaps ``a/b/c``, ``a/b`` does not overlap ``a/bc``) and at least one of them
is exclusive; unit claims on one pool conflict iff together they would exceed its capacity.

1. **Safety.** No two granted leases ever conflict.
2. **All or nothing.** A waiting request holds nothing. Since nobody holds while waiting, declared
   sets cannot deadlock.
3. **Conflict-aware FIFO.** Requests are ordered by a key (priority first, then arrival). A waiting
   request is granted as soon as it conflicts with no granted lease *and with no earlier waiting
   request*. The second half is what makes it fair: a writer waiting behind readers is not
   overtaken by readers that arrive after it, and a request for three files is not starved by a
   stream of requests for one of them, because every later conflicting request queues behind it.
   Requests that conflict with nobody earlier overtake freely: there is no head-of-line blocking.
   For a pool, "earlier" counts units: a unit claim waits while the units held plus the units of
   earlier waiting claims on that pool plus its own exceed the capacity.
4. **Direct hand-off.** ``release`` grants every newly grantable waiter inside the same call and
   returns their ids. There is no moment at which a resource is free and nobody has it yet, so a
   late-comer cannot barge in between a release and the wake-up of the waiter it was meant for.
5. **Cancellation safety.** ``release`` takes a waiting request as well (that is how a waiter
   withdraws) and re-runs the grant scan for whoever stood behind it. If a request was granted in
   the same instant its waiter was cancelled, the waiter simply releases it: the grant is never
   leaked. Adapters call ``release`` on every exit path.
6. **Synchronous release.** Release is a plain method call; it is checked against the owner given
   at request time, and a second or foreign release raises without changing anything.
7. **Determinism.** Ids and keys come from an arrival counter; scans visit requests in key order.
   Nothing depends on the iteration order of sets or on object identity.
8. **Priorities.** A request of higher priority may overtake waiting requests of lower priority,
   but never a waiting request of its own *group* (a batch of calls): when a request arrives its
   effective priority is capped at the effective priority of the latest request of its group still
   waiting. Starvation bound: at equal priority a request waits only for the conflicting requests
   ahead of it when it arrived (and their holders); a request can be overtaken without bound only
   by a sustained stream of strictly higher-priority conflicting requests. That is what a priority
   means; callers who want aging can resubmit with a raised priority.
9. **Scale.** Held leases and waiting requests are indexed in a trie over resource nodes, with
   per-subtree counts. Checking a claim costs O(depth) plus the waiting requests it overlaps;
   releasing costs O(depth) plus the waiting requests that overlapped the released claims. Nothing
   walks all held leases or all waiters.

Why a rescan only of the overlapping waiters is enough: a waiting request is waiting because it
conflicts with something held or something earlier and waiting. Removing request Q can only change
that for requests that conflicted with Q. Granting a waiter never unblocks anyone else: whoever it
blocked as a waiter, it now blocks as a holder. So one pass over Q's conflicting waiters, in key
order, grants everything that became grantable.

Rejected alternatives: strict FIFO over all requests (head-of-line blocking: one busy file would
stall unrelated calls); "grant whatever fits" (readers starve writers, small requests starve big
ones); per-resource queues with incremental acquisition (deadlocks unless resources are ordered,
and holds resources while waiting).
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

import attrs

from .._errors import (
    CapacityError,
    ForeignLeaseError,
    InvalidClaimError,
    LeaseReleaseError,
    UnknownPoolError,
)
from ._resources import Claim, Mode, Pool, canonical_claims

__all__ = ["LeaseTable", "LeaseInfo", "LeaseTableStatistics", "LeaseTableSnapshot"]

# A module global, read for every claim requested: on Python 3.11 ``Mode.EXCLUSIVE`` goes through
# the enum metaclass's ``__getattr__`` hook (~0.1 us a time).
_EXCLUSIVE = Mode.EXCLUSIVE

# A request's place in the queue: (-effective priority, arrival number). The arrival number is also
# the request's id, so keys are unique and comparing two keys never looks further.
_Key = tuple[int, int]


@attrs.frozen
class LeaseInfo:
    """One request in a :class:`LeaseTableSnapshot`."""

    id: int
    """The lease id, which is also its arrival number."""
    claims: tuple[Claim, ...]
    """The canonical claim set."""
    held: bool
    """True once granted; False while waiting."""
    priority: int
    """The priority it was requested with."""
    effective_priority: int
    """The priority it queues at, after the cap by earlier waiting requests of its group."""
    group: Hashable
    """The group (batch) it was requested in, or None."""
    waits_for: tuple[int, ...]
    """While waiting: the ids of the held leases and earlier waiting requests it conflicts with."""


@attrs.frozen
class LeaseTableSnapshot:
    """The whole state of a :class:`LeaseTable` as an immutable value (compares with ``==``)."""

    held: tuple[LeaseInfo, ...]
    """Granted leases, by id."""
    waiting: tuple[LeaseInfo, ...]
    """Waiting requests, in queue order (the order in which they will be considered)."""
    capacities: tuple[tuple[str, int], ...]
    """Pool capacities, by name."""


@attrs.frozen
class LeaseTableStatistics:
    """Cheap counts describing a :class:`LeaseTable`."""

    held: int
    """Number of granted leases."""
    waiting: int
    """Number of requests waiting for a grant."""
    shared_claims_held: int
    """Number of shared claims (including pool unit claims) inside granted leases."""
    exclusive_claims_held: int
    """Number of exclusive claims inside granted leases."""
    pool_units_held: tuple[tuple[str, int], ...]
    """For each pool with a capacity, the units held, by name."""


class _Entry(NamedTuple):
    """One canonical claim with what the hot paths ask of it, worked out once per request."""

    claim: Claim
    node_key: tuple[str, ...]
    exclusive: bool
    pool_units: int
    """The units a shared pool claim counts against its pool; 0 for every other claim."""


@attrs.define(eq=False)
class _Request:
    id: int
    claims: tuple[Claim, ...]
    entries: tuple[_Entry, ...]
    exclusive_count: int
    key: _Key
    priority: int
    group: Hashable
    owner: object
    held: bool = False


class _Node:
    """One node of the resource trie, with what is held and what waits at it and below it."""

    __slots__ = (
        "children",
        "held_exclusive",
        "held_shared",
        "name",
        "parent",
        "tree_held_exclusive",
        "tree_held_shared",
        "tree_wait",
        "tree_wait_exclusive",
        "units_held",
        "wait_exclusive",
        "wait_shared",
        "wait_units",
    )

    def __init__(self, name: str | None, parent: _Node | None) -> None:
        self.name = name
        self.parent = parent
        self.children: dict[str, _Node] = {}
        # Ids of granted leases holding a claim at exactly this node.
        self.held_shared: dict[int, None] = {}
        self.held_exclusive: dict[int, None] = {}
        # Counts of held claims at this node and anywhere below it.
        self.tree_held_shared = 0
        self.tree_held_exclusive = 0
        # Keys of waiting requests with a claim at exactly this node, sorted (earliest first).
        # An empty tuple until somebody waits here: most nodes only ever hold leases, and two
        # lists for each would be two more objects per held path for the garbage collector.
        self.wait_shared: Sequence[_Key] = ()
        self.wait_exclusive: Sequence[_Key] = ()
        # Counts of waiting claims at this node and anywhere below it.
        self.tree_wait = 0
        self.tree_wait_exclusive = 0
        # Pool nodes only: units held, and units wanted by each waiting request id.
        self.units_held = 0
        self.wait_units: dict[int, int] = {}

    def is_empty(self) -> bool:
        return not (
            self.children or self.tree_held_shared or self.tree_held_exclusive or self.tree_wait
        )

    def descendants(self, exclusive_only: bool, waiting: bool) -> Iterator[_Node]:
        """This node and the nodes below it that hold (or wait for) claims of interest."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            for child in node.children.values():
                if waiting:
                    count = child.tree_wait_exclusive if exclusive_only else child.tree_wait
                else:
                    count = child.tree_held_exclusive
                    if not exclusive_only:
                        count += child.tree_held_shared
                if count:
                    stack.append(child)


def _insert_key(node: _Node, exclusive: bool, key: _Key) -> None:
    keys = node.wait_exclusive if exclusive else node.wait_shared
    if isinstance(keys, list):
        bisect.insort(keys, key)
    elif exclusive:
        node.wait_exclusive = [key]
    else:
        node.wait_shared = [key]


def _remove_key(keys: Sequence[_Key], key: _Key) -> None:
    assert isinstance(keys, list)  # it holds ``key``, so it was made a list
    del keys[bisect.bisect_left(keys, key)]


def _blocks_below(node: _Node, exclusive: bool, key: _Key) -> bool:
    """Does a held lease or an earlier waiting claim at ``node`` conflict with a claim below it?"""
    if node.held_exclusive or (exclusive and node.held_shared):
        return True
    if node.wait_exclusive and node.wait_exclusive[0] < key:
        return True
    return exclusive and bool(node.wait_shared) and node.wait_shared[0] < key


class LeaseTable:
    """Grants shared and exclusive leases on sets of resources, fairly and all at once.

    Pure bookkeeping: methods return what changed and never block. See the module docstring for
    the guarantees. Example::

        >>> table = LeaseTable(pools={"network": 2})
        >>> writer = table.request([writes("a.txt")])
        >>> reader = table.request([reads("a.txt")])
        >>> table.is_held(writer), table.is_held(reader)
        (True, False)
        >>> table.release(writer)          # hands the file to the reader within this call
        (2,)
    """

    def __init__(self, pools: Mapping[str, int] | None = None) -> None:
        self._root = _Node(None, None)
        self._requests: dict[int, _Request] = {}
        self._capacity: dict[str, int] = {}
        self._last_id = 0
        self._held_count = 0
        self._shared_claims_held = 0
        self._exclusive_claims_held = 0
        # For each group, its waiting request ids in arrival order (the last one caps priority).
        self._group_waiting: dict[Hashable, dict[int, None]] = {}
        for name, capacity in (pools or {}).items():
            self._check_capacity_value(name, capacity)
            self._capacity[name] = capacity

    # -- public queries ----------------------------------------------------------------------

    def is_held(self, lease_id: int) -> bool:
        """True iff ``lease_id`` names a granted lease."""
        request = self._requests.get(lease_id)
        return request is not None and request.held

    def is_waiting(self, lease_id: int) -> bool:
        """True iff ``lease_id`` names a request that is waiting for its grant."""
        request = self._requests.get(lease_id)
        return request is not None and not request.held

    def claims(self, lease_id: int) -> tuple[Claim, ...]:
        """The canonical claims of a held or waiting request."""
        return self._get(lease_id, "look up").claims

    def capacity(self, pool_name: str) -> int | None:
        """The capacity of a pool, or None if it was never set."""
        return self._capacity.get(pool_name)

    def waits_for(self, lease_id: int) -> tuple[int, ...]:
        """Ids of the held leases and earlier waiting requests a waiting request conflicts with.

        Empty for a held lease. Costs O(depth + overlapping requests) per claim.
        """
        request = self._get(lease_id, "look up")
        if request.held:
            return ()
        found: set[int] = set()
        for entry in request.entries:
            found.update(self._overlapping(entry, held=True))
            for other in self._overlapping(entry, held=False):
                if self._requests[other].key < request.key:
                    found.add(other)
        found.discard(lease_id)
        return tuple(sorted(found, key=lambda i: self._requests[i].key))

    def statistics(self) -> LeaseTableStatistics:
        """Cheap counts of what is held and waiting."""
        return LeaseTableStatistics(
            held=self._held_count,
            waiting=len(self._requests) - self._held_count,
            shared_claims_held=self._shared_claims_held,
            exclusive_claims_held=self._exclusive_claims_held,
            pool_units_held=tuple(
                (name, self._pool_node(name).units_held if self._has_node(name) else 0)
                for name in sorted(self._capacity)
            ),
        )

    def snapshot(self) -> LeaseTableSnapshot:
        """The full state as an immutable value."""
        requests = sorted(self._requests.values(), key=lambda r: r.key)
        return LeaseTableSnapshot(
            held=tuple(self._info(r) for r in sorted(requests, key=lambda r: r.id) if r.held),
            waiting=tuple(self._info(r) for r in requests if not r.held),
            capacities=tuple(sorted(self._capacity.items())),
        )

    # -- public operations -------------------------------------------------------------------

    def request(
        self,
        claims: Iterable[Claim],
        *,
        priority: int = 0,
        group: Hashable = None,
        owner: object = None,
    ) -> int:
        """Ask for all of ``claims`` at once; return the new lease id.

        The request is granted at once if it conflicts with no held lease and no earlier waiting
        request (check with :meth:`is_held`); otherwise it waits, holding nothing, until a
        :meth:`release` or :meth:`set_capacity` grants it. ``owner`` is checked on release.

        Raises :class:`UnknownPoolError` for a pool without capacity and :class:`CapacityError`
        for more units than the pool has: such a request could never be granted.
        """
        request = self._make_request(claims, priority, group, owner)
        self._requests[request.id] = request
        self._last_id = request.id
        if self._grantable(request):
            self._index(request, held=True)
        else:
            self._index(request, held=False)
        return request.id

    def request_nowait(
        self,
        claims: Iterable[Claim],
        *,
        priority: int = 0,
        group: Hashable = None,
        owner: object = None,
    ) -> int | None:
        """Like :meth:`request`, but return None (and change nothing) instead of waiting."""
        request = self._make_request(claims, priority, group, owner)
        if not self._grantable(request):
            return None
        self._requests[request.id] = request
        self._last_id = request.id
        self._index(request, held=True)
        return request.id

    def release(self, lease_id: int, *, owner: object = None) -> tuple[int, ...]:
        """Release a held lease or withdraw a waiting request; return the ids granted as a result.

        Synchronous. The newly granted requests hold their leases when this returns. Raises
        :class:`LeaseReleaseError` if ``lease_id`` is neither held nor waiting (for example a
        second release), :class:`ForeignLeaseError` if ``owner`` is not the requester's owner;
        either way nothing changes.
        """
        request = self._get(lease_id, "release")
        if request.owner is not owner:
            raise ForeignLeaseError(
                f"can't release lease {lease_id}: it belongs to {request.owner!r}, not {owner!r}"
            )
        # Nobody waiting at all is the common case: then there is nobody to rescan.
        candidates = self._conflicting_waiters(request) if self._root.tree_wait else None
        self._unindex(request)
        del self._requests[lease_id]
        return self._grant_scan(candidates) if candidates else ()

    def requeue(
        self, lease_id: int, claims: Iterable[Claim], *, owner: object = None
    ) -> tuple[int, ...]:
        """Replace a request's claims, keeping its id and its place in the queue.

        For a caller that learns, after the grant, that its claims named the wrong resources (a
        path's meaning changed). The request gives up what it held and asks again as if it had
        arrived when it first did: it is granted at once if it can be, else it waits ahead of
        everyone who came after it. Returns the ids granted as a result (``lease_id`` among them
        if it was granted again). Same errors as :meth:`release` and :meth:`request`.

        A request requeued after it was granted keeps its old key, but requests of its group that
        arrived while it held were not capped by it: one of higher priority may now queue ahead
        of it. Same-priority batches (the kernel's case) keep their emission order.
        """
        request = self._get(lease_id, "requeue")
        if request.owner is not owner:
            raise ForeignLeaseError(
                f"can't requeue lease {lease_id}: it belongs to {request.owner!r}, not {owner!r}"
            )
        replacement = self._make_request(claims, request.priority, request.group, owner)
        candidates = self._conflicting_waiters(request)
        self._unindex(request)
        request.claims = replacement.claims
        request.entries = replacement.entries
        request.exclusive_count = replacement.exclusive_count
        granted_now = self._grantable(request)
        self._index(request, held=granted_now)
        candidates.update(self._conflicting_waiters(request))
        candidates.discard(lease_id)
        granted = self._grant_scan(candidates)
        return (lease_id, *granted) if granted_now else granted

    def set_capacity(self, pool_name: str, capacity: int) -> tuple[int, ...]:
        """Set a pool's capacity; return the ids of waiting requests granted as a result.

        Lowering it below the units held, or below what a waiting request asks for, raises
        :class:`CapacityError` and changes nothing.
        """
        self._check_capacity_value(pool_name, capacity)
        node = self._pool_node(pool_name) if self._has_node(pool_name) else None
        if node is not None:
            if node.units_held > capacity:
                raise CapacityError(
                    f"can't set the capacity of pool {pool_name!r} to {capacity}: "
                    f"{node.units_held} units are held"
                )
            largest = max(node.wait_units.values(), default=0)
            if largest > capacity:
                raise CapacityError(
                    f"can't set the capacity of pool {pool_name!r} to {capacity}: "
                    f"a waiting request needs {largest} units"
                )
        self._capacity[pool_name] = capacity
        if node is None:
            return ()
        return self._grant_scan({key[1] for key in node.wait_shared})

    # -- requests ----------------------------------------------------------------------------

    def _get(self, lease_id: int, verb: str) -> _Request:
        request = self._requests.get(lease_id)
        if request is None:
            raise LeaseReleaseError(f"can't {verb} lease {lease_id}: it is not held or waiting")
        return request

    def _make_request(
        self, claims: Iterable[Claim], priority: int, group: Hashable, owner: object
    ) -> _Request:
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise InvalidClaimError(f"priority must be an int, not {priority!r}")
        given = tuple(claims)
        canonical: tuple[Claim, ...]
        if len(given) == 1 and isinstance(given[0], Claim):
            canonical = given  # a lone claim is already canonical; skip the merge
        else:
            canonical = canonical_claims(given)
        entries = []
        exclusive_count = 0
        for claim in canonical:
            resource = claim.resource
            exclusive = claim.mode is _EXCLUSIVE
            pool_units = 0
            if isinstance(resource, Pool):
                capacity = self._capacity.get(resource.name)
                if capacity is None:
                    raise UnknownPoolError(
                        f"pool {resource.name!r} has no capacity; "
                        f"set it with pools={{{resource.name!r}: n}}"
                    )
                if not exclusive:
                    if claim.units > capacity:
                        raise CapacityError(
                            f"can't ever grant {claim.units} units of {resource}: "
                            f"its capacity is {capacity}"
                        )
                    pool_units = claim.units
            entries.append(_Entry(claim, resource.node, exclusive, pool_units))
            exclusive_count += exclusive
        effective = priority
        if group is not None:
            waiting = self._group_waiting.get(group)
            if waiting:
                latest = self._requests[next(reversed(waiting))]
                effective = min(priority, -latest.key[0])
        lease_id = self._last_id + 1
        return _Request(
            lease_id,
            canonical,
            tuple(entries),
            exclusive_count,
            (-effective, lease_id),
            priority,
            group,
            owner,
        )

    def _info(self, request: _Request) -> LeaseInfo:
        return LeaseInfo(
            id=request.id,
            claims=request.claims,
            held=request.held,
            priority=request.priority,
            effective_priority=-request.key[0],
            group=request.group,
            waits_for=self.waits_for(request.id),
        )

    # -- the trie ----------------------------------------------------------------------------

    def _chain(self, node_key: tuple[str, ...], create: bool) -> list[_Node]:
        """The nodes from the root down to ``node_key``; stops early if absent and not creating."""
        node = self._root
        chain = [node]
        for name in node_key:
            child = node.children.get(name)
            if child is None:
                if not create:
                    break
                child = node.children[name] = _Node(name, node)
            node = child
            chain.append(node)
        return chain

    def _has_node(self, pool_name: str) -> bool:
        pools = self._root.children.get("pool")
        return pools is not None and pool_name in pools.children

    def _pool_node(self, pool_name: str) -> _Node:
        return self._root.children["pool"].children[pool_name]

    def _index(self, request: _Request, *, held: bool) -> None:
        request.held = held
        for _, node_key, exclusive, pool_units in request.entries:
            chain = self._chain(node_key, create=True)
            node = chain[-1]
            if held:
                (node.held_exclusive if exclusive else node.held_shared)[request.id] = None
                node.units_held += pool_units
                if exclusive:
                    for step in chain:
                        step.tree_held_exclusive += 1
                else:
                    for step in chain:
                        step.tree_held_shared += 1
            else:
                _insert_key(node, exclusive, request.key)
                if pool_units:
                    node.wait_units[request.id] = pool_units
                for step in chain:
                    step.tree_wait += 1
                if exclusive:
                    for step in chain:
                        step.tree_wait_exclusive += 1
        if held:
            self._held_count += 1
            self._exclusive_claims_held += request.exclusive_count
            self._shared_claims_held += len(request.entries) - request.exclusive_count
        elif request.group is not None:
            waiting = self._group_waiting.setdefault(request.group, {})
            if waiting and next(reversed(waiting)) > request.id:
                # A requeued request keeps its arrival place; the group must stay in arrival
                # order, since its last member is the one that caps newcomers' priority.
                waiting[request.id] = None
                self._group_waiting[request.group] = dict.fromkeys(sorted(waiting))
            else:
                waiting[request.id] = None

    def _unindex(self, request: _Request) -> None:
        for _, node_key, exclusive, pool_units in request.entries:
            chain = self._chain(node_key, create=False)
            node = chain[-1]
            if request.held:
                del (node.held_exclusive if exclusive else node.held_shared)[request.id]
                node.units_held -= pool_units
                if exclusive:
                    for step in chain:
                        step.tree_held_exclusive -= 1
                else:
                    for step in chain:
                        step.tree_held_shared -= 1
            else:
                _remove_key(node.wait_exclusive if exclusive else node.wait_shared, request.key)
                if pool_units:
                    del node.wait_units[request.id]
                for step in chain:
                    step.tree_wait -= 1
                if exclusive:
                    for step in chain:
                        step.tree_wait_exclusive -= 1
            self._prune(chain)
        if request.held:
            self._held_count -= 1
            self._exclusive_claims_held -= request.exclusive_count
            self._shared_claims_held -= len(request.entries) - request.exclusive_count
        elif request.group is not None:
            waiting = self._group_waiting[request.group]
            del waiting[request.id]
            if not waiting:
                del self._group_waiting[request.group]

    @staticmethod
    def _prune(chain: list[_Node]) -> None:
        # Drop empty nodes bottom-up so the trie only holds what is held or waited for.
        for depth in range(len(chain) - 1, 0, -1):
            node = chain[depth]
            if not node.is_empty() or node.wait_units or node.units_held:
                break
            assert node.name is not None
            del chain[depth - 1].children[node.name]

    # -- conflicts ---------------------------------------------------------------------------

    def _grantable(self, request: _Request) -> bool:
        key = request.key
        for entry in request.entries:
            exclusive = entry.exclusive
            # Walk down from the root, checking each strict ancestor of the claim's node; if the
            # walk runs off the trie, nothing is held or waiting at or below the node.
            node = self._root
            for name in entry.node_key:
                if _blocks_below(node, exclusive, key):
                    return False
                child = node.children.get(name)
                if child is None:
                    break
                node = child
            else:
                if self._conflicts_at(entry, node, key):
                    return False
        return True

    def _conflicts_at(self, entry: _Entry, node: _Node, key: _Key) -> bool:
        """Does a claim conflict at its own existing ``node`` or below (subtree, pool units)?"""
        exclusive = entry.exclusive
        if node.tree_held_exclusive or (exclusive and node.tree_held_shared):
            return True
        if node.tree_wait_exclusive or (exclusive and node.tree_wait):
            for below in node.descendants(exclusive_only=not exclusive, waiting=True):
                if below.wait_exclusive and below.wait_exclusive[0] < key:
                    return True
                if exclusive and below.wait_shared and below.wait_shared[0] < key:
                    return True
        if entry.pool_units:
            reserved = node.units_held + entry.pool_units
            for waiting_key in node.wait_shared:
                if waiting_key >= key:
                    break
                reserved += node.wait_units[waiting_key[1]]
            resource = entry.claim.resource
            assert isinstance(resource, Pool)
            if reserved > self._capacity[resource.name]:
                return True
        return False

    def _overlapping(self, entry: _Entry, *, held: bool) -> Iterator[int]:
        """Ids of held (or waiting) requests with a claim that conflicts with ``entry`` by mode.

        Pool unit claims on the same pool are included (their conflict depends on counts).
        """
        chain = self._chain(entry.node_key, create=False)
        exclusive = entry.exclusive
        exact = len(chain) == len(entry.node_key) + 1
        above = chain[:-1] if exact else chain
        for node in above:
            if held:
                yield from node.held_exclusive
                if exclusive:
                    yield from node.held_shared
            else:
                yield from (key[1] for key in node.wait_exclusive)
                if exclusive:
                    yield from (key[1] for key in node.wait_shared)
        if not exact:
            return
        node = chain[-1]
        if entry.pool_units:
            yield from (node.held_shared if held else (key[1] for key in node.wait_shared))
        for below in node.descendants(exclusive_only=not exclusive, waiting=not held):
            if held:
                yield from below.held_exclusive
                if exclusive:
                    yield from below.held_shared
            else:
                yield from (key[1] for key in below.wait_exclusive)
                if exclusive:
                    yield from (key[1] for key in below.wait_shared)

    def _conflicting_waiters(self, request: _Request) -> set[int]:
        """Waiting requests whose wait ``request`` may be part of: the only ones to rescan."""
        found: set[int] = set()
        if not self._root.tree_wait:
            return found  # nobody waits at all: the common case, and nothing to rescan
        for entry in request.entries:
            found.update(self._overlapping(entry, held=False))
        found.discard(request.id)
        if not request.held:
            found = {i for i in found if self._requests[i].key > request.key}
        return found

    def _grant_scan(self, candidates: set[int]) -> tuple[int, ...]:
        if not candidates:
            return ()
        granted = []
        for key in sorted(self._requests[i].key for i in candidates):
            request = self._requests[key[1]]
            if self._grantable(request):
                self._unindex(request)
                self._index(request, held=True)
                granted.append(request.id)
        return tuple(granted)

    @staticmethod
    def _check_capacity_value(name: str, capacity: int) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidClaimError(f"pool name must be a non-empty string, not {name!r}")
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
            raise CapacityError(
                f"capacity of pool {name!r} must be a positive int, not {capacity!r}"
            )

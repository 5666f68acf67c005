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
9. **Scale.** Held leases and waiting requests are indexed in a trie over resource nodes. A node
   counts what is held at and below it, keeps its own waiting line (keys, earliest first), and
   keeps, for the nodes below it, the key of the first waiter of each mode there. Checking a
   claim costs O(depth) (a pool unit claim also counts the earlier unit claims on its pool, at
   most its capacity of them). Releasing or withdrawing a request costs O(depth) for each queue
   front its claims were holding back (the only requests it can have let through), not for the
   requests queued behind those fronts: n requests queued on one file run, or are withdrawn, in
   O(n * depth) in all. Nothing walks all held leases or all waiters. ``statistics()`` counts the
   waiting requests examined, so tests can hold the table to this without a clock.

Why looking at queue fronts is enough: a waiting request waits because it conflicts with something
held or with an earlier waiting request. Removing request Q can change that only for requests that
conflicted with Q. Granting a waiter never lets anyone else through: whoever it blocked as a
waiter, it now blocks as a holder (so the grants of one release can be made in any order, with
the same result). On any one node, a request queued behind an earlier conflicting request stays
behind it, waiting or granted; so of each node's line only the *front* can be let through: the
shared claims ahead of its first exclusive claim, or that exclusive claim when it comes first (on
a pool: the unit claims that fit). A removal looks at the fronts on the nodes of the removed
claims, on their ancestors, and on the nodes below them whose first waiter comes before every
waiter on the path above; the first-waiter keys each node keeps for its subtree find those nodes
without visiting the others. Withdrawing a request from the middle of a line lets nobody through
on that line, and costs O(depth).

Rejected alternatives: strict FIFO over all requests (head-of-line blocking: one busy file would
stall unrelated calls); "grant whatever fits" (readers starve writers, small requests starve big
ones); per-resource queues with incremental acquisition (deadlocks unless resources are ordered,
and holds resources while waiting).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

from .._checks import check_priority
from .._errors import (
    CapacityError,
    ForeignLeaseError,
    InvalidClaimError,
    LeaseReleaseError,
    UnknownPoolError,
)
from ._keyqueue import KeyQueue
from ._requests import ARRIVALS, Entry, Request, blockers, priority_of, queue_key, strictly_below
from ._resources import Claim, Mode, Pool, canonical_claims, check_capacity, claim_tuple
from ._table_values import LeaseInfo, LeaseTableSnapshot, LeaseTableStatistics
from ._trie import (
    _NO_CHILDREN,
    _NO_IDS,
    BELOW,
    EXCLUSIVE_BELOW,
    EXCLUSIVE_HERE,
    SHARED_BELOW,
    SHARED_HERE,
    Key,
    Node,
    chain_to,
    count_held,
    dequeue,
    earlier,
    earliest_here,
    enqueue,
    hold,
    hold_here,
    move_first,
    nothing_before,
    prune,
    unhold,
)

__all__ = ["LeaseTable", "LeaseInfo", "LeaseTableStatistics", "LeaseTableSnapshot"]

# A module global, read for every claim requested: on Python 3.11 ``Mode.EXCLUSIVE`` goes through
# the enum metaclass's ``__getattr__`` hook (~0.1 us a time).
_EXCLUSIVE = Mode.EXCLUSIVE
_new_object = object.__new__


def _clear_at(node: Node, exclusive: bool, key: Key) -> bool:
    """Whether a claim (exclusive or not) of the request ``key`` may be held at ``node``, its own
    node, as far as the node and what is below it say: nothing held there or below conflicts
    with it, and nothing waits there or below ahead of it that it conflicts with (exclusive
    claims waiting conflict with any claim; shared ones with an exclusive claim)."""
    if node.tree_held_exclusive or (exclusive and node.tree_held_shared):
        return False
    waits = node.waits
    if waits is None:
        return True
    if not (
        nothing_before(waits[EXCLUSIVE_HERE], key) and nothing_before(waits[EXCLUSIVE_BELOW], key)
    ):
        return False
    return not exclusive or (
        nothing_before(waits[SHARED_HERE], key) and nothing_before(waits[SHARED_BELOW], key)
    )


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
        self._root = Node(None)
        # The chain of the claim released last, pruned at the next release of a held claim.
        self._unpruned: list[Node] = [self._root]
        # The lowest node pruned from that chain, reused for the next node made: requests on
        # distinct files of one directory then make no node at all.
        self._spare: Node | None = None
        self._requests: dict[int, Request] = {}
        self._capacity: dict[str, int] = {}
        self._last_id = 0
        self._held_count = 0
        self._shared_claims_held = 0
        self._exclusive_claims_held = 0
        self._examined = 0
        # For each group, the ids of its waiting requests (the last one caps priority).
        self._group_waiting: dict[Hashable, KeyQueue] = {}
        # The entries of recent claim sets, made once (bounded; pools' claims are not kept).
        self._recent_entries: dict[tuple[Claim, ...], tuple[tuple[Entry, ...], int]] = {}
        for name, capacity in (pools or {}).items():
            check_capacity(name, capacity)
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
        """Ids of the requests a waiting request waits behind directly, in queue order.

        These are held leases and earlier waiting requests it conflicts with: on each node its
        claims overlap, the nearest of them (the last exclusive request ahead of it and the shared
        ones after that; the holders there only when no exclusive request on its path waits ahead
        of it). Following ``waits_for`` from these, and from those in turn, reaches every held
        lease and earlier waiting request it conflicts with, so a wait-for cycle shows as a cycle;
        but in a deep queue each request names the one just ahead of it, not all n - 1.

        Empty for a held lease. Costs O(depth) per node with conflicting requests ahead of it,
        plus what it returns.
        """
        request = self._get(lease_id, "look up")
        if request.held:
            return ()
        found: set[int] = set()
        for entry in request.entries:
            blockers(self._root, self._requests, entry, request.key, found)
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
            requests_examined=self._examined,
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
        if len(request.entries) == 1:
            if request.entries[0].pool_units == 0:
                if self._take_lone(request):
                    return request.id
                held = False  # _take_lone is _grantable for such a request
            else:
                held = self._grantable(request)
            if not held:
                self._share_entries(request)
        else:
            held = self._grantable(request)
        self._index(request, held=held)
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
        request = self._request_nowait(claims, priority, group, owner)
        return None if request is None else request.id

    def _request_nowait(
        self, claims: Iterable[Claim], priority: int, group: Hashable, owner: object
    ) -> Request | None:
        """:meth:`request_nowait`, returning the request itself (for ``LockManager``)."""
        request = self._make_request(claims, priority, group, owner)
        if len(request.entries) == 1 and request.entries[0].pool_units == 0:
            if not self._take_lone(request):
                return None
        elif self._grantable(request):
            self._index(request, held=True)
        else:
            return None
        self._requests[request.id] = request
        self._last_id = request.id
        return request

    def release(self, lease_id: int, *, owner: object = None) -> tuple[int, ...]:
        """Release a held lease or withdraw a waiting request; return the ids granted as a result.

        Synchronous. The newly granted requests hold their leases when this returns. Raises
        :class:`LeaseReleaseError` if ``lease_id`` is neither held nor waiting (for example a
        second release), :class:`ForeignLeaseError` if ``owner`` is not the requester's owner;
        either way nothing changes.
        """
        request = self._requests.get(lease_id)
        if request is None:
            raise self._unknown(lease_id, "release")
        if request.owner is not owner:
            raise ForeignLeaseError(
                f"can't release lease {lease_id}: it belongs to {request.owner!r}, not {owner!r}"
            )
        self._unindex(request)
        del self._requests[lease_id]
        if self._held_count == len(self._requests):
            return ()  # nobody waits: the common case, and nobody to let through
        return self._grant(self._let_through(request))

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
        self._unindex(request)
        # Taking the old claims away is what can let others through; asking again can't.
        candidates = self._let_through(request)
        request.claims = replacement.claims
        request.entries = replacement.entries
        request.exclusive_count = replacement.exclusive_count
        granted_now = self._grantable(request)
        self._index(request, held=granted_now)
        granted = self._grant(candidates)
        return (lease_id, *granted) if granted_now else granted

    def set_capacity(self, pool_name: str, capacity: int) -> tuple[int, ...]:
        """Set a pool's capacity; return the ids of waiting requests granted as a result.

        Lowering it below the units held, or below what a waiting request asks for, raises
        :class:`CapacityError` and changes nothing.
        """
        check_capacity(pool_name, capacity)
        node = self._pool_node(pool_name) if self._has_node(pool_name) else None
        if node is not None:
            if node.units_held > capacity:
                raise CapacityError(
                    f"can't set the capacity of pool {pool_name!r} to {capacity}: "
                    f"{node.units_held} units are held"
                )
            largest = max((node.wait_units or {}).values(), default=0)
            if largest > capacity:
                raise CapacityError(
                    f"can't set the capacity of pool {pool_name!r} to {capacity}: "
                    f"a waiting request needs {largest} units"
                )
        self._capacity[pool_name] = capacity
        if node is None:
            return ()
        candidates: set[Key] = set()
        self._front_at(("pool", pool_name), True, None, candidates, set())
        return self._grant(candidates)

    # -- requests ----------------------------------------------------------------------------

    def _get(self, lease_id: int, verb: str) -> Request:
        request = self._requests.get(lease_id)
        if request is None:
            raise self._unknown(lease_id, verb)
        return request

    @staticmethod
    def _unknown(lease_id: int, verb: str) -> LeaseReleaseError:
        return LeaseReleaseError(f"can't {verb} lease {lease_id}: it is not held or waiting")

    def _make_request(
        self, claims: Iterable[Claim], priority: int, group: Hashable, owner: object
    ) -> Request:
        if type(priority) is not int:  # the common case costs one test on the grant path
            try:
                check_priority(priority)
            except ValueError as error:
                raise InvalidClaimError(str(error)) from None
        # A list or tuple (the usual argument) can't be a lone claim or a string: no check.
        kind = type(claims)
        given = tuple(claims) if kind is list or kind is tuple else claim_tuple(claims)
        canonical: tuple[Claim, ...]
        if len(given) == 1 and isinstance(given[0], Claim):
            # A lone claim is already canonical; skip the merge. Unless it is a pool's, its
            # entry costs less to make than to look up.
            claim = given[0]
            resource = claim.resource
            if not isinstance(resource, Pool):
                exclusive = claim.mode is _EXCLUSIVE
                # tuple.__new__ skips the NamedTuple constructor's Python frame.
                lone = (tuple.__new__(Entry, (claim, resource.node, exclusive, 0)),)
                if priority or (group is not None and group in self._group_waiting):
                    return self._new_request(given, lone, int(exclusive), priority, group, owner)
                # Request(...) without the call to its __init__: every lease is made here. At
                # priority 0, with nobody of its group waiting to cap it, its key is its id.
                request = _new_object(Request)
                request.id = request.key = self._last_id + 1
                request.claims = given
                request.entries = lone
                request.exclusive_count = int(exclusive)
                request.priority = 0
                request.group = group
                request.owner = owner
                request.held = False
                request.chains = None
                return request
            canonical = given
        else:
            canonical = canonical_claims(given)
        known = self._recent_entries.get(canonical)
        if known is not None:  # requests queued on one file share their entries
            entries_made, exclusive_count = known
            return self._new_request(
                canonical, entries_made, exclusive_count, priority, group, owner
            )
        entries = []
        exclusive_count = 0
        pooled = False
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
                pooled = True
            entries.append(Entry(claim, resource.node, exclusive, pool_units))
            exclusive_count += exclusive
        made = tuple(entries)
        if not pooled:  # a pool's claims are checked against its capacity, which may change
            if len(self._recent_entries) >= 1024:
                self._recent_entries.clear()
            self._recent_entries[canonical] = (made, exclusive_count)
        return self._new_request(canonical, made, exclusive_count, priority, group, owner)

    def _share_entries(self, request: Request) -> None:
        """Give a waiting request of one claim the entries of others waiting with the same
        claim: a deep queue on one file then costs one entry (granted at once, a lone claim's
        entry is made afresh, which costs less than the look-up)."""
        entry = request.entries[0]
        if isinstance(entry.claim.resource, Pool):
            return  # made through the cache already, or never cached
        known = self._recent_entries.get(request.claims)
        if known is not None:
            request.entries = known[0]
            return
        if len(self._recent_entries) >= 1024:
            self._recent_entries.clear()
        self._recent_entries[request.claims] = (request.entries, request.exclusive_count)

    def _new_request(
        self,
        canonical: tuple[Claim, ...],
        entries: tuple[Entry, ...],
        exclusive_count: int,
        priority: int,
        group: Hashable,
        owner: object,
    ) -> Request:
        effective = priority
        if group is not None:
            waiting = self._group_waiting.get(group)
            if waiting is not None:
                latest = self._requests[waiting.last()]
                effective = min(priority, priority_of(latest.key))
        lease_id = self._last_id + 1
        return Request(
            lease_id,
            canonical,
            entries,
            exclusive_count,
            queue_key(effective, lease_id),
            priority,
            group,
            owner,
        )

    def _info(self, request: Request) -> LeaseInfo:
        return LeaseInfo(
            id=request.id,
            claims=request.claims,
            held=request.held,
            priority=request.priority,
            effective_priority=priority_of(request.key),
            group=request.group,
            waits_for=self.waits_for(request.id),
        )

    # -- the trie ----------------------------------------------------------------------------

    def _has_node(self, pool_name: str) -> bool:
        pools = self._root.children.get("pool")
        return pools is not None and pool_name in pools.children

    def _pool_node(self, pool_name: str) -> Node:
        return self._root.children["pool"].children[pool_name]

    def _index(self, request: Request, *, held: bool) -> None:
        request.held = held
        chains: list[tuple[Entry, list[Node]]] | None = [] if held else None
        for entry in request.entries:
            _, node_key, exclusive, pool_units = entry
            chain = chain_to(self._root, node_key, create=True)
            node = chain[-1]
            if chains is not None:
                chains.append((entry, chain))
                hold(chain, exclusive, request.id)
                node.units_held += pool_units
            else:
                enqueue(chain, exclusive, request.key)
                if pool_units:
                    if node.wait_units is None:
                        node.wait_units = {}
                    node.wait_units[request.id] = pool_units
        if held:
            request.chains = chains
            self._held_count += 1
            self._exclusive_claims_held += request.exclusive_count
            self._shared_claims_held += len(request.entries) - request.exclusive_count
        elif request.group is not None:
            # A requeued request keeps its arrival number, so it may land before the group's
            # last member, which is the one that caps newcomers' priority.
            waiting = self._group_waiting.get(request.group)
            if waiting is None:
                self._group_waiting[request.group] = KeyQueue(request.id)
            else:
                waiting.add(request.id)

    def _unindex(self, request: Request) -> None:
        chains = request.chains
        if chains is not None:
            request.chains = None
            lease_id = request.id
            for entry, chain in chains:
                # unhold(), written out: this is every release.
                node = chain[-1]
                if entry.exclusive:
                    node.exclusive_holder = None
                    for step in chain:
                        step.tree_held_exclusive -= 1
                    self._exclusive_claims_held -= 1
                else:
                    held = node.held_shared
                    del held[lease_id]
                    if not held:
                        node.held_shared = _NO_IDS
                    for step in chain:
                        step.tree_held_shared -= 1
                    self._shared_claims_held -= 1
                    if entry.pool_units:
                        node.units_held -= entry.pool_units
                # Pruning waits a release: the next request is likely to reuse these nodes.
                self._spare = prune(self._unpruned, True) or self._spare
                self._unpruned = chain
            self._held_count -= 1
            return
        for _, node_key, exclusive, pool_units in request.entries:
            chain = chain_to(self._root, node_key, create=False)
            node = chain[-1]
            if request.held:
                unhold(chain, exclusive, request.id)
                node.units_held -= pool_units
            else:
                dequeue(chain, exclusive, request.key)
                if pool_units:
                    assert node.wait_units is not None
                    del node.wait_units[request.id]
                    if not node.wait_units:
                        node.wait_units = None
            prune(chain)
        if request.held:
            self._held_count -= 1
            self._exclusive_claims_held -= request.exclusive_count
            self._shared_claims_held -= len(request.entries) - request.exclusive_count
        elif request.group is not None and self._group_waiting[request.group].remove(request.id):
            del self._group_waiting[request.group]

    # -- granting ----------------------------------------------------------------------------

    def _take_lone(self, request: Request) -> bool:
        """Grant a request of one claim (not a pool's units) if it is grantable, in one walk
        down the trie: :meth:`_grantable` and :meth:`_index` together. False if it must wait
        (the trie is then unchanged)."""
        entry = request.entries[0]
        exclusive = entry.exclusive
        key = request.key
        node = self._root
        chain = [node]
        append = chain.append  # (the bound method once, not at every level)
        names = iter(entry.node_key)
        for name in names:
            # As in _grantable: a strict ancestor of the claim's node.
            if node.exclusive_holder is not None or (exclusive and node.held_shared):
                return False
            if node.waits is not None:
                queues = node.waits
                queue = queues[EXCLUSIVE_HERE]
                if queue is not None and queue.first < key:
                    return False
                queue = queues[SHARED_HERE]
                if exclusive and queue is not None and queue.first < key:
                    return False
            child = node.children.get(name)
            if child is None:
                # Nothing is held or waits at or below the claim's node: make the rest.
                children = node.children
                if children is _NO_CHILDREN:
                    children = node.children = {}
                spare = self._spare
                if spare is None:
                    node = Node(name)
                else:
                    self._spare = None
                    spare.name = name
                    node = spare
                children[name] = node
                append(node)
                for name in names:
                    node.children = {name: (child := Node(name))}
                    node = child
                    append(node)
                break
            node = child
            append(node)
        else:
            if not _clear_at(node, exclusive, key):
                return False
        # hold(), written out: this is every uncontended grant.
        lease_id = request.id
        if exclusive:
            node.exclusive_holder = lease_id
            for step in chain:
                step.tree_held_exclusive += 1
            self._exclusive_claims_held += 1
        else:
            held = node.held_shared
            if held is _NO_IDS:
                node.held_shared = {lease_id: None}
            else:
                held[lease_id] = None
            for step in chain:
                step.tree_held_shared += 1
            self._shared_claims_held += 1
        request.held = True
        request.chains = ((entry, chain),)
        self._held_count += 1
        return True

    def _grantable(self, request: Request) -> bool:
        key = request.key
        for entry in request.entries:
            exclusive = entry.exclusive
            # Walk down from the root, checking each strict ancestor of the claim's node; if the
            # walk runs off the trie, nothing is held or waiting at or below the node.
            node = self._root
            for name in entry.node_key:
                if node.exclusive_holder is not None or (exclusive and node.held_shared):
                    return False
                waits = node.waits
                if waits is not None:
                    queue = waits[EXCLUSIVE_HERE]
                    if queue is not None and queue.first < key:
                        return False
                    queue = waits[SHARED_HERE]
                    if exclusive and queue is not None and queue.first < key:
                        return False
                child = node.children.get(name)
                if child is None:
                    break
                node = child
            else:
                # At the claim's own node: what is held or waits there or below, and units.
                if not _clear_at(node, exclusive, key):
                    return False
                if entry.pool_units and self._units_short(node, entry, key):
                    return False
        return True

    def _units_short(self, node: Node, entry: Entry, key: Key) -> bool:
        """Would the units held, those reserved by earlier waiters, and ``entry``'s exceed the
        pool's capacity?"""
        resource = entry.claim.resource
        assert isinstance(resource, Pool)
        capacity = self._capacity[resource.name]
        reserved = node.units_held + entry.pool_units
        waits = node.waits
        queue = None if waits is None else waits[SHARED_HERE]
        if queue is not None:
            wait_units = node.wait_units
            assert wait_units is not None
            # Every waiter counts at least one unit, so this looks at most at ``capacity`` of them.
            for earlier in queue.after(None):
                if reserved > capacity or not earlier < key:
                    break
                self._examined += 1
                reserved += wait_units[earlier % ARRIVALS]
        return reserved > capacity

    def _grant(self, candidates: set[Key]) -> tuple[int, ...]:
        """Grant every candidate that is grantable; return their ids in queue order.

        Granting a waiter never changes whether another is grantable (see the module docstring),
        so all are checked first and then granted together: a line's front is taken off in one
        go, and the nodes above it learn its new first waiter once.
        """
        self._examined += len(candidates)
        requests = self._requests
        if len(candidates) == 1:  # the front of one line: a deep queue's every release
            (key,) = candidates
            request = requests[key % ARRIVALS]
            if not self._grantable(request):
                return ()
            self._promote([request])
            return (request.id,)
        granted = [
            requests[key % ARRIVALS]
            for key in sorted(candidates)
            if self._grantable(requests[key % ARRIVALS])
        ]
        if granted:
            self._promote(granted)
        return tuple(request.id for request in granted)

    def _promote(self, requests: list[Request]) -> None:
        """Turn waiting requests into held leases (what ``_unindex`` then ``_index`` would)."""
        # The lines taken from, each with the first key it had before: (node id, mode) ->
        # (chain, mode, first key); and the claims granted from each. The claims are counted up
        # the chain once a line, not once a claim: a hand-off to n readers of one file walks
        # its chain once rather than n times.
        lines: dict[tuple[int, bool], tuple[list[Node], bool, Key]] = {}
        granted_from: dict[tuple[int, bool], int] = {}
        # Requests on one resource share their node key, and the trie doesn't change shape
        # here, so each chain is walked once.
        chain_of: dict[tuple[str, ...], list[Node]] = {}
        for request in requests:
            key, lease_id = request.key, request.id
            chains: list[tuple[Entry, list[Node]]] = []
            for entry in request.entries:
                _, node_key, exclusive, pool_units = entry
                chain = chain_of.get(node_key)
                if chain is None:
                    chain = chain_of[node_key] = chain_to(self._root, node_key, create=False)
                chains.append((entry, chain))
                node = chain[-1]
                waits = node.waits
                assert waits is not None
                queue = waits[exclusive]
                assert queue is not None
                line = (id(node), exclusive)
                if line in lines:
                    granted_from[line] += 1
                else:
                    lines[line] = (chain, exclusive, queue.first)
                    granted_from[line] = 1
                if queue.remove(key):
                    waits[exclusive] = None
                if pool_units:
                    assert node.wait_units is not None
                    del node.wait_units[lease_id]
                    if not node.wait_units:
                        node.wait_units = None
                    node.units_held += pool_units
                hold_here(node, exclusive, lease_id)
            if request.group is not None and self._group_waiting[request.group].remove(lease_id):
                del self._group_waiting[request.group]
            request.held = True
            request.chains = chains
            self._held_count += 1
            self._exclusive_claims_held += request.exclusive_count
            self._shared_claims_held += len(request.entries) - request.exclusive_count
        for line, (chain, exclusive, old) in lines.items():
            count_held(chain, exclusive, granted_from[line])
            # (A line below may have emptied this node's ``waits`` already.)
            waits = chain[-1].waits
            queue = None if waits is None else waits[exclusive]
            if queue is None:
                move_first(chain, exclusive + BELOW, old, None)
                if waits == [None, None, None, None]:
                    chain[-1].waits = None
            elif queue.first != old:
                move_first(chain, exclusive + BELOW, old, queue.first)

    def _let_through(self, request: Request) -> set[Key]:
        """The keys of the waiting requests that taking ``request`` out may have let through.

        Call it after unindexing ``request``: for each claim, the fronts of the queues at its
        node, at its ancestors, and below it. A waiting request removed blocked only later ones.
        """
        after = None if request.held else request.key
        candidates: set[Key] = set()
        for entry in request.entries:
            self._let_through_claim(entry, after, candidates)
        return candidates

    def _let_through_claim(self, entry: Entry, after: Key | None, found: set[Key]) -> None:
        exclusive, node_key = entry.exclusive, entry.node_key
        # A shared claim held back only exclusive claims, except unit claims on its own pool.
        frees_shared = exclusive or entry.pool_units > 0
        # What the nodes walked so far do to the claims below them: a shared lease held, and the
        # earliest key waiting (in any mode, in exclusive mode) there.
        shared_held = False
        earliest: Key | None = None
        earliest_exclusive: Key | None = None
        node = self._root
        depth = len(node_key)
        for level in range(depth + 1):
            at_claim = level == depth
            waits = node.waits
            if waits is not None and (
                waits[SHARED_HERE] is not None or waits[EXCLUSIVE_HERE] is not None
            ):
                self._front(
                    node,
                    shared_held,
                    earliest,
                    earliest_exclusive,
                    exclusive or (at_claim and entry.pool_units > 0),
                    after,
                    found,
                )
                earliest, earliest_exclusive = earliest_here(waits, earliest, earliest_exclusive)
            if node.exclusive_holder is not None:
                return  # everything below stays held off
            shared_held = shared_held or bool(node.held_shared)
            if after is not None:
                # Below here, requests after ``after`` stay behind the earliest waiters so far.
                no_exclusive = shared_held or (earliest is not None and earliest < after)
                no_shared = earliest_exclusive is not None and earliest_exclusive < after
                if no_exclusive and (no_shared or not frees_shared):
                    return
            elif shared_held and not frees_shared:
                return
            if at_claim:
                break
            child = node.children.get(node_key[level])
            if child is None:
                return  # nothing waits at or below the claim's node
            node = child
        # Below the claim's node, only nodes whose first waiter of a mode comes before the
        # earliest conflicting waiter on the path can have a front that was let through.
        waits = node.waits
        if waits is None:
            return
        seen: set[int] = set()
        for index in (EXCLUSIVE_BELOW, SHARED_BELOW):
            shared = index == SHARED_BELOW
            firsts = waits[index]
            if firsts is None or (shared and not exclusive) or (not shared and shared_held):
                continue
            bound = earliest_exclusive if shared else earliest
            # Exclusive fronts are first waiters, so they come after ``after``; a shared front
            # may start before it and reach past it.
            for key in firsts.after(None if shared else after):
                if bound is not None and bound < key:
                    break
                self._examined += 1
                for other in self._requests[key % ARRIVALS].entries:
                    if other.exclusive is not shared and strictly_below(other.node_key, node_key):
                        self._front_at(other.node_key, exclusive, after, found, seen)

    def _front_at(
        self,
        node_key: tuple[str, ...],
        want_shared: bool,
        after: Key | None,
        found: set[Key],
        seen: set[int],
    ) -> None:
        """:meth:`_front` of the node at ``node_key``, once for the ids of nodes in ``seen``."""
        shared_held = False
        earliest: Key | None = None
        earliest_exclusive: Key | None = None
        node = self._root
        for name in node_key:
            if node.exclusive_holder is not None:
                return
            shared_held = shared_held or bool(node.held_shared)
            if node.waits is not None:
                earliest, earliest_exclusive = earliest_here(
                    node.waits, earliest, earliest_exclusive
                )
            node = node.children[name]
        if id(node) not in seen:
            seen.add(id(node))
            self._front(node, shared_held, earliest, earliest_exclusive, want_shared, after, found)

    def _front(
        self,
        node: Node,
        shared_held: bool,
        earliest: Key | None,
        earliest_exclusive: Key | None,
        want_shared: bool,
        after: Key | None,
        found: set[Key],
    ) -> None:
        """Add to ``found`` the front of ``node``'s waiting line: the keys after ``after`` whose
        claim at ``node`` conflicts with nothing held and with no earlier waiter.

        The other arguments describe the node's strict ancestors (none of which holds an
        exclusive lease): whether one holds a shared lease, and the earliest key waiting there,
        in any mode and in exclusive mode. Shared (and unit) claims only if ``want_shared``.
        """
        waits = node.waits
        if waits is None:
            return
        shared, exclusive = waits[SHARED_HERE], waits[EXCLUSIVE_HERE]
        if exclusive is not None:
            # Only the first exclusive waiter can be at the front, and only if it comes first.
            key = exclusive.first
            self._examined += 1
            if (
                not (shared_held or node.tree_held_shared or node.tree_held_exclusive)
                and (after is None or after < key)
                and (earliest is None or not earliest < key)
                and (shared is None or not shared.first < key)
                and nothing_before(waits[SHARED_BELOW], key)
                and nothing_before(waits[EXCLUSIVE_BELOW], key)
            ):
                found.add(key)
        if not want_shared or shared is None or node.tree_held_exclusive:
            return
        # Shared claims up to the first exclusive one here, below or above (on a pool: while
        # the units fit).
        limit = earliest_exclusive
        for queue in (exclusive, waits[EXCLUSIVE_BELOW]):
            if queue is not None:
                limit = earlier(limit, queue.first)
        if node.wait_units is not None:
            assert node.name is not None
            capacity = self._capacity[node.name]
            reserved = node.units_held
            for key in shared.after(None):
                if limit is not None and limit < key:
                    break
                self._examined += 1
                reserved += node.wait_units[key % ARRIVALS]
                if reserved > capacity:
                    break
                if after is None or after < key:
                    found.add(key)
            return
        for key in shared.after(after):
            if limit is not None and limit < key:
                break
            self._examined += 1
            found.add(key)

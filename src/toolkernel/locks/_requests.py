"""A request as the lease table keeps it, and whom a waiting request waits behind directly.

The queue key orders requests (priority first, then arrival); ``blockers`` answers
:meth:`LeaseTable.waits_for` for one claim from the nodes of the resource trie (``_trie``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import NamedTuple

import attrs

from ._resources import Claim
from ._trie import EXCLUSIVE_BELOW, EXCLUSIVE_HERE, SHARED_BELOW, SHARED_HERE, Key, Node, chain_to

__all__ = [
    "ARRIVALS",
    "Entry",
    "Request",
    "blockers",
    "nearest_at",
    "priority_of",
    "queue_key",
    "strictly_below",
]

# A request's place in the queue: its arrival number (which is also its id) less its effective
# priority times ARRIVALS, so keys sort by priority (highest first), then arrival. An int rather
# than a pair: it compares faster, and at priority 0 the key is the id itself, so a waiting request
# costs no key object of its own.
ARRIVALS = 1 << 62  # more requests than any table will see


def queue_key(effective_priority: int, lease_id: int) -> Key:
    return lease_id - effective_priority * ARRIVALS if effective_priority else lease_id


def priority_of(key: Key) -> int:
    return -(key // ARRIVALS)


def strictly_below(node_key: tuple[str, ...], ancestor: tuple[str, ...]) -> bool:
    return len(node_key) > len(ancestor) and node_key[: len(ancestor)] == ancestor


class Entry(NamedTuple):
    """One canonical claim with what the hot paths ask of it, worked out once per request."""

    claim: Claim
    node_key: tuple[str, ...]
    exclusive: bool
    pool_units: int
    """The units a shared pool claim counts against its pool; 0 for every other claim."""


@attrs.define(eq=False)
class Request:
    """A held or waiting request: its claims as given and as the hot paths read them."""

    id: int
    claims: tuple[Claim, ...]
    entries: tuple[Entry, ...]
    exclusive_count: int
    key: Key
    priority: int
    group: Hashable
    owner: object
    held: bool = False
    chains: Sequence[tuple[Entry, list[Node]]] | None = None
    """While held: each entry with the trie nodes from the root to its node (held nodes are
    never pruned, so release reuses them rather than walking the trie again)."""


def blockers(
    root: Node, requests: Mapping[int, Request], entry: Entry, key: Key, found: set[int]
) -> None:
    """Add to ``found`` whom one claim of the waiting request ``key`` waits behind directly.

    See :meth:`LeaseTable.waits_for`. The latest exclusive request waiting ahead of it anywhere
    on its path overlaps everything the claim overlaps, so it waits (directly or through
    others) for every holder and every earlier waiter the claim conflicts with: with it named,
    only the waiters after it need naming too.
    """
    exclusive, units = entry.exclusive, entry.pool_units > 0
    chain = chain_to(root, entry.node_key, create=False)
    node = chain[-1]  # the request waits here, so the node exists
    latest: Key | None = None
    for step in chain:
        queue = None if step.waits is None else step.waits[EXCLUSIVE_HERE]
        ahead = None if queue is None else queue.last_before(key)
        if ahead is not None and (latest is None or latest < ahead):
            latest = ahead
    if latest is not None:
        found.add(latest % ARRIVALS)
    for step in chain:
        queue = None if step.waits is None else step.waits[SHARED_HERE]
        if queue is not None and step is node and units:
            # Each unit claim waits for the one before it, which waits for the units held.
            ahead = queue.last_before(key)
            if ahead is not None and (latest is None or latest < ahead):
                found.add(ahead % ARRIVALS)
        elif queue is not None and exclusive:
            for ahead in queue.after(latest):
                if not ahead < key:
                    break
                found.add(ahead % ARRIVALS)
        if latest is None:
            if step.exclusive_holder is not None:
                found.add(step.exclusive_holder)
            if exclusive or (units and step is node):
                found.update(step.held_shared)
    # Below the claim's node: on each node with a conflicting request ahead, the nearest.
    waits = node.waits
    if waits is not None:
        seen: set[int] = set()
        for index in (EXCLUSIVE_BELOW, SHARED_BELOW):
            shared = index == SHARED_BELOW
            firsts = waits[index]
            if firsts is None or (shared and not exclusive):
                continue
            for first in firsts.after(None):
                if not first < key:
                    break
                for other in requests[first % ARRIVALS].entries:
                    if other.exclusive is shared or not strictly_below(
                        other.node_key, entry.node_key
                    ):
                        continue
                    below = chain_to(root, other.node_key, create=False)[-1]
                    if id(below) not in seen:
                        seen.add(id(below))
                        nearest_at(below, exclusive, key, latest, found)
    if latest is None:
        found.update(node.held_below(exclusive_only=not exclusive))


def nearest_at(node: Node, exclusive: bool, key: Key, latest: Key | None, found: set[int]) -> None:
    """Add the requests waiting at ``node`` (below a claim) between ``latest`` and ``key``
    that the claim waits behind directly: the last exclusive one, and the shared ones after
    it if the claim is exclusive."""
    waits = node.waits
    assert waits is not None
    queue = waits[EXCLUSIVE_HERE]
    nearest = None if queue is None else queue.last_before(key)
    if nearest is not None and (latest is None or latest < nearest):
        found.add(nearest % ARRIVALS)
        latest = nearest
    queue = waits[SHARED_HERE]
    if exclusive and queue is not None:
        for ahead in queue.after(latest):
            if not ahead < key:
                break
            found.add(ahead % ARRIVALS)

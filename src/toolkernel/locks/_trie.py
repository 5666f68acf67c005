"""The lease table's index: a trie over resource nodes, with what is held and waits at each.

A node knows the leases held at exactly it (ids, by mode), how many claims are held at it and
below it, and, once anyone waits at it or below it, four queues of keys (``Node.waits``): its own
waiting lines, shared and exclusive, and for every node below it with waiters, the first key of
each mode there. The functions here keep those in step as claims are held, queued and dropped;
they decide nothing. Nodes exist only while something is held or waited for at or below them,
and for the nodes of the claim released last, kept until the next release (a path released is
often asked for again, and its directories are shared with the next path).
"""

from __future__ import annotations

from collections.abc import Iterator

from ._keyqueue import KeyQueue

__all__ = [
    "BELOW",
    "EXCLUSIVE_BELOW",
    "EXCLUSIVE_HERE",
    "Key",
    "Node",
    "SHARED_BELOW",
    "SHARED_HERE",
    "chain_to",
    "count_held",
    "dequeue",
    "earlier",
    "earliest_here",
    "enqueue",
    "hold",
    "hold_here",
    "move_first",
    "nothing_before",
    "prune",
    "unhold",
]

# A request's place in the queue (see ``_table``): smaller is earlier.
Key = int

# The four queues of ``Node.waits``: the node's own waiting lines, by mode, and the first waiting
# key of each mode on every node below it. ``BELOW`` turns one into the other.
SHARED_HERE, EXCLUSIVE_HERE, SHARED_BELOW, EXCLUSIVE_BELOW = 0, 1, 2, 3
BELOW = 2

# Never written to: see Node.__init__.
_NO_CHILDREN: dict[str, Node] = {}
_NO_IDS: dict[int, None] = {}


class Node:
    """One node of the resource trie, with what is held and what waits at it and below it."""

    __slots__ = (
        "children",
        "exclusive_holder",
        "held_shared",
        "name",
        "tree_held_exclusive",
        "tree_held_shared",
        "units_held",
        "wait_units",
        "waits",
    )

    def __init__(self, name: str | None) -> None:
        self.name = name
        # The dicts start as shared empty ones, replaced by a node's own on its first write and
        # shared again once empty: most nodes are leaves that hold in one mode, and an empty dict
        # costs 64 bytes.
        self.children: dict[str, Node] = _NO_CHILDREN
        # Ids of granted leases holding a shared claim at exactly this node, and the id of the
        # one holding an exclusive claim there (safety allows one at most, so no dict for it).
        self.held_shared: dict[int, None] = _NO_IDS
        self.exclusive_holder: int | None = None
        # Counts of held claims at this node and anywhere below it.
        self.tree_held_shared = 0
        self.tree_held_exclusive = 0
        # None while nobody waits at or below this node (most nodes only ever hold leases);
        # else four queues of keys, indexed by SHARED_HERE and the rest: the keys of the shared
        # (exclusive) claims waiting at exactly this node, and for each node below it where
        # shared (exclusive) claims wait, the first of their keys. Each queue is None when empty.
        self.waits: list[KeyQueue | None] | None = None
        # Pool nodes only: units held, and units wanted by each waiting request id.
        self.units_held = 0
        self.wait_units: dict[int, int] | None = None

    def held_below(self, exclusive_only: bool) -> Iterator[int]:
        """Ids of the leases held at this node and below it (exclusive ones only, if asked)."""
        stack = [self]
        while stack:
            node = stack.pop()
            if node.exclusive_holder is not None:
                yield node.exclusive_holder
            if not exclusive_only:
                yield from node.held_shared
            for child in node.children.values():
                if child.tree_held_exclusive or (not exclusive_only and child.tree_held_shared):
                    stack.append(child)


def chain_to(root: Node, node_key: tuple[str, ...], create: bool) -> list[Node]:
    """The nodes from ``root`` down to ``node_key``; stops early if absent and not creating."""
    node = root
    chain = [node]
    for name in node_key:
        child = node.children.get(name)
        if child is None:
            if not create:
                break
            if node.children is _NO_CHILDREN:
                node.children = {}
            child = node.children[name] = Node(name)
        node = child
        chain.append(node)
    return chain


def prune(chain: list[Node], kept: bool = False) -> Node | None:
    """Drop the empty nodes at the end of ``chain``, bottom-up, so the trie only holds what is
    held or waited for. Return the lowest node dropped, if any (it is as ``Node`` makes one,
    but for its name).

    A ``kept`` chain (one kept from an earlier release) may have lost nodes since: the walk
    stops at a node no longer in the trie (pruned since, perhaps replaced by a new node of its
    name).
    """
    dropped = None
    depth = len(chain) - 1
    while depth:
        node = chain[depth]
        if (
            node.children
            or node.tree_held_shared
            or node.tree_held_exclusive
            or node.waits is not None
        ):
            break
        parent = chain[depth - 1]
        children = parent.children
        name = node.name
        assert name is not None
        if kept and children.get(name) is not node:
            break
        del children[name]
        if dropped is None:
            dropped = node
        if children:
            break  # the parent keeps other children, so it stays
        parent.children = _NO_CHILDREN
        depth -= 1
    return dropped


def earlier(a: Key | None, b: Key | None) -> Key | None:
    """The earlier of two keys, None standing for "no key"."""
    if a is None:
        return b
    if b is None or a < b:
        return a
    return b


def nothing_before(queue: KeyQueue | None, key: Key) -> bool:
    """Is ``queue`` empty or ``key`` not after its first key?"""
    return queue is None or not queue.first < key


def earliest_here(
    waits: list[KeyQueue | None], earliest: Key | None, earliest_exclusive: Key | None
) -> tuple[Key | None, Key | None]:
    """``earliest`` and ``earliest_exclusive`` (keys waiting in any mode, in exclusive mode),
    made earlier by the keys waiting at the node of ``waits``."""
    queue = waits[EXCLUSIVE_HERE]
    if queue is not None:
        earliest_exclusive = earlier(earliest_exclusive, queue.first)
        earliest = earlier(earliest, queue.first)
    queue = waits[SHARED_HERE]
    if queue is not None:
        earliest = earlier(earliest, queue.first)
    return earliest, earliest_exclusive


def hold(chain: list[Node], exclusive: bool, lease_id: int) -> None:
    """Record a granted claim at the node ``chain`` ends at, and count it on the way there."""
    hold_here(chain[-1], exclusive, lease_id)
    count_held(chain, exclusive, 1)


def hold_here(node: Node, exclusive: bool, lease_id: int) -> None:
    """Record a granted claim at ``node`` without counting it: :func:`hold` less
    :func:`count_held`, for a caller that counts many claims at once."""
    if exclusive:
        node.exclusive_holder = lease_id
    else:
        if node.held_shared is _NO_IDS:
            node.held_shared = {}
        node.held_shared[lease_id] = None


def count_held(chain: list[Node], exclusive: bool, claims: int) -> None:
    """Count ``claims`` more claims held in one mode at the node ``chain`` ends at, on every
    node of the chain."""
    if exclusive:
        for step in chain:
            step.tree_held_exclusive += claims
    else:
        for step in chain:
            step.tree_held_shared += claims


def unhold(chain: list[Node], exclusive: bool, lease_id: int) -> None:
    """The undo of :func:`hold`."""
    node = chain[-1]
    if exclusive:
        node.exclusive_holder = None
        for step in chain:
            step.tree_held_exclusive -= 1
    else:
        del node.held_shared[lease_id]
        if not node.held_shared:
            node.held_shared = _NO_IDS
        for step in chain:
            step.tree_held_shared -= 1


def enqueue(chain: list[Node], index: int, key: Key) -> None:
    """Add ``key`` to queue ``index`` (SHARED_HERE or EXCLUSIVE_HERE) of the node ``chain``
    ends at, and keep its ancestors' first-waiter keys in step."""
    node = chain[-1]
    waits = node.waits
    if waits is None:
        waits = node.waits = [None, None, None, None]
    queue = waits[index]
    if queue is None:
        waits[index] = KeyQueue(key)
        move_first(chain, index + BELOW, None, key)
        return
    old = queue.first
    queue.add(key)
    if queue.first != old:
        move_first(chain, index + BELOW, old, key)


def dequeue(chain: list[Node], index: int, key: Key) -> None:
    """Take ``key`` out of queue ``index`` of the node ``chain`` ends at (the undo of
    :func:`enqueue`)."""
    node = chain[-1]
    waits = node.waits
    assert waits is not None
    queue = waits[index]
    assert queue is not None
    old = queue.first
    if queue.remove(key):
        waits[index] = None
        if waits == [None, None, None, None]:
            node.waits = None
        move_first(chain, index + BELOW, old, None)
    elif queue.first != old:
        move_first(chain, index + BELOW, old, queue.first)


def move_first(chain: list[Node], index: int, old: Key | None, new: Key | None) -> None:
    """The first key of one mode waiting at the node ``chain`` ends at went from ``old`` to
    ``new`` (either may be None): update queue ``index`` (a BELOW one) of every ancestor."""
    for depth in range(len(chain) - 1):
        node = chain[depth]
        waits = node.waits
        if waits is None:
            waits = node.waits = [None, None, None, None]
        firsts = waits[index]
        if old is None:
            assert new is not None
            if firsts is None:
                waits[index] = KeyQueue(new)
            else:
                firsts.add(new)
            continue
        assert firsts is not None  # it holds ``old``
        if new is not None:
            firsts.replace(old, new)
        elif firsts.remove(old):
            waits[index] = None
            if waits == [None, None, None, None]:
                node.waits = None

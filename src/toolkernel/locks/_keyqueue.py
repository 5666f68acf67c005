"""A sorted queue of keys that is cheap at both ends: the lease table's per-node waiting lines.

The lease table keeps, for every resource node, the keys of the requests waiting there, earliest
first. Keys mostly arrive in order (an arrival counter) and mostly leave from the front (grants
go in queue order; ``cancel_all`` withdraws in arrival order), so a plain sorted list would pay a
``memmove`` of the whole list on every grant: quadratic over a deep queue. Here the list keeps a
*head* index instead: leaving from the front moves the index, and the dead prefix is dropped once
it is half the list. Adding at the back is an ``append``; adding or removing elsewhere moves the
shorter side of the list. Nothing here knows what a key means beyond its order.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator

__all__ = ["KeyQueue"]

# A dead prefix shorter than this is never worth a copy to drop.
_COMPACT_AFTER = 32


class KeyQueue:
    """Distinct int keys in ascending order; never empty (holders keep ``None`` for no queue).

    ``first`` is the smallest key. Example::

        >>> queue = KeyQueue(5)
        >>> queue.add(9); queue.add(7)
        >>> queue.remove(5)
        False
        >>> queue.first, list(queue.after(None))
        (7, [7, 9])
    """

    __slots__ = ("_head", "_items", "first")

    def __init__(self, first: int) -> None:
        self._items: list[int] = [first]
        self._head = 0
        self.first: int = first

    def __len__(self) -> int:
        return len(self._items) - self._head

    def add(self, key: int) -> None:
        """Insert ``key`` (not already present) in its place."""
        items, head = self._items, self._head
        if items[-1] < key:
            items.append(key)
            return
        i = bisect_left(items, key, head)
        if i == head:
            if head:
                head = self._head = head - 1  # reuse a dead slot in front
                items[head] = key
            else:
                items.insert(0, key)
            self.first = key
        else:
            items.insert(i, key)

    def remove(self, key: int) -> bool:
        """Take ``key`` (which must be present) out; return True if the queue is now empty."""
        items, head = self._items, self._head
        if items[head] == key:
            head += 1
        elif items[-1] == key:
            items.pop()
        else:
            i = bisect_left(items, key, head)
            if i - head < len(items) - i:
                items[head + 1 : i + 1] = items[head:i]  # shift the front part up by one
                head += 1
            else:
                del items[i]
        if head == len(items):
            return True
        if head >= _COMPACT_AFTER and 2 * head >= len(items):
            del items[:head]
            head = 0
        self._head = head
        self.first = items[head]
        return False

    def replace(self, old: int, new: int) -> None:
        """Swap ``old`` (present) for ``new`` (absent)."""
        if len(self._items) - self._head == 1:
            self._items[self._head] = new
            self.first = new
        else:
            self.remove(old)  # leaves a key, so the queue stays valid for the add
            self.add(new)

    def last_before(self, key: int) -> int | None:
        """The largest key smaller than ``key``, or None."""
        i = bisect_left(self._items, key, self._head)
        return self._items[i - 1] if i > self._head else None

    def after(self, key: int | None) -> Iterator[int]:
        """The keys greater than ``key`` (all of them for None), in order.

        A generator over the live list: do not change the queue while iterating.
        """
        items = self._items
        start = self._head if key is None else bisect_right(items, key, self._head)
        for i in range(start, len(items)):
            yield items[i]

    def last(self) -> int:
        """The largest key."""
        return self._items[-1]

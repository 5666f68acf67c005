"""Lease-wait deadlines: a heap with lazy deletion, the shape of trio's own ``Deadlines``.

A queued call may have a limit on how long it waits for its leases. Thousands of calls can wait
at once, and most of them are granted (or cancelled) long before their deadline, so removing a
deadline must be cheap and finding the next one must not scan every waiting call. An entry is
never taken out of the heap when its call stops waiting: each entry carries a token, the item
keeps the token of its one live entry, and an entry whose token the item no longer holds is
*stale* and skipped when it reaches the top. When more than half the heap is stale it is
rebuilt, so the heap stays within about twice the number of live deadlines. Pure: no clock, no
trio.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Deadlines"]

T = TypeVar("T")


class Deadlines(Generic[T]):
    """Deadlines of items; ``token_of(item)`` is the token of the item's live entry (or 0).

    ::

        deadlines = Deadlines(lambda record: record.wait_token)
        record.wait_token = deadlines.add(5.0, record)
        deadlines.next_deadline()              # 5.0
        record.wait_token = 0; deadlines.discard()   # it was granted: the entry goes stale
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

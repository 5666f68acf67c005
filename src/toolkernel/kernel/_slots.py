"""Concurrency slots: at most ``max_concurrency`` top-level calls run at once. Pure.

A call takes a slot when its leases are granted; if none is free it waits, holding its leases,
and slots go to waiting calls by priority, then in the order their leases were granted. Holding
the leases while waiting for a slot loses nothing: a conflicting call could not run before it
anyway (the lease table hands leases out in order). A running call may wait for those leases,
though, through a nested call or a batch its tool awaits; the scheduler then runs the waiting
call in the slot of the call awaiting it (``lend``), as it runs an awaited batch's calls, so no
cycle forms through a slot.

Slots are kept apart from the lease table (not as a pool every call claims a unit of): a slot is
a counter and a line, while a pool unit per call would make every call of a large batch a
waiter in the table, to be scanned and granted one by one (benchmarks/overhead.py measured the
table's pool at three times the cost of the rest of a call).
"""

from __future__ import annotations

import bisect
from collections import deque

from ._record import CallRecord

__all__ = ["Slots", "NO_SLOT", "WAITING", "HOLDING"]

NO_SLOT, WAITING, HOLDING = 0, 1, 2
"""``CallRecord.slot``: none, waiting for one, holding one."""


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
        if self._free is None:
            record.slot = HOLDING
            return True
        if self._free > 0:
            self._free -= 1
            record.slot = HOLDING
            return True
        record.slot = WAITING
        priority = record.call.priority
        line = self._lines.get(priority)
        if line is None:
            line = self._lines[priority] = deque()
            bisect.insort(self._priorities, -priority)
        line.append(record)
        return False

    def lend(self, record: CallRecord) -> None:
        """``record``, waiting, runs in the slot of a call that awaits it: it leaves the line
        (skipped when reached) and holds no slot of its own."""
        assert record.slot == WAITING
        record.slot = NO_SLOT

    def give_back(self, record: CallRecord) -> CallRecord | None:
        """``record`` is done with its slot or its place in line; returns the call the freed
        slot goes to, if any (it now holds it)."""
        held, record.slot = record.slot, NO_SLOT
        if held != HOLDING or self._free is None:
            return None
        while self._priorities:
            priority = -self._priorities[0]
            line = self._lines[priority]
            while line:
                nxt = line.popleft()
                if nxt.slot == WAITING:
                    nxt.slot = HOLDING
                    return nxt
            del self._lines[priority]
            del self._priorities[0]
        self._free += 1
        return None

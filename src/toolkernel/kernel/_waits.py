"""Who waits for whom: the wait-for graph of calls, its cycles, and how a wait is described.

A queued call waits for the calls whose leases (held, or requested earlier) it conflicts with; a
running call waits for the nested calls it is awaiting, and for the calls of batches its tool
submitted to its own kernel and awaits. Top-level calls alone can never deadlock (a waiting
request holds nothing), so every cycle passes through a running call awaiting one of those, and
a cycle means nobody in it can ever move. A call waiting for a slot holds its leases but waits
for no call in particular: the scheduler runs it in the slot of an awaiting call whose wait
reaches it (``slot_waiters_behind``), so it closes no cycle. Pure: it reads the lease tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..locks import Claim, Pool, claims_conflict
from ._record import CallRecord
from ._slots import WAITING

__all__ = [
    "waits_for",
    "find_cycle",
    "deadlocked",
    "slot_waiters_behind",
    "contested",
    "contested_alone",
    "slot_wait",
    "describe_waits",
]


def waits_for(record: CallRecord) -> list[CallRecord]:
    """The calls ``record`` waits for right now (none if it waits for nothing)."""
    group = record.waiting_in
    if group is not None:
        lease_id = next(i for g, i in record.leases() if g is group)
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
        if record.waiting_in is None or record.result is not None:
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
                if nxt.slot == WAITING:
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
    mine = record.claims or ()
    found: list[str] = []
    for other in waits_for(record) if behind is None else behind:
        for claim in mine:
            for theirs in other.claims or ():
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

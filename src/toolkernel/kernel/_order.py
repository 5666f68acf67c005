"""Emission order: which ready calls of a batch may ask for their leases now. Pure.

The lease table is FIFO among conflicting requests, so a batch's calls keep the model's order
if they *request* in that order. But calls become ready at different times (a before-hook or an
approval may take a while, ``after=`` may hold one back), so a call does not request while an
earlier call of its batch that may conflict with it is still pending: an approval for one call
never lets a later conflicting call jump ahead of it. Calls that cannot conflict with anything
earlier and pending request at once.

A call whose before-hooks have not all answered may conflict with anything: a hook may rewrite
its arguments, and with them its claims.

One exception: ``after=`` wins over emission order. If holding a call back for an earlier one
would make the earlier one wait (through ``after=`` and this very rule) for the held-back call,
as in ``[edit(a, after=c2), c2: edit(a)]``, the later call goes first.
"""

from __future__ import annotations

from itertools import takewhile

from ..locks import Claim, claims_conflict
from ._call import CallState
from ._record import HOOKED, READY, Batch, CallRecord

__all__ = ["next_requests", "may_conflict"]


def next_requests(batch: Batch) -> list[CallRecord]:
    """The calls of ``batch`` that may request their leases now, in emission order; they are
    taken out of ``batch.unrequested``. Calls no longer pending are dropped from it too."""
    unrequested = batch.unrequested
    if not unrequested:  # every call of the batch has asked already
        return []
    # Calls past the last ready one would only be added to ``ahead``: leave them unvisited.
    last = batch.last_ready
    head = batch.head
    while head <= last and head not in unrequested:
        head += 1
    batch.head = head
    if head > last:
        return []  # no call up to the last ready one is left to ask
    if head == last:
        # The common case (a batch being submitted, a call after its turn came): the only call
        # to visit is the last ready one, and nobody of the batch is ahead of it.
        record = unrequested[head]
        if record.stage is READY:
            del unrequested[head]
            return [record]
        if record.state is not CallState.PENDING:
            del unrequested[head]
        return []
    ahead: list[CallRecord] = []
    found: list[CallRecord] = []
    for record in list(takewhile(lambda r: r.uid <= last, unrequested.values())):
        if record.state is not CallState.PENDING:
            del unrequested[record.uid]
        elif record.stage is READY and not any(holds_back(earlier, record) for earlier in ahead):
            del unrequested[record.uid]
            found.append(record)
        else:
            ahead.append(record)
    return found


def holds_back(earlier: CallRecord, record: CallRecord) -> bool:
    """Whether ``earlier``, a pending call of the batch, keeps ``record`` from requesting.

    It does if they may conflict, unless ``earlier`` may itself be waiting for ``record``
    (through ``after=`` and this very rule): holding ``record`` back would then deadlock.
    """
    if not may_conflict(record.claims, _known_claims(earlier)):
        return False
    return not (record.batch.has_deps and _may_wait_for(earlier, record))


def _may_wait_for(start: CallRecord, target: CallRecord) -> bool:
    """True if ``start`` may wait for ``target`` along ``after=`` edges and hold-backs."""
    batch = start.batch
    seen = {start.uid}
    stack = [start]
    while stack:
        current = stack.pop()
        # Dependencies that requested already, or live in older batches, wait in the lease
        # table only for requests older than ``target``'s (which has not requested): skip them.
        following = [
            batch.unrequested[uid] for uid in current.deps_left or () if uid in batch.unrequested
        ]
        for other in batch.unrequested.values():
            if other.uid >= current.uid:
                break
            if other.state is CallState.PENDING and may_conflict(
                _known_claims(current), _known_claims(other)
            ):
                following.append(other)
        for nxt in following:
            if nxt is target:
                return True
            if nxt.uid not in seen:
                seen.add(nxt.uid)
                stack.append(nxt)
    return False


def _known_claims(record: CallRecord) -> tuple[Claim, ...] | None:
    """A pending call's claims, or None while a before-hook may still rewrite its arguments
    (and so its claims): until then it may conflict with anything."""
    return None if record.stage is HOOKED else record.claims


def may_conflict(claims: tuple[Claim, ...] | None, earlier: tuple[Claim, ...] | None) -> bool:
    """Whether two claim sets may conflict (unknown claims may conflict with anything)."""
    if claims is None or earlier is None:
        return True
    return any(claims_conflict(a, b) for a in claims for b in earlier)

"""Nested calls: calls a running tool makes through ``ctx.call``. The scheduler's decisions
about them, kept apart from those about top-level calls. Pure: no event loop.

A nested call is admitted like any call but runs inline, in its parent's task (the async layer
awaits its grant, then runs it). Claims its parent's leases cover are requested in the parent's
own lease group, so siblings still exclude each other; the rest from the kernel at a raised
priority. Only the waits of calls a running call awaits (nested calls, and calls its tool
submitted to its own kernel) can close a wait-for cycle (a waiting top-level request holds
nothing), so only they are checked, whenever any request starts waiting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..locks import Claim
from . import _messages as messages
from ._call import CANCELLED, ERROR, CallState, Status, ToolCall
from ._causes import CancelReason, Why
from ._events import CallEvent, CallQueued
from ._leasing import Leasing
from ._record import QUEUED, CallRecord, Stage
from ._report import Reporter

__all__ = ["NestedCalls", "Host"]


class Host(Protocol):
    """What nested calls need of the scheduler they are part of."""

    leasing: Leasing
    report: Reporter

    def now(self) -> float: ...

    def admit_alone(
        self, call: ToolCall, parent: CallRecord
    ) -> tuple[CallRecord, BaseException | None]:
        """Admit ``call`` as a batch of its own, made inside ``parent``: its record, and why
        admission failed (None if it did not)."""

    def move(self, record: CallRecord, stage: Stage, now: float) -> None: ...

    def tell(self, record: CallRecord, event: CallEvent) -> None:
        """Have the async layer give ``event`` to the listeners once this operation returns."""

    def blocked(self, record: CallRecord) -> None:
        """``record`` waits: tally it, and say so if anyone listens."""

    def interrupt(self, record: CallRecord) -> None:
        """Ask the async layer to cancel the task running ``record``, if one does."""

    def fail(self, record: CallRecord, status: Status, exception: BaseException) -> None:
        """Finish ``record`` with ``status`` and the exception that says why."""

    def request_nested_leases(
        self, record: CallRecord, claims: tuple[Claim, ...], inside: bool
    ) -> None:
        """Request ``record``'s claims, granting them at once if they are free."""

    def lend_slots(self) -> None:
        """Start the calls waiting for a slot that a watched wait reaches, each in the slot of
        the call awaiting (a wait through a slot would otherwise close a cycle)."""


class NestedCalls:
    """The scheduler's decisions about nested calls."""

    def __init__(self, host: Host, max_depth: int) -> None:
        self._host = host
        self._max_depth = max_depth

    def admit(self, parent: CallRecord, name: str, arguments: Mapping[str, Any]) -> CallRecord:
        """Admit a call made from inside ``parent``'s tool; it may come back finished."""
        host = self._host
        parent.nested_count += 1
        call = ToolCall(
            f"{parent.call.id}.{parent.nested_count}",
            name,
            dict(arguments),
            priority=parent.call.priority,
            agent=parent.call.agent,  # on behalf of the same agent, as the same kind of caller
            read_first=parent.call.read_first,
        )
        record, failure = host.admit_alone(call, parent)
        if host.report.listeners:
            event = CallQueued(call.id, name, record.queued_at, record.claims or (), parent.call.id)
            host.tell(record, event)
        if failure is None and record.depth > self._max_depth:
            failure = messages.too_deep(parent.call.id, parent.name, name, self._max_depth)
        if failure is not None:
            host.fail(record, ERROR, failure)
            return record
        if parent.awaiting is None:
            parent.awaiting = set()
        parent.awaiting.add(record)
        return record

    def request(self, record: CallRecord, claims: tuple[Claim, ...], inside: bool) -> None:
        """Request a nested call's claims: within its parent's lease group, or from the kernel
        at a raised priority. Its parent's task is woken when it may go on: granted, or
        finished (a wait that would deadlock fails at once)."""
        host = self._host
        if record.state is CallState.PENDING:
            host.move(record, QUEUED, host.now())
        host.request_nested_leases(record, claims, inside)
        if record.waiting_in is not None:
            self.break_wait_cycles()  # this wait may close a cycle: then it fails at once
            if record.waiting_in is not None:
                host.blocked(record)

    def end(self, record: CallRecord) -> None:
        """The parent's task is done with this nested call, whatever happened to it."""
        parent = record.parent
        assert parent is not None
        if parent.awaiting is not None:
            parent.awaiting.discard(record)
        if record.result is None:  # the parent was cancelled while this call waited or ran
            reason = record.cancel_reason or CancelReason(Why.WITH_PARENT, parent.call.id)
            self._host.fail(record, CANCELLED, messages.cancelled(reason))

    def end_children(self, parent: CallRecord) -> None:
        """``parent``'s leases are going while nested calls it started are still in flight (its
        tool returned without awaiting them, say from a background task): they ran inside
        those leases, so they end now, CANCELLED, before the leases go."""
        host = self._host
        for child in sorted(parent.awaiting or (), key=lambda r: r.uid):
            if child.parent is not parent:
                continue  # a call of a batch its tool submitted: it holds leases of its own
            if child.cancel_reason is None:
                child.cancel_reason = CancelReason(Why.PARENT_ENDED, parent.call.id, parent.name)
            host.interrupt(child)  # its task unwinds; its result is given now
            host.fail(child, CANCELLED, messages.cancelled(child.cancel_reason))

    def break_wait_cycles(self) -> None:
        """Fail every awaited waiting call whose wait closes a cycle, whenever a request starts
        waiting: a cycle can close after such a call began its wait (a higher-priority
        request queues ahead of someone in it). Only awaited calls can close one."""
        for record, chain in self._host.leasing.deadlocked():
            owner = record.parent or record.batch.awaited_by
            parent_id = owner.call.id if owner is not None else None
            self._host.fail(record, ERROR, messages.deadlock(chain, parent_id))
        self._host.lend_slots()

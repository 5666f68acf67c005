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

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..locks import Claim
from . import _messages as messages
from ._call import CANCELLED, ERROR, PENDING, QUEUED, CallState, Status, ToolCall
from ._events import CallQueued
from ._record import Batch, CallRecord

if TYPE_CHECKING:
    from ._leasing import Leasing
    from ._report import Reporter

__all__ = ["NestedCalls"]


class NestedCalls:
    """The part of :class:`~toolkernel.kernel._scheduler.Scheduler` that decides about nested
    calls (a base class of it: it uses the scheduler's state and its way out, ``finish``)."""

    if TYPE_CHECKING:
        _serial: int
        _max_depth: int
        _now: Callable[[], float]
        leasing: Leasing
        report: Reporter

        def _new_record(
            self,
            call: ToolCall,
            batch: Batch,
            now: float,
            in_order: bool = False,
            parent: CallRecord | None = None,
        ) -> CallRecord: ...

        def _admit(self, record: CallRecord) -> BaseException | None: ...

        def _move(self, record: CallRecord, state: CallState, now: float) -> None: ...

        def finish_failed(
            self, record: CallRecord, status: Status, exception: BaseException
        ) -> None: ...

    def admit_nested(
        self, parent: CallRecord, name: str, arguments: Mapping[str, Any]
    ) -> CallRecord:
        """Admit a call made from inside ``parent``'s tool; it may come back finished."""
        parent.nested_count += 1
        call = ToolCall(
            f"{parent.call.id}.{parent.nested_count}",
            name,
            dict(arguments),
            priority=parent.call.priority,
        )
        self._serial += 1
        batch = Batch(self._serial, 1, self._serial + 1)
        record = self._new_record(call, batch, self._now(), True, parent)
        failure = self._admit(record)
        if self.report.listeners:
            event = CallQueued(call.id, name, record.queued_at, record.claims or (), parent.call.id)
            self.report.emit(record, event)
        if failure is None and record.depth > self._max_depth:
            failure = messages.too_deep(parent.call.id, parent.name, name, self._max_depth)
        if failure is not None:
            self.finish_failed(record, ERROR, failure)
            return record
        if parent.awaiting is None:
            parent.awaiting = set()
        parent.awaiting.add(record)
        return record

    def request_nested(self, record: CallRecord, claims: tuple[Claim, ...], inside: bool) -> None:
        """Request a nested call's claims: within its parent's lease group, or from the kernel
        at a raised priority. Its ``granted`` signal is set when the parent's task may go on:
        granted, or finished (a wait that would deadlock fails at once)."""
        if record.state is PENDING:
            self._move(record, QUEUED, self._now())
        self.leasing.request_nested(record, claims, inside)
        if record.waiting_in is not None:
            self._break_wait_cycles()  # this wait may close a cycle: then it fails at once
            if record.waiting_in is not None:
                self.report.blocked(record, self._now())

    def end_nested(self, record: CallRecord) -> None:
        """The parent's task is done with this nested call, whatever happened to it."""
        parent = record.parent
        assert parent is not None
        if parent.awaiting is not None:
            parent.awaiting.discard(record)
        if record.result is None:  # the parent was cancelled while this call waited or ran
            reason = record.cancel_reason or f"cancelled with its parent call {parent.call.id}"
            self.finish_failed(record, CANCELLED, messages.cancelled(reason))

    def end_children(self, parent: CallRecord) -> None:
        """``parent``'s leases are going while nested calls it started are still in flight (its
        tool returned without awaiting them, say from a background task): they ran inside
        those leases, so they end now, CANCELLED, before the leases go."""
        for child in sorted(parent.awaiting or (), key=lambda r: r.uid):
            if child.parent is not parent:
                continue  # a call of a batch its tool submitted: it holds leases of its own
            if child.cancel_reason is None:
                child.cancel_reason = (
                    f"cancelled: its parent call {parent.call.id} ({parent.name}) ended first; "
                    f"a tool must await the calls it makes before it returns"
                )
            if child.scope is not None:
                child.scope.cancel()  # its task unwinds; its result is given now
            self.finish_failed(child, CANCELLED, messages.cancelled(child.cancel_reason))

    def _break_wait_cycles(self) -> None:
        """Fail every awaited waiting call whose wait closes a cycle, whenever a request starts
        waiting: a cycle can close after such a call began its wait (a higher-priority
        request queues ahead of someone in it). Only awaited calls can close one."""
        for record, chain in self.leasing.deadlocked():
            owner = record.parent or record.batch.awaited_by
            parent_id = owner.call.id if owner is not None else None
            self.finish_failed(record, ERROR, messages.deadlock(chain, parent_id))

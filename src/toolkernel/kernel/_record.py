"""What the kernel keeps about calls and batches while they are alive. Pure data.

The scheduler (``_scheduler.py``) owns these and decides every change to them. The async layer
(``_kernel.py``) keeps its own objects (cancel scopes, events to wait on) itself, by record, and
hangs nothing on them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import attrs

from .._errors import IllegalTransitionError
from ..locks import Claim, LeaseTable, Path
from ._ahead import Ahead, ChangedMeanwhile
from ._call import CallState, ToolCall, ToolResult
from ._events import CallEvent
from ._messages import CancelReason, RootCause
from ._protocol import KernelTool

__all__ = ["CallRecord", "Batch", "Hold", "LeaseGroup", "Stage", "MOVES", "illegal_move"]

NO_ARGUMENTS: Mapping[str, Any] = MappingProxyType({})


class Stage(enum.Enum):
    """Where a call is: the one state the scheduler answers every question about it from.

    Finer than the public :class:`CallState` each stage belongs to (``stage.state``): what a
    pending call may do next, and whether a granted call's path keys need a second look.
    """

    HOOKED = ("hooked", CallState.PENDING)
    """Its before-hooks have not all answered: they may still rewrite its arguments and claims
    (so until then it may conflict with anything)."""
    PENDING = ("pending", CallState.PENDING)
    """Waiting for ``after=`` calls, or for the policy or an approver."""
    READY = ("ready", CallState.PENDING)
    """Hooks and policy done: it requests its leases when its turn in its batch comes."""
    QUEUED = ("queued", CallState.QUEUED)
    """Its request is in a lease table."""
    HELD = ("held", CallState.QUEUED)
    """Granted in the step that keyed its claims, it waits for a slot, holding its leases:
    it runs on those keys when it gets one (as between the last look and the I/O, what
    changes meanwhile ``ctx.fs`` refuses), so a long queue is not keyed twice."""
    FOR_SLOT = ("waiting for a slot", CallState.QUEUED)
    """Granted its leases after a wait (or in a later step than the one that keyed its
    claims), it waits for a slot, holding them; its task looks at its keys again when it has
    one."""
    FRESH = ("fresh", CallState.RUNNING)
    """Granted in the very step that keyed its claims: nothing ran in between, so its keys
    need no second look before its tool starts (``Scheduler.confirm_keys``)."""
    GRANTED = ("granted", CallState.RUNNING)
    """Granted after a wait: its task looks at its keys again before its tool starts."""
    RUNNING = ("running", CallState.RUNNING)
    """Its tool (or, for a nested call, its parent's task on its behalf) runs."""
    AHEAD = ("running ahead", CallState.RUNNING)
    """Its tool runs, in a slot, before its leases are granted (``_ahead``): its request
    waits in the lease table at its place; nothing it does is visible until it commits."""
    AWAITING = ("waiting for its grant", CallState.RUNNING)
    """It ran ahead and its tool now waits for its leases (``ctx.wait_granted``), holding no
    slot: calls before it that wait for a slot can't wait on it."""
    AWAITING_SLOT = ("granted, waiting for a slot", CallState.RUNNING)
    """It ran ahead and was granted while its tool waited for that: it waits for a slot to
    go on in."""
    FINISHED = ("finished", CallState.FINISHED)
    """It has its result."""

    def __init__(self, label: str, state: CallState) -> None:
        self.label = label
        self.state = state

    # Compared and hashed by identity, as ``CallState`` (its inherited hash is Python code).
    __hash__ = object.__hash__


# The members as module globals for the hot paths (see ``_call.PENDING``).
(
    HOOKED,
    PENDING,
    READY,
    QUEUED,
    HELD,
    FOR_SLOT,
    FRESH,
    GRANTED,
    RUNNING,
    AHEAD,
    AWAITING,
    AWAITING_SLOT,
    FINISHED,
) = Stage

# The legal moves from each stage (``Scheduler.move`` checks every move against them).
MOVES: dict[Stage, frozenset[Stage]] = {
    HOOKED: frozenset({PENDING, FINISHED}),
    PENDING: frozenset({READY, QUEUED, RUNNING, FINISHED}),  # QUEUED, RUNNING: nested calls
    READY: frozenset({QUEUED, HELD, FOR_SLOT, FRESH, GRANTED, FINISHED}),
    QUEUED: frozenset({FOR_SLOT, FRESH, GRANTED, RUNNING, AHEAD, FINISHED}),  # AHEAD: run ahead
    HELD: frozenset({FRESH, FINISHED}),  # HELD and FOR_SLOT: it gets a slot, or a lent one
    FOR_SLOT: frozenset({GRANTED, FINISHED}),
    FRESH: frozenset({RUNNING, QUEUED, FINISHED}),
    GRANTED: frozenset({RUNNING, QUEUED, FINISHED}),  # QUEUED: its keys changed meaning
    RUNNING: frozenset({QUEUED, FINISHED}),  # QUEUED: its tool asked to hold more
    # RUNNING: granted while its tool runs; GRANTED: granted before its task began
    AHEAD: frozenset({RUNNING, GRANTED, AWAITING, FINISHED}),
    AWAITING: frozenset({RUNNING, AWAITING_SLOT, FINISHED}),
    AWAITING_SLOT: frozenset({RUNNING, FINISHED}),
    FINISHED: frozenset(),
}


def illegal_move(call_id: str, old: Stage, new: Stage) -> IllegalTransitionError:
    """The error for a move ``old -> new`` that is not in :data:`MOVES`."""
    return IllegalTransitionError(
        f"can't go from {old.state.name} to {new.state.name} for call {call_id} "
        f"(from its stage {old.label} to {new.label})"
    )


class LeaseGroup:
    """A lease table and the calls whose requests are in it.

    The kernel has one for top-level calls; a running call gets its own, lazily, for the nested
    calls its leases cover (so they run inside its leases but still exclude each other).
    """

    __slots__ = ("owner", "records", "table")

    def __init__(self, table: LeaseTable, owner: CallRecord | None) -> None:
        self.table = table
        self.owner = owner
        self.records: dict[int, CallRecord] = {}


class Hold:
    """What one call holds and waits for: its leases, the group it waits in, its wait limit's
    entry, its slot. ``_leasing`` keeps it and is its only writer, as the scheduler is the
    record's: the record says where the call is, this what it holds while it is there.
    """

    __slots__ = ("group", "lease_id", "more", "own_group", "slot", "wait_token", "waiting_in")

    def __init__(self) -> None:
        # Nearly every call has exactly one lease, kept in two plain fields so that it costs no
        # container; a nested call may have a second (``more``).
        self.group: LeaseGroup | None = None
        self.lease_id = 0
        self.more: list[tuple[LeaseGroup, int]] | None = None
        self.waiting_in: LeaseGroup | None = None  # the group whose table it waits in
        self.wait_token = 0  # its live entry in ``_leasing.Deadlines``, or 0
        self.slot = 0  # top-level calls: ``_leasing.NO_SLOT``, ``WAITING`` or ``HOLDING``
        self.own_group: LeaseGroup | None = None  # for nested calls its leases cover

    def leases(self) -> list[tuple[LeaseGroup, int]]:
        """Its leases, held or waiting, in the order requested."""
        if self.group is None:
            return []
        return [(self.group, self.lease_id), *(self.more or ())]


@attrs.define(eq=False)
class Batch:
    """Calls submitted together; they request leases in emission order."""

    uid: int
    # Calls of this batch that have not finished; ``run`` waits for this to reach 0.
    unfinished: int
    # No call with a uid below ``head`` is in ``unrequested`` (it may be stale-low, never high),
    # so the common case, "the call just marked ready is the first not to have requested",
    # is found without walking the dict (which would also step over every deleted entry).
    # It starts at the first call's uid, ``uid + 1``.
    head: int
    # Calls of this batch that have not requested leases yet, in emission order (their uids
    # follow the batch's own: uid + 1, uid + 2, ...).
    unrequested: dict[int, CallRecord] = attrs.field(factory=dict)
    # The highest uid of a call marked ready: calls after it can't request yet, so the emission
    # order scan stops there (without it, submitting n calls costs O(n^2)).
    last_ready: int = 0
    # Whether any call of this batch waits through ``after=``; only then can holding a call
    # back for an earlier one close a cycle (see ``_scheduler.holds_back``).
    has_deps: bool = False
    # The running call whose tool submitted this batch (``kernel.run`` from inside a tool) and
    # awaits it: the wait-for graph has an edge from it to each of the batch's calls.
    awaited_by: CallRecord | None = None
    # The tools its calls are found in when the batch brought some (``kernel.run(calls,
    # tools=...)``): those, then the kernel's own.
    tools: Mapping[str, KernelTool] | None = None
    # The limit of a ``run(timeout=...)`` that ran out: its unfinished calls end TIMEOUT.
    time_limit: float | None = None


# Containers a call needs only sometimes are None (or an empty tuple) until then: a batch keeps
# thousands of records alive, and every container in them is one more object to allocate and
# for the garbage collector to visit again and again.
@attrs.define(eq=False)
class CallRecord:
    """One call from admission to its result, its fields grouped by the stages that use them.

    The scheduler is its one writer; what the call holds and waits for is its :class:`Hold`,
    written by ``_leasing`` alone.
    """

    # -- what it is and where it is
    call: ToolCall
    uid: int
    batch: Batch
    queued_at: float
    state_since: float
    parent: CallRecord | None = None
    depth: int = 0
    stage: Stage = PENDING  # moved only by ``Scheduler.move``
    # -- admitted: its tool, its arguments as validated, its canonical claims
    tool: KernelTool | None = None
    arguments: Mapping[str, Any] = NO_ARGUMENTS
    claims: tuple[Claim, ...] | None = None
    # The paths its claims keyed, as spelled and as keyed, when its tool's claims follow the
    # keys alone (``KernelTool.claims``): after a wait they are keyed again, not recomputed.
    keyed: tuple[tuple[str, Path], ...] | None = None
    # -- pending: the ``after=`` calls it still waits for (by uid), and for output passing
    # (``_admission.fill_in``) its arguments before the placeholders are filled in and the
    # calls whose outputs fill them, by id
    deps_left: set[int] | None = None
    unfilled: Any = None
    sources: dict[str, CallRecord] | None = None
    # -- queued and running: its leases, waits and slot
    hold: Hold = attrs.field(factory=Hold)
    # Set when it first has to wait (for leases or a slot): the resources it waits on, spelled
    # for people, and since when; its wait is tallied against them when it finishes.
    contested: tuple[str, ...] | None = None
    blocked_at: float = 0.0
    # -- running: since when, whether its tool has a context to revoke when its leases go,
    # what its tool asked to hold beyond its claims (``HoldMore``, kept through re-keying) and
    # the state it left for its next run
    started_at: float | None = None
    has_context: bool = False
    more_claims: tuple[Claim, ...] = ()
    resumed: Any = None
    requeues: int = 0
    nested_count: int = 0
    # -- running ahead of its grant (``_ahead``): what its tool answered (None: it may not run
    # ahead; asked at admission of a top-level call no running call awaits), the calls that
    # conflicted with it and finished while it ran ahead, and what its tool reported it changed
    # (``ctx.report_changes``; None: every exclusive claim it holds)
    ahead: Ahead | None = None
    meanwhile: list[ChangedMeanwhile] | None = None
    changed: tuple[Claim, ...] | None = None
    # Nested calls it is waiting for, calls of batches its tool submitted and awaits, and calls
    # whose handles its tool awaits.
    awaiting: set[CallRecord] | None = None
    # -- finished: its result, why it was cancelled, and when skipped the failure at the head
    # of its chain
    result: ToolResult | None = None
    cancel_reason: CancelReason | None = None
    root_cause: RootCause | None = None
    # -- throughout: who waits for it (``after=`` dependents, running calls awaiting its
    # handle) and who listens to it (``stream`` listeners)
    dependents: list[CallRecord] | None = None
    handle_waiters: int = 0
    sinks: tuple[Callable[[CallEvent], None], ...] = ()

    @property
    def name(self) -> str:
        return self.call.name

    @property
    def table_claims(self) -> tuple[Claim, ...] | None:
        """What it holds in the kernel's own lease table: its claims, and what its commit may
        change beyond them (``Ahead.commits_beyond``)."""
        claims, ahead = self.claims, self.ahead
        if ahead is None or not ahead.commits_beyond or claims is None:
            return claims
        return (*claims, *ahead.commits_beyond)

    @property
    def state(self) -> CallState:
        """Its public state: the one its stage belongs to."""
        return self.stage.state

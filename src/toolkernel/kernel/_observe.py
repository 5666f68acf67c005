"""Snapshots and statistics of a kernel: immutable values, cheap to compare and print."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import attrs

from ..locks import Claim
from ._call import OK, CallState, ToolResult
from ._waits import waits_for

if TYPE_CHECKING:
    from ._record import CallRecord

__all__ = ["CallInfo", "KernelSnapshot", "KernelStatistics", "ToolStatistics", "snapshot_of"]


@attrs.frozen
class CallInfo:
    """One unfinished call in a :class:`KernelSnapshot`."""

    call_id: str
    name: str
    state: CallState
    claims: tuple[Claim, ...]
    """Its canonical claims (empty while not yet computed)."""
    waits_for: tuple[str, ...]
    """While queued: the calls it waits behind. While pending: the calls it depends on."""
    since: float
    """When it entered its current state."""
    parent: str | None
    """The call that made it through ``ctx.call``, if any."""


@attrs.frozen
class KernelSnapshot:
    """What a kernel is doing right now."""

    running: tuple[CallInfo, ...]
    queued: tuple[CallInfo, ...]
    pending: tuple[CallInfo, ...]


@attrs.frozen
class ToolStatistics:
    """Per-tool counts and time percentiles (seconds) over the calls that finished."""

    name: str
    count: int
    """Calls finished."""
    errors: int
    """Calls that did not end OK."""
    wait_p50: float
    wait_p90: float
    wait_p99: float
    run_p50: float
    run_p90: float
    run_p99: float


@attrs.frozen
class KernelStatistics:
    """Cheap counts of a kernel's calls, and per-tool statistics."""

    pending: int
    queued: int
    running: int
    finished: int
    tools: tuple[ToolStatistics, ...]


def _percentile(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))
    return ordered[index]


@attrs.define
class ToolTally:
    """Running tally for one tool; keeps the most recent times for percentiles."""

    name: str
    count: int = 0
    errors: int = 0
    waits: deque[float] = attrs.field(factory=lambda: deque(maxlen=10_000))
    runs: deque[float] = attrs.field(factory=lambda: deque(maxlen=10_000))

    def add(self, result: ToolResult) -> None:
        self.count += 1
        if result.status is not OK:
            self.errors += 1
        # ``result.wait_time`` and ``result.run_time``, spelled out: this runs for every call.
        started_at = result.started_at
        if started_at is None:
            self.waits.append(result.finished_at - result.queued_at)
        else:
            self.waits.append(started_at - result.queued_at)
            self.runs.append(result.finished_at - started_at)

    def freeze(self) -> ToolStatistics:
        waits, runs = list(self.waits), list(self.runs)
        return ToolStatistics(
            name=self.name,
            count=self.count,
            errors=self.errors,
            wait_p50=_percentile(waits, 0.5),
            wait_p90=_percentile(waits, 0.9),
            wait_p99=_percentile(waits, 0.99),
            run_p50=_percentile(runs, 0.5),
            run_p90=_percentile(runs, 0.9),
            run_p99=_percentile(runs, 0.99),
        )


def freeze_tallies(tallies: Iterable[ToolTally]) -> tuple[ToolStatistics, ...]:
    return tuple(t.freeze() for t in sorted(tallies, key=lambda t: t.name))


def snapshot_of(live: Mapping[int, CallRecord]) -> KernelSnapshot:
    """A snapshot of the unfinished calls ``live`` (by uid)."""
    infos: dict[CallState, list[CallInfo]] = {s: [] for s in CallState}
    for uid in sorted(live):
        record = live[uid]
        if record.state is CallState.QUEUED:
            behind = tuple(r.call.id for r in waits_for(record))
        elif record.state is CallState.PENDING:
            deps = sorted(record.deps_left or ())
            behind = tuple(live[dep].call.id for dep in deps if dep in live)
        else:
            behind = ()
        infos[record.state].append(
            CallInfo(
                call_id=record.call.id,
                name=record.name,
                state=record.state,
                claims=record.claims or (),
                waits_for=behind,
                since=record.state_since,
                parent=record.parent.call.id if record.parent else None,
            )
        )
    return KernelSnapshot(
        running=tuple(infos[CallState.RUNNING]),
        queued=tuple(infos[CallState.QUEUED]),
        pending=tuple(infos[CallState.PENDING]),
    )

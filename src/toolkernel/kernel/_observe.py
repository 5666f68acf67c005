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

__all__ = [
    "CallInfo",
    "KernelSnapshot",
    "KernelStatistics",
    "ToolStatistics",
    "ResourceContention",
    "ToolTally",
    "ContentionTally",
    "snapshot_of",
]

MAX_ERROR_TYPES = 32
"""Error types counted apart per tool; any more share one bucket, ``OTHER_ERRORS``."""
OTHER_ERRORS = "(other types)"
MAX_CONTENDED = 1_000
"""Resources whose contention is tallied apart; the least waited-on of them is folded into
``OTHER_RESOURCES`` to make room for a new one, so memory stays bounded however many paths a
long session touches."""
OTHER_RESOURCES = "(other resources)"
KEPT_TIMES = 10_000
"""Wait and run times kept per tool for percentiles (the most recent ones)."""


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
    """Per-tool counts and time percentiles (seconds) over the calls that finished.

    Percentiles are nearest-rank: always a time some call took (of 1 s and 3 s, p50 is 1 s).
    """

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
    errors_by_type: tuple[tuple[str, int], ...] = ()
    """``(error type, count)`` for the calls that did not end OK, most frequent first: the
    exception class behind the result (``result.error_type``, such as ``"RunTimeoutError"`` or
    the tool's ``"ValueError"``). At most 32 types; the rest are counted as
    ``"(other types)"``."""


@attrs.frozen
class ResourceContention:
    """How much calls waited on one resource: one line of :attr:`KernelStatistics.contention`.

    A call that has to wait for its leases is counted against the resources it was found
    waiting on when it began to wait (the claims of its that conflict with the calls ahead of
    it, as ``CallBlocked.resources`` spells them), for the whole of its wait.
    """

    resource: str
    """The resource, spelled for people (``src/a.py``, ``workspace``, ``device:android``, ``one
    of 4 concurrency slots``)."""
    waits: int
    """Calls that waited on it."""
    total_wait: float
    """Seconds they waited, summed."""
    max_wait: float
    """The longest of those waits, in seconds."""

    @property
    def mean_wait(self) -> float:
        """Seconds waited per wait."""
        return self.total_wait / self.waits if self.waits else 0.0


@attrs.frozen
class KernelStatistics:
    """Cheap counts of a kernel's calls, per-tool statistics, and where calls waited."""

    pending: int
    queued: int
    running: int
    finished: int
    tools: tuple[ToolStatistics, ...]
    peak_running: int = 0
    """The most calls that were running their tools at one time (nested calls included)."""
    contention: tuple[ResourceContention, ...] = ()
    """The resources calls waited on, the most waited-on (by total wait) first: the hot paths
    and devices. At most 1,000 resources are kept apart (those waited on least are folded into
    ``"(other resources)"``)."""


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
    waits: deque[float] = attrs.field(factory=lambda: deque(maxlen=KEPT_TIMES))
    runs: deque[float] = attrs.field(factory=lambda: deque(maxlen=KEPT_TIMES))
    error_types: dict[str, int] | None = None  # made at the first error

    def add(self, result: ToolResult) -> None:
        self.count += 1
        if result.status is not OK:
            self.errors += 1
            self._count_error(result.error_type or result.status.name)
        # ``result.wait_time`` and ``result.run_time``, spelled out: this runs for every call.
        started_at = result.started_at
        if started_at is None:
            self.waits.append(result.finished_at - result.queued_at)
        else:
            self.waits.append(started_at - result.queued_at)
            self.runs.append(result.finished_at - started_at)

    def _count_error(self, error_type: str) -> None:
        types = self.error_types
        if types is None:
            types = self.error_types = {}
        if error_type not in types and len(types) >= MAX_ERROR_TYPES:
            error_type = OTHER_ERRORS
        types[error_type] = types.get(error_type, 0) + 1

    def freeze(self) -> ToolStatistics:
        waits, runs = list(self.waits), list(self.runs)
        by_type = sorted((self.error_types or {}).items(), key=lambda item: (-item[1], item[0]))
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
            errors_by_type=tuple(by_type),
        )


@attrs.define
class _Waited:
    waits: int = 0
    total: float = 0.0
    longest: float = 0.0


class ContentionTally:
    """Waits per contested resource, bounded: see :data:`MAX_CONTENDED`."""

    def __init__(self, limit: int = MAX_CONTENDED) -> None:
        self._limit = limit
        self._resources: dict[str, _Waited] = {}

    def add(self, resources: Iterable[str], waited: float) -> None:
        """One call waited ``waited`` seconds on ``resources``."""
        for resource in resources:
            entry = self._resources.get(resource)
            if entry is None:
                entry = self._make_room_for(resource)
            entry.waits += 1
            entry.total += waited
            if waited > entry.longest:
                entry.longest = waited

    def _make_room_for(self, resource: str) -> _Waited:
        resources = self._resources
        if len(resources) >= self._limit:
            # Fold the least waited-on resource into the shared bucket (a scan, but only when
            # a new resource arrives with the table full, and only on the waiting path).
            kept = [name for name in resources if name != OTHER_RESOURCES]
            coldest = min(kept, key=lambda name: resources[name].total)
            folded = resources.pop(coldest)
            other = resources.setdefault(OTHER_RESOURCES, _Waited())
            other.waits += folded.waits
            other.total += folded.total
            other.longest = max(other.longest, folded.longest)
        entry = resources[resource] = _Waited()
        return entry

    def freeze(self) -> tuple[ResourceContention, ...]:
        ordered = sorted(self._resources.items(), key=lambda item: (-item[1].total, item[0]))
        return tuple(
            ResourceContention(name, entry.waits, entry.total, entry.longest)
            for name, entry in ordered
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

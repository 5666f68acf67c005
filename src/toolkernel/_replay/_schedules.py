"""The schedules other runtimes would make of a turn, computed from its calls' durations. Pure.

Each strategy gives every call a start time (ms from the turn's start, in emission order); it
ends ``ms`` later. A turn's *makespan* is its last end.

- ``serial``: one after the other.
- ``coarse``: Claude Code's scheme: consecutive read-only calls together (at most 10), every
  other call alone, in order.
- ``flag``: the parallelizable flag: every read-only call first, all together, then the rest
  one by one. Fast, but a read may run before an earlier write of its file.
- ``levels``: dependency levels of the conflict graph (a call's level is one more than the
  highest of the earlier calls it conflicts with), each level behind a barrier.
- ``gather``: every call at once, as most agent frameworks do. Unsafe.
- ``critical path``: each call starts when every earlier call it conflicts with has ended: no
  schedule that keeps conflicting calls apart and in emission order is shorter. The kernel's
  schedule must be exactly this one.

``unsafe_pairs`` counts the conflicting pairs a schedule does not keep apart and in order.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..locks import claims_conflict
from ._turns import RecordedCall

__all__ = [
    "Schedule",
    "conflict_matrix",
    "serial",
    "coarse",
    "parallelizable_flag",
    "dependency_levels",
    "gather",
    "critical_path",
    "makespan",
    "unsafe_pairs",
    "COARSE_GROUP_LIMIT",
]

Schedule = tuple[float, ...]
"""Start times (ms) of a turn's calls, in emission order."""

COARSE_GROUP_LIMIT = 10  # Claude Code runs at most 10 concurrency-safe calls together


def conflict_matrix(calls: Sequence[RecordedCall]) -> list[list[bool]]:
    """``m[i][j]``: calls ``i`` and ``j`` hold conflicting claims."""
    n = len(calls)
    matrix = [[False] * n for _ in range(n)]
    for i in range(n):
        for j in range(i):
            hit = any(claims_conflict(a, b) for a in calls[i].claims for b in calls[j].claims)
            matrix[i][j] = matrix[j][i] = hit
    return matrix


def makespan(calls: Sequence[RecordedCall], starts: Schedule) -> float:
    """When the last call ends."""
    return max((s + c.ms for c, s in zip(calls, starts, strict=True)), default=0.0)


def serial(calls: Sequence[RecordedCall]) -> Schedule:
    starts, now = [], 0.0
    for call in calls:
        starts.append(now)
        now += call.ms
    return tuple(starts)


def coarse(calls: Sequence[RecordedCall]) -> Schedule:
    starts: list[float] = []
    now, group_end, size = 0.0, 0.0, 0
    for call in calls:
        if call.read_only and 0 < size < COARSE_GROUP_LIMIT:
            starts.append(now)
            group_end, size = max(group_end, now + call.ms), size + 1
            continue
        now, size = max(now, group_end), 0  # the group (if any) ends before this call
        starts.append(now)
        if call.read_only:
            group_end, size = now + call.ms, 1
        else:
            now = group_end = now + call.ms
    return tuple(starts)


def parallelizable_flag(calls: Sequence[RecordedCall]) -> Schedule:
    reads_end = max((c.ms for c in calls if c.read_only), default=0.0)
    starts, now = [], reads_end
    for call in calls:
        if call.read_only:
            starts.append(0.0)
        else:
            starts.append(now)
            now += call.ms
    return tuple(starts)


def dependency_levels(calls: Sequence[RecordedCall], conflicts: list[list[bool]]) -> Schedule:
    level: list[int] = []
    longest: dict[int, float] = {}
    for i, call in enumerate(calls):
        mine = 1 + max((level[j] for j in range(i) if conflicts[i][j]), default=0)
        level.append(mine)
        longest[mine] = max(longest.get(mine, 0.0), call.ms)
    begins, now = {}, 0.0
    for number in sorted(longest):
        begins[number] = now
        now += longest[number]
    return tuple(begins[n] for n in level)


def gather(calls: Sequence[RecordedCall]) -> Schedule:
    return tuple(0.0 for _ in calls)


def critical_path(calls: Sequence[RecordedCall], conflicts: list[list[bool]]) -> Schedule:
    ends: list[float] = []
    starts: list[float] = []
    for i, call in enumerate(calls):
        start = max((ends[j] for j in range(i) if conflicts[i][j]), default=0.0)
        starts.append(start)
        ends.append(start + call.ms)
    return tuple(starts)


def unsafe_pairs(
    calls: Sequence[RecordedCall], conflicts: list[list[bool]], starts: Schedule
) -> int:
    """Conflicting pairs ``i < j`` where ``j`` starts before ``i`` has ended (they overlapped,
    or ``j`` ran first); calls that take no time can't overlap anything."""
    count = 0
    for i in range(len(calls)):
        for j in range(i + 1, len(calls)):
            if not conflicts[i][j] or calls[i].ms == 0 or calls[j].ms == 0:
                continue
            if starts[j] < starts[i] + calls[i].ms:
                count += 1
    return count

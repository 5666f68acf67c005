"""Every strategy's makespan over a set of turns, side by side; and a table of them."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from . import _schedules as schedules
from ._kernel import KernelReplay, replay_on_kernel
from ._schedules import Schedule
from ._turns import RecordedTurn

__all__ = ["STRATEGIES", "TurnSchedules", "Comparison", "compare", "schedules_of", "format_table"]

STRATEGIES = (
    ("critical path", "cp"),
    ("kernel (toolkernel)", "kernel"),
    ("all-serial", "serial"),
    ("coarse read/write", "coarse"),
    ("parallelizable flag", "flag"),
    ("dependency levels", "levels"),
    ("gather everything", "gather"),
)
"""(label, key) of every strategy, in the order tables show them."""


@attrs.frozen
class TurnSchedules:
    """One turn under every strategy: start times per strategy key (ms)."""

    turn: RecordedTurn
    starts: dict[str, Schedule]
    kernel_ends: Schedule
    conflicts: list[list[bool]]

    def makespan(self, key: str) -> float:
        if key == "kernel":
            return max(self.kernel_ends, default=0.0)
        return schedules.makespan(self.turn.calls, self.starts[key])

    def unsafe(self, key: str) -> int:
        return schedules.unsafe_pairs(self.turn.calls, self.conflicts, self.starts[key])

    @property
    def kernel_exact(self) -> bool:
        """The kernel started and ended every call exactly on the critical path."""
        cp = self.starts["cp"]
        calls = self.turn.calls
        return all(
            self.starts["kernel"][i] == cp[i] and self.kernel_ends[i] == cp[i] + c.ms
            for i, c in enumerate(calls)
        )


def schedules_of(
    turn: RecordedTurn, kernel_starts: Schedule, kernel_ends: Schedule
) -> TurnSchedules:
    calls = turn.calls
    conflicts = schedules.conflict_matrix(calls)
    starts = {
        "cp": schedules.critical_path(calls, conflicts),
        "kernel": kernel_starts,
        "serial": schedules.serial(calls),
        "coarse": schedules.coarse(calls),
        "flag": schedules.parallelizable_flag(calls),
        "levels": schedules.dependency_levels(calls, conflicts),
        "gather": schedules.gather(calls),
    }
    return TurnSchedules(turn, starts, kernel_ends, conflicts)


@attrs.frozen
class Comparison:
    """Every strategy over a set of turns."""

    title: str
    turns: tuple[TurnSchedules, ...]
    kernel: KernelReplay

    def total(self, key: str, *, multi_only: bool = False) -> float:
        """The makespans of ``key``, summed (ms) over the turns (with several calls)."""
        return sum(t.makespan(key) for t in self.turns if not multi_only or len(t.turn.calls) > 1)

    def unsafe(self, key: str) -> int:
        return sum(t.unsafe(key) for t in self.turns)

    @property
    def misses(self) -> list[TurnSchedules]:
        """Turns where the kernel's schedule was not exactly the critical path."""
        return [t for t in self.turns if not t.kernel_exact]


def compare(title: str, turns: Sequence[RecordedTurn]) -> Comparison:
    """Run ``turns`` through the kernel (mock clock) and every other strategy."""
    kernel = replay_on_kernel(turns)
    scheduled = tuple(
        schedules_of(turn, starts, ends)
        for turn, starts, ends in zip(turns, kernel.starts, kernel.ends, strict=True)
    )
    return Comparison(title, scheduled, kernel)


def _ratio(value: float, reference: float) -> str:
    return f"{value / reference:.3f}" if reference else "-"


def format_table(comparison: Comparison) -> str:
    """Makespans summed over all turns and over the turns with several calls, each as a ratio
    to the critical path, the kernel's speed-up over it, and the unsafe pairs it ran."""
    turns = comparison.turns
    multi = sum(1 for t in turns if len(t.turn.calls) > 1)
    calls = sum(len(t.turn.calls) for t in turns)
    cp, multi_cp = comparison.total("cp"), comparison.total("cp", multi_only=True)
    kernel_multi = comparison.total("kernel", multi_only=True)
    lines = [
        f"{comparison.title}: {len(turns)} turns ({multi} with several calls), {calls} calls",
        f"  {'strategy':<22}{'all turns s':>12}{'x CP':>7}{'multi-call s':>14}{'x CP':>7}"
        f"{'kernel faster':>15}  unsafe pairs",
    ]
    for label, key in STRATEGIES:
        total, several = comparison.total(key), comparison.total(key, multi_only=True)
        faster = f"x{several / kernel_multi:.2f}" if kernel_multi else "-"
        lines.append(
            f"  {label:<22}{total / 1000:>12.1f}{_ratio(total, cp):>7}{several / 1000:>14.1f}"
            f"{_ratio(several, multi_cp):>7}{faster:>15}  {comparison.unsafe(key)}"
        )
    lines.append(
        f"  turns where the kernel's schedule != the critical path: {len(comparison.misses)}; "
        f"calls that failed: {len(comparison.kernel.failures)}"
    )
    return "\n".join(lines)

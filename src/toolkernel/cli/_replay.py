"""``python -m toolkernel replay [TRACE.jsonl]``: recorded turns under every strategy, a picture.

Each turn of the file (without one, the sample shipped beside ``toolkernel._replay``: 764 turns
of real Claude Code sessions, :func:`sample_trace`) runs through
the kernel on the mock clock, each call taking its recorded duration (capped at 30 s by
default: recorded durations include time spent waiting for a person) and declaring what
toolkernel's tool would (a Bash command: ``shell_claims(command)``). The table compares the
kernel with the schedules of other runtimes (``toolkernel._replay``); then the kernel's
statistics say where calls waited, and an SVG shows one turn under every strategy.
"""

from __future__ import annotations

import pathlib
import sys
import tempfile
from typing import TextIO

from .._replay import (
    Comparison,
    RecordedTurn,
    capped,
    compare,
    format_table,
    load_turns,
    per_tool_medians,
    timeline_svg,
)
from .._replay._agents import replay_agents
from ..formats._calls import unicode_text
from ..trace import format_statistics

__all__ = ["run_replay", "sample_trace", "DURATIONS"]

DURATIONS = {
    "capped": "durations capped at 30 s",
    "recorded": "recorded durations",
    "median": "each call taking its tool's median duration",
}


def sample_trace() -> pathlib.Path:
    """The recorded turns shipped with toolkernel (``_replay/sample-traces``, with their note)."""
    return (
        pathlib.Path(__file__).parent.parent / "_replay" / "sample-traces" / "claude-code-log.jsonl"
    )


def _with_durations(turns: list[RecordedTurn], durations: str) -> list[RecordedTurn]:
    if durations == "capped":
        return capped(turns)
    if durations == "median":
        return per_tool_medians(turns)
    return turns


def _choose(comparison: Comparison, wanted: str | None) -> int:
    """The index of the turn to draw: the one named (label or 1-based number), else, of the
    turns with four calls or more (or several, if none has), the one where the kernel gains
    most over the coarse scheme."""
    turns = comparison.turns
    if wanted:
        if wanted.isdigit() and 1 <= int(wanted) <= len(turns):
            return int(wanted) - 1
        for index, scheduled in enumerate(turns):
            if scheduled.turn.label == wanted:
                return index
        raise SystemExit(
            f"replay: no turn {wanted!r} (give a label such as 's00 turn 7', or 1 to {len(turns)})"
        )

    def gain(index: int) -> tuple[float, float, int]:
        scheduled = turns[index]
        kernel = scheduled.makespan("kernel") or 1.0
        return (
            scheduled.makespan("coarse") / kernel,
            scheduled.makespan("serial") / kernel,
            len(scheduled.turn.calls),
        )

    multi = (
        [i for i, t in enumerate(turns) if len(t.turn.calls) >= 4]
        or [i for i, t in enumerate(turns) if len(t.turn.calls) > 1]
        or list(range(len(turns)))
    )
    return max(multi, key=gain)


def run_replay(
    trace: pathlib.Path,
    *,
    durations: str = "capped",
    turn: str | None = None,
    svg: pathlib.Path | None = None,
    out: TextIO | None = None,
) -> int:
    """Replay ``trace``; print the table and statistics; write the SVG. Returns the exit code:
    1 if the kernel's schedule ever differed from the critical path, else 0. A file that can't
    be read, or is not a trace, exits with a message saying why."""
    out = out or sys.stdout
    turns = _with_durations(_loaded(trace), durations)
    if not turns:
        print(f"replay: {trace} holds no turns", file=out)
        return 1
    comparison = compare(f"{trace.name}, {DURATIONS[durations]}", turns)
    print(format_table(comparison), file=out)
    print("\nThe kernel's statistics over the replay:", file=out)
    print(format_statistics(comparison.kernel.statistics, seconds_per_unit=0.001), file=out)
    chosen = comparison.turns[_choose(comparison, turn)]
    target = svg or pathlib.Path(tempfile.gettempdir()) / "toolkernel-replay.svg"
    try:
        # A trace's names may hold lone surrogates (a file name that is not UTF-8).
        target.write_text(unicode_text(timeline_svg(chosen)), encoding="utf-8")
    except OSError as exc:
        raise SystemExit(f"replay: can't write {target}: {exc.strerror or exc}") from None
    spans = ", ".join(
        f"{key} {chosen.makespan(key) / 1000:.2f} s" for key in ("kernel", "coarse", "serial")
    )
    print(
        f"\n{chosen.turn.label} ({len(chosen.turn.calls)} calls; {spans}) under every "
        f"strategy: {target}",
        file=out,
    )
    for miss in comparison.misses:
        print(f"the kernel missed the critical path on {miss.turn.label}", file=out)
    return 1 if comparison.misses or comparison.kernel.failures else 0


def _loaded(trace: pathlib.Path) -> list[RecordedTurn]:
    """The turns of ``trace``; a file that can't be read, or is not a trace, exits with a
    message saying why."""
    try:
        return load_turns(trace)
    except OSError as exc:
        raise SystemExit(f"replay: can't read {trace}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SystemExit(f"replay: {trace} is not UTF-8 text; a trace is JSON lines") from None
    except ValueError as exc:
        raise SystemExit(f"replay: {exc}") from None


def run_replay_agents(
    trace: pathlib.Path,
    agents: int,
    *,
    turns: int = 0,
    scale: float = 0.01,
    out: TextIO | None = None,
) -> int:
    """Replay ``trace`` by ``agents`` processes on one tree (``replay._agents``); print the
    makespans and the edits that landed. Returns 1 if an edit was lost or a call failed."""
    out = out or sys.stdout
    if not _loaded(trace):
        print(f"replay: {trace} holds no turns", file=out)
        return 1
    report = replay_agents(trace, agents=agents, turns=turns, scale=scale)
    print(
        f"{agents} agents replaying {trace.name} on one tree, sharing leases through a lease "
        f"service (durations x{scale:g}):\n"
        f"  together: {report.together:.2f} s; one after the other: "
        f"{report.one_after_another:.2f} s ({report.one_after_another / report.together:.2f}x)\n"
        f"  edits landed: {report.landed} of {report.edits}",
        file=out,
    )
    for failure in report.failures:
        print(f"  failed: {failure}", file=out)
    return 0 if report.landed == report.edits and not report.failures else 1

"""Scripted turns: what a model said and the calls it emitted, as data, replayed in order.

A scripted model (the agent loop's stand-in for a real one, in tests and demos) answers each step
with the next :class:`Turn`. The demo's session is data of its own (``_demo_turns``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import attrs

from .._checks import check_number
from ..kernel import ToolCall

__all__ = ["Turn"]


def _calls(calls: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    return tuple(calls)


def _times(times: Iterable[float]) -> tuple[float, ...]:
    times = tuple(check_number("an emission time", time, unit="seconds") for time in times)
    if any(later < earlier for earlier, later in itertools.pairwise(times)):
        raise ValueError(f"emission times must not decrease: {times!r}")
    return tuple(float(time) for time in times)


@attrs.frozen
class Turn:
    """One turn of a model: what it says, and the tool calls it emits (run as one batch)."""

    says: str
    """The model's text before its calls."""
    calls: tuple[ToolCall, ...] = attrs.field(converter=_calls)
    """The calls it emits, in the order it emitted them."""
    emitted: tuple[float, ...] = attrs.field(default=(), converter=_times, kw_only=True)
    """When each call's block is complete, in seconds from the start of the answer (after the
    model's ``think``); the answer ends with the last. Empty: every call at once, when the
    answer starts. A model asked for the whole answer gives it when the last call is complete.
    """
    cut: BaseException | None = attrs.field(default=None, kw_only=True)
    """An error (a :class:`~toolkernel.ModelError`) a streamed answer fails with instead of
    finishing: at the last call's emission time, that call's block written but not known to
    be complete (so it never starts, as in a real stream cut there). A model asked for the
    whole answer raises it."""

    def __attrs_post_init__(self) -> None:
        if self.emitted and len(self.emitted) != len(self.calls):
            raise ValueError(
                f"a turn with {len(self.calls)} calls needs as many emission times, not "
                f"{len(self.emitted)}"
            )

    @property
    def duration(self) -> float:
        """Seconds from the start of the answer to its end."""
        return self.emitted[-1] if self.emitted else 0.0

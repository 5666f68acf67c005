"""Scripted turns: what a model said and the calls it emitted, as data, replayed in order.

A scripted model (the agent loop's stand-in for a real one, in tests and demos) answers each step
with the next :class:`Turn`. ``DEMO_TURNS`` is the session ``python -m toolkernel demo`` replays
over its sample project: explore (reads, greps, a glob in parallel), edit (several files at once,
two edits and a read of the same file that must take turns), verify (a grep and the project's
tests through Bash).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable

import attrs

from .._checks import check_number
from ..kernel import ToolCall

__all__ = ["Turn", "DEMO_TURNS"]


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


_TESTS = f"{sys.executable} -m unittest -q 2>&1"  # the sample project's own tests

DEMO_TURNS: tuple[Turn, ...] = (
    Turn(
        "Let me look around the project first.",
        (
            ToolCall("c1", "Glob", {"pattern": "**/*.py"}),
            ToolCall("c2", "Read", {"file_path": "calc/ops.py"}),
            ToolCall("c3", "Read", {"file_path": "calc/parse.py"}),
            ToolCall("c4", "Grep", {"pattern": "TODO", "output_mode": "content"}),
            ToolCall("c5", "Read", {"file_path": "tests/test_calc.py"}),
            ToolCall("c6", "Bash", {"command": "ls calc tests"}),
        ),
    ),
    Turn(
        "I'll add power(), a clearer division error, and a test.",
        (
            ToolCall(
                "c7",
                "Edit",
                {
                    "file_path": "calc/ops.py",
                    "old_string": "def divide(a: float, b: float) -> float:\n"
                    "    # TODO: say something better than ZeroDivisionError\n"
                    "    return a / b\n",
                    "new_string": "def divide(a: float, b: float) -> float:\n"
                    "    if b == 0:\n"
                    '        raise ZeroDivisionError(f"can\'t divide {a} by zero")\n'
                    "    return a / b\n",
                },
            ),
            ToolCall(
                "c8",
                "Edit",
                {
                    "file_path": "calc/parse.py",
                    "old_string": '"+": add, "-": subtract, "*": multiply, "/": divide}',
                    "new_string": '"+": add, "-": subtract, "*": multiply, "/": divide, '
                    '"^": power}',
                },
            ),
            ToolCall(
                "c9",
                "Edit",
                {
                    "file_path": "calc/ops.py",
                    "old_string": "def multiply(",
                    "new_string": "def power(a: float, b: float) -> float:\n"
                    "    return a**b\n\n\ndef multiply(",
                },
            ),
            ToolCall("c10", "Read", {"file_path": "calc/ops.py"}),
            ToolCall(
                "c11",
                "Edit",
                {
                    "file_path": "calc/parse.py",
                    "old_string": "from .ops import add, divide, multiply, subtract",
                    "new_string": "from .ops import add, divide, multiply, power, subtract",
                },
            ),
            ToolCall(
                "c12",
                "MultiEdit",
                {
                    "file_path": "tests/test_calc.py",
                    "edits": [
                        {
                            "old_string": "from calc import add, divide, evaluate, format_number",
                            "new_string": "from calc import add, divide, evaluate, "
                            "format_number\nfrom calc.ops import power",
                        },
                        {
                            "old_string": "    def test_format(self) -> None:",
                            "new_string": "    def test_power(self) -> None:\n"
                            '        self.assertEqual(evaluate("2 ^ 10"), 1024)\n'
                            "        self.assertEqual(power(3, 2), 9)\n\n"
                            "    def test_format(self) -> None:",
                        },
                    ],
                },
            ),
            ToolCall(
                "c13",
                "TodoWrite",
                {
                    "todos": [
                        {"content": "add power()", "status": "completed"},
                        {"content": "run the tests", "status": "in_progress"},
                    ]
                },
            ),
        ),
    ),
    Turn(
        "Now check nothing is left to do and run the tests.",
        (
            ToolCall("c14", "Grep", {"pattern": "TODO", "path": "calc"}),
            ToolCall("c15", "Read", {"file_path": "calc/parse.py"}),
            ToolCall("c16", "Bash", {"command": _TESTS}),
            ToolCall("c17", "Read", {"file_path": "README.md", "limit": 3}),
        ),
    ),
)

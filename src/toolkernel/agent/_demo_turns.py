"""The session ``python -m toolkernel demo`` replays over its sample project, as data: explore
(reads, greps, a glob in parallel), edit (several files at once, two edits and a read of the same
file that must take turns), verify (a grep and the project's tests through Bash). The command
line's, not the public API's (``toolkernel.agent.DEMO_TURNS`` warns, for one release).
"""

from __future__ import annotations

import sys

from ..kernel import ToolCall
from ._turns import Turn

__all__ = ["DEMO_TURNS"]

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

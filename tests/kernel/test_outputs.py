"""Output passing: a call uses the outputs of the calls it runs after (``${c1}``, ``$c1``)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
import trio

import toolkernel as tk
from toolkernel.kernel._admission import fill_in, placeholders


def make_tools(seen: list[tuple[str, Any]]) -> list[tk.Tool]:
    @tk.tool(claims=lambda args: [])
    async def find(ctx: tk.ToolContext, pattern: str) -> list[str]:
        """Find files (fake)."""
        await anyio.sleep(1)
        return [f"src/{pattern}.py", f"tests/{pattern}.py"]

    @tk.tool(reads=["path"])
    async def read(ctx: tk.ToolContext, path: str) -> str:
        """Read (fake)."""
        seen.append((ctx.call_id, path))
        return f"text of {path}"

    @tk.tool(claims=lambda args: [])
    async def count(ctx: tk.ToolContext, paths: list[str], note: str = "") -> int:
        """Count (fake)."""
        seen.append((ctx.call_id, (paths, note)))
        return len(paths)

    @tk.tool(claims=lambda args: [])
    async def broken(ctx: tk.ToolContext) -> str:
        """Fail."""
        raise RuntimeError("no luck")

    return [find, read, count, broken]


async def test_outputs_fill_the_arguments_of_the_calls_that_run_after_them(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[tuple[str, Any]] = []
    async with tk.open_kernel(tools=make_tools(seen)) as kernel:
        results = await kernel.run(
            [
                tk.ToolCall("c1", "find", {"pattern": "config"}),
                tk.ToolCall("c2", "count", {"paths": "$c1", "note": "found ${c1}"}, after=["c1"]),
                tk.ToolCall("c3", "read", '{"path": "${c2}.txt"}', after=["c2"]),
                tk.ToolCall("c4", "read", {"path": "$HOME/x"}, after=["c1"]),  # not a call id
            ]
        )
    assert [r.status for r in results] == [tk.Status.OK] * 4
    assert dict(seen) == {
        "c2": (["src/config.py", "tests/config.py"], 'found ["src/config.py", "tests/config.py"]'),
        "c3": "2.txt",
        "c4": "$HOME/x",
    }


async def test_a_filled_in_argument_is_validated_and_its_claims_computed_then(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[tuple[str, Any]] = []
    async with tk.open_kernel(tools=make_tools(seen)) as kernel:
        found, bad = await kernel.run(
            [
                tk.ToolCall("c1", "find", {"pattern": "x"}),
                tk.ToolCall("c2", "read", {"path": "$c1"}, after=["c1"]),  # a list, not a path
            ]
        )
    assert found.ok and bad.error_type == "InvalidArgumentsError"
    assert "path" in (bad.error or "")


async def test_a_failed_source_skips_the_call_that_uses_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with tk.open_kernel(tools=make_tools([])) as kernel:
        _, skipped = await kernel.run(
            [
                tk.ToolCall("c1", "broken"),
                tk.ToolCall("c2", "read", {"path": "${c1}"}, after=["c1"]),
            ]
        )
    assert skipped.status is tk.Status.SKIPPED


async def test_an_output_from_an_earlier_batch_is_not_kept(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with tk.open_kernel(tools=make_tools([])) as kernel:
        await kernel.run([tk.ToolCall("c1", "find", {"pattern": "x"})])
        (late,) = await kernel.run([tk.ToolCall("c2", "read", {"path": "$c1"}, after=["c1"])])
    assert late.error_type == "InvalidCallError"
    assert "finished in an earlier batch" in (late.error or "")


@pytest.mark.parametrize(
    ("arguments", "found"),
    [
        ({"a": "$c1"}, {"c1"}),
        ({"a": ["x ${c2} y", {"b": "${c1}"}]}, {"c1", "c2"}),
        ({"a": "$c3", "b": "${nope}", "c": "$ c1"}, set()),
        ("not a mapping", set()),
    ],
)
def test_placeholders_are_only_the_ids_it_runs_after(arguments: Any, found: set[str]) -> None:
    assert placeholders(arguments, {"c1", "c2"}) == found


def test_a_whole_placeholder_keeps_a_json_output_and_an_embedded_one_its_text() -> None:
    done = tk.ToolResult("c1", "t", tk.Status.OK, {"n": 1})
    assert fill_in({"a": "$c1", "b": "${c1}", "c": "<${c1}>"}, {"c1": done}) == {
        "a": {"n": 1},
        "b": {"n": 1},
        "c": '<{"n": 1}>',
    }

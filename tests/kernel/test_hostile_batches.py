"""Batches no well-behaved caller sends: a placeholder thousands of levels deep, a call after
tens of thousands of others. Each runs (or fails as a result), in time linear in its size."""

from __future__ import annotations

import time
from typing import Any

import attrs

import toolkernel as tk
from toolkernel.kernel._admission import find_cycles, map_strings

from .fakes import assert_leases_returned


@tk.tool(claims=lambda args: [])
async def keep(ctx: tk.ToolContext, text: str = "", data: Any = None) -> Any:
    """Give back what it was given."""
    return data if data is not None else text


def nested(depth: int, leaf: object) -> object:
    value = leaf
    for _ in range(depth):
        value = {"inner": [value]}
    return value


def bottom(value: Any) -> Any:
    while isinstance(value, dict):
        (value,) = value["inner"]
    return value


async def test_a_placeholder_thousands_of_levels_deep_is_filled_in() -> None:
    deep = nested(5000, "got ${c1}")
    async with tk.open_kernel(tools=[keep]) as kernel:
        first, second = await kernel.run(
            [
                tk.ToolCall("c1", "keep", {"text": "a"}),
                tk.ToolCall("c2", "keep", {"data": deep}, after=("c1",)),
            ]
        )
        assert_leases_returned(kernel)
    assert first.ok and second.ok, second.error
    assert bottom(second.output) == "got a"


def test_map_strings_keeps_order_sharing_and_cycles() -> None:
    shared = ["s"]
    looped: list[Any] = ["x"]
    looped.append(looped)
    out = map_strings({"b": shared, "a": (shared, 1, None), "c": looped}, str.upper)
    assert list(out) == ["b", "a", "c"]
    assert out["b"] == ["S"] and out["a"] == [["S"], 1, None]
    assert out["a"][0] is out["b"]  # a container met twice is rebuilt once
    assert out["c"][0] == "X" and out["c"][1] is out["c"]


@attrs.frozen
class Node:
    uid: int


def test_the_cycle_search_is_linear_in_the_edges() -> None:
    n = 20_000
    records = [Node(uid) for uid in range(n + 1)]
    edges = {n: records[:n]}  # the last call runs after all the others
    began = time.perf_counter()
    found = list(find_cycles(records, edges))  # type: ignore[arg-type]
    took = time.perf_counter() - began
    # About 0.02 s; filtering the last call's edges again at every step took about 20 s.
    assert took < 1.0, took
    assert found == []
    edges[0] = [records[n]]  # and the first one after the last: one cycle
    assert [[r.uid for r in c] for c in find_cycles(records, edges)] == [[0, n]]  # type: ignore[arg-type]


async def test_a_call_after_thousands_of_others_runs_with_their_outputs() -> None:
    ids = [f"d{i}" for i in range(2000)]
    calls = [tk.ToolCall(i, "keep", {"text": i}) for i in ids]
    calls.append(tk.ToolCall("last", "keep", {"text": "${d7}"}, after=tuple(ids)))
    async with tk.open_kernel(tools=[keep]) as kernel:
        results = await kernel.run(calls)
    assert all(r.ok for r in results)
    assert results[-1].output == "d7"


async def test_ids_names_and_arguments_nested_too_deeply_to_print_fail_their_call() -> None:
    deep: object = 1
    for _ in range(5000):
        deep = [deep]
    calls = [
        tk.ToolCall("c1", deep, {}),  # type: ignore[arg-type]
        tk.ToolCall("c2", "keep", {"text": "x"}, after=(deep,)),  # type: ignore[arg-type]
        tk.ToolCall(deep, "keep", {"text": "x"}),  # type: ignore[arg-type]
        tk.ToolCall("c4", "keep", {"text": deep}),
    ]
    async with tk.open_kernel(tools=[keep]) as kernel:
        results = [(await kernel.run([call]))[0] for call in calls]
        assert_leases_returned(kernel)
    assert [r.status for r in results] == [tk.Status.ERROR] * 4
    for result in results[:3]:
        assert "a list nested too deeply to show" in (result.error or "")

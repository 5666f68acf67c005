"""No two tools share a wire name, whatever their names: a model's call to one never runs
another."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

import toolkernel as tk
from toolkernel.formats import openai, wire_names
from toolkernel.formats._names import _digest

FITS = re.compile(r"[A-Za-z0-9_-]{1,64}")


def named(name: str) -> tk.Tool:
    @tk.tool(name=name, claims=lambda args: [])
    async def answer(ctx: tk.ToolContext) -> str:
        return name

    return answer


def test_a_hashed_name_that_is_another_tools_name_takes_the_next_digest() -> None:
    taken = f"a_b_{_digest('a.b')}"  # what ``a.b`` was renamed to, beside ``a b``
    for third in (taken, f"a.b_{_digest('a.b')}"):
        mapping = wire_names(["a.b", "a b", third])
        assert len(set(mapping.values())) == 3, mapping
        assert mapping[third] == taken  # the name that needs no digest keeps it
        assert mapping["a.b"] != taken and FITS.fullmatch(mapping["a.b"])


async def test_each_wire_name_runs_its_own_tool() -> None:
    names = ["a.b", "a b", f"a_b_{_digest('a.b')}"]
    tools = [named(name) for name in names]
    exported = openai.chat_tools(tools)
    wire = [spec["function"]["name"] for spec in exported]
    assert len(set(wire)) == 3
    message = {
        "role": "assistant",
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": w, "arguments": "{}"}}
            for i, w in enumerate(wire)
        ],
    }
    async with tk.open_kernel(tools=tools) as kernel:
        results = await kernel.run(openai.calls_from_chat(message, tools))
    named_by_wire = {w: n for n, w in wire_names(names).items()}
    assert [r.output for r in results] == [named_by_wire[w] for w in wire]
    assert sorted(r.output for r in results) == sorted(names)


@given(st.sets(st.text(alphabet="ab._ -é", min_size=0, max_size=70), max_size=12))
def test_wire_names_are_unique_fit_and_ignore_order(names: set[str]) -> None:
    mapping = wire_names(sorted(names))
    assert set(mapping) == names
    assert len(set(mapping.values())) == len(names)
    assert all(FITS.fullmatch(w) for w in mapping.values())
    assert wire_names(sorted(names, reverse=True)) == mapping

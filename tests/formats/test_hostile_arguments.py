"""What a model may send that no well-behaved model would: arguments nested hundreds deep beside
``depends_on``, thousands of ``depends_on`` entries, entries that are no position or id. Each
becomes a call (or a per-call error), never an exception out of the formats, and in time linear
in what was sent."""

from __future__ import annotations

import json
import time
from typing import Any

import toolkernel as tk
from toolkernel.formats import DEPENDS_ON, anthropic, openai
from toolkernel.formats._nulls import drop_nulls

# Deeper than any recursive walk gets from where the formats run (the limit is 1,000 frames),
# and within what ``json.loads`` itself reads.
DEPTH = 900


@tk.tool(claims=lambda args: [])
async def keep(ctx: tk.ToolContext, text: str, data: Any = None) -> Any:
    """Give back what it was given."""
    return data if data is not None else text


def nested(depth: int, leaf: object) -> object:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def bottom(value: Any) -> Any:
    while isinstance(value, list):
        (value,) = value
    return value


def chat(*arguments: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": "keep", "arguments": text}}
            for n, text in enumerate(arguments, start=1)
        ],
    }


def deep_arguments() -> str:
    return json.dumps({"text": "b", DEPENDS_ON: [1], "data": nested(DEPTH, "got ${1}")})


def test_deep_arguments_beside_depends_on_in_chat_and_responses() -> None:
    first = json.dumps({"text": "a"})
    for calls in (
        openai.calls_from_chat(chat(first, deep_arguments()), [keep]),
        openai.calls_from_responses(
            [
                {"type": "function_call", "call_id": "c1", "name": "keep", "arguments": first},
                {
                    "type": "function_call",
                    "call_id": "c2",
                    "name": "keep",
                    "arguments": deep_arguments(),
                },
            ],
            [keep],
        ),
    ):
        assert calls[1].after == ("c1",)
        assert bottom(calls[1].arguments["data"]) == "got ${c1}"


def test_deep_arguments_beside_depends_on_in_anthropic_messages() -> None:
    message = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "t1", "name": "keep", "input": {"text": "a"}},
            # Deeper than JSON text could carry: an SDK's object, built in Python.
            {
                "type": "tool_use",
                "id": "t2",
                "name": "keep",
                "input": {"text": "b", DEPENDS_ON: [1], "data": nested(5000, "got ${1}")},
            },
        ],
    }
    calls = anthropic.calls_from_message(message, [keep])
    assert calls[1].after == ("t1",)
    assert bottom(calls[1].arguments["data"]) == "got ${t1}"


async def test_the_kernel_fills_in_a_deep_placeholder() -> None:
    calls = openai.calls_from_chat(chat(json.dumps({"text": "a"}), deep_arguments()), [keep])
    async with tk.open_kernel(tools=[keep]) as kernel:
        first, second = await kernel.run(calls)
    assert first.ok and second.ok, second.error
    assert bottom(second.output) == "got a"


def test_thousands_of_depends_on_entries_take_linear_time() -> None:
    n = 20_000
    entries = [*range(1, n + 1), *(f"id{i}" for i in range(n)), *range(1, n + 1)]
    message = chat(
        json.dumps({"text": "a"}),
        json.dumps({"text": "$1", DEPENDS_ON: entries}),
    )
    began = time.perf_counter()
    calls = openai.calls_from_chat(message, [keep])
    took = time.perf_counter() - began
    # Linear: about 0.1 s here; the list kept unique by ``in`` took 9 s for these 60,000.
    assert took < 2.0, took
    after = calls[1].after
    assert len(after) == len(set(after)) == 2 * n  # positions 3.. name nothing: kept as given
    assert after[:2] == ("c1", "c2")
    assert calls[1].arguments["text"] == "${c1}"


async def test_entries_that_name_nothing_become_an_error_of_that_call() -> None:
    circular: list[Any] = []
    circular.append(circular)
    odd: list[object] = ["9" * 5000, nested(3000, 1), {"a": nested(3000, 1)}, 10**5000, circular]
    message = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": f"t{n}", "name": "keep", "input": {"text": "x", **extra}}
            for n, extra in enumerate([{DEPENDS_ON: [entry]} for entry in odd], start=1)
        ],
    }
    calls = anthropic.calls_from_message(message, [keep])
    assert calls[0].after == ("9" * 5000,)
    assert [c.after for c in calls[1:]] == [("<list>",), ("<dict>",), ("<int>",), ("<list>",)]
    async with tk.open_kernel(tools=[keep]) as kernel:
        results = await kernel.run(calls)
    for result in results:
        assert result.status is tk.Status.ERROR
        assert "which is not a known call" in (result.error or "")


class TreeTool:
    """A tool from elsewhere (an MCP server, say) whose schema refers to itself."""

    name = "tree"
    description = "takes a tree"

    def parameters_schema(self) -> dict[str, Any]:
        node = {
            "type": "object",
            "properties": {
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                "note": {"type": "string"},
            },
        }
        return {
            "type": "object",
            "properties": {"root": {"$ref": "#/$defs/node"}},
            "$defs": {"node": node},
        }


def test_a_schema_that_refers_to_itself_is_followed_only_so_deep() -> None:
    def tree(depth: int) -> dict[str, Any]:
        node: dict[str, Any] = {"note": None}
        for _ in range(depth):
            node = {"children": [node], "note": None}
        return node

    call = {"id": "c1", "type": "function", "function": {"name": "tree"}}
    call["function"]["arguments"] = json.dumps({"root": tree(300)})
    (parsed,) = openai.calls_from_chat({"role": "assistant", "tool_calls": [call]}, [TreeTool()])
    assert "note" not in parsed.arguments["root"]  # strict mode's nulls still go near the top
    deep = drop_nulls({"root": tree(5000)}, TreeTool().parameters_schema())
    assert deep["root"]["children"][0].keys() == {"children"}


def test_an_output_nested_too_deeply_to_print_is_answered_in_every_format() -> None:
    result = tk.ToolResult("c1", "keep", tk.Status.OK, nested(5000, "x"))
    (chat,) = openai.chat_tool_messages([result])
    (responses,) = openai.responses_outputs([result])
    (message,) = anthropic.tool_results([result])
    shown = "(list nested too deeply to show)"
    assert chat["content"] == responses["output"] == message["content"] == shown

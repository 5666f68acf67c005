"""Dependent calls in one model message: ``depends_on`` positions become ``after=`` ids, and
``${N}`` placeholders become the kernel's ``${id}`` (only for the calls listed)."""

from __future__ import annotations

import json
from typing import Any

import toolkernel as tk
from tests.sample_tools import SAMPLE_TOOLS
from toolkernel.formats import DEPENDS_ON, anthropic, openai


def chat(*calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for call_id, name, arguments in calls
        ],
    }


def test_positions_in_depends_on_become_after_ids_and_the_argument_is_removed() -> None:
    calls = openai.calls_from_chat(
        chat(
            ("call_a", "echo", {"text": "a"}),
            ("call_b", "echo", {"text": "b"}),
            ("call_c", "echo", {"text": "c", DEPENDS_ON: [1, 2, 1]}),
            ("call_d", "echo", {"text": "d", DEPENDS_ON: 3}),
            ("call_e", "echo", {"text": "e", DEPENDS_ON: ["call_a", "2"]}),
            ("call_f", "echo", {"text": "f", DEPENDS_ON: None}),
        )
    )
    assert [c.after for c in calls] == [
        (),
        (),
        ("call_a", "call_b"),
        ("call_c",),
        ("call_a", "call_b"),
        (),
    ]
    assert all(DEPENDS_ON not in c.arguments for c in calls)


def test_placeholders_of_listed_calls_are_rewritten_to_the_kernels_and_others_left_alone() -> None:
    (_, second) = openai.calls_from_chat(
        chat(
            ("call_a", "echo", {"text": "a"}),
            (
                "call_b",
                "edit",
                {
                    "whole": "$1",
                    "inside": "before ${1} after",
                    "nested": [{"new": "${1}"}, "$1"],
                    "awk": "awk '{print $1}'",
                    "shell": "echo ${HOME} $HOME ${2}",
                    DEPENDS_ON: [1],
                },
            ),
        )
    )
    assert second.after == ("call_a",)
    assert second.arguments == {
        "whole": "${call_a}",
        "inside": "before ${call_a} after",
        "nested": [{"new": "${call_a}"}, "${call_a}"],
        "awk": "awk '{print $1}'",
        "shell": "echo ${HOME} $HOME ${2}",
    }


def test_without_depends_on_nothing_is_rewritten() -> None:
    (call,) = openai.calls_from_chat(chat(("c1", "echo", {"text": "${1} $1"})))
    assert call.arguments == {"text": "${1} $1"} and call.after == ()


def test_every_format_reads_depends_on() -> None:
    items = [
        {"type": "function_call", "call_id": "c1", "name": "echo", "arguments": '{"text": "a"}'},
        {
            "type": "function_call",
            "call_id": "c2",
            "name": "echo",
            "arguments": '{"text": "${1}", "depends_on": [1]}',
        },
    ]
    assert openai.calls_from_responses(items)[1] == tk.ToolCall(
        "c2", "echo", {"text": "${c1}"}, after=("c1",)
    )
    blocks = [
        {"type": "tool_use", "id": "t1", "name": "echo", "input": {"text": "a"}},
        {
            "type": "tool_use",
            "id": "t2",
            "name": "echo",
            "input": {"text": "$1", "depends_on": [1]},
        },
    ]
    assert anthropic.calls_from_message(blocks)[1] == tk.ToolCall(
        "t2", "echo", {"text": "${t1}"}, after=("t1",)
    )


@tk.tool(claims=lambda args: [])
async def schedule(ctx: tk.ToolContext, task: str, depends_on: list[str]) -> str:
    """A tool with a parameter of its own named depends_on."""
    return f"{task} after {', '.join(depends_on)}"


def test_a_tool_with_its_own_depends_on_parameter_keeps_it() -> None:
    (call,) = openai.calls_from_chat(
        chat(("c1", "schedule", {"task": "t", DEPENDS_ON: ["x"]})), tools=[schedule]
    )
    assert call.arguments == {"task": "t", DEPENDS_ON: ["x"]} and call.after == ()
    exported = openai.chat_tools([schedule], dependencies=True)[0]["function"]["parameters"]
    assert exported == schedule.parameters_schema()


def test_exporting_with_dependencies_offers_depends_on_in_every_format() -> None:
    for spec in openai.chat_tools(SAMPLE_TOOLS, dependencies=True):
        assert spec["function"]["parameters"]["properties"][DEPENDS_ON]["type"] == "array"
    for spec in openai.responses_tools(SAMPLE_TOOLS, strict=True, dependencies=True):
        assert spec["parameters"]["properties"][DEPENDS_ON]["type"] == ["array", "null"]
        assert DEPENDS_ON in spec["parameters"]["required"]
    for spec in openai.chat_tools(SAMPLE_TOOLS):
        assert DEPENDS_ON not in spec["function"]["parameters"]["properties"]


# -- through the kernel ------------------------------------------------------------------------


async def run(message: dict[str, Any]) -> list[tk.ToolResult]:
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        return await kernel.run(openai.calls_from_chat(message, tools=kernel.tools))


async def test_a_call_runs_after_the_calls_it_depends_on() -> None:
    first, second = await run(
        chat(("c1", "note", {"text": "a"}), ("c2", "echo", {"text": "b", DEPENDS_ON: [1]}))
    )
    assert first.ok and second.ok
    assert second.started_at is not None and second.started_at >= first.finished_at


async def test_a_call_whose_dependency_failed_is_skipped_with_the_reason() -> None:
    _, skipped = await run(chat(("c1", "fail", {}), ("c2", "echo", {"text": "b", DEPENDS_ON: [1]})))
    assert skipped.status is tk.Status.SKIPPED
    assert skipped.error == "skipped: it had to run after c1 (fail), which ended error: it broke"


async def test_a_position_that_names_no_call_is_an_error_for_the_model() -> None:
    (result,) = await run(chat(("c1", "echo", {"text": "b", DEPENDS_ON: [7]})))
    assert result.status is tk.Status.ERROR
    assert "it must run after '7', which is not a known call" in (result.error or "")


async def test_a_dependent_call_gets_the_output_of_the_call_it_names() -> None:
    _, inside, whole = await run(
        chat(
            ("c1", "echo", {"text": "hello"}),
            ("c2", "echo", {"text": "${1}, world", DEPENDS_ON: [1]}),
            ("c3", "echo", {"text": "$2", "times": 2, DEPENDS_ON: [2]}),
        )
    )
    assert inside.output == "hello, world"
    assert whole.output == "hello, worldhello, world"

"""Anthropic Messages: ``tool_use`` blocks in, ``tool_result`` blocks out (``is_error``, every id
answered exactly once, before any text), and the glue with the official SDK over loopback."""

from __future__ import annotations

from typing import Any

import anthropic as anthropic_sdk
from anthropic.types import Message, TextBlock, ToolParam, ToolResultBlockParam, ToolUseBlock, Usage
from pydantic import TypeAdapter

import toolkernel as tk
from tests.loopback import Reply, anthropic_message, serve
from tests.sample_tools import SAMPLE_TOOLS
from toolkernel.formats import anthropic


def sdk_message(*blocks: Any) -> Message:
    return Message(
        id="msg_1",
        type="message",
        role="assistant",
        model="claude-test",
        content=list(blocks),
        stop_reason="tool_use",
        stop_sequence=None,
        usage=Usage(input_tokens=1, output_tokens=1),
    )


def use(block_id: str, name: str, arguments: dict[str, Any]) -> ToolUseBlock:
    return ToolUseBlock(type="tool_use", id=block_id, name=name, input=arguments)


def test_calls_are_the_tool_use_blocks_in_order() -> None:
    message = sdk_message(
        TextBlock(type="text", text="Two things at once."),
        use("toolu_2", "echo", {"text": "b"}),
        use("toolu_1", "note", {"text": "a"}),
    )
    expected = [
        tk.ToolCall("toolu_2", "echo", {"text": "b"}),
        tk.ToolCall("toolu_1", "note", {"text": "a"}),
    ]
    assert anthropic.calls_from_message(message) == expected
    assert anthropic.calls_from_message(message.content) == expected
    assert anthropic.calls_from_message(message.model_dump()) == expected


async def test_tool_results_answer_every_id_once_in_order_with_is_error() -> None:
    message = sdk_message(
        use("toolu_1", "echo", {"text": "a"}),
        use("toolu_2", "fail", {"why": "no disk"}),
        use("toolu_1", "echo", {"text": "again"}),  # a repeated id
        use("toolu_3", "ehco", {}),
        use("toolu_4", "echo", {"text": "x"}),
    )
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        results = await kernel.run(anthropic.calls_from_message(message, tools=SAMPLE_TOOLS))
    blocks = anthropic.tool_results(results)
    for block in blocks:
        TypeAdapter(ToolResultBlockParam).validate_python(block)
    assert [(b["tool_use_id"], b["is_error"]) for b in blocks] == [
        ("toolu_1", False),
        ("toolu_2", True),
        ("toolu_3", True),
        ("toolu_4", False),
    ]
    assert blocks[0]["content"] == (
        "a\n\nInvalidCallError: call id 'toolu_1' is used twice in this batch; ids must be unique"
    )
    assert blocks[1]["content"] == "no disk"
    assert blocks[2]["content"].startswith("UnknownToolError: there is no tool named 'ehco'")


def test_tools_are_valid_sdk_tool_parameters() -> None:
    for spec in anthropic.tools(SAMPLE_TOOLS, dependencies=True):
        TypeAdapter(ToolParam).validate_python(spec)
        assert "depends_on" in spec["input_schema"]["properties"]
    echo = anthropic.tools(SAMPLE_TOOLS)[0]
    assert echo == {
        "name": "echo",
        "description": "Say the text back.",
        "input_schema": SAMPLE_TOOLS[0].parameters_schema(),
    }


async def test_the_glue_with_the_official_sdk_over_loopback() -> None:
    """What a developer writes: export tools, create, run the calls, answer, create again."""
    first = anthropic_message(
        [
            {"type": "text", "text": "Both at once."},
            {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"text": "hi"}},
            {"type": "tool_use", "id": "toolu_2", "name": "fail", "input": {}},
        ]
    )
    final = anthropic_message([{"type": "text", "text": "Done."}])
    async with serve([Reply(first), Reply(final)]) as server:
        client = anthropic_sdk.AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0)
        async with client, tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
            tools = anthropic.tools(kernel.tools.values())
            messages: list[Any] = [{"role": "user", "content": "go"}]
            reply = await client.messages.create(
                model="claude-test", max_tokens=100, messages=messages, tools=tools
            )
            results = await kernel.run(anthropic.calls_from_message(reply, tools=kernel.tools))
            messages += [
                {"role": "assistant", "content": reply.content},
                {"role": "user", "content": anthropic.tool_results(results)},
            ]
            done = await client.messages.create(
                model="claude-test", max_tokens=100, messages=messages, tools=tools
            )
    assert done.content[0].type == "text"
    sent = server.requests[1].json["messages"]
    assert [b["type"] for b in sent[1]["content"]] == ["text", "tool_use", "tool_use"]
    assert sent[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "hi", "is_error": False},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "it broke", "is_error": True},
    ]

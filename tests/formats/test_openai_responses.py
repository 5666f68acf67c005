"""Responses: ``function_call`` items in (SDK objects or dicts), ``function_call_output`` out."""

from __future__ import annotations

import pytest
from openai.types.responses import (
    Response,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_input_item_param import FunctionCallOutput
from pydantic import TypeAdapter

import toolkernel as tk
from tests.sample_tools import SAMPLE_TOOLS
from toolkernel.formats import openai


def items() -> list[object]:
    return [
        ResponseReasoningItem(id="rs_1", type="reasoning", summary=[]),
        ResponseOutputMessage(
            id="msg_1",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text="Reading.", annotations=[])],
        ),
        ResponseFunctionToolCall(
            type="function_call",
            id="fc_1",
            call_id="call_1",
            name="echo",
            arguments='{"text": "a"}',
        ),
        ResponseFunctionToolCall(
            type="function_call", id="fc_2", call_id="call_2", name="fail", arguments="{}"
        ),
    ]


def test_calls_are_the_function_call_items_identified_by_call_id() -> None:
    expected = [tk.ToolCall("call_1", "echo", {"text": "a"}), tk.ToolCall("call_2", "fail", {})]
    assert openai.calls_from_responses(items()) == expected
    assert openai.calls_from_responses(Response.model_construct(output=items())) == expected
    assert openai.calls_from_responses([i.model_dump() for i in items()]) == expected  # type: ignore[attr-defined]


async def test_outputs_answer_each_call_id_in_order_as_valid_sdk_input_items() -> None:
    calls = openai.calls_from_responses(items())
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        outputs = openai.responses_outputs(await kernel.run(calls))
    for output in outputs:
        TypeAdapter(FunctionCallOutput).validate_python(output)
    assert outputs == [
        {"type": "function_call_output", "call_id": "call_1", "output": "a"},
        {"type": "function_call_output", "call_id": "call_2", "output": "error: it broke"},
    ]


def test_responses_tools_always_say_whether_they_are_strict() -> None:
    """The Responses API defaults to strict when ``strict`` is left out."""
    for strict in (False, True):
        for spec in openai.responses_tools(SAMPLE_TOOLS, strict=strict):
            assert spec["type"] == "function" and spec["strict"] is strict
            assert set(spec) == {"type", "name", "description", "parameters", "strict"}


@pytest.mark.parametrize("output", [5, "text", b"bytes", None, 1.5, object()])
def test_output_that_is_not_a_list_of_items_holds_no_calls(output: object) -> None:
    """As a chat message with no ``tool_calls``: malformed model output is never an exception."""
    assert openai.calls_from_responses(output) == []
    assert openai.calls_from_chat(output) == []

"""Chat Completions: calls in from the SDK's messages (or dicts), tool messages out, and the
glue a developer writes with the official SDK, over a loopback server."""

from __future__ import annotations

import json
from typing import Any

import openai as openai_sdk
import pytest
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionToolMessageParam,
)
from openai.types.chat.chat_completion_message_function_tool_call import Function
from pydantic import TypeAdapter

import toolkernel as tk
from tests.loopback import chat_reply, serve
from tests.sample_tools import SAMPLE_TOOLS
from toolkernel.formats import openai


def sdk_call(call_id: str, name: str, arguments: str) -> ChatCompletionMessageFunctionToolCall:
    return ChatCompletionMessageFunctionToolCall(
        id=call_id, type="function", function=Function(name=name, arguments=arguments)
    )


def sdk_message(*calls: ChatCompletionMessageFunctionToolCall) -> ChatCompletionMessage:
    return ChatCompletionMessage(role="assistant", content="On it.", tool_calls=list(calls))


def test_calls_from_an_sdk_message_keep_ids_order_and_arguments() -> None:
    message = sdk_message(
        sdk_call("call_b", "echo", '{"text": "hi", "times": 2}'),
        sdk_call("call_a", "note", '{"text": "x"}'),
    )
    assert openai.calls_from_chat(message) == [
        tk.ToolCall("call_b", "echo", {"text": "hi", "times": 2}),
        tk.ToolCall("call_a", "note", {"text": "x"}),
    ]


def test_a_completion_a_choice_a_message_and_its_dict_give_the_same_calls() -> None:
    message = sdk_message(sdk_call("call_1", "echo", '{"text": "hi"}'))
    completion = ChatCompletion(
        id="x",
        object="chat.completion",
        created=0,
        model="m",
        choices=[{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    )
    expected = [tk.ToolCall("call_1", "echo", {"text": "hi"})]
    assert openai.calls_from_chat(completion) == expected
    assert openai.calls_from_chat(completion.choices[0]) == expected
    assert openai.calls_from_chat(message.model_dump()) == expected
    assert openai.calls_from_chat(ChatCompletionMessage(role="assistant", content="done")) == []


async def test_malformed_output_becomes_error_results_and_never_an_exception() -> None:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": "{bad"}},
            {"id": "c2", "type": "function", "function": {"name": "ehco", "arguments": "{}"}},
            {"id": "c3", "type": "function", "function": {"name": "echo", "arguments": "[1]"}},
            {
                "id": "c4",
                "type": "function",
                "function": {"name": "echo", "arguments": '{"text": "a"}'},
            },
            {
                "id": "c4",
                "type": "function",
                "function": {"name": "echo", "arguments": '{"text": "b"}'},
            },
            {"type": "function", "function": {"name": "echo", "arguments": '{"text": "no id"}'}},
            {
                "id": "",
                "type": "function",
                "function": {"name": "echo", "arguments": '{"text": "empty"}'},
            },
        ],
    }
    calls = openai.calls_from_chat(message, tools=SAMPLE_TOOLS)
    assert [c.id for c in calls] == ["c1", "c2", "c3", "c4", "c4", "call_6", "call_7"]
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        results = await kernel.run(calls)
    assert [r.status for r in results] == [tk.Status.ERROR] * 3 + [tk.Status.OK] + [
        tk.Status.ERROR
    ] + [tk.Status.OK] * 2
    answers = {m["tool_call_id"]: m["content"] for m in openai.chat_tool_messages(results)}
    assert list(answers) == ["c1", "c2", "c3", "c4", "call_6", "call_7"]  # each id once
    assert answers["c1"].startswith(
        "error: InvalidArgumentsError: the arguments of echo are not valid JSON"
    )
    assert answers["c2"] == (
        "error: UnknownToolError: there is no tool named 'ehco'; available tools: echo, fail, "
        "forever, note"
    )
    assert answers["c3"] == (
        "error: InvalidArgumentsError: the arguments of echo must be a JSON object, not an array"
    )
    assert answers["c4"] == (
        "a\n\nerror: InvalidCallError: call id 'c4' is used twice in this batch; ids must be unique"
    )
    assert answers["call_6"] == "no id"


async def test_tool_messages_are_valid_sdk_parameters_in_call_order_saying_how_calls_failed() -> (
    None
):
    calls = [
        tk.ToolCall("c1", "fail", {"why": "disk full"}),
        tk.ToolCall("c2", "echo", {"text": ""}),
        tk.ToolCall("c3", "echo", {"text": "ok"}, after=("c1",)),
    ]
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        results = await kernel.run(calls)
    messages = openai.chat_tool_messages(results)
    adapter = TypeAdapter(ChatCompletionToolMessageParam)
    for message in messages:
        adapter.validate_python(message)
    assert [(m["tool_call_id"], m["content"]) for m in messages] == [
        ("c1", "error: disk full"),
        ("c2", "(no output)"),
        ("c3", "skipped: it had to run after c1 (fail), which ended error: disk full"),
    ]


async def test_the_glue_with_the_official_sdk_over_loopback() -> None:
    """What a developer writes: export tools, create, run the calls, answer, create again."""
    first = chat_reply(
        None,
        ("call_1", "echo", '{"text": "ab", "times": null}'),  # strict mode: null = left out
        ("call_2", "note", '{"text": "n"}'),
    )
    async with serve([first, chat_reply("All done.")]) as server:
        client = openai_sdk.AsyncOpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)
        async with client, tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
            tools = openai.chat_tools(kernel.tools.values(), strict=True)
            messages: list[Any] = [{"role": "user", "content": "go"}]
            completion = await client.chat.completions.create(
                model="m", messages=messages, tools=tools
            )
            message = completion.choices[0].message
            calls = openai.calls_from_chat(message, tools=kernel.tools)
            results = await kernel.run(calls)
            messages += [message, *openai.chat_tool_messages(results)]
            final = await client.chat.completions.create(model="m", messages=messages, tools=tools)
    assert final.choices[0].message.content == "All done."
    assert [r.output for r in results] == ["ab", "noted 'n'"]
    sent = server.requests[0].json
    assert [t["function"]["name"] for t in sent["tools"]] == ["echo", "fail", "note", "forever"]
    assert all(t["function"]["strict"] is True for t in sent["tools"])
    second = server.requests[1].json["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in second[1]["tool_calls"]] == ["call_1", "call_2"]
    assert [(m["tool_call_id"], m["content"]) for m in second[2:]] == [
        ("call_1", "ab"),
        ("call_2", "noted 'n'"),
    ]
    assert json.loads(second[1]["tool_calls"][0]["function"]["arguments"])["times"] is None


@pytest.mark.parametrize(
    ("arguments", "json_type"), [("null", "null"), ('"hi"', "a string"), ("[1]", "an array")]
)
async def test_arguments_that_are_not_an_object_are_named_in_json_terms(
    arguments: str, json_type: str
) -> None:
    message = {"role": "assistant", "tool_calls": [sdk_call("c1", "echo", arguments).model_dump()]}
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        (result,) = await kernel.run(openai.calls_from_chat(message, tools=kernel.tools))
    assert result.error == (
        f"InvalidArgumentsError: the arguments of echo must be a JSON object, not {json_type}"
    )

"""MCP servers that break the protocol (``tests/mcp/hostile_server.py``, a real subprocess over
stdio): what they get wrong stays with their own tools and calls, and reads as a message a model
can act on."""

from __future__ import annotations

import logging
import pathlib
import sys

import pytest

import toolkernel as tk
from toolkernel.formats import anthropic, openai
from toolkernel.mcp import stdio_tools

SERVER = [sys.executable, str(pathlib.Path(__file__).with_name("hostile_server.py"))]


async def test_a_tool_listed_twice_is_kept_once_and_the_kernel_opens(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="toolkernel.mcp"):
        async with stdio_tools([*SERVER, "twice"]) as tools:
            assert [(t.name, t.description) for t in tools] == [
                ("lookup", "the first"),
                ("other", "another"),
            ]
            async with tk.open_kernel(tools) as kernel:
                (result,) = await kernel.run([tk.ToolCall("c1", "lookup", {"key": "k"})])
    assert result.output == "lookup answered"
    assert "lists the tool 'lookup' twice; the first is kept" in caplog.text


async def test_a_malformed_result_fails_only_its_call_with_a_message_for_the_model() -> None:
    async with stdio_tools([*SERVER, "malformed"]) as tools, tk.open_kernel(tools) as kernel:
        first, second = await kernel.run(
            [tk.ToolCall("c1", "lookup", {"key": "a"}), tk.ToolCall("c2", "lookup", {"key": "b"})]
        )
    for result in (first, second):
        assert result.status is tk.Status.ERROR and result.error_type == "MCPToolError"
        assert result.error is not None
        assert result.error.startswith(
            "the MCP server 'hostile' answered the call of lookup with a result "
            "that is not valid MCP (content: Input should be a valid list)"
        )
        assert "errors.pydantic.dev" not in result.error


async def test_a_tool_whose_schema_has_no_properties_goes_out_with_them_and_runs() -> None:
    async with stdio_tools([*SERVER, "no-properties"]) as tools, tk.open_kernel(tools) as kernel:
        (function,) = openai.chat_tools(tools, strict=True)
        assert function["function"]["parameters"]["properties"] == {}
        assert anthropic.tools(tools)[0]["input_schema"]["type"] == "object"
        message = {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "function": function["function"] | {"arguments": "{}"}}],
        }
        (result,) = await kernel.run(openai.calls_from_chat(message, tools=kernel.tools))
    assert result.output == "help answered"


async def test_a_tool_list_the_sdk_refuses_is_a_declaration_error_naming_server_and_field() -> None:
    with pytest.raises(tk.ToolDeclarationError) as raised:
        async with stdio_tools([*SERVER, "untyped"]):
            pytest.fail("started with tools the SDK refused")
    assert str(raised.value).startswith(
        "the MCP server 'hostile' lists its tools in a form that is not valid MCP "
        "(tools.0.inputSchema.type: Field required)"
    )


async def test_a_tool_with_an_empty_name_is_left_out_with_a_warning_and_the_others_work(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="toolkernel.mcp"):
        async with stdio_tools([*SERVER, "empty-name"]) as tools, tk.open_kernel(tools) as kernel:
            assert [t.name for t in tools] == ["lookup"]
            (result,) = await kernel.run([tk.ToolCall("c1", "lookup", {"key": "k"})])
    assert result.output == "lookup answered"
    assert "lists a tool with an empty name ('')" in caplog.text
    assert "lists a tool with an empty name (' ')" in caplog.text

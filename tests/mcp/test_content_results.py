"""What a real MCP server's results become (``tests/mcp/server.py`` over stdio): the model reads
the server's text, programs keep the structured content, images and PDFs reach the wire formats
that carry them as images and files, and an ``isError`` result is an error with the server's
text."""

from __future__ import annotations

import pathlib
import sys

from anthropic.types import ToolResultBlockParam
from anthropic.types.tool_result_block_param import Content as AnthropicResultContent
from openai.types.responses.response_input_item_param import FunctionCallOutput
from pydantic import TypeAdapter

import toolkernel as tk
from toolkernel.formats import anthropic, openai
from toolkernel.mcp import stdio_tools

SERVER = [sys.executable, str(pathlib.Path(__file__).with_name("server.py"))]
PNG = "iVBORw0KGgo="  # the server's picture: the eight bytes of a PNG signature
TOOL_RESULT = TypeAdapter(ToolResultBlockParam)
TOOL_RESULT_CONTENT = TypeAdapter(list[AnthropicResultContent])
FUNCTION_CALL_OUTPUT = TypeAdapter(FunctionCallOutput)


async def run(*calls: tk.ToolCall) -> list[tk.ToolResult]:
    async with stdio_tools(SERVER) as tools, tk.open_kernel(tools) as kernel:
        return await kernel.run(list(calls))


async def test_a_string_with_structured_output_reaches_the_model_as_the_string() -> None:
    (greeted,) = await run(tk.ToolCall("c1", "greet", {"name": "Ada"}))
    assert greeted.ok
    assert greeted.text() == "hello, Ada"  # not {"result": "hello, Ada"}
    assert isinstance(greeted.output, tk.Content)
    assert greeted.output.structured == {"result": "hello, Ada"}
    assert openai.chat_tool_messages([greeted])[0]["content"] == "hello, Ada"
    assert anthropic.tool_results([greeted])[0]["content"] == "hello, Ada"


async def test_images_and_documents_reach_anthropic_and_responses_as_themselves() -> None:
    picture, report = await run(tk.ToolCall("c1", "picture", {}), tk.ToolCall("c2", "report", {}))
    assert picture.output == tk.Content([{"type": "image", "data": PNG, "mimeType": "image/png"}])
    assert report.text() == (
        "the quarter in one chart:\n"
        "[image: image/png, 8 bytes]\n"
        "[resource: file:///reports/q3.pdf (application/pdf, 9 bytes)]\n"
        "[resource link: q3.csv <file:///reports/q3.csv>]"
    )

    image_source = {"type": "base64", "media_type": "image/png", "data": PNG}
    blocks = anthropic.tool_results([picture, report])
    for block in blocks:
        TOOL_RESULT.validate_python(block)
        # Equal after validation: no key was dropped as unknown to the SDK.
        assert TOOL_RESULT_CONTENT.validate_python(block["content"]) == block["content"]
    assert blocks[0]["content"] == [{"type": "image", "source": image_source}]
    assert blocks[1]["content"] == [
        {"type": "text", "text": "the quarter in one chart:"},
        {"type": "image", "source": image_source},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"},
            "title": "q3.pdf",
        },
        {"type": "text", "text": "[resource link: q3.csv <file:///reports/q3.csv>]"},
    ]

    items = openai.responses_outputs([picture, report])
    for item in items:
        assert FUNCTION_CALL_OUTPUT.validate_python(item) == item
    image_item = {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"}
    assert items[0]["output"] == [{**image_item, "detail": "auto"}]
    assert [part["type"] for part in items[1]["output"]] == [
        "input_text",
        "input_image",
        "input_file",
        "input_text",
    ]
    assert items[1]["output"][2]["file_data"] == "data:application/pdf;base64,JVBERi0xLjQK"


async def test_an_is_error_result_is_an_error_with_the_servers_text() -> None:
    refused, conflict = await run(
        tk.ToolCall("c1", "refuse", {"reason": "the disk is full"}),
        tk.ToolCall("c2", "conflict", {}),
    )
    assert refused.status is tk.Status.ERROR and refused.error_type == "MCPToolError"
    assert refused.error == "Error executing tool refuse: the disk is full"
    # No text, but structured content: its JSON is the message.
    assert conflict.status is tk.Status.ERROR and conflict.error_type == "MCPToolError"
    assert conflict.error == '{"code": 409, "reason": "stale"}'
    assert anthropic.tool_results([conflict])[0] == {
        "type": "tool_result",
        "tool_use_id": "c2",
        "content": '{"code": 409, "reason": "stale"}',
        "is_error": True,
    }


async def test_a_huge_text_answer_is_cut_for_the_model_and_says_so(tmp_path: pathlib.Path) -> None:
    # A server answering a whole dump would fill the model's context: the head is kept, and
    # the end says how much was cut and what to ask for instead. An error's text too.
    from toolkernel.mcp._content import MCP_TEXT_LIMIT

    (tmp_path / "dump.txt").write_text("x" * (MCP_TEXT_LIMIT + 5_000))
    async with stdio_tools(SERVER, cwd=tmp_path) as tools, tk.open_kernel(tools) as kernel:
        dump, refused, small = await kernel.run(
            [
                tk.ToolCall("d", "read_file", {"path": "dump.txt"}),
                tk.ToolCall("r", "refuse", {"reason": "y" * (MCP_TEXT_LIMIT + 1)}),
                tk.ToolCall("s", "greet", {"name": "Ada"}),
            ]
        )
    assert dump.ok
    assert dump.text().startswith("x" * MCP_TEXT_LIMIT + "\n... (5000 more characters")
    assert "ask the tool for less" in dump.text()
    assert refused.status is tk.Status.ERROR
    assert "more characters of the answer cut" in (refused.error or "")
    assert small.text() == "hello, Ada"

"""An MCP tool's claims, argument checks and outputs, from the tool as a server lists it (the SDK's
own ``Tool`` and content types), without a server: these are decided before and after the call.
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types
import pytest

import toolkernel as tk
from toolkernel.mcp import MCPTool
from toolkernel.mcp._content import error_text_of, output_of
from toolkernel.mcp._tool import ServerConnection

SERVER = tk.device("mcp:fs")

EDIT_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "edits": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"old": {"type": "string"}, "new": {"type": "string"}},
                "required": ["old", "new"],
            },
        },
        "dry_run": {"type": "boolean", "default": False},
        "mode": {"enum": ["fast", "safe"]},
    },
    "required": ["path", "edits"],
    "additionalProperties": False,
}


def make(
    name: str = "edit_file",
    schema: dict[str, Any] | None = None,
    annotations: mcp_types.ToolAnnotations | None = None,
    **options: Any,
) -> MCPTool:
    spec = mcp_types.Tool(
        name=name,
        description=f"{name}, for the tests",
        input_schema=schema or EDIT_SCHEMA,
        annotations=annotations,
    )
    return MCPTool(ServerConnection("fs", ["fs-server"], None), spec, **options)


def message(tool: MCPTool, arguments: dict[str, Any]) -> str:
    with pytest.raises(tk.errors.InvalidArgumentsError) as raised:
        tool.parse_arguments(arguments)
    return str(raised.value)


# -- declarations (what calls claim: test_claims.py) ----------------------------------------


def test_declaring_an_argument_the_tool_does_not_have_is_refused() -> None:
    with pytest.raises(tk.ToolDeclarationError, match="'file' of MCP tool 'edit_file'"):
        make(writes=["file"])


def test_names_descriptions_and_the_schema_models_are_shown() -> None:
    tool = make(prefix="fs_")
    assert tool.name == "fs_edit_file" and tool.remote_name == "edit_file"
    assert tool.description == "edit_file, for the tests"
    assert tool.parameters_schema() == EDIT_SCHEMA
    assert tool.parameters_schema() is not tool.input_schema  # a copy


# -- arguments -------------------------------------------------------------------------------


def test_arguments_are_checked_against_the_input_schema_with_messages_for_the_model() -> None:
    tool = make()
    good = {"path": "a", "edits": [{"old": "x", "new": "y"}], "dry_run": True}
    assert tool.parse_arguments(good) == good
    assert message(tool, {"path": "a"}) == "edit_file is missing required argument 'edits'"
    assert message(tool, {}) == "edit_file is missing required arguments 'path', 'edits'"
    assert message(tool, {"path": "a", "edits": [], "force": True}) == (
        "edit_file got unexpected argument 'force'; it takes path, edits, dry_run, mode"
    )
    assert message(tool, {"path": 3, "edits": []}) == (
        "edit_file argument 'path' must be string, not integer (3)"
    )
    assert message(tool, {"path": "a", "edits": [{"old": "x", "new": 1}]}) == (
        "edit_file argument 'edits[0].new' must be string, not integer (1)"
    )
    assert message(tool, {"path": "a", "edits": [], "mode": "slow"}) == (
        "edit_file argument 'mode': 'slow' is not one of ['fast', 'safe']"
    )


def test_a_schema_that_is_not_json_schema_leaves_the_checking_to_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="toolkernel.mcp"):
        tool = make("odd", {"type": "object", "properties": {"n": {"type": "whole number"}}})
    assert "is not valid JSON Schema" in caplog.text
    assert tool.parse_arguments({"n": "anything"}) == {"n": "anything"}


# -- results ---------------------------------------------------------------------------------


def result(*content: Any, structured: Any = None, error: bool = False) -> Any:
    return mcp_types.CallToolResult(
        content=list(content), structured_content=structured, is_error=error
    )


def test_outputs_are_text_or_content_with_every_block_and_the_structured_content() -> None:
    text = mcp_types.TextContent(type="text", text="line 1")
    more = mcp_types.TextContent(type="text", text="line 2")
    image = mcp_types.ImageContent(type="image", data="AAAA", mime_type="image/png")
    assert output_of(result(text, more)) == "line 1\nline 2"
    assert output_of(result()) == ""
    with_structured = output_of(result(text, structured={"n": 1}))
    assert with_structured == tk.Content([{"type": "text", "text": "line 1"}], structured={"n": 1})
    assert with_structured.text() == "line 1"  # the model reads the server's text
    assert output_of(result(structured={"n": 1})).text() == '{"n": 1}'  # or, with none, the JSON
    assert output_of(result(text, image)) == tk.Content(
        [
            {"type": "text", "text": "line 1"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        ]
    )
    assert error_text_of(result(text, image, more, error=True)) == "line 1\nline 2"
    assert error_text_of(result(structured={"n": 1}, error=True)) == '{"n": 1}'
    assert error_text_of(result(image, error=True)) == ""

"""Content outputs in the answers to the model: images and PDFs as each format's own blocks
(Anthropic ``tool_result``, OpenAI Responses ``function_call_output``), text everywhere else,
checked against the official SDKs' request types."""

from __future__ import annotations

from typing import Any

from anthropic.types import ToolResultBlockParam
from anthropic.types.tool_result_block_param import Content as AnthropicResultContent
from openai.types.chat import ChatCompletionToolMessageParam
from openai.types.responses.response_input_item_param import FunctionCallOutput
from pydantic import TypeAdapter

import toolkernel as tk
from toolkernel.formats import anthropic, openai

TOOL_RESULT = TypeAdapter(ToolResultBlockParam)
TOOL_RESULT_CONTENT = TypeAdapter(list[AnthropicResultContent])
FUNCTION_CALL_OUTPUT = TypeAdapter(FunctionCallOutput)
TOOL_MESSAGE = TypeAdapter(ChatCompletionToolMessageParam)

PNG = "iVBORw0KGgo="
PDF = "JVBERi0xLjQK"


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def image(mime_type: str = "image/png", data: str = PNG) -> dict[str, Any]:
    return {"type": "image", "data": data, "mimeType": mime_type}


def blob(uri: str, mime_type: str, data: str = PDF) -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime_type, "blob": data}}


def ok(output: Any, call_id: str = "c1") -> tk.ToolResult:
    return tk.ToolResult(call_id, "t", tk.Status.OK, output=output)


def anthropic_blocks(results: list[tk.ToolResult]) -> list[dict[str, Any]]:
    """``tool_results``, each block checked against the SDK's types (the equality proves no key
    was dropped as unknown)."""
    blocks = anthropic.tool_results(results)
    for block in blocks:
        TOOL_RESULT.validate_python(block)
        if not isinstance(block["content"], str):
            assert TOOL_RESULT_CONTENT.validate_python(block["content"]) == block["content"]
    return blocks


def responses_items(results: list[tk.ToolResult]) -> list[dict[str, Any]]:
    items = openai.responses_outputs(results)
    for item in items:
        assert FUNCTION_CALL_OUTPUT.validate_python(item) == item
    return items


def chat_messages(results: list[tk.ToolResult]) -> list[dict[str, Any]]:
    messages = openai.chat_tool_messages(results)
    for message in messages:
        assert TOOL_MESSAGE.validate_python(message) == message
    return messages


MIXED = tk.Content(
    [
        text("the quarter:"),
        image(),
        blob("file:///reports/q%203.pdf", "application/pdf"),
        {"type": "resource_link", "uri": "file:///reports/q3.csv", "name": "q3.csv"},
        image("image/tiff", "AAAA"),
        {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
        text("end"),
    ],
    structured={"rows": 3},
)


def test_anthropic_carries_images_and_pdfs_as_blocks_and_the_rest_as_text() -> None:
    (block,) = anthropic_blocks([ok(MIXED)])
    assert block["is_error"] is False
    assert block["content"] == [
        {"type": "text", "text": "the quarter:"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
            "title": "q 3.pdf",
        },
        {
            "type": "text",
            "text": "[resource link: q3.csv <file:///reports/q3.csv>]\n"
            "[image: image/tiff, 3 bytes]\n[audio: audio/wav, 3 bytes]\nend",
        },
    ]


def test_responses_carries_images_and_pdfs_as_input_items_and_the_rest_as_text() -> None:
    (item,) = responses_items([ok(MIXED)])
    assert item["output"] == [
        {"type": "input_text", "text": "the quarter:"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"},
        {
            "type": "input_file",
            "file_data": f"data:application/pdf;base64,{PDF}",
            "filename": "q 3.pdf",
        },
        {
            "type": "input_text",
            "text": "[resource link: q3.csv <file:///reports/q3.csv>]\n"
            "[image: image/tiff, 3 bytes]\n[audio: audio/wav, 3 bytes]\nend",
        },
    ]


def test_chat_tool_messages_take_text_only_so_attachments_are_placeholders() -> None:
    (message,) = chat_messages([ok(MIXED)])
    assert message["content"] == MIXED.text()
    assert "[image: image/png, 8 bytes]" in message["content"]
    assert "[resource: file:///reports/q%203.pdf (application/pdf, 9 bytes)]" in message["content"]


def test_an_image_alone_and_an_image_sent_as_a_blob_resource() -> None:
    alone = tk.Content([image("image/JPEG; q=1")])
    as_resource = tk.Content([text(" "), blob("file:///shots/a.webp", "image/webp", PNG)])
    first, second = anthropic_blocks([ok(alone, "c1"), ok(as_resource, "c2")])
    assert first["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": PNG}}
    ]
    # White space alone is no text block (the API refuses those).
    assert second["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/webp", "data": PNG}}
    ]
    first, second = responses_items([ok(alone, "c1"), ok(as_resource, "c2")])
    assert first["output"] == [
        {"type": "input_image", "image_url": f"data:image/jpeg;base64,{PNG}", "detail": "auto"}
    ]
    assert second["output"][0] == {"type": "input_text", "text": " "}


def test_content_without_attachments_is_the_same_plain_text_as_before() -> None:
    outputs = [
        tk.Content([text("hello"), text("world")], structured={"result": "hello\nworld"}),
        tk.Content([text("a"), {"type": "resource_link", "uri": "u", "name": "n"}]),
        tk.Content(structured={"n": 1}),
        tk.Content([image("image/tiff", "AAAA")]),
        tk.Content(),
    ]
    expected = ["hello\nworld", "a\n[resource link: n <u>]", '{"n": 1}']
    expected += ["[image: image/tiff, 3 bytes]", "(no output)"]
    results = [ok(output, f"c{n}") for n, output in enumerate(outputs)]
    assert [b["content"] for b in anthropic_blocks(results)] == expected
    assert [i["output"] for i in responses_items(results)] == expected
    assert [m["content"] for m in chat_messages(results)] == expected


def test_a_repeated_id_adds_its_error_after_the_attachments() -> None:
    repeat = tk.ToolResult("c1", "t", tk.Status.ERROR, error="call id 'c1' is used twice")
    (block,) = anthropic_blocks([ok(tk.Content([image()])), repeat])
    assert block["is_error"] is False
    assert block["content"][1:] == [{"type": "text", "text": "call id 'c1' is used twice"}]
    (item,) = responses_items([ok(tk.Content([image()])), repeat])
    assert item["output"][1:] == [
        {"type": "input_text", "text": "error: call id 'c1' is used twice"}
    ]
    (message,) = chat_messages([ok(tk.Content([image()])), repeat])
    assert message["content"] == (
        "[image: image/png, 8 bytes]\n\nerror: call id 'c1' is used twice"
    )


def test_errors_are_text_as_before() -> None:
    failed = tk.ToolResult("c1", "t", tk.Status.ERROR, error="the disk is full")
    (block,) = anthropic_blocks([failed])
    assert (block["content"], block["is_error"]) == ("the disk is full", True)
    (item,) = responses_items([failed])
    assert item["output"] == "error: the disk is full"

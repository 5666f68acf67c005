"""Content: rich outputs (text, images, audio, resources) in MCP's shapes, and what models read
of them."""

from __future__ import annotations

import base64
from typing import Any

import pytest

import toolkernel as tk

PNG = base64.b64encode(bytes(12 * 1024)).decode()  # 12 KiB


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


@pytest.mark.parametrize(
    ("block", "read"),
    [
        (text("hello"), "hello"),
        ({"type": "image", "data": PNG, "mimeType": "image/png"}, "[image: image/png, 12 KiB]"),
        ({"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}, "[audio: audio/wav, 3 bytes]"),
        (
            {"type": "resource_link", "uri": "file:///r/q3.csv", "name": "q3.csv"},
            "[resource link: q3.csv <file:///r/q3.csv>]",
        ),
        (
            {"type": "resource", "resource": {"uri": "file:///notes.md", "text": "# notes"}},
            "# notes",
        ),
        (
            {
                "type": "resource",
                "resource": {"uri": "file:///q3.pdf", "mimeType": "application/pdf", "blob": PNG},
            },
            "[resource: file:///q3.pdf (application/pdf, 12 KiB)]",
        ),
        (
            {"type": "resource", "resource": {"uri": "file:///x.bin", "blob": "AA=="}},
            "[resource: file:///x.bin (1 byte)]",
        ),
    ],
    ids=["text", "image", "audio", "link", "text-resource", "blob-resource", "untyped-blob"],
)
def test_the_model_reads_text_as_it_is_and_a_placeholder_for_what_text_cant_carry(
    block: dict[str, Any], read: str
) -> None:
    assert tk.Content([block]).text() == read


def test_blocks_are_joined_by_newlines_and_structured_content_is_for_programs() -> None:
    image = {"type": "image", "data": "AAAA", "mimeType": "image/gif"}
    content = tk.Content([text("a chart:"), image, text("done")], structured={"n": 1})
    assert content.text() == "a chart:\n[image: image/gif, 3 bytes]\ndone"
    assert content.structured == {"n": 1}


def test_with_no_blocks_the_model_reads_the_structured_content_as_json() -> None:
    assert tk.Content(structured={"words": 2, "é": [1]}).text() == '{"words": 2, "é": [1]}'
    assert tk.Content().text() == ""


def test_the_blocks_are_a_tuple_of_copies() -> None:
    block: dict[str, Any] = {"type": "resource", "resource": {"uri": "u", "text": "before"}}
    content = tk.Content([block])
    block["resource"]["text"] = "after"
    block["type"] = "nonsense"
    assert isinstance(content.blocks, tuple)
    assert content.text() == "before"
    assert content == tk.Content([{"type": "resource", "resource": {"uri": "u", "text": "before"}}])


def test_other_keys_of_a_block_are_kept() -> None:
    block = {**text("hi"), "annotations": {"audience": ["user"]}, "_meta": {"k": 1}}
    assert tk.Content([block]).blocks == (block,)


def test_the_repr_shows_long_data_as_its_length() -> None:
    content = tk.Content([{"type": "image", "data": PNG, "mimeType": "image/png"}])
    assert f"({len(PNG)} chars)" in repr(content)
    assert len(repr(content)) < 200


@pytest.mark.parametrize(
    ("blocks", "error", "message"),
    [
        (text("lone"), TypeError, "not a single mapping; wrap the block in a list"),
        ("text", TypeError, "not str"),
        (["hello"], TypeError, "content block 0 must be a mapping, not str"),
        ([{"text": "no type"}], ValueError, "content block 0 has type None; a block's type is"),
        ([text("a"), {"type": "video"}], ValueError, "content block 1 has type 'video'"),
        ([{"type": "text"}], ValueError, "content block 0 (text) has no 'text'"),
        ([{"type": "text", "text": 3}], TypeError, "needs 'text' as a string, not int"),
        (
            [{"type": "image", "data": b"\x89PNG", "mimeType": "image/png"}],
            TypeError,
            "content block 0 (image) needs 'data' as a base64 string, not bytes",
        ),
        ([{"type": "audio", "data": "AAAA"}], ValueError, "(audio) has no 'mimeType'"),
        ([{"type": "resource_link", "uri": "u"}], ValueError, "(resource_link) has no 'name'"),
        (
            [{"type": "resource", "resource": "file:///a"}],
            TypeError,
            "(resource) needs 'resource' as a mapping with 'uri' and 'text' or 'blob', not str",
        ),
        (
            [{"type": "resource", "resource": {"uri": "u"}}],
            ValueError,
            "content block 0 (resource) resource needs exactly one of 'text' and 'blob'",
        ),
        (
            [{"type": "resource", "resource": {"uri": "u", "text": "t", "blob": "AA=="}}],
            ValueError,
            "needs exactly one of 'text' and 'blob'",
        ),
        (
            [{"type": "resource", "resource": {"text": "t"}}],
            ValueError,
            "(resource) resource has no 'uri'",
        ),
    ],
)
def test_a_malformed_block_is_refused_saying_which_and_why(
    blocks: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as raised:
        tk.Content(blocks)
    assert message in str(raised.value)


def test_segments_are_the_blocks_a_format_carries_between_runs_of_text() -> None:
    image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    link = {"type": "resource_link", "uri": "u", "name": "n"}
    content = tk.Content([text("a"), text("b"), image, link, image])
    assert content.segments(lambda block: block["type"] == "image") == [
        "a\nb",
        image,
        "[resource link: n <u>]",
        image,
    ]
    assert content.segments(lambda block: False) == [content.text()]
    assert tk.Content(structured=[1]).segments(lambda block: True) == ["[1]"]


def test_a_result_whose_output_is_content_reads_as_its_text() -> None:
    content = tk.Content([text("see:"), {"type": "image", "data": "AAAA", "mimeType": "image/png"}])
    result = tk.ToolResult("c1", "shot", tk.Status.OK, output=content)
    assert result.text() == "see:\n[image: image/png, 3 bytes]"
    listed = tk.ToolResult("c1", "shots", tk.Status.OK, output=[content])
    assert listed.text() == '["see:\\n[image: image/png, 3 bytes]"]'


async def test_a_tool_of_ones_own_may_return_content() -> None:
    @tk.tool(claims=lambda args: [])
    async def screenshot(ctx: tk.ToolContext) -> tk.Content:
        """Show the screen."""
        png = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
        return tk.Content(
            [text("the screen:"), {"type": "image", "data": png, "mimeType": "image/png"}]
        )

    @tk.tool(claims=lambda args: [])
    async def describe(ctx: tk.ToolContext, seen: str) -> str:
        """Say what was seen."""
        return f"seen: {seen}"

    async with tk.open_kernel([screenshot, describe]) as kernel:
        shot, described = await kernel.run(
            [
                tk.ToolCall("c1", "screenshot", {}),
                tk.ToolCall("c2", "describe", {"seen": "$c1"}, after=["c1"]),
            ]
        )
    assert isinstance(shot.output, tk.Content)
    assert shot.text() == "the screen:\n[image: image/png, 8 bytes]"
    assert described.output == "seen: the screen:\n[image: image/png, 8 bytes]"

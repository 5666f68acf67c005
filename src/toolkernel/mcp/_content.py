"""What an MCP ``CallToolResult`` becomes: the output of an OK result, or the text of an error.

- Content that is all text, with no structured content, is the output as one string (blocks
  joined by newlines): what most tools answer, and what the model reads.
- Anything else is a :class:`~toolkernel.Content`: every content block as a plain dict in MCP's
  own shape (``{"type": "image", "data": ..., "mimeType": "image/png"}``), and the structured
  content (``structuredContent``, for programs) as it came. The model reads the blocks: a tool
  with an ``outputSchema`` should send its JSON as text too (the spec says so, and the SDK's
  servers do), so a FastMCP tool returning a string reaches the model as that string, not as
  ``{"result": ...}``; with no blocks at all, the model reads the structured content's JSON.
  Images and documents reach the model as images and files in the wire formats that carry
  them (see :class:`~toolkernel.Content`).

An ``isError`` result's text is the error message; with no text, its structured content's
JSON; a result with neither says so.

Text output is kept up to :data:`MCP_TEXT_LIMIT` characters, as Claude Code keeps an MCP tool's
answer to about 25,000 tokens: a server answering a whole database dump would otherwise fill
the model's context. What is cut is said at the end, with what to do about it.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic

from ..kernel import Content

__all__ = ["MCP_TEXT_LIMIT", "output_of", "error_text_of", "first_problem"]

MCP_TEXT_LIMIT = 100_000
"""Characters of an MCP tool's text answer kept for the model (about 25,000 tokens)."""


def _blocks(result: Any) -> list[Any]:
    content = getattr(result, "content", None)
    return list(content) if content else []


def _text(block: Any) -> str | None:
    if getattr(block, "type", None) == "text":
        text = getattr(block, "text", None)
        return text if isinstance(text, str) else None
    return None


def _plain(block: Any) -> Any:
    """A block as the spec spells it: camelCase keys, nothing the server left out."""
    if hasattr(block, "model_dump"):
        return block.model_dump(mode="json", by_alias=True, exclude_none=True)
    return block


def output_of(result: Any) -> str | Content:
    """The output of a successful call from its ``CallToolResult``."""
    structured = getattr(result, "structured_content", None)
    blocks = _blocks(result)
    if structured is None:
        texts = [_text(block) for block in blocks]
        if all(text is not None for text in texts):
            return _kept("\n".join(text for text in texts if text is not None))
    return Content([_plain(block) for block in blocks], structured=structured)


def _kept(text: str) -> str:
    if len(text) <= MCP_TEXT_LIMIT:
        return text
    cut = len(text) - MCP_TEXT_LIMIT
    return (
        f"{text[:MCP_TEXT_LIMIT]}\n... ({cut} more characters of the answer cut: ask the tool "
        "for less, a narrower query or one page at a time)"
    )


def error_text_of(result: Any) -> str:
    """The message of an ``isError`` result: its text blocks, joined; else its structured
    content as JSON; else ``""``."""
    texts = [text for block in _blocks(result) if (text := _text(block))]
    if texts:
        return _kept("\n".join(texts))
    structured = getattr(result, "structured_content", None)
    if structured is None:
        return ""
    return json.dumps(structured, ensure_ascii=False, default=str)


def first_problem(error: pydantic.ValidationError) -> str:
    """``content: Input should be a valid list``: where and what, without pydantic's links."""
    problems = error.errors(include_url=False, include_input=False)
    if not problems:
        return "no details"
    first = problems[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
    return f"{where}: {first.get('msg', '')}{more}" if where else f"{first.get('msg', '')}{more}"

"""What an MCP ``CallToolResult`` becomes: the output of an OK result, or the text of an error.

- Structured content (a JSON object, for tools with an ``outputSchema``) is the output as it is.
- Otherwise, content that is all text is the output as one string (blocks joined by newlines).
- Otherwise (images, audio, resource links, embedded resources) the output is the list of
  content blocks as plain dicts, in MCP's own shape (``{"type": "image", "data": ...,
  "mimeType": "image/png"}``), so nothing the server sent is lost.

An ``isError`` result's text is the error message; a result with no text says so.
"""

from __future__ import annotations

from typing import Any

import pydantic

__all__ = ["output_of", "error_text_of", "first_problem"]


def _blocks(result: Any) -> list[Any]:
    content = getattr(result, "content", None)
    return list(content) if content else []


def _text(block: Any) -> str | None:
    if getattr(block, "type", None) == "text":
        text = getattr(block, "text", None)
        return text if isinstance(text, str) else None
    return None


def output_of(result: Any) -> Any:
    """The output of a successful call from its ``CallToolResult``."""
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        return structured
    blocks = _blocks(result)
    texts = [_text(block) for block in blocks]
    if all(text is not None for text in texts):
        return "\n".join(text for text in texts if text is not None)
    return [
        block.model_dump(mode="json", by_alias=True, exclude_none=True)
        if hasattr(block, "model_dump")
        else block
        for block in blocks
    ]


def error_text_of(result: Any) -> str:
    """The message of an ``isError`` result: its text blocks, joined."""
    texts = [text for block in _blocks(result) if (text := _text(block))]
    return "\n".join(texts)


def first_problem(error: pydantic.ValidationError) -> str:
    """``content: Input should be a valid list``: where and what, without pydantic's links."""
    problems = error.errors(include_url=False, include_input=False)
    if not problems:
        return "no details"
    first = problems[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
    return f"{where}: {first.get('msg', '')}{more}" if where else f"{first.get('msg', '')}{more}"

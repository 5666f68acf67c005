"""Anthropic's Messages wire format: tools out, ``tool_use`` in, ``tool_result`` out.

The functions accept the official ``anthropic`` SDK's objects and plain dicts alike (the SDK is
not needed), and return plain dicts the SDK accepts as request parameters::

    from toolkernel.formats import anthropic as wire

    reply = await client.messages.create(
        model=..., max_tokens=4096, messages=messages, tools=wire.tools(kernel.tools.values())
    )
    calls = wire.calls_from_message(reply, tools=kernel.tools)
    results = await kernel.run(calls)
    messages += [
        {"role": "assistant", "content": reply.content},
        {"role": "user", "content": wire.tool_results(results)},
    ]

Tool names Anthropic forbids are renamed (see :func:`toolkernel.formats.wire_names`); pass the
same tools as ``tools=`` to :func:`calls_from_message` to map them back. Malformed model output
(an unknown tool, a missing or repeated id) becomes an ERROR result, never an exception.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..kernel import ToolCall, ToolResult
from ._attachments import Attachment
from ._calls import Answer, WireCall, answers, exported_tools, field, to_tool_calls

__all__ = ["tools", "calls_from_message", "tool_results"]

Tools = Iterable[object] | Mapping[str, object]


def tools(tools: Tools, *, dependencies: bool = False) -> list[dict[str, Any]]:
    """The ``tools`` parameter of a Messages request: name, description, ``input_schema``.

    With ``dependencies=True`` every tool also offers the optional ``depends_on`` argument
    (see :mod:`toolkernel.formats`).
    """
    exported = []
    for _, wire_name, description, schema in exported_tools(tools, dependencies):
        spec: dict[str, Any] = {"name": wire_name}
        if description:
            spec["description"] = description
        spec["input_schema"] = schema
        exported.append(spec)
    return exported


def calls_from_message(message: object, tools: Tools = ()) -> list[ToolCall]:
    """The kernel calls of an assistant message's ``tool_use`` blocks, in order.

    ``message`` is a ``Message`` (SDK object or dict) or its ``content`` list. ``tools``: the
    tools the names were exported from (or ``kernel.tools``), to map renamed names back.
    """
    content = field(message, "content", message)
    if isinstance(content, str):
        content = []
    wire = [
        WireCall(field(block, "id"), field(block, "name"), field(block, "input"))
        for block in (content or ())
        if field(block, "type") == "tool_use"
    ]
    return to_tool_calls(wire, tools)


def tool_results(results: Iterable[ToolResult]) -> list[dict[str, Any]]:
    """The content of the user message answering a batch: one ``tool_result`` block per
    ``tool_use`` id, in call order, with ``is_error`` set for every call that did not succeed.

    Every id is answered exactly once (a repeated id's error joins the first answer). The list
    holds only ``tool_result`` blocks, so text you add goes after them, as the API requires.

    A block's ``content`` is the result's text; for an output that is a
    :class:`~toolkernel.Content` with images (PNG, JPEG, GIF, WebP) or PDF documents, it is a
    list of ``text``, ``image`` and ``document`` blocks, in the content's order.
    """
    return [
        {
            "type": "tool_result",
            "tool_use_id": answer.call_id,
            "content": _content(answer),
            "is_error": not answer.ok,
        }
        for answer in answers(results)
    ]


def _content(answer: Answer) -> str | list[dict[str, Any]]:
    segments = answer.segments()
    if segments is None:
        return answer.text
    # The API refuses text blocks with nothing but white space in them.
    return [
        _block(segment) for segment in segments if not isinstance(segment, str) or segment.strip()
    ]


def _block(segment: str | Attachment) -> dict[str, Any]:
    if isinstance(segment, str):
        return {"type": "text", "text": segment}
    source = {"type": "base64", "media_type": segment.media_type, "data": segment.data}
    if segment.kind == "image":
        return {"type": "image", "source": source}
    document: dict[str, Any] = {"type": "document", "source": source}
    if segment.name:
        document["title"] = segment.name
    return document

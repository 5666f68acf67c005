"""OpenAI's wire formats: Chat Completions and Responses, tools out, calls in, results out.

The functions accept the official ``openai`` SDK's objects and plain dicts alike (the SDK is
not needed), and return plain dicts the SDK accepts as request parameters::

    from toolkernel.formats import openai as wire

    tools = wire.chat_tools(kernel.tools.values())
    completion = await client.chat.completions.create(model=..., messages=messages, tools=tools)
    message = completion.choices[0].message
    calls = wire.calls_from_chat(message, tools=kernel.tools)
    results = await kernel.run(calls)
    messages += [message, *wire.chat_tool_messages(results)]

Tool names OpenAI forbids are renamed (see :func:`toolkernel.formats.wire_names`); pass the same
tools as ``tools=`` to the ``calls_from_*`` functions to map them back. Malformed model output
(bad JSON, an unknown tool, a missing or repeated id) becomes an ERROR result, never an
exception. With ``dependencies=True`` every tool also offers the optional ``depends_on``
argument (see :mod:`toolkernel.formats`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..kernel import ToolCall, ToolResult
from ._attachments import Attachment
from ._calls import Answer, WireCall, answers, exported_tools, field, to_tool_calls
from ._schema import strict_schema

__all__ = [
    "chat_tools",
    "responses_tools",
    "calls_from_chat",
    "chat_tool_messages",
    "calls_from_responses",
    "responses_outputs",
]

Tools = Iterable[object] | Mapping[str, object]


def _functions(tools: Tools, strict: bool, dependencies: bool) -> list[dict[str, Any]]:
    functions = []
    for name, wire_name, description, schema in exported_tools(tools, dependencies):
        function: dict[str, Any] = {"name": wire_name}
        if description:
            function["description"] = description
        function["parameters"] = strict_schema(schema, name) if strict else schema
        function["strict"] = strict
        functions.append(function)
    return functions


def chat_tools(
    tools: Tools, strict: bool = False, *, dependencies: bool = False
) -> list[dict[str, Any]]:
    """The ``tools`` parameter of a Chat Completions request, one function per tool.

    With ``strict=True`` every schema follows OpenAI's strict-mode rules (all properties
    required, optional ones nullable, ``additionalProperties: false``, no unsupported keywords);
    a tool whose parameters can't be said that way raises :class:`~toolkernel.errors.SchemaError`.
    """
    return [
        {"type": "function", "function": function}
        for function in _functions(tools, strict, dependencies)
    ]


def responses_tools(
    tools: Tools, strict: bool = False, *, dependencies: bool = False
) -> list[dict[str, Any]]:
    """The ``tools`` parameter of a Responses request (``strict`` is always sent: the Responses
    API would otherwise default to strict)."""
    return [
        {"type": "function", **function} for function in _functions(tools, strict, dependencies)
    ]


# -- Chat Completions ---------------------------------------------------------------------------


def _chat_message(message: object) -> object:
    """The assistant message, from a message, a choice, or a whole completion."""
    choices = field(message, "choices")
    if choices:
        message = field(choices[0], "message") or {}
    elif field(message, "message") is not None and field(message, "role") is None:
        message = field(message, "message")
    return message


def parse_chat(message: object, tools: Tools = ()) -> tuple[dict[str, Any], list[ToolCall]]:
    """The assistant message as a plain dict (every tool call with its id, made up if missing),
    and its kernel calls."""
    message = _chat_message(message)
    raw_calls = _listed(field(message, "tool_calls"))
    wire = []
    for raw in raw_calls:
        function = field(raw, "function")
        if function is not None:
            name, arguments = field(function, "name"), field(function, "arguments")
            wire.append(WireCall(field(raw, "id"), name, arguments))
        else:  # a custom (free-text) tool call: toolkernel exports none, so it is an error
            custom = field(raw, "custom")
            wire.append(WireCall(field(raw, "id"), field(custom, "name"), field(custom, "input")))
    calls = to_tool_calls(wire, tools)
    content = field(message, "content")
    # The API takes null content only beside tool_calls: a message with neither says "".
    empty = None if raw_calls else ""
    plain: dict[str, Any] = {"role": "assistant", "content": content if content else empty}
    refusal = field(message, "refusal")
    if isinstance(refusal, str) and refusal:
        plain["refusal"] = refusal
    if raw_calls:
        plain["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": w.name if isinstance(w.name, str) else "",
                    "arguments": _recorded(w.arguments),
                },
            }
            for call, w in zip(calls, wire, strict=True)
        ]
    return plain, calls


def _recorded(arguments: object) -> str:
    """The arguments as the conversation records them: the model's text when it is a JSON
    object, else ``{}``. Servers that render the history through a chat template (vLLM,
    llama.cpp) parse every call's arguments, and refuse the whole request, every later turn,
    when one is not an object; the call's answer already says what was wrong with them."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):
            return "{}"
        return arguments if isinstance(parsed, dict) else "{}"
    if isinstance(arguments, Mapping):
        try:
            return json.dumps(dict(arguments), default=str)
        except (TypeError, ValueError, RecursionError):
            return "{}"
    return "{}"


def _listed(tool_calls: object) -> list[object]:
    """The message's tool calls as a list: one call given on its own counts as one, and
    anything else that is there (a number, a string) as one malformed call, answered with an
    error rather than ignored or raised."""
    if tool_calls is None or tool_calls == [] or tool_calls == ():
        return []
    if isinstance(tool_calls, list | tuple):
        return list(tool_calls)
    return [tool_calls]


def calls_from_chat(message: object, tools: Tools = ()) -> list[ToolCall]:
    """The kernel calls of a Chat Completions assistant message (``tool_calls``, arguments as
    JSON strings), in the order the model emitted them.

    ``message`` is a ``ChatCompletionMessage`` or its dict (a ``ChatCompletion`` or a choice
    works too). ``tools``: the tools the names were exported from (or ``kernel.tools``), to
    map renamed names back, and to read ``null`` for an optional argument as "absent".
    """
    return parse_chat(message, tools)[1]


def chat_tool_messages(results: Iterable[ToolResult]) -> list[dict[str, Any]]:
    """One ``role: "tool"`` message per call, in call order, each answering its call's id. A
    call that did not succeed says so first (``error: ...``, ``skipped: ...``).

    Tool messages take text only: the images and files of a :class:`~toolkernel.Content`
    output read as their placeholders (``[image: image/png, 12 KiB]``)."""
    return [
        {"role": "tool", "tool_call_id": answer.call_id, "content": answer.labelled()}
        for answer in answers(results)
    ]


# -- Responses ----------------------------------------------------------------------------------


def calls_from_responses(output_items: object, tools: Tools = ()) -> list[ToolCall]:
    """The kernel calls among a response's output items (its ``function_call`` items).

    ``output_items`` is ``response.output`` (SDK objects or dicts), or the ``Response`` itself.
    The call's id is the item's ``call_id``.
    """
    items = field(output_items, "output", output_items)
    if isinstance(items, str | bytes) or not isinstance(items, Iterable):
        items = ()  # not a list of items: no calls in it, as a message with no tool_calls
    wire = [
        WireCall(field(item, "call_id"), field(item, "name"), field(item, "arguments"))
        for item in items
        if field(item, "type") == "function_call"
    ]
    return to_tool_calls(wire, tools)


def responses_outputs(results: Iterable[ToolResult]) -> list[dict[str, Any]]:
    """One ``function_call_output`` input item per call, in call order. A call that did not
    succeed says so first (``error: ...``, ``skipped: ...``).

    An item's ``output`` is the result's text; for an output that is a
    :class:`~toolkernel.Content` with images (PNG, JPEG, GIF, WebP) or PDF documents, it is a
    list of ``input_text``, ``input_image`` and ``input_file`` items (as ``data:`` URLs), in
    the content's order.
    """
    return [
        {"type": "function_call_output", "call_id": answer.call_id, "output": _output(answer)}
        for answer in answers(results)
    ]


def _output(answer: Answer) -> str | list[dict[str, Any]]:
    segments = answer.segments(labelled=True)
    if segments is None:
        return answer.labelled()
    return [_item(segment) for segment in segments if not isinstance(segment, str) or segment]


def _item(segment: str | Attachment) -> dict[str, Any]:
    if isinstance(segment, str):
        return {"type": "input_text", "text": segment}
    if segment.kind == "image":
        return {"type": "input_image", "image_url": segment.data_url(), "detail": "auto"}
    return {
        "type": "input_file",
        "file_data": segment.data_url(),
        "filename": segment.name or "document.pdf",
    }

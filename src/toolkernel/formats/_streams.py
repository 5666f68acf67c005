"""Streamed answers: a model's stream events in, each call the moment its block is complete. Pure.

A model that streams its answer finishes its tool calls one by one, long before the answer
ends. :class:`AnswerStream` reads the events of any of the three streams (the official SDKs'
objects or their dicts; the format is told by the first event) and returns, from each
:meth:`~AnswerStream.feed`, the calls that event completed, in the order the model wrote them:

- OpenAI Chat Completions chunks (``ChatCompletionChunk``): a call's deltas come under its
  ``index``, one call after the other, so a call is complete when a delta for a call not seen
  before arrives, or the choice finishes. A whole ``ChatCompletion`` counts as one chunk
  (a server that ignores ``stream``).
- OpenAI Responses events: a ``function_call`` item is complete at
  ``response.function_call_arguments.done`` or ``response.output_item.done``, whichever comes
  first.
- Anthropic Messages events (``RawMessageStreamEvent``): a ``tool_use`` block is complete at
  its ``content_block_stop``.

:meth:`~AnswerStream.finish` completes what is left and gives the whole answer as a Chat
Completions assistant message, the shape the agent loop keeps its conversation in.
:class:`CallReader` turns each completed call into a kernel call at once, as
``to_tool_calls`` does for a whole message (ids made up where missing, names mapped back,
``depends_on`` resolved against the calls before it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..kernel import ToolCall
from ._calls import ToolLookup, WireCall, field

__all__ = ["AnswerStream", "CallReader", "StreamFormatError"]

_ANTHROPIC = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
    }
)


class StreamFormatError(ValueError):
    """An event no stream format explains: the model's stream is not one this reads."""


class _Call:
    """A call whose block is still being written."""

    __slots__ = ("arguments", "done", "id", "name", "whole")

    def __init__(self, call_id: object = None, name: object = None) -> None:
        self.id = call_id
        self.name = name
        self.arguments: list[str] = []  # the deltas
        self.whole: object = None  # arguments that came whole, for a call with no deltas
        self.done = False

    def text(self) -> str:
        if not self.arguments and self.whole is not None:
            return self.whole if isinstance(self.whole, str) else _json(self.whole)
        return "".join(self.arguments)

    def wire(self) -> WireCall:
        self.done = True
        return WireCall(self.id, self.name, self.text())


class AnswerStream:
    """One streamed answer, assembled event by event.

    ::

        answer = AnswerStream()
        async for chunk in await client.chat.completions.create(..., stream=True):
            for call in answer.feed(chunk):
                ...                             # complete: start it
        message, rest = answer.finish()
    """

    def __init__(self) -> None:
        self.format: str | None = None
        """``"chat"``, ``"responses"`` or ``"anthropic"``, once the first event told it."""
        self.finished = False
        """Whether the stream said the answer is whole (a finish reason, ``message_stop``,
        ``response.completed``); a stream that ends without saying so was cut off."""
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[object, _Call] = {}  # by index, item id or block index
        self._order: list[_Call] = []
        self.error: str | None = None
        """What an ``error`` event (or ``response.failed``) said: the answer failed."""

    def feed(self, event: object) -> list[WireCall]:
        """The calls ``event`` completed, in order. Raises :class:`StreamFormatError` for an
        event that belongs to no stream format (or to another than the first event's)."""
        if field(event, "type") in ("error", "response.failed"):
            self.error = _error_text(event)
            return []
        kind = self._kind(event)
        if self.format is None:
            self.format = kind
        elif kind != self.format:
            raise StreamFormatError(
                f"an event of the {kind} format in a {self.format} stream: {_preview(event)}"
            )
        if kind == "chat":
            return self._chat(event)
        if kind == "responses":
            return self._responses(event)
        return self._anthropic(event)

    def finish(self) -> tuple[dict[str, Any], list[WireCall]]:
        """The whole answer as a Chat Completions assistant message, and the calls not
        completed before (in order). Call it once the stream has ended."""
        rest = [call.wire() for call in self._order if not call.done]
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text) or None}
        refusal = "".join(self._refusal)
        if refusal:
            message["refusal"] = refusal
        if self._order:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.text()},
                }
                for call in self._order
            ]
        return message, rest

    # -- per format --------------------------------------------------------------------------

    @staticmethod
    def _kind(event: object) -> str:
        kind = field(event, "type")
        if isinstance(kind, str):
            if kind.startswith("response."):
                return "responses"
            if kind in _ANTHROPIC:
                return "anthropic"
        if field(event, "choices") is not None:
            return "chat"
        raise StreamFormatError(
            f"not an event of a Chat Completions, Responses or Anthropic Messages stream: "
            f"{_preview(event)}"
        )

    def _start(self, key: object, call_id: object, name: object) -> _Call:
        call = _Call(call_id, name)
        self._calls[key] = call
        self._order.append(call)
        return call

    def _chat(self, chunk: object) -> list[WireCall]:
        choices = field(chunk, "choices") or ()
        if not isinstance(choices, list | tuple) or not choices:
            return []  # the usage chunk at the end has no choices
        choice = choices[0]
        delta = field(choice, "delta")
        if delta is None:
            delta = field(choice, "message")  # a whole completion
        completed: list[WireCall] = []
        if delta is not None:
            text = field(delta, "content")
            if isinstance(text, str):
                self._text.append(text)
            refusal = field(delta, "refusal")
            if isinstance(refusal, str):
                self._refusal.append(refusal)
            tool_calls = field(delta, "tool_calls") or ()
            if not isinstance(tool_calls, list | tuple):
                tool_calls = [tool_calls]
            for position, part in enumerate(tool_calls):
                index = field(part, "index", position)
                key = index if isinstance(index, int) else position
                function = field(part, "function")
                call = self._calls.get(key)
                part_id = field(part, "id")
                # A different id under a known index is a new call all the same (servers that
                # send every call whole, each as index 0).
                if call is None or (part_id and call.id and part_id != call.id):
                    # Calls are streamed one after the other: a new one ends the ones before.
                    completed += [c.wire() for c in self._order if not c.done]
                    call = self._start(key, part_id, None)
                if call.id is None and part_id:
                    call.id = part_id
                name = field(function, "name")
                if isinstance(name, str):  # sent once, or (by some servers) again and again
                    known = call.name if isinstance(call.name, str) else ""
                    call.name = name if name == known else known + name
                arguments = field(function, "arguments")
                if isinstance(arguments, str):
                    call.arguments.append(arguments)
                elif arguments is not None:
                    call.whole = arguments
        if field(choice, "finish_reason"):
            self.finished = True
            completed += [c.wire() for c in self._order if not c.done]
        return completed

    def _responses(self, event: object) -> list[WireCall]:
        kind = field(event, "type")
        item = field(event, "item")
        if kind == "response.output_item.added" and field(item, "type") == "function_call":
            self._start(field(item, "id"), field(item, "call_id"), field(item, "name"))
        elif kind == "response.function_call_arguments.delta":
            call = self._calls.get(field(event, "item_id"))
            delta = field(event, "delta")
            if call is not None and not call.done and isinstance(delta, str):
                call.arguments.append(delta)
        elif kind == "response.function_call_arguments.done":
            call = self._calls.get(field(event, "item_id"))
            if call is not None and not call.done:
                return [self._whole(call, field(event, "arguments"))]
        elif kind == "response.output_item.done" and field(item, "type") == "function_call":
            found = self._calls.get(field(item, "id"))
            # No ``added`` event came for it: it starts and ends here.
            call = found or self._start(
                field(item, "id"), field(item, "call_id"), field(item, "name")
            )
            if not call.done:
                call.id = call.id or field(item, "call_id")
                call.name = call.name or field(item, "name")
                return [self._whole(call, field(item, "arguments"))]
        elif kind == "response.output_text.delta":
            delta = field(event, "delta")
            if isinstance(delta, str):
                self._text.append(delta)
        elif kind == "response.refusal.delta":
            delta = field(event, "delta")
            if isinstance(delta, str):
                self._refusal.append(delta)
        elif kind in ("response.completed", "response.incomplete"):
            self.finished = True
            return [c.wire() for c in self._order if not c.done]
        return []

    @staticmethod
    def _whole(call: _Call, arguments: object) -> WireCall:
        """The call with its final arguments (which win over the deltas, as the API says)."""
        if isinstance(arguments, str):
            call.arguments = [arguments]
        elif arguments is not None:
            call.whole = arguments
        return call.wire()

    def _anthropic(self, event: object) -> list[WireCall]:
        kind = field(event, "type")
        index = field(event, "index")
        if kind == "content_block_start":
            block = field(event, "content_block")
            block_type = field(block, "type")
            if block_type == "tool_use":
                call = self._start(index, field(block, "id"), field(block, "name"))
                # The API starts every block with ``{}`` and sends the input as deltas; a
                # server that sends it whole here sends none.
                call.whole = field(block, "input")
            elif block_type == "text":
                text = field(block, "text")
                if isinstance(text, str):
                    self._text.append(text)
        elif kind == "content_block_delta":
            delta = field(event, "delta")
            delta_type = field(delta, "type")
            if delta_type == "text_delta" and isinstance(field(delta, "text"), str):
                self._text.append(field(delta, "text"))
            elif delta_type == "input_json_delta":
                writing = self._calls.get(index)
                partial = field(delta, "partial_json")
                if writing is not None and not writing.done and isinstance(partial, str):
                    writing.arguments.append(partial)
        elif kind == "content_block_stop":
            stopped = self._calls.get(index)
            if stopped is not None and not stopped.done:
                return [stopped.wire()]
        elif kind == "message_stop":
            self.finished = True
            return [c.wire() for c in self._order if not c.done]
        return []


def _error_text(event: object) -> str:
    error = field(event, "error")
    if error is None:  # response.failed carries the response, whose error says why
        error = field(field(event, "response"), "error")
    message = field(error, "message") if error is not None else field(event, "message")
    return message if isinstance(message, str) else _preview(event)


def _json(value: object) -> str:
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError, RecursionError):
        return "{}"


def _preview(event: object, limit: int = 120) -> str:
    text = repr(event)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class CallReader:
    """Kernel calls for the calls of one message, one at a time, as they complete.

    The same conversion as ``to_tool_calls`` (see ``_calls``), call by call: a missing id is
    made up from the call's position and kept unique among the calls before it; ``depends_on``
    names calls before this one (a position after it names nothing yet, and the kernel says
    so).
    """

    def __init__(self, tools: Iterable[object] | Mapping[str, object]) -> None:
        self._lookup = ToolLookup(tools)
        self.ids: list[str] = []
        self._taken: set[str] = set()

    def read(self, call: WireCall) -> ToolCall:
        """The kernel call for the next call of the message."""
        position = len(self.ids) + 1
        call_id = call.id if isinstance(call.id, str) and call.id else None
        if call_id is None:
            made, n = f"call_{position}", 1
            while made in self._taken:
                n += 1
                made = f"call_{position}_{n}"
            call_id = made
        self.ids.append(call_id)
        self._taken.add(call_id)
        return self._lookup.call(call, call_id, position, self.ids)

"""What the agent loop needs from a model, and a model that replies from a script.

The loop keeps the conversation as OpenAI Chat Completions messages (plain dicts: the lingua
franca of OpenAI, Ollama, vLLM, llama.cpp and most gateways), so a model is one method: given
the messages so far and the kernel's tools, return the assistant's next message in that shape.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import anyio

from .._errors import ModelError
from ..formats._names import NameMap
from ..formats._schema import DEPENDS_ON
from ..kernel import ToolCall
from ._turns import Turn

__all__ = ["Model", "ScriptedModel"]


@runtime_checkable
class Model(Protocol):
    """A chat model, as :func:`~toolkernel.agent.run_agent` drives it."""

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[object]
    ) -> Mapping[str, Any] | object:
        """The assistant's next message: a Chat Completions assistant message (a dict, or the
        ``openai`` SDK's ``ChatCompletionMessage``) with ``content`` and ``tool_calls``.

        ``messages`` is the conversation so far (Chat Completions messages); ``tools`` are the
        kernel's tools (export them with ``toolkernel.formats.openai.chat_tools``). Raise
        :class:`~toolkernel.ModelError` when the request fails, with ``transient=True`` if
        trying again may help.
        """
        ...


class ScriptedModel:
    """A model that answers each request with the next item of a script.

    An item is a :class:`Turn` (what the model says and the calls it emits), a
    :class:`~toolkernel.ModelError` (raised, as a failing server would), or a mapping (returned
    as the assistant message as it is, malformed or not). Once the script is used up, the model
    says ``final`` and calls nothing, which ends the loop. ``think`` seconds pass before each
    answer, as a real model would take.

    It streams too (:meth:`stream`, for ``run_agent(..., stream=True)``): a turn's answer comes
    as Chat Completions chunks, each call's block complete at its time in ``Turn.emitted``;
    asked for the whole answer, the model gives it when its last call is complete.

    A turn's calls keep their ids; their ``after=`` is written as the ``depends_on`` argument,
    as a model would write it. ``requests`` records the messages and tool names of every
    request, for tests and demos to look at.
    """

    def __init__(
        self,
        script: Iterable[Turn | ModelError | Mapping[str, Any]],
        *,
        final: str = "Done.",
        think: float = 0.0,
    ) -> None:
        self._script = list(script)
        self._next = 0
        self.final = final
        self.think = think
        self.requests: list[tuple[tuple[dict[str, Any], ...], tuple[str, ...]]] = []

    def __repr__(self) -> str:
        return f"<ScriptedModel {self._next}/{len(self._script)} items used>"

    @property
    def remaining(self) -> int:
        """How many items of the script are still to come."""
        return len(self._script) - self._next

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[object]
    ) -> Mapping[str, Any]:
        """The next item of the script, as an assistant message."""
        item, names = await self._next_item(messages, tools)
        if isinstance(item, Turn):
            if item.duration:
                await anyio.sleep(item.duration)  # the whole answer comes at its end
            if item.cut is not None:
                raise item.cut
            return assistant_message(item, names)
        return item

    async def stream(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[object]
    ) -> AsyncIterator[Mapping[str, Any]]:
        """The next item of the script as a streamed answer: Chat Completions chunks (dicts),
        each call complete at its time in ``Turn.emitted`` (a mapping comes as one chunk)."""
        item, names = await self._next_item(messages, tools)
        if not isinstance(item, Turn):
            yield _chunk({"message": item, "finish_reason": "stop"})
            return
        if item.says:
            yield _chunk({"delta": {"role": "assistant", "content": item.says}})
        start = anyio.current_time()
        for index, call in enumerate(item.calls):
            # A call's block is complete when the next one starts (or the answer finishes):
            # its id and name come when the one before it is complete, its arguments by its
            # own emission time.
            header = {"index": index, "id": call.id, "type": "function"}
            header["function"] = {"name": names.wire(call.name), "arguments": ""}
            yield _chunk({"delta": {"tool_calls": [header]}})
            if item.emitted:
                await anyio.sleep_until(start + item.emitted[index])
            arguments = {"index": index, "function": {"arguments": _arguments(call)}}
            yield _chunk({"delta": {"tool_calls": [arguments]}})
        if item.cut is not None:
            raise item.cut
        yield _chunk({"delta": {}, "finish_reason": "tool_calls" if item.calls else "stop"})

    async def _next_item(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[object]
    ) -> tuple[Turn | Mapping[str, Any], NameMap]:
        """The next item of the script, after the model has thought (a ModelError raised)."""
        names = NameMap(tools)
        self.requests.append((tuple(dict(m) for m in messages), tuple(names.to_wire)))
        if self.think:
            await anyio.sleep(self.think)
        else:
            await anyio.lowlevel.checkpoint()
        if self._next >= len(self._script):
            return {"role": "assistant", "content": self.final}, names
        item = self._script[self._next]
        self._next += 1
        if isinstance(item, ModelError):
            raise item
        return item, names


def _chunk(choice: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions chunk with one choice."""
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, **choice}],
    }


def assistant_message(turn: Turn, names: NameMap) -> dict[str, Any]:
    """A turn as the Chat Completions assistant message a model would have sent."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.says or None}
    if turn.calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": names.wire(call.name), "arguments": _arguments(call)},
            }
            for call in turn.calls
        ]
    return message


def _arguments(call: ToolCall) -> str:
    if call.after and isinstance(call.arguments, Mapping):
        return json.dumps({**call.arguments, DEPENDS_ON: list(call.after)}, default=str)
    return call.arguments_json()

"""Streamed turns: each call starts the moment its block is complete in the model's answer.

A model that can stream (:class:`StreamingModel`: a ``stream`` method yielding the provider's
stream events) lets the loop start a call while the model is still writing the calls after it,
as Claude Code does for its read-only tools. Each call is submitted to the kernel the moment
its block is complete, synchronously and in the order the blocks complete; the kernel orders
conflicting calls of different submissions first come, first served, so conflicting calls still
run in the order the model emitted them, and the others start early. The answers go back to the
model as before: in call order, one per call id, once the answer is finished and all its calls
are done.

What differs from a whole answer, and why:

- A call that repeats an id of its answer is not run (the kernel would not know which of the two
  a later ``depends_on`` names); it is answered with an error, as the kernel answers a repeat in
  one batch.
- A call that uses the output of an earlier call of its answer (``"$1"``, ``${1}``) is held
  back until that call has finished, and gets the output filled in here: the kernel passes
  outputs only between calls of one submission. The calls after it are held back with it (their
  order must hold) while the answer goes on being read, so such an answer streams less.
- If the stream fails before the answer is finished, the calls already started are cancelled
  (and their leases returned) before the request is tried again: the model never saw that
  answer, so it must not be told of those calls, and the retried answer's calls must not wait
  behind them. What a call finished before the failure stays done.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import anyio
import anyio.abc
import attrs

from .._errors import ModelError
from ..formats._streams import AnswerStream, CallReader, StreamFormatError
from ..formats.openai import parse_chat
from ..kernel import CallEvent, CallFinished, Kernel, Status, ToolCall, ToolResult

# Output passing is the kernel's; its two pure helpers are used here, not copied, so that a
# filled-in call reads exactly as the kernel would have filled it.
from ..kernel._admission import fill_in, placeholders
from ..tools._todo import TodoWrite
from ._events import AgentEvent, ModelReplied, TodosUpdated
from ._model import Model

__all__ = ["StreamingModel", "StreamedTurn"]


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A model that can also stream its answer (see :meth:`stream`)."""

    def stream(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[object]
    ) -> AsyncIterator[Any]:
        """The events of the model's streamed answer, as they come: OpenAI Chat Completions
        chunks (``ChatCompletionChunk``), OpenAI Responses events, or Anthropic Messages events
        (``RawMessageStreamEvent``), as the official SDKs' objects or their dicts.

        An async generator is the natural way to write it; the loop closes it when it stops
        reading. Raise :class:`~toolkernel.ModelError` when the request fails, mid-answer too,
        with ``transient=True`` if trying again may help. A stream that ends without saying the
        answer is finished (a finish reason, ``message_stop``, ``response.completed``) counts
        as cut off: a transient error.
        """
        ...


class StreamedTurn:
    """One step of the loop whose answer streams: its calls, started as they complete."""

    def __init__(
        self,
        kernel: Kernel,
        toolset: Mapping[str, object],
        step: int,
        emit: Callable[[AgentEvent], object],
        timeout: float | None = None,
    ) -> None:
        self._kernel = kernel
        self._timeout = timeout  # for the step's calls, from the first one's start
        self._deadline: float | None = None
        self._toolset = toolset
        self._step = step
        self._emit = emit
        self.assistant: dict[str, Any] | None = None
        """The answer as the conversation records it, once it is finished."""
        self.says = ""
        self.calls: list[ToolCall] = []
        """The answer's calls, in the order the model emitted them."""
        self.results: list[ToolResult | None] = []
        """Their results, in call order (None: not finished)."""
        self._positions: dict[str, int] = {}
        self._finished: list[anyio.Event] = []
        self._held: list[tuple[ToolCall, int]] = []
        self.agent: str | None = None
        """Whose view of the files the calls keep (``run_agent``'s ``agent``)."""

    async def attempt(
        self, model: StreamingModel, history: Sequence[Mapping[str, Any]], tools: Sequence[object]
    ) -> None:
        """Ask once; return when the answer is finished and all its calls are done. Raises
        ModelError (its started calls cancelled first) if the answer fails."""
        self.assistant, self.says = None, ""
        self.calls, self.results, self._positions, self._finished = [], [], {}, []
        self._held, self._deadline = [], None
        failure: Exception | None = None
        # Leaving the stack leaves each call's ``kernel.stream`` (after the task group has
        # ended): a call still running (the answer failed, or the loop is cancelled) is
        # cancelled there, its leases returned.
        async with contextlib.AsyncExitStack() as stack, anyio.create_task_group() as group:
            try:
                await self._read(model, history, tools, stack, group)
            except Exception as exc:  # raised after the calls are cancelled, unwrapped
                failure = exc
                group.cancel_scope.cancel()
        if failure is not None:
            raise failure

    async def _read(
        self,
        model: StreamingModel,
        history: Sequence[Mapping[str, Any]],
        tools: Sequence[object],
        stack: contextlib.AsyncExitStack,
        group: anyio.abc.TaskGroup,
    ) -> None:
        answer = AnswerStream()
        reader = CallReader(self._toolset)
        events = model.stream(list(history), tools)
        close = getattr(events, "aclose", None)
        async with contextlib.AsyncExitStack() as closing:
            if close is not None:
                closing.push_async_callback(close)
            async for event in events:
                try:
                    completed = answer.feed(event)
                except StreamFormatError as exc:
                    raise ModelError(
                        f"the model's stream can't be read: {exc}", transient=False
                    ) from None
                if answer.error is not None:
                    raise ModelError(f"the model's answer failed: {answer.error}", transient=True)
                for wire in completed:
                    await self._start(reader.read(wire), stack, group)
        if answer.format is not None and not answer.finished:
            raise ModelError(
                "the model's answer stream ended before the answer did (cut off)", transient=True
            )
        message, rest = answer.finish()
        for wire in rest:
            await self._start(reader.read(wire), stack, group)
        self._answered(message)

    async def _start(
        self, call: ToolCall, stack: contextlib.AsyncExitStack, group: anyio.abc.TaskGroup
    ) -> None:
        position = len(self.calls)
        self.calls.append(call)
        self.results.append(None)
        self._finished.append(anyio.Event())
        if call.id in self._positions:
            self._finish(position, _repeated(call))
            return
        self._positions[call.id] = position
        if self._held or self._uses_outputs(call):
            # Held back until the outputs it uses are there, and every call after it with it
            # (their order must hold), while the answer goes on being read.
            self._held.append((call, position))
            if len(self._held) == 1:
                group.start_soon(self._submit_held, stack, group)
            return
        await self._submit(call, position, stack, group)

    async def _submit(
        self,
        call: ToolCall,
        position: int,
        stack: contextlib.AsyncExitStack,
        group: anyio.abc.TaskGroup,
    ) -> None:
        # Entering submits the call at once (no checkpoint before it), so calls are queued in
        # the order their blocks completed.
        left = None
        if self._timeout is not None:  # what is left of the step's time, for this call
            now = anyio.current_time()
            if self._deadline is None:
                self._deadline = now + self._timeout
            left = max(self._deadline - now, 0.0)
        # As a model's call, on behalf of the loop's agent (see run_agent).
        call = attrs.evolve(call, agent=self.agent, read_first=True)
        events = await stack.enter_async_context(self._kernel.stream([call], timeout=left))
        group.start_soon(self._drain, events, position)

    async def _submit_held(
        self, stack: contextlib.AsyncExitStack, group: anyio.abc.TaskGroup
    ) -> None:
        """Submit the held calls in order, each once the outputs it uses are there."""
        while self._held:
            call, position = self._held[0]
            await self._submit(await self._filled_in(call), position, stack, group)
            del self._held[0]  # only now: a call completed meanwhile queues behind it

    def _uses_outputs(self, call: ToolCall) -> bool:
        sources = [i for i in call.after if i in self._positions]
        return bool(sources) and bool(placeholders(call.arguments, sources))

    async def _filled_in(self, call: ToolCall) -> ToolCall:
        """The call with the outputs it uses of earlier calls of the answer filled in, once
        those have finished; unchanged if it uses none."""
        sources = {i: self._positions[i] for i in call.after if i in self._positions}
        used = placeholders(call.arguments, sources) if sources else set()
        if not used:
            return call
        for call_id in used:
            await self._finished[sources[call_id]].wait()
        outputs = {i: r for i in used if (r := self.results[sources[i]]) and r.ok}
        # A source that failed stays in ``after``: the kernel remembers it, and skips the call.
        after = tuple(i for i in call.after if i not in outputs)
        return attrs.evolve(call, arguments=fill_in(call.arguments, outputs), after=after)

    async def _drain(self, events: AsyncIterator[CallEvent], position: int) -> None:
        async for event in events:
            self._emit(event)
            if isinstance(event, CallFinished):
                result = event.result
                self._finish(position, result)
                if result.status is Status.OK:
                    tool = self._toolset.get(result.name)
                    if isinstance(tool, TodoWrite):
                        todos = tuple(tool.todos)
                        self._emit(TodosUpdated(self._step, str(result.call_id), todos))

    def _finish(self, position: int, result: ToolResult) -> None:
        self.results[position] = result
        self._finished[position].set()

    def _answered(self, message: dict[str, Any]) -> None:
        """Record the finished answer, its calls carrying the ids they ran with."""
        for raw, call in zip(message.get("tool_calls", ()), self.calls, strict=True):
            raw["id"] = call.id
        assistant, _ = parse_chat(message, self._toolset)
        self.assistant = assistant
        content = assistant.get("content")
        self.says = (content if isinstance(content, str) else "") or assistant.get("refusal", "")
        self._emit(ModelReplied(self._step, self.says, tuple(self.calls)))


def _repeated(call: ToolCall) -> ToolResult:
    return ToolResult(
        call.id,
        call.name,
        Status.ERROR,
        error=f"call id {call.id!r} is used twice in this answer; ids must be unique",
        error_type="InvalidCallError",
    )

"""The agent loop: model -> calls -> kernel -> results -> model, until the model is done.

Each step asks the model once (retrying transient failures with backoff), records its message,
runs the calls it emitted as one kernel batch, and answers every call. With ``stream=True`` and
a model that streams, each call starts the moment its block is complete in the answer, before
the answer ends (see ``_streaming``); the answers go back in call order all the same.

The loop ends when the model replies with no calls (``completed``), after ``max_steps``
replies (``max_steps``), when the model fails for good (``model_error``), or when the
``cancel_scope`` given to it is cancelled (``cancelled``). Whatever ends it, the messages it
returns are a valid conversation: every call the model emitted is answered (a call cut short by
cancellation as CANCELLED), so a caller can go on from them with another :func:`run_agent`.

Cancellation of the caller's own scopes is not caught: it propagates, as it must.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import partial
from typing import Any, TypeVar

import anyio
import attrs

from .._checks import check_count, check_seconds
from .._errors import ModelError
from ..formats.openai import chat_tool_messages, parse_chat
from ..kernel import CallFinished, Kernel, Status, ToolCall, ToolResult
from ..kernel._messages import describe, duplicate_id
from ..tools._todo import TodoWrite
from ._events import AgentEvent, ModelReplied, ModelRetrying, StepStarted, TodosUpdated
from ._model import Model
from ._prompt import CALLS_PROMPT
from ._retry import Retry
from ._streaming import StreamedTurn, StreamingModel

__all__ = ["run_agent", "AgentOutcome", "Step", "StopReason"]


class StopReason(enum.StrEnum):
    """Why :func:`run_agent` stopped. Compares equal to its value (``"completed"``)."""

    COMPLETED = "completed"
    """The model replied without calling anything."""
    MAX_STEPS = "max_steps"
    """The model had replied ``max_steps`` times and still had calls to make."""
    CANCELLED = "cancelled"
    """The ``cancel_scope`` given to the loop was cancelled (or reached its deadline)."""
    MODEL_ERROR = "model_error"
    """The model failed for good: an error that retrying can't fix, or retries used up."""


@attrs.frozen
class Step:
    """One step: what the model said, the calls it emitted, and their results (in call order)."""

    index: int
    says: str
    calls: tuple[ToolCall, ...] = ()
    results: tuple[ToolResult, ...] = ()


@attrs.frozen
class AgentOutcome:
    """How :func:`run_agent` ended."""

    stop_reason: StopReason
    messages: tuple[dict[str, Any], ...]
    """The whole conversation as Chat Completions messages; pass it as ``messages=`` to go
    on."""
    steps: tuple[Step, ...]
    error: ModelError | None = attrs.field(default=None, eq=False)
    """The model's error, when ``stop_reason`` is ``model_error``."""

    @property
    def text(self) -> str:
        """What the model said last."""
        return self.steps[-1].says if self.steps else ""


async def run_agent(
    model: Model,
    kernel: Kernel,
    prompt: str,
    *,
    max_steps: int = 50,
    system: str = "",
    messages: Iterable[Mapping[str, Any]] | None = None,
    calls_prompt: str = CALLS_PROMPT,
    retry: Retry = Retry(),  # noqa: B008 - frozen, so one instance can be shared
    on_event: Callable[[AgentEvent], object] | None = None,
    cancel_scope: anyio.CancelScope | None = None,
    stream: bool = False,
    turn_timeout: float | None = None,
    agent: str | None = None,
) -> AgentOutcome:
    """Run ``model`` on ``prompt`` with the kernel's tools until it is done.

    ::

        async with open_kernel(tools=builtin_tools(), root=".") as kernel:
            outcome = await run_agent(model, kernel, "Add a --verbose flag", max_steps=20)
        print(outcome.stop_reason, outcome.text)

    - ``system``: your system prompt; ``calls_prompt`` (how to emit calls so independent ones
      run together, :data:`CALLS_PROMPT`) is appended to it; pass ``calls_prompt=""`` to leave
      it out. Neither is used when ``messages`` is given.
    - ``messages``: an earlier conversation to go on from (``outcome.messages``, or Chat
      Completions messages of your own: dicts, or the ``openai`` SDK's message objects);
      ``prompt`` is added to it as the next user message.
    - ``retry``: backoff for transient model errors (:class:`Retry`).
    - ``on_event``: called with each :class:`StepStarted`, :class:`ModelReplied`,
      :class:`ModelRetrying`, :class:`TodosUpdated`, and the kernel's events for every call.
    - ``cancel_scope``: a fresh ``anyio.CancelScope`` the loop runs in; cancelling it (or its
      deadline passing) stops the loop with ``stop_reason == "cancelled"`` and the calls that
      were running cancelled.
    - ``stream``: read the model's answers as streams (when the model can:
      :class:`StreamingModel`), starting each call the moment its block is complete, conflicting
      calls still in the order the model emitted them. ``ModelReplied`` then comes when the
      answer is finished, after the events of the calls that started early. If a stream fails
      mid-answer, the calls it started that are still running are cancelled before the request
      is tried again; one that finished stays done, and the model, not told of it, may emit it
      again in the answer tried again (an append then lands twice). Off by
      default: listeners keyed on ``ModelReplied`` coming first keep working, and a server that
      streams tool calls badly can't break a working loop; the gain is the time the model spends
      writing the calls after each one (about a tenth of a multi-call turn on recorded sessions,
      see ``benchmarks/streaming.py``).
    - ``turn_timeout``: seconds each step's calls may take, from the first one's start
      (``kernel.run(timeout=...)``): the calls still unfinished then end TIMEOUT, and the
      model reads so, with the results of those that finished; the loop goes on.
    - ``agent``: whose view of the files the calls keep (``ToolCall.agent``): give each loop
      sharing a kernel its own name. The calls are a model's (``ToolCall.read_first``):
      ``Write``, ``Edit`` and ``MultiEdit`` refuse a file this agent never read, and one that
      changed since it last read or wrote it (another agent's, a command's or a person's
      change), telling the model to read it again.
    """
    check_seconds("turn_timeout", turn_timeout)
    check_count("max_steps", max_steps, 1)
    emit = on_event or _ignore
    history: list[dict[str, Any]] = []
    if messages is not None:
        history.extend(_plain_message(m) for m in messages)
    else:
        system_text = "\n\n".join(part for part in (system, calls_prompt) if part)
        if system_text:
            history.append({"role": "system", "content": system_text})
    history.append({"role": "user", "content": prompt})
    steps: list[Step] = []
    stop: StopReason | None = None
    error: ModelError | None = None
    scope = cancel_scope if cancel_scope is not None else anyio.CancelScope()
    with scope:
        toolset = kernel.tools  # a copy: read it once
        tools = list(toolset.values())
        for index in range(1, max_steps + 1):
            emit(StepStarted(index))
            if stream and isinstance(model, StreamingModel):
                turn = StreamedTurn(kernel, toolset, index, emit, turn_timeout)
                turn.agent = agent
                try:
                    await _ask(partial(turn.attempt, model, history, tools), retry, index, emit)
                except ModelError as exc:
                    stop, error = StopReason.MODEL_ERROR, exc
                    break
                finally:  # cancelled or not, a finished answer's calls all get their answers
                    if turn.assistant is not None:
                        answer = (turn.says, turn.assistant, turn.calls, turn.results)
                        _record(history, steps, index, *answer)
                if not turn.calls:
                    stop = StopReason.COMPLETED
                    break
                continue
            try:
                reply = await _ask(lambda: model.complete(list(history), tools), retry, index, emit)
            except ModelError as exc:
                stop, error = StopReason.MODEL_ERROR, exc
                break
            assistant, calls = parse_chat(reply, toolset)
            says = _text(assistant["content"]) or assistant.get("refusal", "")
            emit(ModelReplied(index, says, tuple(calls)))
            results: list[ToolResult | None] = [None] * len(calls)
            try:
                if calls:
                    await _run_batch(
                        kernel, toolset, calls, results, index, emit, turn_timeout, agent
                    )
            finally:  # cancelled or not, every call the model emitted gets its answer
                _record(history, steps, index, says, assistant, calls, results)
            if not calls:
                stop = StopReason.COMPLETED
                break
        else:
            stop = StopReason.MAX_STEPS
    if stop is None:
        stop = StopReason.CANCELLED
    return AgentOutcome(stop, tuple(history), tuple(steps), error)


def _ignore(event: AgentEvent) -> None:
    pass


def _record(
    history: list[dict[str, Any]],
    steps: list[Step],
    index: int,
    says: str,
    assistant: dict[str, Any],
    calls: list[ToolCall],
    results: list[ToolResult | None],
) -> None:
    """Add a step's answer, and an answer to each of its calls (a call cut short by
    cancellation as CANCELLED), to the conversation."""
    history.append(assistant)
    if not calls:
        steps.append(Step(index, says))
        return
    done = tuple(r or _cut_short(c) for r, c in zip(results, calls, strict=True))
    history.extend(chat_tool_messages(done))
    steps.append(Step(index, says, tuple(calls), done))


def _plain_message(message: object) -> dict[str, Any]:
    """A message of an earlier conversation as a plain dict: the ``openai`` SDK's objects
    (``completion.choices[0].message``) become the dicts the SDK would send for them."""
    plain = _plain(message)
    if not isinstance(plain, dict):
        raise TypeError(f"messages must be chat messages (mappings), not {message!r}")
    if plain.get("role") == "assistant":
        plain.setdefault("content", None)
    return plain


def _plain(value: object) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return dump(mode="json", exclude_none=True)
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _text(content: object) -> str:
    """What an assistant message's content says: the string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return ""


_T = TypeVar("_T")


async def _ask(
    request: Callable[[], Awaitable[_T]],
    retry: Retry,
    step: int,
    emit: Callable[[AgentEvent], object],
) -> _T:
    """The model's reply, retrying transient errors as ``retry`` says."""
    attempt = 1
    while True:
        try:
            return await request()
        except ModelError as exc:
            if not exc.transient or attempt >= retry.attempts:
                if attempt > 1:
                    exc.add_note(f"gave up after {attempt} attempts")
                raise
            delay = retry.delay(attempt, exc, random.random())
            attempt += 1
            emit(ModelRetrying(step, attempt, delay, exc))
            await anyio.sleep(delay)


async def _run_batch(
    kernel: Kernel,
    toolset: Mapping[str, object],
    calls: list[ToolCall],
    results: list[ToolResult | None],
    step: int,
    emit: Callable[[AgentEvent], object],
    limit: float | None = None,
    agent: str | None = None,
) -> None:
    """Run one batch, passing its events on; fill ``results`` (in call order) as calls end."""
    # A model's calls: a file it never read may not be overwritten (see run_agent).
    calls = [attrs.evolve(call, agent=agent, read_first=True) for call in calls]
    # Ids are usually unique, but a model may repeat one: the kernel runs the first call with
    # it and fails each repeat at admission, whenever the first ends. A repeat's result goes
    # to the earliest repeat of its tool without one, any other result to the first.
    waiting: dict[str, list[int]] = {}
    for position, call in enumerate(calls):
        waiting.setdefault(str(call.id), []).append(position)
    first = {call_id: positions[0] for call_id, positions in waiting.items()}
    async with kernel.stream(calls, timeout=limit) as events:
        async for event in events:
            emit(event)
            if not isinstance(event, CallFinished):
                continue
            result = event.result
            call_id = str(event.call_id)
            positions = waiting.get(call_id)
            if positions:
                repeats = [p for p in positions if p != first[call_id]]
                repeat = result.error == describe(duplicate_id(call_id))
                same = [p for p in repeats if calls[p].name == result.name]
                position = (same or repeats)[0] if repeat and repeats else positions[0]
                if not repeat and first[call_id] in positions:
                    position = first[call_id]
                positions.remove(position)
                results[position] = result
            if result.status is Status.OK:
                tool = toolset.get(result.name)
                if isinstance(tool, TodoWrite):
                    emit(TodosUpdated(step, str(result.call_id), tuple(tool.todos)))


def _cut_short(call: ToolCall) -> ToolResult:
    """The result of a call the loop was cancelled before it ended."""
    return ToolResult(
        call.id,
        call.name,
        Status.CANCELLED,
        error="cancelled: the agent run was cancelled before this call finished",
        error_type="CallCancelledError",
    )

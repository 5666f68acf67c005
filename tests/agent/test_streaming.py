"""Streamed turns on the mock clock: each call starts when its block is complete in the answer,
conflicting calls keep the order the model emitted them in, and the answers go back as before.

The scripted model streams Chat Completions chunks with each call's block complete at its time
in ``Turn.emitted``; tools are ``FakeTool``s with durations, so every time is exact.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import anyio
import pytest

import toolkernel as tk
from tests.sample_tools import SAMPLE_TOOLS
from toolkernel.agent import (
    AgentEvent,
    ModelError,
    ModelReplied,
    ModelRetrying,
    Retry,
    ScriptedModel,
    StreamingModel,
    Turn,
    run_agent,
)
from toolkernel.testing import FakeTool

EDIT = FakeTool("edit", writes=True, touch_files=False)
READ = FakeTool("read", reads=True, touch_files=False)
TOOLS = [EDIT, READ, *SAMPLE_TOOLS]
NO_JITTER = Retry(jitter=0.0, initial=1.0)


def edit(call_id: str, path: str, duration: float) -> tk.ToolCall:
    return tk.ToolCall(call_id, "edit", {"paths": [path], "duration": duration})


def read(call_id: str, path: str, duration: float) -> tk.ToolCall:
    return tk.ToolCall(call_id, "read", {"paths": [path], "duration": duration})


class Timeline:
    """The kernel's events, with the virtual time each came at (from the start)."""

    def __init__(self) -> None:
        self.start = anyio.current_time()
        self.events: list[tuple[float, tk.CallEvent]] = []

    def __call__(self, event: tk.CallEvent) -> None:
        self.events.append((anyio.current_time() - self.start, event))

    def times(self, kind: type) -> dict[str, float]:
        return {e.call_id: t for t, e in self.events if isinstance(e, kind)}

    def statuses(self) -> dict[str, tk.Status]:
        return {
            e.call_id: e.result.status
            for _, e in self.events
            if isinstance(e, tk.kernel.CallFinished)
        }


async def run(turns: Sequence[Turn], *, stream: bool, **options: Any) -> tuple[Any, Timeline]:
    async with tk.open_kernel(tools=TOOLS) as kernel:
        timeline = Timeline()
        kernel.add_listener(timeline)
        outcome = await run_agent(ScriptedModel(turns), kernel, "go", stream=stream, **options)
        assert kernel.snapshot() == tk.kernel.KernelSnapshot((), (), ())  # nothing left behind
    return outcome, timeline


ANSWER = Turn(
    "Editing x, then reading it back, and reading y.",
    [edit("a", "x", 5), read("b", "x", 1), read("c", "y", 1)],
    emitted=(1, 2, 3),
)


async def test_calls_start_as_their_blocks_complete_and_conflicting_ones_keep_emission_order(
    autojump_clock: object,
) -> None:
    outcome, timeline = await run([ANSWER], stream=True)
    # a starts at once; b, emitted after a, waits for it although a was submitted alone; c on
    # another file starts when its block is complete.
    assert timeline.times(tk.kernel.CallStarted) == {"a": 1.0, "b": 6.0, "c": 3.0}
    assert timeline.times(tk.kernel.CallFinished) == {"a": 6.0, "c": 4.0, "b": 7.0}
    assert outcome.stop_reason == "completed"


async def test_waiting_for_the_whole_answer_starts_every_call_when_it_ends(
    autojump_clock: object,
) -> None:
    _, timeline = await run([ANSWER], stream=False)
    assert timeline.times(tk.kernel.CallStarted) == {"a": 3.0, "c": 3.0, "b": 8.0}
    assert (
        max(timeline.times(tk.kernel.CallFinished).values()) == 9.0
    )  # two seconds more than streamed


async def test_a_streamed_run_records_the_same_conversation_as_a_whole_one(
    autojump_clock: object,
) -> None:
    turns = [
        ANSWER,
        Turn("Notes.", [tk.ToolCall("d", "note", {"text": "1"}), tk.ToolCall("e", "echo", {})]),
        Turn("And one more.", [tk.ToolCall("f", "echo", {"text": "x", "times": 2})]),
    ]
    streamed, _ = await run(turns, stream=True)
    whole, _ = await run(turns, stream=False)
    assert streamed.messages == whole.messages
    assert [(s.says, s.calls) for s in streamed.steps] == [(s.says, s.calls) for s in whole.steps]
    assert [[(r.status, r.output) for r in s.results] for s in streamed.steps] == [
        [(r.status, r.output) for r in s.results] for s in whole.steps
    ]
    tools = [m for m in streamed.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["a", "b", "c", "d", "e", "f"]
    assert "error" in tools[4]["content"]  # e lacks its text: answered, in its place


async def test_the_answers_go_back_once_the_answer_is_finished_and_all_its_calls_are_done(
    autojump_clock: object,
) -> None:
    events: list[tuple[float, AgentEvent]] = []
    start = anyio.current_time()
    async with tk.open_kernel(tools=TOOLS) as kernel:
        model = ScriptedModel([ANSWER])
        await run_agent(
            model,
            kernel,
            "go",
            stream=True,
            on_event=lambda e: events.append((anyio.current_time() - start, e)),
        )
    replied = [(t, e) for t, e in events if isinstance(e, ModelReplied)]
    assert replied[0] == (3.0, ModelReplied(1, ANSWER.says, ANSWER.calls))
    first_queued = next(t for t, e in events if isinstance(e, tk.kernel.CallQueued))
    assert first_queued == 1.0  # the kernel's events come through on_event as they happen
    # The second request was made at 7 s, when the last call (b) had finished, with all three
    # answers in call order.
    second = model.requests[1][0]
    assert [m.get("tool_call_id") for m in second if m["role"] == "tool"] == ["a", "b", "c"]
    assert [t for t, e in events if isinstance(e, ModelReplied)][1] == 7.0


async def test_a_stream_cut_mid_answer_cancels_the_calls_it_started_before_trying_again(
    autojump_clock: object,
) -> None:
    cut = Turn(
        "Editing x.",
        [edit("a", "x", 100), read("r", "y", 1), read("z", "y", 1)],
        emitted=(1, 2, 3),
        cut=ModelError("the connection dropped mid-answer", transient=True),
    )
    again = Turn("Editing x.", [edit("a2", "x", 1)], emitted=(1,))
    events: list[AgentEvent] = []
    outcome, timeline = await run(
        [cut, again], stream=True, retry=NO_JITTER, on_event=events.append
    )
    # When the stream broke at 3 s, a was running, r had finished, and z's block was not
    # complete (z never ran): a is cancelled at once (its lease returned), the retry waits its
    # 1 s, and the new answer's edit of x is not held up behind the old one.
    assert timeline.statuses() == {
        "a": tk.Status.CANCELLED,
        "r": tk.Status.OK,
        "a2": tk.Status.OK,
    }
    assert timeline.times(tk.kernel.CallFinished)["a"] == 3.0
    assert timeline.times(tk.kernel.CallStarted)["a2"] == 5.0
    assert [(e.attempt, e.delay) for e in events if isinstance(e, ModelRetrying)] == [(2, 1.0)]
    # The model never sees the broken answer: the conversation holds the new one only.
    (step, _) = outcome.steps
    assert [c.id for c in step.calls] == ["a2"]
    assert [m.get("tool_call_id") for m in outcome.messages if m["role"] == "tool"] == ["a2"]


async def test_a_stream_that_fails_for_good_stops_the_loop_with_no_call_left_running(
    autojump_clock: object,
) -> None:
    refused = ModelError("the model server answered 400", transient=False, status=400)
    cut = Turn("", [edit("a", "x", 100), read("b", "y", 1)], emitted=(1, 2), cut=refused)
    outcome, timeline = await run([cut], stream=True)  # ``run`` checks the kernel is idle
    assert outcome.stop_reason == "model_error"
    assert outcome.error is refused
    assert outcome.steps == ()
    assert timeline.statuses() == {"a": tk.Status.CANCELLED}


async def test_cancelling_mid_answer_cancels_the_started_calls_and_records_no_answer(
    autojump_clock: object,
) -> None:
    turn = Turn("", [edit("a", "x", 100), read("b", "y", 1)], emitted=(1, 10))
    scope = anyio.CancelScope(deadline=anyio.current_time() + 5)
    outcome, timeline = await run([turn], stream=True, cancel_scope=scope)
    assert outcome.stop_reason == "cancelled"
    assert outcome.steps == ()
    assert [m["role"] for m in outcome.messages] == ["system", "user"]  # nothing half-said
    assert timeline.statuses() == {"a": tk.Status.CANCELLED}


async def test_cancelling_after_the_answer_answers_every_call(autojump_clock: object) -> None:
    turn = Turn("", [edit("a", "x", 100), read("b", "y", 1)], emitted=(1, 2))
    scope = anyio.CancelScope(deadline=anyio.current_time() + 5)
    outcome, _ = await run([turn], stream=True, cancel_scope=scope)
    assert outcome.stop_reason == "cancelled"
    (step,) = outcome.steps
    assert [r.status for r in step.results] == [tk.Status.CANCELLED, tk.Status.OK]
    assert [m.get("tool_call_id") for m in outcome.messages if m["role"] == "tool"] == ["a", "b"]


async def test_a_repeated_id_in_a_streamed_answer_is_answered_once_with_an_error(
    autojump_clock: object,
) -> None:
    turn = Turn("", [read("a", "x", 1), read("a", "y", 1)], emitted=(1, 2))
    outcome, timeline = await run([turn], stream=True)
    assert timeline.statuses() == {"a": tk.Status.OK}  # the repeat never ran
    (tool_message,) = [m for m in outcome.messages if m["role"] == "tool"]
    assert "is used twice" in tool_message["content"]


async def test_a_call_uses_the_output_of_an_earlier_one_that_finished_before_it_was_emitted(
    autojump_clock: object,
) -> None:
    turn = Turn(
        "",
        [
            tk.ToolCall("c1", "echo", {"text": "hello"}),
            tk.ToolCall("c2", "echo", {"text": "${c1}, ${c1}!"}, after=["c1"]),
            tk.ToolCall("c3", "fail", {}),
            tk.ToolCall("c4", "echo", {"text": "$c3"}, after=["c3"]),
            tk.ToolCall("c5", "echo", {"text": "after"}, after=["c1"]),
        ],
        emitted=(1, 5, 6, 9, 10),
    )
    outcome, _ = await run([turn], stream=True)
    results = {r.call_id: r for r in outcome.steps[0].results}
    assert results["c2"].output == "hello, hello!"
    assert results["c4"].status is tk.Status.SKIPPED  # its source failed
    assert results["c5"].ok


async def test_a_model_that_cannot_stream_is_asked_for_whole_answers(
    autojump_clock: object,
) -> None:
    class WholeOnly:
        async def complete(
            self, messages: Sequence[Mapping[str, Any]], tools: Sequence[object]
        ) -> Mapping[str, Any]:
            return {"role": "assistant", "content": "Nothing to do."}

    assert not isinstance(WholeOnly(), StreamingModel)
    assert isinstance(ScriptedModel([]), StreamingModel)
    async with tk.open_kernel(tools=TOOLS) as kernel:
        outcome = await run_agent(WholeOnly(), kernel, "go", stream=True)
    assert (outcome.stop_reason, outcome.text) == ("completed", "Nothing to do.")


class Events:
    """A model whose streams are given lists of events (of any format)."""

    def __init__(self, *streams: Sequence[object]) -> None:
        self.streams = list(streams)

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[object]
    ) -> Mapping[str, Any]:
        raise AssertionError("a streamed run asks for streams")

    async def stream(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[object]
    ) -> AsyncIterator[object]:
        for event in self.streams.pop(0):
            await anyio.lowlevel.checkpoint()
            yield event


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}


DONE = chunk({"content": "Done."}, "stop")


async def test_a_stream_of_something_else_stops_the_loop_with_a_clear_error(
    autojump_clock: object,
) -> None:
    async with tk.open_kernel(tools=TOOLS) as kernel:
        outcome = await run_agent(Events([{"what": "not an event"}]), kernel, "go", stream=True)
    assert outcome.stop_reason == "model_error"
    assert outcome.error is not None and not outcome.error.transient
    assert "not an event of a Chat Completions, Responses or Anthropic" in str(outcome.error)


async def test_a_stream_that_ends_before_its_answer_did_is_tried_again(
    autojump_clock: object,
) -> None:
    call = {"index": 0, "id": "c1", "function": {"name": "echo", "arguments": '{"text": "a"}'}}
    cut_short = [chunk({"content": "Echoing."}), chunk({"tool_calls": [call]})]
    whole = [*cut_short, chunk({}, "tool_calls")]
    model = Events(cut_short, whole, [DONE])
    events: list[AgentEvent] = []
    async with tk.open_kernel(tools=TOOLS) as kernel:
        outcome = await run_agent(
            model, kernel, "go", stream=True, retry=NO_JITTER, on_event=events.append
        )
    (retrying,) = [e for e in events if isinstance(e, ModelRetrying)]
    assert "ended before the answer did" in str(retrying.error)
    assert outcome.stop_reason == "completed"
    assert [r.output for r in outcome.steps[0].results] == ["a"]


async def test_an_error_event_mid_stream_is_a_transient_model_error(
    autojump_clock: object,
) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    start = {"type": "message_start", "message": {"id": "m", "content": []}}
    model = Events([start, overloaded], [DONE])
    events: list[AgentEvent] = []
    async with tk.open_kernel(tools=TOOLS) as kernel:
        outcome = await run_agent(
            model, kernel, "go", stream=True, retry=NO_JITTER, on_event=events.append
        )
    (retrying,) = [e for e in events if isinstance(e, ModelRetrying)]
    assert str(retrying.error) == "the model's answer failed: Overloaded"
    assert outcome.text == "Done."


def test_emission_times_must_fit_the_calls() -> None:
    with pytest.raises(ValueError, match="needs as many emission times"):
        Turn("", [read("a", "x", 1)], emitted=(1, 2))
    with pytest.raises(ValueError, match="must not decrease"):
        Turn("", [read("a", "x", 1), read("b", "x", 1)], emitted=(2, 1))
    with pytest.raises(ValueError, match="non-negative"):
        Turn("", [read("a", "x", 1)], emitted=(-1,))


async def test_a_call_waiting_for_an_output_holds_back_the_calls_after_it_not_the_answer(
    autojump_clock: object,
) -> None:
    turn = Turn(
        "",
        [
            edit("c1", "x", 10),
            tk.ToolCall("c2", "echo", {"text": "after ${c1}"}, after=["c1"]),
            read("c3", "y", 1),
            edit("c4", "x", 1),
        ],
        emitted=(1, 2, 3, 4),
    )
    events: list[tuple[float, AgentEvent]] = []
    start = anyio.current_time()
    async with tk.open_kernel(tools=TOOLS) as kernel:
        timeline = Timeline()
        kernel.add_listener(timeline)
        outcome = await run_agent(
            ScriptedModel([turn]),
            kernel,
            "go",
            stream=True,
            on_event=lambda e: events.append((anyio.current_time() - start, e)),
        )
    # The answer was read to its end at 4 s while c2 waited for c1's output (until 11 s); c3
    # and c4 were held back behind c2, in order, and submitted with it.
    assert next(t for t, e in events if isinstance(e, ModelReplied)) == 4.0
    assert timeline.times(tk.kernel.CallStarted) == {"c1": 1.0, "c2": 11.0, "c3": 11.0, "c4": 11.0}
    assert [r.status for r in outcome.steps[0].results] == [tk.Status.OK] * 4
    assert outcome.steps[0].results[1].output.startswith("after ")


GARBLED = [
    {
        "role": "assistant",
        "content": "Trying.",
        "tool_calls": [
            {"type": "function", "function": {"name": "echo", "arguments": '{"text": "a"}'}},
            {"id": "x", "type": "function", "function": {"name": "echo", "arguments": "{"}},
            {"id": "y", "type": "function", "function": {"name": "nope", "arguments": "{}"}},
        ],
    },
    *({"role": "assistant", "content": None, "tool_calls": bad} for bad in (5, "echo", True)),
    {"role": "assistant", "content": None, "tool_calls": {"id": "c1"}},
    {"role": "assistant", "content": None, "refusal": "I can't help with that."},
]


@pytest.mark.parametrize("garbled", GARBLED)
async def test_malformed_output_streamed_is_answered_as_a_whole_answer_would_be(
    garbled: dict[str, Any], autojump_clock: object
) -> None:
    streamed, _ = await run([garbled], stream=True)  # type: ignore[list-item]
    whole, _ = await run([garbled], stream=False)  # type: ignore[list-item]
    assert streamed.stop_reason == whole.stop_reason == "completed"
    assert [(m["role"], m.get("tool_call_id")) for m in streamed.messages] == [
        (m["role"], m.get("tool_call_id")) for m in whole.messages
    ]
    assert [m for m in streamed.messages if m["role"] == "assistant"] == [
        m for m in whole.messages if m["role"] == "assistant"
    ]
    statuses = [[r.status for r in s.results] for s in streamed.steps]
    assert statuses == [[r.status for r in s.results] for s in whole.steps]

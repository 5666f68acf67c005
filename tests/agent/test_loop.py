"""The agent loop with the scripted model: how it ends, what it records, what it reports."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from openai.types.chat import ChatCompletionMessageParam
from pydantic import TypeAdapter

import toolkernel as tk
from tests.loopback import assistant
from tests.sample_tools import SAMPLE_TOOLS
from toolkernel.agent import (
    CALLS_PROMPT,
    AgentEvent,
    ModelError,
    ModelReplied,
    ScriptedModel,
    StepStarted,
    StopReason,
    TodosUpdated,
    Turn,
    run_agent,
)
from toolkernel.tools import builtin_tools

MESSAGES = TypeAdapter(list[ChatCompletionMessageParam])


def turn(says: str, *calls: tuple[str, str, dict[str, Any]], after: Any = None) -> Turn:
    return Turn(says, [tk.ToolCall(i, n, a) for i, n, a in calls])


async def test_the_loop_runs_each_batch_and_completes_when_the_model_calls_nothing() -> None:
    model = ScriptedModel(
        [
            turn("Two at once.", ("c1", "echo", {"text": "a"}), ("c2", "note", {"text": "b"})),
            turn("One more.", ("c3", "echo", {"text": "c", "times": 2})),
        ],
        final="All done.",
    )
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        outcome = await run_agent(model, kernel, "Do it.")
    assert outcome.stop_reason == StopReason.COMPLETED == "completed"
    assert outcome.text == "All done."
    assert [(s.index, s.says, [r.output for r in s.results]) for s in outcome.steps] == [
        (1, "Two at once.", ["a", "noted 'b'"]),
        (2, "One more.", ["cc"]),
        (3, "All done.", []),
    ]
    MESSAGES.validate_python(outcome.messages)  # a conversation the SDK would send as it is
    assert [m["role"] for m in outcome.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert outcome.messages[0]["content"] == CALLS_PROMPT
    assert outcome.messages[1] == {"role": "user", "content": "Do it."}
    assert [m["tool_call_id"] for m in outcome.messages if m["role"] == "tool"] == [
        "c1",
        "c2",
        "c3",
    ]
    # The model saw the whole conversation so far at every step, and the tools' names.
    assert [len(messages) for messages, _ in model.requests] == [2, 5, 7]
    assert model.requests[0][1] == ("echo", "fail", "forever", "note")


async def test_the_system_prompt_is_yours_then_the_calls_paragraph() -> None:
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        both = await run_agent(ScriptedModel([]), kernel, "hi", system="You are terse.")
        mine = await run_agent(ScriptedModel([]), kernel, "hi", system="Mine.", calls_prompt="")
        none = await run_agent(ScriptedModel([]), kernel, "hi", calls_prompt="")
    assert both.messages[0]["content"] == "You are terse.\n\n" + CALLS_PROMPT
    assert mine.messages[0] == {"role": "system", "content": "Mine."}
    assert none.messages[0] == {"role": "user", "content": "hi"}


async def test_a_conversation_goes_on_from_the_messages_of_the_last_run() -> None:
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        first = await run_agent(
            ScriptedModel([turn("", ("c1", "echo", {"text": "a"}))]), kernel, "one"
        )
        model = ScriptedModel([], final="Second answer.")
        second = await run_agent(model, kernel, "two", messages=first.messages)
    assert second.messages[: len(first.messages)] == first.messages
    assert second.messages[len(first.messages)] == {"role": "user", "content": "two"}
    assert [m["role"] for m in second.messages].count("system") == 1
    assert len(model.requests[0][0]) == len(first.messages) + 1


async def test_the_loop_stops_after_max_steps_with_every_call_answered() -> None:
    script = [turn(f"step {n}", (f"c{n}", "echo", {"text": str(n)})) for n in range(1, 6)]
    model = ScriptedModel(script)
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        outcome = await run_agent(model, kernel, "go", max_steps=2)
    assert outcome.stop_reason == "max_steps"
    assert [s.index for s in outcome.steps] == [1, 2]
    assert len(model.requests) == 2 and model.remaining == 3
    assert outcome.messages[-1] == {"role": "tool", "tool_call_id": "c2", "content": "2"}


@pytest.mark.parametrize(
    ("bad", "error"), [(0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError)]
)
async def test_max_steps_must_be_a_positive_int(bad: Any, error: type) -> None:
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        with pytest.raises(error, match="max_steps must be an int >= 1"):
            await run_agent(ScriptedModel([]), kernel, "go", max_steps=bad)


async def test_an_error_retrying_cannot_fix_stops_the_loop_at_once() -> None:
    refused = ModelError("the model server answered 401: bad key", transient=False, status=401)
    events: list[AgentEvent] = []
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        outcome = await run_agent(
            ScriptedModel([turn("", ("c1", "echo", {"text": "a"})), refused]),
            kernel,
            "go",
            on_event=events.append,
        )
    assert outcome.stop_reason == "model_error"
    assert outcome.error is refused
    assert [s.index for s in outcome.steps] == [1]
    assert [type(e).__name__ for e in events if isinstance(e, StepStarted | ModelReplied)] == [
        "StepStarted",
        "ModelReplied",
        "StepStarted",
    ]


async def test_events_tell_each_step_what_the_model_said_and_each_calls_start_and_end() -> None:
    events: list[AgentEvent] = []
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        await run_agent(
            ScriptedModel([turn("Look.", ("c1", "echo", {"text": "a"}))], final="Done."),
            kernel,
            "go",
            on_event=events.append,
        )
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "StepStarted",
        "ModelReplied",
        "CallQueued",
        "CallStarted",
        "CallFinished",
        "StepStarted",
        "ModelReplied",
    ]
    replied = [e for e in events if isinstance(e, ModelReplied)]
    assert replied[0] == ModelReplied(1, "Look.", (tk.ToolCall("c1", "echo", {"text": "a"}),))
    assert replied[1] == ModelReplied(2, "Done.", ())


async def test_todo_write_updates_are_reported_with_the_whole_list() -> None:
    todos = [{"content": "write tests", "status": "in_progress"}]
    events: list[AgentEvent] = []
    async with tk.open_kernel(tools=builtin_tools()) as kernel:
        await run_agent(
            ScriptedModel([turn("", ("t1", "TodoWrite", {"todos": todos}))]),
            kernel,
            "plan",
            on_event=events.append,
        )
    assert [e for e in events if isinstance(e, TodosUpdated)] == [
        TodosUpdated(1, "t1", tuple(todos))
    ]


async def test_malformed_model_output_is_answered_with_errors_and_the_loop_goes_on() -> None:
    garbled = {
        "role": "assistant",
        "content": "Trying.",
        "tool_calls": [
            {"type": "function", "function": {"name": "echo", "arguments": '{"text": "a"}'}},
            {"id": "x", "type": "function", "function": {"name": "echo", "arguments": "{"}},
            {"id": "y", "type": "function", "function": {"name": "nope", "arguments": "{}"}},
        ],
    }
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        outcome = await run_agent(ScriptedModel([garbled]), kernel, "go")
    assert outcome.stop_reason == "completed"
    assistant, *answers = outcome.messages[2:6]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_1", "x", "y"]
    assert [a["tool_call_id"] for a in answers] == ["call_1", "x", "y"]
    assert [a["content"].split(":")[0] for a in answers] == ["a", "error", "error"]
    MESSAGES.validate_python(outcome.messages)


@pytest.mark.parametrize("first", ["echo", "nope"])  # the first runs, or fails at admission
async def test_a_repeated_id_leaves_each_result_beside_its_call(first: str) -> None:
    """The kernel fails a repeat at once: its result was put beside the first call with the
    id, and the first call's beside the repeat."""
    model = ScriptedModel(
        [
            turn(
                "Thrice.",
                ("a", first, {"text": "x"}),
                ("b", "note", {"text": "y"}),
                ("a", "note", {"text": "z"}),
                ("a", "echo", {"text": "w"}),
            )
        ]
    )
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        outcome = await run_agent(model, kernel, "go")
    step = outcome.steps[0]
    assert [r.name for r in step.results] == [c.name for c in step.calls]
    assert [r.call_id for r in step.results] == ["a", "b", "a", "a"]
    assert step.results[1].output == "noted 'y'"
    if first == "echo":  # it runs; both repeats are refused
        assert step.results[0].output == "x"
        assert [r.error_type for r in step.results[2:]] == ["InvalidCallError"] * 2
    else:  # refused at admission, it holds no id: the next with it runs, the last is refused
        assert step.results[0].error_type == "UnknownToolError"
        assert step.results[2].output == "noted 'z'"
        assert step.results[3].error_type == "InvalidCallError"


async def test_a_scripted_calls_after_travels_as_depends_on_and_orders_the_batch() -> None:
    script = [
        Turn(
            "",
            [
                tk.ToolCall("c1", "note", {"text": "first"}),
                tk.ToolCall("c2", "echo", {"text": "second"}, after=("c1",)),
            ],
        )
    ]
    model = ScriptedModel(script)
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        outcome = await run_agent(model, kernel, "go")
    sent = outcome.messages[2]["tool_calls"][1]["function"]["arguments"]
    assert sent == '{"text": "second", "depends_on": ["c1"]}'
    first, second = outcome.steps[0].results
    assert outcome.steps[0].calls[1].after == ("c1",)
    assert second.started_at is not None and second.started_at >= first.finished_at


async def test_a_call_of_a_batch_can_use_the_output_of_another_it_depends_on() -> None:
    message = assistant(
        "Look it up, then use it.",
        ("a", "echo", '{"text": "config.py"}'),
        ("b", "echo", '{"text": "reading ${1}", "depends_on": [1]}'),
        ("c", "fail", "{}"),
        ("d", "echo", '{"text": "$3", "depends_on": [3]}'),
    )
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        outcome = await run_agent(ScriptedModel([message]), kernel, "go")
    results = outcome.steps[0].results
    assert [r.status for r in results] == [
        tk.Status.OK,
        tk.Status.OK,
        tk.Status.ERROR,
        tk.Status.SKIPPED,
    ]
    assert results[1].output == "reading config.py"
    assert outcome.steps[0].calls[1].arguments == {"text": "reading ${a}"}


async def test_cancelling_the_loops_scope_stops_it_with_every_call_answered() -> None:
    scope = anyio.CancelScope()

    def cancel_when_forever_starts(event: AgentEvent) -> None:
        if isinstance(event, tk.kernel.CallStarted) and event.name == "forever":
            scope.cancel()

    model = ScriptedModel(
        [turn("", ("c1", "echo", {"text": "a"}), ("c2", "forever", {}))], final="unreached"
    )
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        outcome = await run_agent(
            model, kernel, "go", cancel_scope=scope, on_event=cancel_when_forever_starts
        )
        assert outcome.stop_reason == "cancelled"
        assert [r.status for r in outcome.steps[0].results][1] is tk.Status.CANCELLED
        assert [m["tool_call_id"] for m in outcome.messages[3:]] == ["c1", "c2"]
        MESSAGES.validate_python(outcome.messages)
        again = await run_agent(ScriptedModel([]), kernel, "go on", messages=outcome.messages)
    assert again.stop_reason == "completed"


async def test_cancellation_from_the_callers_own_scope_propagates() -> None:
    model = ScriptedModel([turn("", ("c1", "forever", {}))])
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        with anyio.CancelScope() as outer:

            def cancel(event: AgentEvent) -> None:
                if isinstance(event, tk.kernel.CallStarted):
                    outer.cancel()

            await run_agent(model, kernel, "go", on_event=cancel)
            pytest.fail("run_agent returned from a cancelled scope")
        assert outer.cancelled_caught


@pytest.mark.parametrize(
    "reply",
    [
        {"role": "assistant", "content": None},
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "assistant"},
    ],
)
async def test_an_empty_final_reply_is_recorded_as_a_message_openai_accepts_back(
    reply: dict[str, Any],
) -> None:
    # The API takes an assistant message's content as null only beside tool_calls.
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        outcome = await run_agent(ScriptedModel([reply]), kernel, "go")
    assert outcome.stop_reason == "completed"
    assert outcome.messages[-1] == {"role": "assistant", "content": ""}


async def test_a_reply_whose_content_is_a_list_of_text_parts_says_their_text() -> None:
    parts = [{"type": "text", "text": "All "}, {"type": "text", "text": "done."}]
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        outcome = await run_agent(
            ScriptedModel([{"role": "assistant", "content": parts}]), kernel, "go"
        )
    assert outcome.text == "All done."
    assert outcome.messages[-1]["content"] == parts
    MESSAGES.validate_python(outcome.messages)


@pytest.mark.parametrize("tool_calls", [5, "echo", {"id": "c1"}, True])
async def test_tool_calls_that_are_not_a_list_are_answered_with_an_error_not_raised(
    tool_calls: object,
) -> None:
    garbled = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        outcome = await run_agent(ScriptedModel([garbled]), kernel, "go")
    assert outcome.stop_reason == "completed"
    (result,) = outcome.steps[0].results
    assert result.status is tk.Status.ERROR
    MESSAGES.validate_python(outcome.messages)


async def test_a_refusal_is_what_the_model_says_and_stays_in_the_conversation() -> None:
    refused = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        outcome = await run_agent(ScriptedModel([refused]), kernel, "go")
    assert outcome.stop_reason == "completed"
    assert outcome.text == "I can't help with that."
    assert outcome.messages[-1] == {
        "role": "assistant",
        "content": "",
        "refusal": "I can't help with that.",
    }
    MESSAGES.validate_python(outcome.messages)


async def test_recorded_arguments_are_always_a_json_object_so_servers_accept_the_history() -> None:
    # vLLM and llama.cpp parse the arguments of every call in the history: a model's malformed
    # arguments, recorded as they came, would fail every later request of the conversation.
    def call(call_id: str, arguments: object) -> dict[str, Any]:
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": "echo", "arguments": arguments},
        }

    garbled = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            call("a", '{"text": "fine"}'),
            call("b", '{"text": "cut sh'),
            call("c", "null"),
            call("d", '"text"'),
            call("e", "[1]"),
            call("f", {"text": "an object"}),
            call("g", None),
        ],
    }
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        outcome = await run_agent(ScriptedModel([garbled]), kernel, "go")
    recorded = [c["function"]["arguments"] for c in outcome.messages[2]["tool_calls"]]
    assert recorded == ['{"text": "fine"}', "{}", "{}", "{}", "{}", '{"text": "an object"}', "{}"]
    assert [r.status for r in outcome.steps[0].results] == [
        tk.Status.OK,
        *[tk.Status.ERROR] * 4,
        tk.Status.OK,
        tk.Status.ERROR,
    ]
    MESSAGES.validate_python(outcome.messages)


async def test_a_conversation_can_go_on_from_the_openai_sdks_own_messages() -> None:
    # A conversation begun with the official SDK holds its objects beside plain dicts.
    from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageFunctionToolCall

    call = ChatCompletionMessageFunctionToolCall(
        id="c1", type="function", function={"name": "echo", "arguments": '{"text": "a"}'}
    )
    earlier = [
        {"role": "user", "content": "one"},
        ChatCompletionMessage(role="assistant", content=None, tool_calls=[call]),
        {"role": "tool", "tool_call_id": "c1", "content": "a"},
    ]
    model = ScriptedModel([])
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        outcome = await run_agent(model, kernel, "two", messages=earlier)  # type: ignore[arg-type]
    sent = model.requests[0][0]
    assert sent[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "echo", "arguments": '{"text": "a"}'},
            }
        ],
    }
    MESSAGES.validate_python(outcome.messages)

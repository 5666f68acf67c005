"""Streamed answers in each wire format: when a call is complete, what the whole answer says.

The events are the official SDKs' own types (``ChatCompletionChunk``, the Responses stream
events, Anthropic's ``RawMessageStreamEvent``), validated from the shapes the APIs send, and,
over a loopback server speaking server-sent events, the objects the SDKs' own clients parse.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import anyio
import anyio.abc
import h11
import openai
import pytest
from anthropic.types import RawMessageStreamEvent
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

import toolkernel as tk
from tests.loopback import Action, LoopbackServer, Raw, Reply, chat_reply, completion, serve
from tests.sample_tools import SAMPLE_TOOLS
from toolkernel.agent import (
    AgentEvent,
    ModelRetrying,
    OpenAICompatibleModel,
    Retry,
    run_agent,
)
from toolkernel.formats._calls import WireCall
from toolkernel.formats._streams import AnswerStream, CallReader, StreamFormatError

RESPONSES = TypeAdapter(ResponseStreamEvent)
ANTHROPIC = TypeAdapter(RawMessageStreamEvent)
NO_JITTER = Retry(jitter=0.0, initial=0.01)


def feed_all(events: Sequence[object]) -> tuple[list[list[str]], AnswerStream]:
    """The ids of the calls each event completed, and the stream."""
    answer = AnswerStream()
    return [[str(c.id) for c in answer.feed(event)] for event in events], answer


# -- Chat Completions ---------------------------------------------------------------------------


def chat_chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def chat_call(index: int, call_id: str | None, name: str | None, arguments: str) -> dict[str, Any]:
    part: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        part["id"], part["type"] = call_id, "function"
    if name is not None:
        part["function"]["name"] = name
    return {"tool_calls": [part]}


CHAT_STREAM = [
    chat_chunk({"role": "assistant", "content": ""}),
    chat_chunk({"content": "Two "}),
    chat_chunk({"content": "calls."}),
    chat_chunk(chat_call(0, "call_a", "echo", "")),
    chat_chunk(chat_call(0, None, None, '{"text"')),
    chat_chunk(chat_call(0, None, None, ': "a"}')),
    chat_chunk(chat_call(1, "call_b", "note", "")),
    chat_chunk(chat_call(1, None, None, '{"text": "b"}')),
    chat_chunk({}, "tool_calls"),
]


def test_a_chat_call_is_complete_when_the_next_one_starts_or_the_choice_finishes() -> None:
    chunks = [ChatCompletionChunk.model_validate(c) for c in CHAT_STREAM]
    completed, answer = feed_all(chunks)
    assert completed == [[], [], [], [], [], [], ["call_a"], [], ["call_b"]]
    assert answer.finished
    message, rest = answer.finish()
    assert rest == []
    assert message == {
        "role": "assistant",
        "content": "Two calls.",
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "echo", "arguments": '{"text": "a"}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "note", "arguments": '{"text": "b"}'},
            },
        ],
    }


def test_a_whole_chat_completion_counts_as_one_chunk() -> None:
    body = completion(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "echo", "arguments": "{}"}},
            ],
        }
    )
    completed, answer = feed_all([ChatCompletion.model_validate(body)])
    assert completed == [["c1", "c2"]]
    assert answer.finished


def test_calls_sent_whole_each_under_index_0_are_calls_of_their_own() -> None:
    calls = [chat_call(0, f"call_{n}", "echo", f'{{"text": "{n}"}}') for n in (1, 2)]
    completed, answer = feed_all([ChatCompletionChunk.model_validate(chat_chunk(c)) for c in calls])
    assert completed == [[], ["call_1"]]
    _, rest = answer.finish()
    assert [(c.id, c.arguments) for c in rest] == [("call_2", '{"text": "2"}')]


def test_a_chat_stream_that_stops_early_is_not_finished_and_keeps_its_last_call() -> None:
    completed, answer = feed_all([ChatCompletionChunk.model_validate(c) for c in CHAT_STREAM[:7]])
    assert completed[-1] == ["call_a"] and not answer.finished
    _, rest = answer.finish()
    assert [c.id for c in rest] == ["call_b"]


# -- Responses ----------------------------------------------------------------------------------


def responses_events() -> list[dict[str, Any]]:
    def call_item(item_id: str, call_id: str, name: str, arguments: str, status: str) -> Any:
        return {
            "type": "function_call",
            "id": item_id,
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
            "status": status,
        }

    events: list[dict[str, Any]] = [
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": "Looking.",
            "logprobs": [],
        },
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": call_item("fc_1", "call_a", "echo", "", "in_progress"),
        },
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "output_index": 1,
            "delta": '{"text": ',
        },
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "output_index": 1,
            "delta": '"a"}',
        },
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "output_index": 1,
            "arguments": '{"text": "a"}',
        },
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": call_item("fc_1", "call_a", "echo", '{"text": "a"}', "completed"),
        },
        {
            "type": "response.output_item.added",
            "output_index": 2,
            "item": call_item("fc_2", "call_b", "note", "", "in_progress"),
        },
        {
            "type": "response.output_item.done",
            "output_index": 2,
            "item": call_item("fc_2", "call_b", "note", '{"text": "b"}', "completed"),
        },
        {
            "type": "response.completed",
            "response": {
                "id": "resp_1",
                "object": "response",
                "created_at": 0,
                "model": "m",
                "output": [],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
            },
        },
    ]
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def test_a_responses_call_is_complete_at_its_arguments_done_or_its_item_done() -> None:
    events = [RESPONSES.validate_python(e) for e in responses_events()]
    completed, answer = feed_all(events)
    assert completed == [[], [], [], [], ["call_a"], [], [], ["call_b"], []]
    assert answer.finished
    message, _ = answer.finish()
    assert message["content"] == "Looking."
    assert [(c["id"], c["function"]) for c in message["tool_calls"]] == [
        ("call_a", {"name": "echo", "arguments": '{"text": "a"}'}),
        ("call_b", {"name": "note", "arguments": '{"text": "b"}'}),
    ]


# -- Anthropic ----------------------------------------------------------------------------------


def anthropic_events() -> list[dict[str, Any]]:
    return [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_a", "name": "echo", "input": {}},
        },
        {"type": "ping"},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"text":'},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": ' "a"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_b", "name": "echo", "input": {}},
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]


def test_an_anthropic_tool_use_is_complete_at_its_content_block_stop() -> None:
    # A ping is no event of the SDK's (its client drops them); the wire's dict is read as is.
    events = [
        ANTHROPIC.validate_python(e) if e["type"] != "ping" else e for e in anthropic_events()
    ]
    completed, answer = feed_all(events)
    assert completed == [[], [], [], [], [], [], [], [], ["toolu_a"], [], ["toolu_b"], [], []]
    assert answer.finished
    message, _ = answer.finish()
    assert message["content"] == "Hi"
    assert [(c["id"], c["function"]["arguments"]) for c in message["tool_calls"]] == [
        ("toolu_a", '{"text": "a"}'),
        ("toolu_b", "{}"),  # no deltas: the block's input as it started
    ]


def test_events_of_two_formats_in_one_stream_are_refused_and_errors_are_kept() -> None:
    answer = AnswerStream()
    answer.feed(ChatCompletionChunk.model_validate(CHAT_STREAM[0]))
    with pytest.raises(
        StreamFormatError, match="an event of the anthropic format in a chat stream"
    ):
        answer.feed(ANTHROPIC.validate_python({"type": "message_stop"}))
    with pytest.raises(StreamFormatError, match="not an event of a Chat Completions"):
        AnswerStream().feed(42)
    failing = AnswerStream()
    failing.feed({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    assert failing.error == "Overloaded"


def test_calls_are_read_one_by_one_as_a_whole_message_would_be() -> None:
    reader = CallReader(SAMPLE_TOOLS)
    first = reader.read(WireCall(None, "echo", '{"text": "a"}'))
    second = reader.read(WireCall("call_1", "echo", '{"text": "$1", "depends_on": [1]}'))
    third = reader.read(WireCall("", "note", '{"text": "c", "depends_on": [7]}'))
    assert first == tk.ToolCall("call_1", "echo", {"text": "a"})
    # An id the model gave that a made-up one already took is kept: the loop answers the
    # repeat with an error.
    assert second == tk.ToolCall("call_1", "echo", {"text": "${call_1}"}, after=["call_1"])
    assert third == tk.ToolCall("call_3", "note", {"text": "c"}, after=["7"])


# -- over HTTP, through the real protocols ------------------------------------------------------

SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"


def sse(events: Sequence[Mapping[str, Any]], *, named: bool = False, done: bool = False) -> bytes:
    """Server-sent events: ``data:`` lines (with ``event:`` names, as Anthropic and the
    Responses API send them)."""
    out = b""
    for event in events:
        if named:
            out += f"event: {event['type']}\n".encode()
        out += b"data: " + json.dumps(event).encode() + b"\n\n"
    if done:
        out += b"data: [DONE]\n\n"
    return out


FINAL = chat_reply("All done.")


@pytest.fixture(autouse=True)
def no_openai_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)


def final_sse() -> Raw:
    return Raw(SSE_HEAD + sse([chat_chunk({"content": "All done."}, "stop")], done=True))


async def test_the_http_model_streams_an_answer_and_the_loop_runs_its_calls() -> None:
    async with serve([Raw(SSE_HEAD + sse(CHAT_STREAM, done=True)), final_sse()]) as server:
        model = OpenAICompatibleModel(base_url=server.url, model="m")
        async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
            outcome = await run_agent(model, kernel, "go", stream=True)
    assert outcome.stop_reason == "completed" and outcome.text == "All done."
    assert [r.output for r in outcome.steps[0].results] == ["a", "noted 'b'"]
    assert all(request.json["stream"] is True for request in server.requests)


def multiline_sse(events: Sequence[Mapping[str, Any]], *, blank_lines: bool = True) -> bytes:
    """Each event's JSON spread over several ``data:`` lines (the SSE format joins them with
    newlines); with ``blank_lines=False``, one-line events with no blank line between them,
    as some servers send them."""
    out = b""
    for event in events:
        if blank_lines:
            text = json.dumps(event, indent=1)
            out += b"".join(b"data: " + line.encode() + b"\n" for line in text.split("\n"))
            out += b"\n"
        else:
            out += b"data: " + json.dumps(event).encode() + b"\n"
    return out + b"data: [DONE]\n\n"


@pytest.mark.parametrize("blank_lines", [True, False])
async def test_an_event_over_several_data_lines_is_read_as_one(blank_lines: bool) -> None:
    """As the openai SDK reads them: its first line alone ('{') failed the run."""
    answer = Raw(SSE_HEAD + multiline_sse(CHAT_STREAM, blank_lines=blank_lines))
    async with serve([answer, final_sse()]) as server:
        model = OpenAICompatibleModel(base_url=server.url, model="m")
        async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
            outcome = await run_agent(model, kernel, "go", stream=True)
    assert outcome.stop_reason == "completed" and outcome.text == "All done."
    assert [r.output for r in outcome.steps[0].results] == ["a", "noted 'b'"]


async def test_a_server_that_ignores_stream_answers_whole_and_the_loop_goes_on() -> None:
    reply = chat_reply("One.", ("c1", "echo", '{"text": "a"}'))
    async with serve([reply, FINAL]) as server:
        model = OpenAICompatibleModel(base_url=server.url, model="m")
        async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
            outcome = await run_agent(model, kernel, "go", stream=True)
    assert [r.output for r in outcome.steps[0].results] == ["a"]
    assert outcome.text == "All done."


async def test_a_busy_server_a_failure_mid_answer_and_a_cut_stream_are_retried() -> None:
    failing = sse([chat_chunk({"content": "Hm"}), {"error": {"message": "server overloaded"}}])
    cut = sse(CHAT_STREAM[:6])  # closed before the answer finished, no [DONE]
    script: list[Action] = [
        Reply({"error": {"message": "busy"}}, 503),
        Raw(SSE_HEAD + failing),
        Raw(SSE_HEAD + cut),
        Raw(SSE_HEAD + sse(CHAT_STREAM, done=True)),
        final_sse(),
    ]
    events: list[AgentEvent] = []
    async with serve(script) as server:
        model = OpenAICompatibleModel(base_url=server.url, model="m")
        async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
            outcome = await run_agent(
                model, kernel, "go", stream=True, retry=NO_JITTER, on_event=events.append
            )
    errors = [str(e.error) for e in events if isinstance(e, ModelRetrying)]
    assert "answered 503: busy" in errors[0]
    assert "failed mid-answer: server overloaded" in errors[1]
    assert "ended before the answer did" in errors[2]
    assert outcome.stop_reason == "completed"
    assert [r.output for r in outcome.steps[0].results] == ["a", "noted 'b'"]


async def test_a_stream_event_that_is_not_json_is_an_error_that_is_not_retried() -> None:
    async with serve([Raw(SSE_HEAD + b"data: {nope\n\n")]) as server:
        model = OpenAICompatibleModel(base_url=server.url, model="m")
        async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
            outcome = await run_agent(model, kernel, "go", stream=True)
    assert outcome.stop_reason == "model_error"
    assert outcome.error is not None and "not a JSON object: {nope" in str(outcome.error)
    assert len(server.requests) == 1


class GatedServer(LoopbackServer):
    """Sends the first part of an SSE answer, waits (at most 5 s) for ``gate``, then the rest."""

    def __init__(self, first: bytes, rest: bytes) -> None:
        super().__init__([])
        self.first, self.rest = first, rest
        self.gate = anyio.Event()
        self.waited_out = False

    async def handle(self, stream: anyio.abc.ByteStream) -> None:
        connection = h11.Connection(h11.SERVER)
        async with stream:
            request = await self._read(connection, stream)
            if request is None:
                return
            self.requests.append(request)
            await stream.send(SSE_HEAD + self.first)
            with anyio.move_on_after(5) as scope:
                await self.gate.wait()
            self.waited_out = scope.cancelled_caught
            await stream.send(self.rest)


@asynccontextmanager
async def serve_gated(server: GatedServer) -> AsyncIterator[GatedServer]:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    server.url = f"http://127.0.0.1:{listener.extra(anyio.abc.SocketAttribute.local_port)}"
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, server.handle)
        try:
            yield server
        finally:
            group.cancel_scope.cancel()


async def test_over_http_a_call_starts_while_the_server_is_still_sending_the_answer() -> None:
    server = GatedServer(
        sse(CHAT_STREAM[:7]),  # the first call's block, and the second's start
        sse(CHAT_STREAM[7:], done=True),
    )

    @tk.tool(claims=lambda args: [])
    async def echo(ctx: tk.ToolContext, text: str) -> str:
        server.gate.set()  # the server sends the rest of the answer only now
        return text

    async with serve_gated(server):
        model = OpenAICompatibleModel(base_url=server.url, model="m", timeout=10)
        async with tk.open_kernel(tools=[echo, *SAMPLE_TOOLS[1:]]) as kernel:
            outcome = await run_agent(model, kernel, "go", stream=True, max_steps=1)
    assert not server.waited_out
    assert [r.output for r in outcome.steps[0].results] == ["a", "noted 'b'"]


# -- the official SDKs' clients, as a model of one's own would use them -------------------------


class SDKModel:
    """A streaming model written on an official SDK: it yields the SDK's own events."""

    def __init__(self, events: Any) -> None:
        self.events = events

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[object]
    ) -> Mapping[str, Any]:
        raise AssertionError("a streamed run asks for streams")

    async def stream(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[object]
    ) -> AsyncIterator[object]:
        async for event in await self.events():
            yield event


# The openai SDK stops reading a Chat Completions stream at [DONE] and leaves httpx's
# iterators to the garbage collector, which trio warns of; not this library's doing.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
async def test_a_model_on_an_official_sdk_streams_its_events_into_the_loop(
    api: str, anyio_backend: object
) -> None:
    if api == "chat":
        body = sse(CHAT_STREAM, done=True)
    elif api == "responses":
        body = sse(responses_events(), named=True)
    else:
        body = sse(anthropic_events(), named=True)
    async with serve([Raw(SSE_HEAD + body)]) as server:
        if api == "anthropic":
            client: Any = anthropic.AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0)

            def events() -> Any:
                return client.messages.create(
                    model="claude", max_tokens=100, messages=[], stream=True
                )
        else:
            client = openai.AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0)
            if api == "chat":

                def events() -> Any:
                    return client.chat.completions.create(model="m", messages=[], stream=True)
            else:

                def events() -> Any:
                    return client.responses.create(model="m", input="go", stream=True)

        async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
            outcome = await run_agent(SDKModel(events), kernel, "go", stream=True, max_steps=1)
        await client.close()
    (step,) = outcome.steps
    first, second = step.results
    assert first.output == "a"
    if api == "anthropic":
        assert second.status is tk.Status.ERROR  # echo without its text, answered in its place
    else:
        assert second.output == "noted 'b'"
    assert step.says == {"chat": "Two calls.", "responses": "Looking.", "anthropic": "Hi"}[api]

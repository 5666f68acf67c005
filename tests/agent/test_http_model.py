"""OpenAICompatibleModel against a Chat Completions server on loopback: what it sends, what it
makes of answers, errors, slow answers and dropped connections, and a whole agent run."""

from __future__ import annotations

import email.utils
import time

import anyio
import pytest

import toolkernel as tk
from tests.loopback import (
    Action,
    Drop,
    Hang,
    Raw,
    Reply,
    Request,
    chat_reply,
    completion,
    serve,
)
from tests.sample_tools import SAMPLE_TOOLS
from toolkernel.agent import (
    AgentEvent,
    ModelError,
    ModelRetrying,
    OpenAICompatibleModel,
    Retry,
    run_agent,
)

USER = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
def no_openai_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)


async def test_a_request_carries_model_messages_tools_key_and_options() -> None:
    reply = chat_reply("Reading.", ("call_1", "echo", '{"text": "a"}'))
    async with serve([reply]) as server:
        model = OpenAICompatibleModel(
            base_url=server.url + "/v1/", api_key="sk-test", model="m1", options={"seed": 1}
        )
        message = await model.complete(USER, SAMPLE_TOOLS)
    assert message == completion(reply.body["choices"][0]["message"])["choices"][0]["message"]
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer sk-test"
    body = request.json
    assert (body["model"], body["messages"], body["seed"]) == ("m1", USER, 1)
    assert [t["function"]["name"] for t in body["tools"]] == ["echo", "fail", "note", "forever"]
    echo = body["tools"][0]["function"]
    assert echo["strict"] is False and "depends_on" in echo["parameters"]["properties"]


async def test_strict_tools_and_no_key_and_no_tools() -> None:
    async with serve([chat_reply("a"), chat_reply("b")]) as server:
        model = OpenAICompatibleModel(base_url=server.url, model="m", strict=True)
        await model.complete(USER, SAMPLE_TOOLS)
        await model.complete(USER, [])
    first, second = server.requests
    assert "authorization" not in first.headers
    assert all(t["function"]["strict"] for t in first.json["tools"])
    assert "tools" not in second.json


async def test_base_url_key_and_model_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with serve([chat_reply("a")]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "from-env")
        monkeypatch.setenv("OPENAI_MODEL", "env-model")
        await OpenAICompatibleModel().complete(USER, [])
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer from-env"
    assert request.json["model"] == "env-model"


def test_a_model_name_is_required() -> None:
    with pytest.raises(ValueError, match="needs the model's name"):
        OpenAICompatibleModel(base_url="http://127.0.0.1:1")


@pytest.mark.parametrize("url", ["localhost:11434/v1", "127.0.0.1:8000", "ftp://host/v1"])
def test_a_base_url_without_http_is_refused_where_it_is_given(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not a connection failure to retry with backoff: no request can ever reach it.
    with pytest.raises(ValueError, match=r"base_url must start with http:// or https://"):
        OpenAICompatibleModel(base_url=url, model="m")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    with pytest.raises(ValueError, match="OPENAI_BASE_URL"):
        OpenAICompatibleModel(model="m")


@pytest.mark.parametrize("option", ["stream", "model", "messages", "tools"])
def test_options_that_would_break_every_request_are_refused_where_they_are_given(
    option: str,
) -> None:
    # "stream" makes the server answer with events this client does not read; the others
    # would overwrite what each request must carry.
    with pytest.raises(ValueError, match=f"options can't set {option!r}"):
        OpenAICompatibleModel(base_url="http://127.0.0.1:1", model="m", options={option: True})


async def failure(action: Action, within: float = 10.0) -> ModelError:
    async with serve([action]) as server:
        model = OpenAICompatibleModel(base_url=server.url, model="m", timeout=within)
        with pytest.raises(ModelError) as caught:
            await model.complete(USER, [])
    return caught.value


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504])
async def test_rate_limits_server_errors_and_timeouts_are_transient(status: int) -> None:
    error = await failure(Reply({"error": {"message": "try later"}}, status))
    assert (error.transient, error.status) == (True, status)
    assert str(error).endswith(f"answered {status}: try later")


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_not_transient(status: int) -> None:
    error = await failure(Reply({"error": {"message": "bad request"}}, status))
    assert (error.transient, error.status, error.retry_after) == (False, status, None)
    assert "bad request" in str(error)


async def test_retry_after_is_read_in_seconds_milliseconds_or_as_a_date() -> None:
    seconds = await failure(Reply({}, 429, {"retry-after": "3"}))
    assert seconds.retry_after == 3.0
    millis = await failure(Reply({}, 503, {"retry-after-ms": "250", "retry-after": "9"}))
    assert millis.retry_after == 0.25
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    dated = await failure(Reply({}, 429, {"retry-after": date}))
    assert dated.retry_after is not None and 20 < dated.retry_after <= 30
    nonsense = await failure(Reply({}, 429, {"retry-after": "soon"}))
    assert nonsense.retry_after is None


async def test_a_server_that_does_not_answer_in_time_is_a_transient_timeout(
    autojump_clock: object,
) -> None:
    error = await failure(Hang(), within=30.0)  # virtual seconds
    assert error.transient and error.status is None
    assert "did not answer within 30 s" in str(error)


async def test_a_dropped_or_truncated_answer_is_a_transient_connection_failure() -> None:
    dropped = await failure(Drop())
    assert dropped.transient and "connection to the model server" in str(dropped)
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n"
    truncated = await failure(Raw(head + b'{"choices": ['))
    assert truncated.transient and "connection to the model server" in str(truncated)


async def test_a_refused_connection_is_transient() -> None:
    async with serve() as server:
        url = server.url
    with pytest.raises(ModelError, match="connection to the model server") as caught:
        await OpenAICompatibleModel(base_url=url, model="m").complete(USER, [])
    assert caught.value.transient


async def test_an_answer_that_is_not_a_completion_is_a_lasting_error() -> None:
    garbage = await failure(Raw(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n<html>hi<"))
    assert not garbage.transient and "without a message" in str(garbage)
    assert "<html>hi<" in str(garbage)
    in_body = await failure(Reply({"error": {"message": "model not loaded"}}))
    assert not in_body.transient and str(in_body).endswith("error: model not loaded")


async def test_inside_async_with_one_connection_serves_every_request() -> None:
    async with (
        serve([chat_reply("a"), chat_reply("b")]) as server,
        OpenAICompatibleModel(base_url=server.url, model="m") as model,
    ):
        await model.complete(USER, [])
        await model.complete(USER, [])
    assert server.connections == 1
    async with serve([chat_reply("a"), chat_reply("b")]) as server:
        model = OpenAICompatibleModel(base_url=server.url, model="m")
        await model.complete(USER, [])
        await model.complete(USER, [])
    assert server.connections == 2


async def test_an_agent_run_over_http_retries_passes_outputs_and_completes() -> None:
    script = [
        Reply({"error": {"message": "overloaded"}}, 503),
        chat_reply(
            "Note, then echo.",
            ("call_1", "note", '{"text": "x"}'),
            ("call_2", "echo", '{"text": "${1}, then this", "depends_on": [1]}'),
        ),
        Drop(),
        chat_reply("Finished."),
    ]
    events: list[AgentEvent] = []
    async with serve(script) as server, tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        model = OpenAICompatibleModel(base_url=server.url, model="m")
        outcome = await run_agent(
            model, kernel, "go", retry=Retry(initial=0.0), on_event=events.append
        )
    assert outcome.stop_reason == "completed" and outcome.text == "Finished."
    assert [e.attempt for e in events if isinstance(e, ModelRetrying)] == [2, 2]
    note, echo = outcome.steps[0].results
    assert echo.ok and echo.started_at is not None and echo.started_at >= note.finished_at
    last = server.requests[-1].json["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "tool"]
    assert [m["content"] for m in last[3:]] == ["noted 'x'", "noted 'x', then this"]


async def test_cancelling_a_run_cancels_the_request_in_flight() -> None:
    scope = anyio.CancelScope()

    def cancel_and_hang(request: Request) -> Hang:
        scope.cancel()  # the request has arrived: the client is waiting for the answer
        return Hang()

    async with serve([cancel_and_hang]) as server, tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        model = OpenAICompatibleModel(base_url=server.url, model="m")
        outcome = await run_agent(model, kernel, "go", cancel_scope=scope)
    assert outcome.stop_reason == "cancelled" and len(server.requests) == 1

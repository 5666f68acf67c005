"""OpenAICompatibleModel reads at most ``max_answer_bytes`` of an answer: a server sending more
(declared, close-delimited, compressed, or one event line without end) is a ModelError, not
retried, and what it holds stays bounded."""

from __future__ import annotations

import gzip
import json

import pytest

import toolkernel as tk
from tests.loopback import Raw, Reply, chat_reply, completion, serve
from toolkernel.agent import ModelError, OpenAICompatibleModel, Retry, run_agent

USER = [{"role": "user", "content": "hi"}]
LIMIT = 64 * 1024


@pytest.fixture(autouse=True)
def no_openai_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)


def model(url: str, limit: int = LIMIT) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(base_url=url, model="m", max_answer_bytes=limit)


def big_reply() -> Reply:
    return chat_reply("x" * (4 * LIMIT))


def raw(headers: str, body: bytes) -> Raw:
    return Raw(f"HTTP/1.1 200 OK\r\n{headers}\r\n".encode() + body)


def too_big(error: ModelError) -> None:
    assert not error.transient
    assert f"sent an answer of more than {LIMIT} bytes (max_answer_bytes)" in str(error)


async def test_an_answer_declared_too_big_is_refused() -> None:
    async with serve([big_reply()]) as server:
        with pytest.raises(ModelError) as caught:
            await model(server.url).complete(USER, [])
    too_big(caught.value)


async def test_an_answer_without_a_length_is_cut_at_the_limit() -> None:
    body = json.dumps(completion({"role": "assistant", "content": "x" * 4 * LIMIT})).encode()
    async with serve([raw("Content-Type: application/json\r\n", body)]) as server:
        with pytest.raises(ModelError) as caught:
            await model(server.url).complete(USER, [])
    too_big(caught.value)


async def test_a_compressed_answer_counts_by_what_it_unpacks_to() -> None:
    body = gzip.compress(b" " * (16 * LIMIT))  # 1 MiB of spaces in a few KiB
    assert len(body) < LIMIT
    headers = f"Content-Encoding: gzip\r\nContent-Length: {len(body)}\r\n"
    async with serve([raw(headers, body)]) as server:
        with pytest.raises(ModelError) as caught:
            await model(server.url).complete(USER, [])
    too_big(caught.value)


async def test_an_answer_within_the_limit_is_read() -> None:
    async with serve([chat_reply("y" * (LIMIT // 2))]) as server:
        message = await model(server.url).complete(USER, [])
    assert message["content"] == "y" * (LIMIT // 2)


async def test_a_streamed_line_without_end_is_cut_at_the_limit() -> None:
    headers = "Content-Type: text/event-stream\r\n"
    async with serve([raw(headers, b'data: {"choices": [' + b" " * (4 * LIMIT))]) as server:
        with pytest.raises(ModelError) as caught:
            async for _ in model(server.url).stream(USER, []):
                pass
    too_big(caught.value)


async def test_a_streamed_answer_within_the_limit_is_read_line_by_line() -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "hé\u2028llo"}}]}
    events = f"data: {json.dumps(chunk, ensure_ascii=False)}\r\n\r\ndata: [DONE]\n\n"
    async with serve([raw("Content-Type: text/event-stream\r\n", events.encode())]) as server:
        chunks = [c async for c in model(server.url).stream(USER, [])]
    assert chunks == [chunk]  # U+2028 inside a line is no line end


async def test_run_agent_stops_with_the_reason_and_does_not_retry() -> None:
    async with serve([big_reply(), big_reply()]) as server, tk.open_kernel() as kernel:
        outcome = await run_agent(model(server.url), kernel, "go", retry=Retry(initial=0))
    assert outcome.stop_reason == "model_error"
    assert outcome.error is not None
    too_big(outcome.error)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("limit", "error"),
    [(0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError), ("1", TypeError)],
)
def test_a_bad_limit_is_refused_where_the_model_is_made(limit: object, error: type) -> None:
    with pytest.raises(error, match="max_answer_bytes must be an int >= 1"):
        OpenAICompatibleModel(base_url="http://localhost:1", model="m", max_answer_bytes=limit)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("timeout", "error"), [(0, ValueError), (-1.0, ValueError), (True, TypeError), ("5", TypeError)]
)
def test_a_bad_timeout_is_refused_where_the_model_is_made(timeout: object, error: type) -> None:
    with pytest.raises(error, match="timeout must be a positive number of seconds"):
        OpenAICompatibleModel(base_url="http://localhost:1", model="m", timeout=timeout)  # type: ignore[arg-type]


def test_the_default_limit_is_16_mib() -> None:
    assert OpenAICompatibleModel(base_url="http://localhost:1", model="m").max_answer_bytes == (
        16 * 1024 * 1024
    )

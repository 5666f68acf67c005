"""A loopback HTTP server for the tests, speaking just enough Chat Completions (and Anthropic
Messages) to stand in for a model provider.

It answers each request with the next action of its script: a JSON reply (any status, any
headers), a reply computed from the request, silence (``Hang``: it never answers), a dropped
connection (``Drop``), or raw bytes then a close (``Raw``, for a truncated answer). Every request
is recorded. Runs on anyio, so under trio and asyncio alike; started and stopped by ``serve``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import attrs
import h11


@attrs.frozen
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@attrs.frozen
class Reply:
    body: Any
    status: int = 200
    headers: dict[str, str] = attrs.field(factory=dict)


@attrs.frozen
class Hang:
    """Never answer (until the server stops)."""


@attrs.frozen
class Drop:
    """Close the connection without answering."""


@attrs.frozen
class Raw:
    """Send these bytes, then close the connection."""

    data: bytes


Action = Reply | Hang | Drop | Raw | Callable[[Request], "Reply | Hang | Drop | Raw"]


def completion(message: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    """A Chat Completions response body carrying ``message``."""
    reason = finish_reason or ("tool_calls" if message.get("tool_calls") else "stop")
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": reason, "logprobs": None}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def assistant(content: str | None = None, *calls: tuple[str, str, str]) -> dict[str, Any]:
    """A Chat Completions assistant message; each call is (id, name, arguments JSON)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
    return message


def chat_reply(content: str | None = None, *calls: tuple[str, str, str]) -> Reply:
    return Reply(completion(assistant(content, *calls)))


def anthropic_message(content: list[dict[str, Any]]) -> dict[str, Any]:
    """An Anthropic Messages response body."""
    uses_tools = any(block.get("type") == "tool_use" for block in content)
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": "tool_use" if uses_tools else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


class LoopbackServer:
    def __init__(self, script: Iterable[Action]) -> None:
        self.script = list(script)
        self.requests: list[Request] = []
        self.connections = 0
        self.url = ""

    def _next(self, request: Request) -> Reply | Hang | Drop | Raw:
        if not self.script:
            return Reply({"error": {"message": "the test server's script is used up"}}, 400)
        action = self.script.pop(0)
        return action(request) if callable(action) else action

    async def handle(self, stream: anyio.abc.ByteStream) -> None:
        self.connections += 1
        connection = h11.Connection(h11.SERVER)
        async with stream:
            while True:
                request = await self._read(connection, stream)
                if request is None:
                    return
                self.requests.append(request)
                action = self._next(request)
                if isinstance(action, Hang):
                    await anyio.sleep_forever()
                if isinstance(action, Drop):
                    return
                if isinstance(action, Raw):
                    await stream.send(action.data)
                    return
                assert isinstance(action, Reply)
                body = json.dumps(action.body).encode()
                headers = [
                    ("content-type", "application/json"),
                    ("content-length", str(len(body))),
                    *action.headers.items(),
                ]
                try:
                    for event in (
                        h11.Response(status_code=action.status, headers=headers),
                        h11.Data(data=body),
                        h11.EndOfMessage(),
                    ):
                        await stream.send(connection.send(event) or b"")
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return
                if connection.our_state is not h11.DONE or connection.their_state is not h11.DONE:
                    return
                connection.start_next_cycle()

    async def _read(
        self, connection: h11.Connection, stream: anyio.abc.ByteStream
    ) -> Request | None:
        head: h11.Request | None = None
        body = b""
        while True:
            try:
                event = connection.next_event()
            except h11.RemoteProtocolError:
                return None
            if event is h11.NEED_DATA:
                try:
                    data = await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    data = b""
                connection.receive_data(data)
            elif isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                headers = {k.decode().lower(): v.decode() for k, v in head.headers}
                return Request(head.method.decode(), head.target.decode(), headers, body)
            else:  # ConnectionClosed, PAUSED
                return None


@asynccontextmanager
async def serve(script: Iterable[Action] = ()) -> AsyncIterator[LoopbackServer]:
    """Run a :class:`LoopbackServer` on 127.0.0.1 (a free port) for the duration of the block."""
    server = LoopbackServer(script)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    server.url = f"http://127.0.0.1:{port}"
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, server.handle)
        try:
            yield server
        finally:
            group.cancel_scope.cancel()

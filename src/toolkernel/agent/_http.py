"""A Chat Completions client on httpx, for OpenAI and every server that speaks its protocol
(Ollama, vLLM, llama.cpp, LM Studio, gateways).

One POST to ``{base_url}/chat/completions`` per step: :meth:`~OpenAICompatibleModel.complete`
reads the whole answer, :meth:`~OpenAICompatibleModel.stream` its chunks as they come (server-sent
events, for ``run_agent(..., stream=True)``). Failures become
:class:`~toolkernel.ModelError`, marked transient where trying again may help, as the ``openai``
SDK judges it: 408, 409, 429 and every 5xx, timeouts, and connections refused, reset or dropped
mid-answer. ``Retry-After`` (seconds or an HTTP date) and ``retry-after-ms`` are read into
``retry_after``. The agent loop does the retrying (``toolkernel.agent.Retry``).

Works under trio and asyncio (httpx runs on both); the timeout is a cancel scope around the
whole request, so it bounds a server that trickles its answer too.
"""

from __future__ import annotations

import contextlib
import email.utils
import ipaddress
import json
import math
import os
import re
import time
import urllib.parse
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from .._checks import check_count, check_number
from .._errors import ModelError
from ..formats.openai import chat_tools

if TYPE_CHECKING:
    import httpx

__all__ = ["OpenAICompatibleModel"]

_T = TypeVar("_T")
_TRANSIENT_STATUS = frozenset({408, 409, 429})
_DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""The largest answer read by default: far beyond any chat completion, and a bound on memory
(a server sending 200 MB cost 250 MB more, and the error it came to was retried)."""


def _httpx() -> Any:
    try:
        import httpx
    except ImportError:  # pragma: no cover - the dev set-up installs it
        from .._extras import install_command

        raise ImportError(
            f"toolkernel.agent.OpenAICompatibleModel needs httpx: {install_command('agent')}"
        ) from None
    return httpx


class OpenAICompatibleModel:
    """A model behind a Chat Completions endpoint.

        ::

            model = OpenAICompatibleModel(base_url="http://localhost:11434/v1", model="qwen3")
            async with model:                       # optional: reuse one connection pool
                outcome = await run_agent(model, kernel, "Fix the failing test")

        ``base_url`` defaults to ``$OPENAI_BASE_URL``, then OpenAI's; ``api_key`` to
        ``$OPENAI_API_KEY`` (none is sent if there is none: a server on this machine or a private
    network needs none; for any other, a missing or empty key is a ``ValueError`` at once, not a
    failed request to retry); ``model``
        to ``$OPENAI_MODEL``. ``strict=True`` exports the tools in OpenAI's strict mode;
        ``dependencies`` offers every tool the ``depends_on`` argument (see
        :mod:`toolkernel.formats`). ``timeout`` bounds each request, in seconds, and
        ``max_answer_bytes`` the size of its answer (16 MiB by default: a server sending more
        is a non-transient ``ModelError``, and no more of it is read). ``options`` go into
        every request's body as they are (``{"temperature": 0}``, ``{"max_tokens": 4096}``), and
        ``headers`` into its headers.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        *,
        strict: bool = False,
        dependencies: bool = True,
        timeout: float = 120.0,
        options: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        _httpx()  # fail here, not at the first request, if httpx is missing
        model = model or os.environ.get("OPENAI_MODEL")
        if not model:
            raise ValueError(
                "OpenAICompatibleModel needs the model's name: model='gpt-4.1' (or set "
                "OPENAI_MODEL)"
            )
        check_number("timeout", timeout, unit="seconds", positive=True)
        self.max_answer_bytes = check_count("max_answer_bytes", max_answer_bytes, 1)
        source = "base_url" if base_url else "OPENAI_BASE_URL"
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or _DEFAULT_BASE_URL
        if not base_url.lower().startswith(("http://", "https://")):
            # httpx would fail every request as a transport error, which looks transient.
            raise ValueError(
                f"base_url must start with http:// or https://, not {base_url!r} (from "
                f"{source}); a local Ollama, for one, is at http://localhost:11434/v1"
            )
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.strict = strict
        self.dependencies = dependencies
        self.timeout = float(timeout)
        self.options = dict(options or {})
        for name in ("model", "messages", "tools", "stream"):
            if name in self.options and (name != "stream" or self.options[name]):
                why = (
                    "complete() asks for whole answers, stream() for streamed ones"
                    if name == "stream"
                    else "every request sets it from the model's arguments and the conversation"
                )
                raise ValueError(f"OpenAICompatibleModel options can't set {name!r}: {why}")
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        if not key and not _is_local(base_url):
            # Without a key every request fails (401, or a refused connection offline): say so
            # now rather than after the agent loop's retries.
            given = "api_key is empty" if api_key is not None else "no OPENAI_API_KEY"
            raise ValueError(
                f"OpenAICompatibleModel needs an API key for the model server at {base_url} "
                f"({given}): set OPENAI_API_KEY or pass api_key=...; for a local server (Ollama "
                f"at http://localhost:11434/v1) none is needed"
            )
        self._headers = {"Content-Type": "application/json", **dict(headers or {})}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._client: httpx.AsyncClient | None = None

    def __repr__(self) -> str:
        return f"<OpenAICompatibleModel {self.model!r} at {self.url}>"

    async def __aenter__(self) -> OpenAICompatibleModel:
        self._client = _httpx().AsyncClient(timeout=None)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool opened by ``async with`` (if any)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def request_body(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[object]
    ) -> dict[str, Any]:
        """The JSON body of the request for these messages and tools."""
        body: dict[str, Any] = {"model": self.model, "messages": list(messages)}
        if tools:
            body["tools"] = chat_tools(tools, self.strict, dependencies=self.dependencies)
        body.update(self.options)
        return body

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[object]
    ) -> Mapping[str, Any]:
        """One request; the assistant message of the first choice."""
        content = json.dumps(self.request_body(messages, tools), default=str).encode()
        async with self._connection() as client:
            with anyio.move_on_after(self.timeout) as scope:
                request = client.build_request(
                    "POST", self.url, content=content, headers=self._headers
                )
                response = await client.send(request, stream=True)
                try:  # read inside the deadline, and no more than the cap
                    body = await _read(response, self.max_answer_bytes, self.url)
                finally:
                    with anyio.CancelScope(shield=True):
                        await response.aclose()
            if scope.cancelled_caught:
                raise ModelError(
                    f"the model server at {self.url} did not answer within {self.timeout:g} s",
                    transient=True,
                )
        return _answer(self.url, response.status_code, response.headers, body)

    async def stream(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[object]
    ) -> AsyncIterator[Mapping[str, Any]]:
        """One streamed request (``"stream": true``): the Chat Completions chunks of the answer
        as they come (dicts). A server that answers with a whole completion instead gives it as
        one chunk. ``timeout`` bounds the whole answer, as for :meth:`complete`."""
        body = {**self.request_body(messages, tools), "stream": True}
        content = json.dumps(body, default=str).encode()
        deadline = anyio.current_time() + self.timeout
        async with self._connection() as client:
            request = client.build_request("POST", self.url, content=content, headers=self._headers)
            response = await self._within(client.send(request, stream=True), deadline)
            try:
                kind = response.headers.get("content-type", "")
                if response.status_code >= 400 or not kind.startswith("text/event-stream"):
                    whole = await self._within(
                        _read(response, self.max_answer_bytes, self.url), deadline
                    )
                    message = _answer(self.url, response.status_code, response.headers, whole)
                    yield {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
                    return
                async with contextlib.aclosing(
                    _lines(response, self.max_answer_bytes, self.url)
                ) as lines:
                    events = _Events(self.url)
                    while True:
                        line = await self._within(anext(lines, None), deadline)
                        try:
                            chunk = events.end() if line is None else events.take(line)
                        except ModelError:
                            await _drain(lines)  # a server failing mid-answer ends its body
                            raise
                        if chunk is _DONE:
                            await _drain(lines)
                            return
                        if chunk is not None:
                            yield chunk
                        if line is None:
                            return
            finally:
                with anyio.CancelScope(shield=True):
                    await response.aclose()

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[httpx.AsyncClient]:
        """The client for one request (the one given, or one of its own, closed after), with
        httpx's failures turned into ModelErrors: transient for the connection's, final for
        the others."""
        http = _httpx()
        client: httpx.AsyncClient | None = self._client
        owned = client is None
        if client is None:
            client = http.AsyncClient(timeout=None)
        try:
            yield client
        except http.TransportError as exc:
            raise ModelError(
                f"the connection to the model server at {self.url} failed: "
                f"{type(exc).__name__}: {exc or 'no details'}",
                transient=True,
            ) from exc
        except http.HTTPError as exc:
            raise ModelError(
                f"the request to the model server at {self.url} failed: "
                f"{type(exc).__name__}: {exc}",
                transient=False,
            ) from exc
        finally:
            if owned:
                with anyio.CancelScope(shield=True):
                    await client.aclose()

    async def _within(self, step: Awaitable[_T], deadline: float) -> _T:
        """``await step``, or a transient ModelError once the answer's deadline has passed (a
        scope per step: a generator can't hold a cancel scope across its ``yield``)."""
        with anyio.move_on_after(deadline - anyio.current_time()):
            return await step
        raise ModelError(
            f"the model server at {self.url} did not answer within {self.timeout:g} s",
            transient=True,
        )


_DONE: Mapping[str, Any] = {}

_NEWLINE = re.compile(r"\r\n|\r|\n")  # an event stream's line ends (not str.splitlines')


def _too_big(url: str, limit: int) -> ModelError:
    return ModelError(
        f"the model server at {url} sent an answer of more than {limit} bytes "
        f"(max_answer_bytes), which was not read further",
        transient=False,
    )


async def _read(response: httpx.Response, limit: int, url: str) -> bytes:
    """The whole body (decoded), or a ModelError as soon as it passes ``limit`` bytes."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_big(url, limit)
    chunks, size = [], 0
    pieces = response.aiter_bytes()
    async for chunk in pieces:
        size += len(chunk)  # decompressed: what it costs to hold
        if size > limit:
            await _abandon(response, pieces)
            raise _too_big(url, limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def _abandon(response: httpx.Response, pieces: AsyncIterator[Any]) -> None:
    """Close ``response`` mid-body, then run its iterators to their end (they end at once,
    on the closed stream): httpx's iterators are generators nested three deep, and one left
    suspended is collected with a warning (trio's), which closing the outer one can't avoid."""
    with anyio.CancelScope(shield=True):
        await response.aclose()
        with contextlib.suppress(Exception):
            async for _ in pieces:
                pass


async def _lines(response: httpx.Response, limit: int, url: str) -> AsyncGenerator[str, None]:
    """The lines of an event stream, or a ModelError once it passes ``limit`` characters
    (``aiter_lines`` would hold a line without end whole)."""
    size = 0
    pending: list[str] = []
    texts = response.aiter_text()
    async for text in texts:
        size += len(text)
        if size > limit:
            await _abandon(response, texts)
            raise _too_big(url, limit)
        if not _NEWLINE.search(text):
            pending.append(text)
            continue
        *lines, rest = _NEWLINE.split("".join(pending) + text)
        pending = [rest]
        for line in lines:
            yield line
    if tail := "".join(pending):
        yield tail


_DRAIN_SECONDS = 1.0


async def _drain(lines: AsyncIterator[str]) -> None:
    """Read what follows ``[DONE]`` or an error (servers end the body there): httpx's
    iterators then finish, rather than being left to the garbage collector (which trio warns
    of). A server that keeps the body open is given up on after a second."""
    with anyio.move_on_after(_DRAIN_SECONDS):
        async for _ in lines:
            pass


class _Events:
    """The chunks an event stream's lines carry, an event at a time.

    An event's data may come on several ``data:`` lines, joined with newlines until the blank
    line that ends it (as the SSE format and the openai SDK read them); a ``data:`` line that
    is a whole JSON value alone is an event of its own at once (servers that end no event
    with a blank line are common). Other lines (comments, event names, ids) carry nothing."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._data: list[str] = []

    def take(self, line: str) -> Mapping[str, Any] | None:
        """The chunk ``line`` completes, if it completes one; ``_DONE`` for ``[DONE]``."""
        if not line.strip():
            return self.end()
        if not line.startswith("data:"):
            return None
        data = line[5:].removeprefix(" ")
        if not self._data and (data.strip() == "[DONE]" or _json(data) is not None):
            return _event(self._url, data)
        self._data.append(data)
        return None

    def end(self) -> Mapping[str, Any] | None:
        """The chunk of the event begun, at its end (a blank line, or the stream's)."""
        if not self._data:
            return None
        data, self._data = "\n".join(self._data), []
        return _event(self._url, data)


def _json(data: str) -> object | None:
    try:
        found: object = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return found


def _event(url: str, data: str) -> Mapping[str, Any]:
    """The chunk an event's data carries, ``_DONE`` for ``[DONE]``."""
    data = data.strip()
    if data == "[DONE]":
        return _DONE
    chunk = _json(data)
    if not isinstance(chunk, dict):
        raise ModelError(
            f"the model server at {url} sent a stream event that is not a JSON object: "
            f"{_preview(data.encode())}",
            transient=False,
        )
    if chunk.get("error") and not chunk.get("choices"):  # a server failing mid-answer
        raise ModelError(
            f"the model server at {url} failed mid-answer: {_error_text(chunk, data.encode())}",
            transient=True,
        )
    return chunk


def _is_local(base_url: str) -> bool:
    """Whether the server is on this machine or a private network, where servers (Ollama,
    vLLM, llama.cpp) need no key: a loopback or private address, ``localhost``, or a bare
    host name (a container's, such as ``http://ollama:11434``)."""
    host = (urllib.parse.urlsplit(base_url).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost") or (host and "." not in host):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def _answer(url: str, status: int, headers: Mapping[str, str], body: bytes) -> Mapping[str, Any]:
    """The assistant message of a response, or the ModelError it amounts to."""
    try:
        data = json.loads(body) if body else None
    except (ValueError, RecursionError):
        data = None
    if status >= 400:
        transient = status in _TRANSIENT_STATUS or status >= 500
        raise ModelError(
            f"the model server at {url} answered {status}: {_error_text(data, body)}",
            transient=transient,
            status=status,
            retry_after=_retry_after(headers) if transient else None,
        )
    if isinstance(data, dict) and data.get("error") and not data.get("choices"):
        raise ModelError(
            f"the model server at {url} answered an error: {_error_text(data, body)}",
            transient=False,
            status=status,
        )
    choices = data.get("choices") if isinstance(data, dict) else None
    message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
    if not isinstance(message, dict):
        raise ModelError(
            f"the model server at {url} answered {status} without a message (expected a chat "
            f"completion with choices[0].message): {_preview(body)}",
            transient=False,
            status=status,
        )
    return message


def _error_text(data: object, body: bytes) -> str:
    if isinstance(data, dict):
        error = data.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        if isinstance(message, str):
            return message
        if isinstance(error, str):
            return error
    return _preview(body) or "no details"


def _preview(body: bytes, limit: int = 200) -> str:
    text = body.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked to wait: ``retry-after-ms``, or ``Retry-After`` in seconds or
    as an HTTP date."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                continue
            seconds = when.timestamp() - time.time()
        if math.isfinite(seconds):
            return max(seconds, 0.0)
    return None

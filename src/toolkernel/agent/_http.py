"""A Chat Completions client on httpx, for OpenAI and every server that speaks its protocol
(Ollama, vLLM, llama.cpp, LM Studio, gateways).

One POST to ``{base_url}/chat/completions`` per step, no streaming. Failures become
:class:`~toolkernel.ModelError`, marked transient where trying again may help, as the ``openai``
SDK judges it: 408, 409, 429 and every 5xx, timeouts, and connections refused, reset or dropped
mid-answer. ``Retry-After`` (seconds or an HTTP date) and ``retry-after-ms`` are read into
``retry_after``. The agent loop does the retrying (``toolkernel.agent.Retry``).

Works under trio and asyncio (httpx runs on both); the timeout is a cancel scope around the
whole request, so it bounds a server that trickles its answer too.
"""

from __future__ import annotations

import email.utils
import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio

from .._errors import ModelError
from ..formats.openai import chat_tools

if TYPE_CHECKING:
    import httpx

__all__ = ["OpenAICompatibleModel"]

_TRANSIENT_STATUS = frozenset({408, 409, 429})
_DEFAULT_BASE_URL = "https://api.openai.com/v1"


def _httpx() -> Any:
    try:
        import httpx
    except ImportError:  # pragma: no cover - the dev set-up installs it
        raise ImportError(
            "toolkernel.agent.OpenAICompatibleModel needs httpx: pip install 'toolkernel[agent]'"
        ) from None
    return httpx


class OpenAICompatibleModel:
    """A model behind a Chat Completions endpoint.

    ::

        model = OpenAICompatibleModel(base_url="http://localhost:11434/v1", model="qwen3")
        async with model:                       # optional: reuse one connection pool
            outcome = await run_agent(model, kernel, "Fix the failing test")

    ``base_url`` defaults to ``$OPENAI_BASE_URL``, then OpenAI's; ``api_key`` to
    ``$OPENAI_API_KEY`` (none is sent if there is none: local servers need none); ``model``
    to ``$OPENAI_MODEL``. ``strict=True`` exports the tools in OpenAI's strict mode;
    ``dependencies`` offers every tool the ``depends_on`` argument (see
    :mod:`toolkernel.formats`). ``timeout`` bounds each request, in seconds. ``options`` go into
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
    ) -> None:
        _httpx()  # fail here, not at the first request, if httpx is missing
        model = model or os.environ.get("OPENAI_MODEL")
        if not model:
            raise ValueError(
                "OpenAICompatibleModel needs the model's name: model='gpt-4.1' (or set "
                "OPENAI_MODEL)"
            )
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
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
                    "this client reads whole answers, not streamed ones"
                    if name == "stream"
                    else "every request sets it from the model's arguments and the conversation"
                )
                raise ValueError(f"OpenAICompatibleModel options can't set {name!r}: {why}")
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
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
        http = _httpx()
        content = json.dumps(self.request_body(messages, tools), default=str).encode()
        client: httpx.AsyncClient | None = self._client
        owned = client is None
        if client is None:
            client = http.AsyncClient(timeout=None)
        try:
            with anyio.move_on_after(self.timeout) as scope:
                response = await client.post(self.url, content=content, headers=self._headers)
                body = response.content  # read inside the deadline
            if scope.cancelled_caught:
                raise ModelError(
                    f"the model server at {self.url} did not answer within {self.timeout:g} s",
                    transient=True,
                )
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
        return _answer(self.url, response.status_code, response.headers, body)


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

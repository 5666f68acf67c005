"""A model client without a key fails at once, saying why, and a refused key is not retried.

A newcomer running the agent quick start with no key used to see ``model_error`` and nothing
else, after seconds of retries against a server that could never answer.
"""

from __future__ import annotations

import re

import pytest

import toolkernel as tk
from tests.loopback import Reply, serve
from tests.sample_tools import SAMPLE_TOOLS
from toolkernel.agent import OpenAICompatibleModel, Retry, run_agent


@pytest.fixture(autouse=True)
def no_openai_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)


def test_no_key_for_a_remote_server_is_refused_where_the_model_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ValueError, match=r"needs an API key .*no OPENAI_API_KEY"):
        OpenAICompatibleModel(model="gpt-4.1")  # OpenAI's own URL, the default
    monkeypatch.setenv("OPENAI_API_KEY", "")
    with pytest.raises(ValueError, match=re.escape("https://api.openai.com/v1")):
        OpenAICompatibleModel(model="gpt-4.1")
    with pytest.raises(ValueError, match="api_key is empty"):
        OpenAICompatibleModel(base_url="https://models.example.com/v1", api_key="", model="m")


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:11434/v1",
        "http://127.0.0.1:8000/v1",
        "http://[::1]:8000/v1",
        "http://192.168.1.20:11434/v1",
        "http://ollama:11434/v1",
    ],
)
def test_a_server_on_this_machine_or_a_private_network_needs_no_key(url: str) -> None:
    OpenAICompatibleModel(base_url=url, model="qwen3")


def test_a_key_from_the_environment_or_given_is_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    OpenAICompatibleModel(base_url="https://models.example.com/v1", api_key="sk-1", model="m")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-2")
    OpenAICompatibleModel(model="gpt-4.1")


async def test_a_refused_key_ends_the_run_at_once_with_the_servers_reason() -> None:
    refused = Reply({"error": {"message": "Incorrect API key provided: sk-wrong"}}, 401)
    async with (
        serve([refused, refused, refused]) as server,
        tk.open_kernel(tools=SAMPLE_TOOLS) as kernel,
    ):
        model = OpenAICompatibleModel(base_url=server.url, api_key="sk-wrong", model="m")
        outcome = await run_agent(model, kernel, "go", retry=Retry(attempts=3, initial=30))
    assert outcome.stop_reason == "model_error"
    assert len(server.requests) == 1  # not retried
    assert "answered 401: Incorrect API key provided" in str(outcome.error)

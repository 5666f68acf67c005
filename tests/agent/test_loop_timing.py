"""The loop's waits on the clock: backoff between retries, a deadline on the whole run.

These run on virtual time (``autojump_clock``): the seconds pass at once, on either loop.
"""

from __future__ import annotations

import anyio
import pytest

import toolkernel as tk
from tests.sample_tools import SAMPLE_TOOLS
from toolkernel.agent import (
    AgentEvent,
    ModelError,
    ModelRetrying,
    Retry,
    ScriptedModel,
    Turn,
    run_agent,
)


def busy(status: int = 503, retry_after: float | None = None) -> ModelError:
    return ModelError(
        f"the model server answered {status}",
        transient=True,
        status=status,
        retry_after=retry_after,
    )


async def test_transient_errors_are_retried_after_growing_waits_or_the_servers(
    autojump_clock: object,
) -> None:
    events: list[AgentEvent] = []
    model = ScriptedModel([busy(), busy(), busy(429, retry_after=7.0), Turn("", [])])
    retry = Retry(attempts=4, initial=1.0, multiplier=3.0, jitter=0.0)
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        start = anyio.current_time()
        outcome = await run_agent(model, kernel, "go", retry=retry, on_event=events.append)
        elapsed = anyio.current_time() - start
    assert outcome.stop_reason == "completed"
    retries = [e for e in events if isinstance(e, ModelRetrying)]
    assert [(e.step, e.attempt, e.delay) for e in retries] == [
        (1, 2, 1.0),
        (1, 3, 3.0),
        (1, 4, 7.0),
    ]
    assert [e.error.status for e in retries] == [503, 503, 429]
    assert elapsed == pytest.approx(11.0)


async def test_the_loop_gives_up_when_the_attempts_are_used_up(autojump_clock: object) -> None:
    model = ScriptedModel([busy(), busy(), busy(), Turn("never seen", [])])
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        outcome = await run_agent(model, kernel, "go", retry=Retry(attempts=3, jitter=0.0))
    assert outcome.stop_reason == "model_error"
    assert outcome.error is not None and outcome.error.status == 503
    assert outcome.error.__notes__ == ["gave up after 3 attempts"]
    assert model.remaining == 1


async def test_a_deadline_on_the_loops_scope_cancels_a_slow_model(autojump_clock: object) -> None:
    model = ScriptedModel([Turn("", [])], think=60.0)
    async with tk.open_kernel(tools=SAMPLE_TOOLS) as kernel:
        scope = anyio.CancelScope(deadline=anyio.current_time() + 5.0)
        outcome = await run_agent(model, kernel, "go", cancel_scope=scope)
    assert outcome.stop_reason == "cancelled"
    assert outcome.steps == ()
    assert [m["role"] for m in outcome.messages] == ["system", "user"]

"""A retry hint that is no number of seconds (NaN, a string) and backoff past any float never
crash the agent loop: the computed backoff is used, capped at the maximum."""

from __future__ import annotations

import math

import anyio
import pytest

import toolkernel as tk
from toolkernel.agent import ModelError, ModelRetrying, Retry, ScriptedModel, Turn, run_agent


@pytest.mark.parametrize("asked", [math.nan, "soon", True])
def test_a_retry_after_that_is_no_number_of_seconds_is_ignored(asked: object) -> None:
    error = ModelError("busy", transient=True, status=429)
    error.retry_after = asked  # type: ignore[assignment]
    assert Retry(initial=2.0, jitter=0.0).delay(1, error, 0.5) == 2.0


@pytest.mark.parametrize(("asked", "wait"), [(math.inf, 60.0), (-math.inf, 0.0), (-5, 0.0)])
def test_infinite_or_negative_retry_after_is_clamped(asked: float, wait: float) -> None:
    error = ModelError("busy", transient=True, retry_after=asked)
    assert Retry().delay(1, error, 0.5) == wait


def test_backoff_past_the_largest_float_is_the_maximum() -> None:
    busy = ModelError("busy", transient=True)
    assert Retry(maximum=60.0, jitter=0.0).delay(5000, busy, 0.5) == 60.0
    assert Retry(initial=math.inf, multiplier=0.0, jitter=0.0).delay(3, busy, 0.5) == 60.0


async def test_run_agent_retries_after_a_nan_hint(autojump_clock) -> None:
    events: list[object] = []
    model = ScriptedModel(
        [
            ModelError("slow down", transient=True, status=429, retry_after=math.nan),
            Turn("done", []),
        ]
    )
    async with tk.open_kernel() as kernel:
        outcome = await run_agent(
            model, kernel, "go", retry=Retry(initial=3.0, jitter=0.0), on_event=events.append
        )
        assert anyio.current_time() == pytest.approx(3.0)
    assert outcome.stop_reason == "completed", outcome.error
    (retrying,) = [e for e in events if isinstance(e, ModelRetrying)]
    assert retrying.delay == 3.0

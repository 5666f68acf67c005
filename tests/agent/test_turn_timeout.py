"""``run_agent(turn_timeout=...)``: each step's calls are bounded; the model reads a TIMEOUT
answer for the calls cut short and the results of the others, and the loop goes on."""

from __future__ import annotations

import math

import anyio
import pytest

import toolkernel as tk
from toolkernel.agent import ScriptedModel, Turn, run_agent


@tk.tool(claims=lambda args: [])
async def wait(ctx: tk.ToolContext, seconds: float) -> str:
    """Wait, then say so."""
    await anyio.sleep(seconds)
    return f"waited {seconds} s"


def turns(*emitted: float) -> list[Turn]:
    calls = [
        tk.ToolCall("c1", "wait", {"seconds": 1}),
        tk.ToolCall("c2", "wait", {"seconds": 100}),
    ]
    return [Turn("both", calls, emitted=emitted), Turn("done", [])]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_step_is_bounded_and_the_model_reads_every_answer(
    autojump_clock, stream: bool
) -> None:
    emitted = (0.5, 1.0) if stream else ()
    async with tk.open_kernel([wait]) as kernel:
        outcome = await run_agent(
            ScriptedModel(turns(*emitted)), kernel, "go", turn_timeout=3, stream=stream
        )
        # Counted from the first call's start: 3 s (streamed: it starts 0.5 s into the answer).
        assert anyio.current_time() == pytest.approx(3.5 if stream else 3.0)
        assert kernel.lease_statistics().held == 0
    assert outcome.stop_reason == "completed"
    quick, slow = outcome.steps[0].results
    assert (quick.status, quick.output) == (tk.Status.OK, "waited 1.0 s")
    assert slow.status is tk.Status.TIMEOUT
    answers = {m["tool_call_id"]: m["content"] for m in outcome.messages if m["role"] == "tool"}
    assert answers["c1"] == "waited 1.0 s"
    assert "the batch's limit of" in answers["c2"] and "ran out" in answers["c2"]


@pytest.mark.parametrize("limit", [-1, math.nan, "3"])
async def test_a_bad_turn_timeout_is_refused_before_the_model_is_asked(limit: object) -> None:
    model = ScriptedModel(turns())
    async with tk.open_kernel([wait]) as kernel:
        with pytest.raises((ValueError, TypeError), match="turn_timeout must be"):
            await run_agent(model, kernel, "go", turn_timeout=limit)  # type: ignore[arg-type]

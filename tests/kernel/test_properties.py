"""Random batches through a real kernel on a mock clock, judged only by what the tools saw.

For every scenario: no two conflicting calls ever run at overlapping times (judged with
``claims_conflict`` on the declared claims, in execution order, not only by time); pools and
``max_concurrency`` are never exceeded; every call gets exactly one result, with the status its
script asked for; everything finishes; every lease returns. For batches run one at a time with no
limits and no cancellations, each call starts exactly when the last earlier conflicting call of
its batch ends, so the batch's makespan is its critical path:
``finish[i] = dur[i] + max(finish[j] for j < i if conflict(i, j))``.

Hypothesis and pytest-trio's async tests don't mix, so each example runs its own ``trio.run``
with a ``MockClock(autojump_threshold=0)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import trio
import trio.testing
from hypothesis import given

import toolkernel as tk

from ..strategies import CallScript, Scenario, call_id, parse_claim, scenarios
from .fakes import Recorder, assert_leases_returned, conflicting

LANE = "lane"


def make_act(rec: Recorder) -> tk.Tool:
    @tk.tool(claims=lambda args: [parse_claim(c) for c in args["claims"]])
    async def act(ctx: tk.ToolContext, claims: list[str], duration: int, fail: str) -> str:
        async with rec.run(ctx):
            if fail == "start":
                raise RuntimeError("failed at the start")
            await anyio.sleep(duration)
            if fail == "end":
                raise RuntimeError("failed at the end")
        return "done"

    return act


def critical_path_finishes(batch: Sequence[CallScript]) -> list[int]:
    declared = [c.declared() for c in batch]
    finish: list[int] = []
    for i, script in enumerate(batch):
        start = max(
            (finish[j] for j in range(i) if conflicting(declared[i], declared[j])), default=0
        )
        finish.append(start + script.effective_duration)
    return finish


def run_scenario(scenario: Scenario) -> None:
    rec = Recorder()
    results: dict[str, tk.ToolResult] = {}
    cancel_times = dict(scenario.cancels)
    options: dict[str, object] = {"pools": {LANE: scenario.lane_capacity}}
    if scenario.max_concurrency is not None:
        options["max_concurrency"] = scenario.max_concurrency

    def tool_calls(b: int) -> list[tk.ToolCall]:
        return [
            tk.ToolCall(
                call_id(b, i),
                "act",
                {"claims": list(s.claims), "duration": s.duration, "fail": s.fail},
            )
            for i, s in enumerate(scenario.batches[b])
        ]

    async def run_batch(kernel: tk.Kernel, b: int) -> None:
        batch = scenario.batches[b]
        start = anyio.current_time()
        got = await kernel.run(tool_calls(b))
        assert [r.call_id for r in got] == [call_id(b, i) for i in range(len(batch))]
        results.update((r.call_id, r) for r in got)
        if scenario.clean and not scenario.concurrent:
            predicted = critical_path_finishes(batch)
            assert anyio.current_time() - start == max(predicted)
            for i, script in enumerate(batch):
                result = got[i]
                assert result.finished_at - start == predicted[i], (i, result)
                assert result.started_at is not None
                assert result.started_at - start == predicted[i] - script.effective_duration

    async def cancel_at(kernel: tk.Kernel, target: str, when: float) -> None:
        await anyio.sleep(when)
        kernel.cancel(target)

    async def main() -> None:
        with anyio.fail_after(10_000):  # mock seconds: a hang fails the example at once
            async with tk.open_kernel(tools=[make_act(rec)], **options) as kernel:
                async with anyio.create_task_group() as nursery:
                    for target, when in scenario.cancels:
                        nursery.start_soon(cancel_at, kernel, target, when)
                    if scenario.concurrent:
                        for b in range(len(scenario.batches)):

                            async def delayed(b: int = b) -> None:
                                await anyio.sleep(scenario.offsets[b])
                                await run_batch(kernel, b)

                            nursery.start_soon(delayed)
                    else:
                        for b in range(len(scenario.batches)):
                            await run_batch(kernel, b)
                            assert_leases_returned(kernel)
                assert_leases_returned(kernel)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

    # Every call has exactly one result, with the status its script asked for.
    scripts = {
        call_id(b, i): s for b, batch in enumerate(scenario.batches) for i, s in enumerate(batch)
    }
    assert results.keys() == scripts.keys()
    for cid, result in results.items():
        script = scripts[cid]
        expected = tk.Status.ERROR if script.fail else tk.Status.OK
        if result.status is tk.Status.CANCELLED:
            assert cid in cancel_times, result
            assert result.finished_at == cancel_times[cid]
            if result.started_at is None:
                assert not rec.ran(cid)
        else:
            assert result.status is expected, result
            assert rec.ran(cid) and not rec.spans[cid].cancelled
            assert (result.started_at, result.finished_at) == rec.interval(cid)

    # Safety: no two conflicting calls overlapped, judged on the declared claims.
    spans = list(rec.spans.values())
    for i, first in enumerate(spans):
        assert first.claims == scripts[first.call_id].declared()
        for second in spans[i + 1 :]:
            if rec.overlap(first.call_id, second.call_id):
                assert not conflicting(first.claims, second.claims), (first, second)
    # Limits: the pool and the concurrency slots.
    if scenario.max_concurrency is not None:
        assert rec.max_running <= scenario.max_concurrency
    lane_users = [s for s in spans if "u lane" in scripts[s.call_id].claims]
    for span in lane_users:
        at_once = [s for s in lane_users if s.start_step <= span.start_step < (s.end_step or 0)]
        assert len(at_once) <= scenario.lane_capacity


@given(scenarios())
def test_random_batches_are_safe_finish_and_meet_their_critical_path(scenario: Scenario) -> None:
    run_scenario(scenario)


def test_a_known_scenario_meets_its_critical_path() -> None:
    # a/b/c waits for the writer of a; b and the phone overlap everything else; the barrier
    # waits for all before it, and the last read waits for the barrier.
    batch = (
        CallScript(("w a",), 2, ""),
        CallScript(("r a/b/c",), 1, ""),
        CallScript(("r b", "w @android"), 3, ""),
        CallScript(("w *",), 1, ""),
        CallScript(("r c",), 1, ""),
    )
    assert critical_path_finishes(batch) == [2, 3, 3, 4, 5]
    run_scenario(
        Scenario(
            batches=(batch,),
            concurrent=False,
            offsets=(0.0,),
            max_concurrency=None,
            lane_capacity=1,
            cancels=(),
        )
    )

"""The kernel's own schedule of recorded turns: measured, on trio's mock clock.

Each turn runs as one batch through ``open_kernel`` with stand-in tools named after the
recorded ones: each call declares the claims the real tool would (``RecordedCall.claims``) and
sleeps its duration, in milliseconds of virtual time (whole numbers, so times add up exactly).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._extras import require_extra

# The replay runs on trio's virtual clock; trio is optional (the [trio] extra). Every way into
# toolkernel._replay imports this module first.
require_extra("trio", "toolkernel._replay", "trio")

import trio  # noqa: E402
import trio.testing  # noqa: E402

from .._open import open_kernel  # noqa: E402
from ..kernel import KernelStatistics, ToolCall, ToolContext  # noqa: E402
from ..locks import Claim  # noqa: E402
from ..tools import Tool, tool  # noqa: E402
from ._schedules import Schedule  # noqa: E402
from ._turns import RecordedTurn  # noqa: E402

__all__ = ["KernelReplay", "replay_on_kernel"]


@attrs.frozen
class KernelReplay:
    """What the kernel did with the turns: a schedule per turn, and its statistics."""

    starts: tuple[Schedule, ...]
    """Each call's start (ms from its turn's start), per turn; NaN for a call that never ran."""
    ends: tuple[Schedule, ...]
    failures: tuple[str, ...]
    """Calls that did not end OK (none should): ``"s00 turn 7 c2: ERROR ..."``."""
    statistics: KernelStatistics
    """The kernel's statistics after every turn (times in ms)."""


def _stand_in(name: str, table: Mapping[str, Sequence[Claim]]) -> Tool:
    async def run(ctx: ToolContext, ms: float, key: str) -> None:
        await trio.sleep(ms)

    def claims(arguments: Mapping[str, Any]) -> Sequence[Claim]:
        return table[arguments["key"]]

    return tool(name=name, claims=claims)(run)


def replay_on_kernel(turns: Sequence[RecordedTurn]) -> KernelReplay:
    """Run every turn, one after the other, through one kernel on trio's ``MockClock``."""
    table = {
        f"{t}/{c}": call.claims for t, turn in enumerate(turns) for c, call in enumerate(turn.calls)
    }
    names = sorted({call.tool for turn in turns for call in turn.calls})

    async def main() -> KernelReplay:
        starts: list[Schedule] = []
        ends: list[Schedule] = []
        failures: list[str] = []
        async with open_kernel([_stand_in(n, table) for n in names]) as kernel:
            for t, turn in enumerate(turns):
                calls = [
                    ToolCall(call.id, call.tool, {"ms": call.ms, "key": f"{t}/{c}"})
                    for c, call in enumerate(turn.calls)
                ]
                begin = trio.current_time()
                results = await kernel.run(calls)
                starts.append(
                    tuple(
                        math.nan if r.started_at is None else r.started_at - begin for r in results
                    )
                )
                ends.append(tuple(r.finished_at - begin for r in results))
                failures += [
                    f"{turn.label} {r.call_id}: {r.status.name} {r.error}"
                    for r in results
                    if not r.ok
                ]
            statistics = kernel.statistics()
        return KernelReplay(tuple(starts), tuple(ends), tuple(failures), statistics)

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

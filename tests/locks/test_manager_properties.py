"""LockManager under random tasks, on trio and asyncio, on virtual time: tasks acquire, hold,
raise inside the block, time out while waiting, or try without waiting. Whatever happens, no two
held leases conflict, pool units never exceed the capacity, and at the end nothing is held or
waiting (no lease leaked by a cancellation racing a grant, no waiter left behind)."""

from __future__ import annotations

import contextlib

import anyio
import anyio.lowlevel
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from toolkernel.locks import LockManager, claims_conflict, pool, reads, units, writes
from toolkernel.testing import VirtualClockEventLoop

NET = pool("net")
CAPACITY = 4
CHOICES = [writes("a"), reads("a"), writes("a/b"), reads("a/b"), writes("c"), units(NET, 1)]
ENDINGS = ["release", "raise", "time out", "nowait"]
tasks = st.lists(
    st.tuples(
        st.lists(st.sampled_from(CHOICES), min_size=1, max_size=2),
        st.integers(min_value=0, max_value=3),  # how long it holds
        st.integers(min_value=0, max_value=4),  # how long it may wait, when it times out
        st.sampled_from(ENDINGS),
    ),
    min_size=1,
    max_size=12,
)


def assert_safe(manager: LockManager) -> None:
    held = [info.claims for info in manager.snapshot().held]
    for i, mine in enumerate(held):
        for theirs in held[:i]:
            assert not any(claims_conflict(x, y) for x in mine for y in theirs)
    assert sum(c.units for claims in held for c in claims if c.resource == NET) <= CAPACITY


async def run_tasks(script: list[tuple[list[object], int, int, str]]) -> None:
    manager = LockManager(pools={"net": CAPACITY})

    async def one(claims: list[object], hold: int, patience: int, ending: str) -> None:
        if ending == "nowait":
            with contextlib.suppress(anyio.WouldBlock):
                manager.acquire_nowait(claims).release()  # type: ignore[arg-type]
            return
        with anyio.move_on_after(patience if ending == "time out" else 1000):
            try:
                async with manager.acquire(claims):  # type: ignore[arg-type]
                    assert_safe(manager)
                    await anyio.sleep(hold)
                    if ending == "raise":
                        raise KeyError(hold)
            except KeyError:
                pass

    with anyio.fail_after(1000):
        async with anyio.create_task_group() as tasks:
            for claims, hold, patience, ending in script:
                tasks.start_soon(one, claims, hold, patience, ending)
                await anyio.lowlevel.checkpoint()
    stats = manager.statistics()
    assert (stats.held, stats.waiting) == (0, 0)


@given(tasks)
def test_random_tasks_never_hold_conflicting_leases_and_leave_nothing_behind(
    script: list[tuple[list[object], int, int, str]],
) -> None:
    anyio.run(
        run_tasks,
        script,
        backend="trio",
        backend_options={"clock": trio.testing.MockClock(autojump_threshold=0)},
    )
    virtual_loop = {"loop_factory": VirtualClockEventLoop}
    anyio.run(run_tasks, script, backend="asyncio", backend_options=virtual_loop)

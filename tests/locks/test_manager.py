"""LockManager: tasks waiting on the lease table, driven step by step, on trio and asyncio.

Interleavings are made deterministic with ``wait_all_tasks_blocked``. Every test takes
``autojump_clock``, so it runs on virtual time: nothing really sleeps, and a lost wake-up fails at
once with ``TimeoutError`` instead of hanging the suite (when every task is blocked, the clock
jumps straight to the ``fail_after`` deadline). Checkpoint assertions use trio's instruments, so
those tests run on trio only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import anyio
import anyio.lowlevel
import pytest
import trio
from trio.testing import MockClock, assert_checkpoints, assert_no_checkpoints

from toolkernel._errors import (
    CapacityError,
    ForeignLeaseError,
    LeaseReleaseError,
    UnknownPoolError,
)
from toolkernel.locks import (
    Claim,
    Lease,
    LeaseTableSnapshot,
    LeaseTableStatistics,
    LockManager,
    pool,
    reads,
    units,
    writes,
)
from toolkernel.testing import wait_all_tasks_blocked

NET = pool("net")
DEADLOCK_AFTER = 60  # mock seconds
EMPTY = LeaseTableSnapshot(held=(), waiting=(), capacities=())


def assert_idle(manager: LockManager) -> None:
    stats = manager.statistics()
    assert (stats.held, stats.waiting) == (0, 0)
    assert manager.snapshot().held == () and manager.snapshot().waiting == ()


def waiting_ids(manager: LockManager) -> list[int]:
    return [info.id for info in manager.snapshot().waiting]


def held_ids(manager: LockManager) -> list[int]:
    return [info.id for info in manager.snapshot().held]


# -- the basics ----------------------------------------------------------------------------------


async def test_acquire_holds_for_the_block_and_releases_on_every_exit(
    autojump_clock: MockClock,
) -> None:
    manager = LockManager()
    async with manager.acquire([reads("a"), writes("b")]) as lease:
        assert isinstance(lease, Lease) and lease.held
        assert lease.claims == (reads("a"), writes("b"))
        assert manager.statistics() == LeaseTableStatistics(1, 0, 1, 1, ())
    assert not lease.held
    assert_idle(manager)

    with pytest.raises(KeyError):
        async with manager.acquire([writes("b")]):
            raise KeyError("boom")
    assert_idle(manager)

    # Released by hand inside the block: the exit does not release it a second time.
    async with manager.acquire([writes("b")]) as lease:
        lease.release()
    assert_idle(manager)


async def test_a_waiter_gets_the_lease_when_the_holder_leaves(autojump_clock: MockClock) -> None:
    manager = LockManager()
    log: list[str] = []

    async def worker(name: str, claims: list[Claim]) -> None:
        async with manager.acquire(claims):
            log.append(f"{name} in")
            await anyio.sleep(1)
        log.append(f"{name} out")

    holder = manager.acquire_nowait([writes("f")])
    with anyio.fail_after(DEADLOCK_AFTER):
        async with anyio.create_task_group() as nursery:
            nursery.start_soon(worker, "w", [writes("f")])
            await wait_all_tasks_blocked()
            assert log == [] and waiting_ids(manager) == [2]
            holder.release()
    assert log == ["w in", "w out"]
    assert_idle(manager)


# -- cancellation ---------------------------------------------------------------------------------


async def test_cancelling_a_waiting_writer_lets_the_queued_reader_in_beside_the_first(
    autojump_clock: MockClock,
) -> None:
    manager = LockManager()
    first_reader = manager.acquire_nowait([reads("f")])
    writer_scope = anyio.CancelScope()
    reader_done = anyio.Event()
    log: list[str] = []

    async def writer() -> None:
        with writer_scope:
            async with manager.acquire([writes("f")]):
                log.append("writer in")
        log.append("writer gone")

    async def queued_reader() -> None:
        async with manager.acquire([reads("f")]):
            log.append("reader in")
            await reader_done.wait()

    with anyio.fail_after(DEADLOCK_AFTER):
        async with anyio.create_task_group() as nursery:
            nursery.start_soon(writer)
            await wait_all_tasks_blocked()
            nursery.start_soon(queued_reader)
            await wait_all_tasks_blocked()
            assert log == [] and waiting_ids(manager) == [2, 3]

            writer_scope.cancel()
            await wait_all_tasks_blocked()
            # (Both tasks woke in the same batch, which trio runs in no fixed order.)
            assert sorted(log) == ["reader in", "writer gone"]
            assert first_reader.held and held_ids(manager) == [1, 3]
            reader_done.set()
    first_reader.release()
    assert_idle(manager)


async def test_a_grant_racing_with_cancellation_is_given_back_to_the_next_waiter(
    autojump_clock: MockClock,
) -> None:
    manager = LockManager()
    holder = manager.acquire_nowait([writes("f")])
    racer_scope = anyio.CancelScope()
    log: list[object] = []

    async def racer() -> None:
        with racer_scope:
            async with manager.acquire([writes("f")]):
                log.append("racer in")  # must never run: it was cancelled
        log.append(("racer cancelled", racer_scope.cancelled_caught))

    async def next_in_line() -> None:
        async with manager.acquire([writes("f")]):
            log.append("next in")

    with anyio.fail_after(DEADLOCK_AFTER):
        async with anyio.create_task_group() as nursery:
            nursery.start_soon(racer)
            await wait_all_tasks_blocked()
            nursery.start_soon(next_in_line)
            await wait_all_tasks_blocked()
            racer_id, next_id = waiting_ids(manager)

            # The release hands the file to the racer, then the racer is cancelled in the same
            # tick, before it could run: no checkpoint between the two lines.
            holder.release()
            assert held_ids(manager) == [racer_id]
            racer_scope.cancel()

            await wait_all_tasks_blocked()
            assert log == [("racer cancelled", True), "next in"]
    assert racer_id < next_id
    assert_idle(manager)


async def test_a_timed_out_acquire_leaves_the_queue_as_if_it_never_came(
    autojump_clock: MockClock,
) -> None:
    manager = LockManager(pools={"net": 2})
    holder = manager.acquire_nowait([writes("a"), units(NET, 1)])

    async def reader() -> None:
        async with manager.acquire([reads("a")]):
            pass

    with anyio.fail_after(DEADLOCK_AFTER):
        async with anyio.create_task_group() as nursery:
            nursery.start_soon(reader)
            await wait_all_tasks_blocked()
            before = manager.snapshot()

            with anyio.move_on_after(5) as scope:
                async with manager.acquire([writes("a/b"), units(NET, 2)]):
                    pytest.fail("granted although the file stayed held")
            assert scope.cancelled_caught
            assert anyio.current_time() == pytest.approx(5)
            assert manager.snapshot() == before
            holder.release()
    assert_idle(manager)


async def test_a_timed_out_acquire_hands_over_to_whoever_waited_behind_it(
    autojump_clock: MockClock,
) -> None:
    manager = LockManager(pools={"net": 3})
    holder = manager.acquire_nowait([units(NET, 2)])
    log: list[tuple[str, float]] = []

    async def impatient() -> None:
        with anyio.move_on_after(5):
            async with manager.acquire([units(NET, 2)]):
                log.append(("impatient in", anyio.current_time()))
        log.append(("impatient gave up", anyio.current_time()))

    async def small() -> None:
        # One unit is free, but the impatient request came first and reserved it.
        async with manager.acquire([units(NET, 1)]):
            log.append(("small in", anyio.current_time()))

    with anyio.fail_after(DEADLOCK_AFTER):
        async with anyio.create_task_group() as nursery:
            nursery.start_soon(impatient)
            await wait_all_tasks_blocked()
            nursery.start_soon(small)
    assert sorted(log) == [("impatient gave up", 5), ("small in", 5)]
    holder.release()
    assert_idle(manager)


@pytest.mark.trio_only
async def test_acquire_is_always_a_checkpoint(autojump_clock: MockClock) -> None:
    manager = LockManager()
    entered = False
    with anyio.CancelScope() as scope:
        scope.cancel()
        async with manager.acquire([writes("free")]):
            entered = True
    assert scope.cancelled_caught and not entered
    assert manager.snapshot() == EMPTY

    # Not cancelled, and the lease is free: still a checkpoint (a chance to schedule others).
    with assert_checkpoints():
        lease = await manager.acquire_lease([writes("free")])
    lease.release()
    assert_idle(manager)


@pytest.mark.trio_only
async def test_acquire_nowait_never_checkpoints(autojump_clock: MockClock) -> None:
    manager = LockManager()
    # No await inside on purpose: the point is that nothing here is a checkpoint.
    with anyio.CancelScope() as scope:  # noqa: ASYNC100
        scope.cancel()
        with assert_no_checkpoints():
            lease = manager.acquire_nowait([writes("a")])
    assert not scope.cancelled_caught and lease.held
    with pytest.raises(trio.WouldBlock):
        manager.acquire_nowait([reads("a")])
    lease.release()
    assert_idle(manager)


@pytest.mark.trio_only
async def test_release_is_synchronous_and_works_inside_a_cancelled_scope(
    autojump_clock: MockClock,
) -> None:
    manager = LockManager()
    lease = await manager.acquire_lease([writes("f")])
    log: list[str] = []

    async def waiter() -> None:
        async with manager.acquire([writes("f")]):
            log.append("waiter in")

    with anyio.fail_after(DEADLOCK_AFTER):
        async with anyio.create_task_group() as nursery:
            nursery.start_soon(waiter)
            await wait_all_tasks_blocked()
            with anyio.CancelScope() as scope:  # noqa: ASYNC100 - release must not need an await
                scope.cancel()
                with assert_no_checkpoints():
                    lease.release()
                log.append("after release")
            assert not scope.cancelled_caught
            assert not lease.held
            # Handed over within the release call, before the waiter even ran.
            assert held_ids(manager) == [2] and log == ["after release"]
    assert log == ["after release", "waiter in"]

    # Leaving an `async with` in a cancelled scope releases too, without raising there.
    with anyio.CancelScope() as scope:
        async with manager.acquire([writes("g")]) as lease:
            scope.cancel()
        log.append("left the block")
    assert log[-1] == "left the block" and not lease.held
    assert_idle(manager)


# -- hand-off --------------------------------------------------------------------------------------


async def test_acquire_nowait_fails_while_a_granted_waiter_has_not_resumed(
    autojump_clock: MockClock,
) -> None:
    manager = LockManager()
    holder = manager.acquire_nowait([writes("f")])
    log: list[str] = []

    async def waiter() -> None:
        async with manager.acquire([writes("f")]):
            log.append("waiter in")

    with anyio.fail_after(DEADLOCK_AFTER):
        async with anyio.create_task_group() as nursery:
            nursery.start_soon(waiter)
            await wait_all_tasks_blocked()
            holder.release()
            # The waiter has been granted the file but has not run yet: nobody can barge in.
            assert log == []
            with pytest.raises(trio.WouldBlock):
                manager.acquire_nowait([writes("f")])
            with pytest.raises(trio.WouldBlock):
                manager.acquire_nowait([reads("f")])
            await wait_all_tasks_blocked()
            assert log == ["waiter in"]
    assert_idle(manager)


async def test_a_late_comer_queues_behind_the_woken_waiter(autojump_clock: MockClock) -> None:
    manager = LockManager()
    holder = manager.acquire_nowait([writes("f")])
    log: list[str] = []

    async def worker(name: str) -> None:
        async with manager.acquire([writes("f")]):
            log.append(f"{name} in")
            await anyio.lowlevel.checkpoint()
            log.append(f"{name} out")

    with anyio.fail_after(DEADLOCK_AFTER):
        async with anyio.create_task_group() as nursery:
            nursery.start_soon(worker, "first")
            await wait_all_tasks_blocked()
            holder.release()
            nursery.start_soon(worker, "late")
    assert log == ["first in", "first out", "late in", "late out"]


# -- release errors --------------------------------------------------------------------------------


async def test_release_twice_or_through_another_manager_fails_and_changes_nothing(
    autojump_clock: MockClock,
) -> None:
    mine, other = LockManager(), LockManager()
    lease = mine.acquire_nowait([writes("a")])
    lookalike = other.acquire_nowait([writes("a")])
    assert lease.id == lookalike.id  # same id, different tables

    before = mine.snapshot()
    with pytest.raises(ForeignLeaseError):
        mine.release(lookalike)
    with pytest.raises(ForeignLeaseError):
        other.release(lease)
    assert mine.snapshot() == before and lease.held and lookalike.held

    mine.release(lease)
    after = mine.snapshot()
    with pytest.raises(LeaseReleaseError):
        lease.release()
    with pytest.raises(LeaseReleaseError):
        mine.release(lease)
    assert mine.snapshot() == after
    assert lookalike.held
    lookalike.release()
    assert_idle(mine)
    assert_idle(other)


# -- pools ----------------------------------------------------------------------------------------


async def test_impossible_pool_claims_fail_at_once_instead_of_waiting_forever(
    autojump_clock: MockClock,
) -> None:
    manager = LockManager(pools={"net": 2})
    with anyio.fail_after(DEADLOCK_AFTER):
        with pytest.raises(CapacityError):
            async with manager.acquire([units(NET, 3)]):
                pass
        with pytest.raises(UnknownPoolError):
            async with manager.acquire([units(pool("gpu"), 1)]):
                pass
        with pytest.raises(CapacityError):
            manager.acquire_nowait([units(NET, 3)])
    assert anyio.current_time() == 0
    assert_idle(manager)


async def test_a_multi_unit_claim_waits_holding_nothing_then_gets_all_units(
    autojump_clock: MockClock,
) -> None:
    manager = LockManager(pools={"net": 3})
    holder = manager.acquire_nowait([units(NET, 2)])
    got: list[Lease] = []

    async def wants_two() -> None:
        async with manager.acquire([units(NET, 2)]) as lease:
            got.append(lease)
            assert manager.statistics().pool_units_held == (("net", 2),)

    with anyio.fail_after(DEADLOCK_AFTER):
        async with anyio.create_task_group() as nursery:
            nursery.start_soon(wants_two)
            await wait_all_tasks_blocked()
            assert manager.statistics().pool_units_held == (("net", 2),)  # not 3: nothing partial
            assert not got
            holder.release()
    assert len(got) == 1
    assert_idle(manager)


async def test_raising_a_capacity_wakes_waiters(autojump_clock: MockClock) -> None:
    manager = LockManager(pools={"net": 1})
    holder = manager.acquire_nowait([units(NET, 1)])
    log: list[str] = []

    async def waiter() -> None:
        async with manager.acquire([units(NET, 1)]):
            log.append("in")

    with anyio.fail_after(DEADLOCK_AFTER):
        async with anyio.create_task_group() as nursery:
            nursery.start_soon(waiter)
            await wait_all_tasks_blocked()
            assert log == []
            manager.set_capacity("net", 2)
    assert log == ["in"]
    holder.release()
    assert manager.table.capacity("net") == 2


# -- priorities ---------------------------------------------------------------------------------


async def test_priorities_order_the_waiters_of_different_groups_but_not_within_one(
    autojump_clock: MockClock,
) -> None:
    manager = LockManager()
    holder = manager.acquire_nowait([writes("f")])
    log: list[str] = []

    async def worker(name: str, priority: int, group: str) -> None:
        async with manager.acquire([writes("f")], priority=priority, group=group):
            log.append(name)

    with anyio.fail_after(DEADLOCK_AFTER):
        async with anyio.create_task_group() as nursery:
            for name, priority, group in [
                ("low-1", 0, "batch-1"),
                ("high-1", 5, "batch-1"),  # capped: must not overtake low-1, same batch
                ("high-2", 5, "batch-2"),  # overtakes the whole of batch-1
            ]:
                nursery.start_soon(worker, name, priority, group)
                await wait_all_tasks_blocked()
            holder.release()
    assert log == ["high-2", "low-1", "high-1"]


# -- threads --------------------------------------------------------------------------------------


def in_another_thread(attempts: list[Callable[[], object]]) -> list[BaseException | None]:
    """Run each attempt in a fresh thread, one after another; return what each raised."""
    outcomes: list[BaseException | None] = []

    def run(attempt: Callable[[], object]) -> None:
        try:
            attempt()
        except BaseException as exc:  # handed back to the test
            outcomes.append(exc)
        else:
            outcomes.append(None)

    for attempt in attempts:
        thread = threading.Thread(target=run, args=(attempt,))
        thread.start()
        thread.join()
    return outcomes


def test_a_manager_in_use_in_one_thread_refuses_other_threads_clearly() -> None:
    # The table is not thread-safe and a waiter's wake-up belongs to its own event loop: a
    # second thread used to corrupt trio's run queue and hang the first. Now it is told at once.
    manager = LockManager()
    lease = manager.acquire_nowait([writes("a")])
    before = manager.snapshot()

    async def acquire_in_trio() -> None:
        with trio.fail_after(DEADLOCK_AFTER):
            async with manager.acquire([writes("b")]):
                pass

    def run_trio() -> None:
        trio.run(acquire_in_trio, clock=MockClock(autojump_threshold=0))

    outcomes = in_another_thread(
        [
            lambda: manager.acquire_nowait([writes("b")]),
            lease.release,
            run_trio,
            lambda: manager.set_capacity("net", 2),
        ]
    )
    for outcome in outcomes:
        assert isinstance(outcome, RuntimeError)
        assert "in use in another thread" in str(outcome)
    assert manager.snapshot() == before and lease.held
    lease.release()

    # Once nothing is held or waiting, any thread may take the manager over.
    (outcome,) = in_another_thread([run_trio])
    assert outcome is None
    assert_idle(manager)
    manager.acquire_nowait([writes("a")]).release()

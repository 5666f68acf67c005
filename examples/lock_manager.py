# What to watch: trio tasks sharing files and a pool through one LockManager.
#
# Part 1, files: reader B is granted src/app.py while reader A still reads it (readers share);
# the writer of src/ (a directory claim covers every file under it) waits until both are done;
# reader C, who comes after the writer, queues behind it instead of slipping in, while a reader
# of an unrelated file (docs/) goes straight through.
# Part 2, a pool of 2 "network" units: two downloads run, the third waits for a unit;
# acquire_nowait() raises trio.WouldBlock instead of waiting; and a blocked acquire() inside
# trio.move_on_after() gives up at the deadline and leaves the queue as if it had never come,
# so download 3 is still the only one waiting and gets the next free unit.
#
# Run: .venv/bin/python examples/lock_manager.py   (takes about a second and a half)

from __future__ import annotations

from collections.abc import Sequence

import trio

from toolkernel import Claim, pool, reads, units, writes
from toolkernel.locks import LockManager

TICK = 0.1  # seconds; every delay below is a whole number of ticks
NETWORK = pool("network")


class Clock:
    """Prints each event with the seconds since the clock was made."""

    def __init__(self) -> None:
        self.start = trio.current_time()

    def log(self, who: str, what: str) -> None:
        print(f"  {trio.current_time() - self.start:4.1f}s  {who:<10} {what}")


async def job(
    manager: LockManager,
    clock: Clock,
    who: str,
    claims: Sequence[Claim],
    arrive: int,
    work: int,
) -> None:
    """Arrive after ``arrive`` ticks, hold ``claims`` for ``work`` ticks, then give them back."""
    await trio.sleep(arrive * TICK)
    wanted = ", ".join(str(claim) for claim in claims)
    clock.log(who, f"asks for {wanted}")
    async with manager.acquire(claims):
        clock.log(who, "granted")
        await trio.sleep(work * TICK)
        clock.log(who, "done, releases")


async def files(manager: LockManager, clock: Clock) -> None:
    print("Part 1: readers share a file; a writer waits for them; later readers queue behind it")
    async with trio.open_nursery() as nursery:
        # who, claims, arrives at tick, works for ticks (no two events share a tick)
        nursery.start_soon(job, manager, clock, "reader A", [reads("src/app.py")], 0, 5)
        nursery.start_soon(job, manager, clock, "reader B", [reads("src/app.py")], 1, 5)
        nursery.start_soon(job, manager, clock, "writer", [writes("src")], 2, 2)
        nursery.start_soon(job, manager, clock, "reader C", [reads("src/app.py")], 3, 1)
        nursery.start_soon(job, manager, clock, "docs", [reads("docs/index.md")], 4, 3)


async def network(manager: LockManager, clock: Clock) -> None:
    print()
    print("Part 2: a pool of 2 network units; acquire_nowait() and a deadline")
    async with trio.open_nursery() as nursery:
        one_unit = [units(NETWORK, 1)]
        nursery.start_soon(job, manager, clock, "download 1", one_unit, 0, 5)
        nursery.start_soon(job, manager, clock, "download 2", one_unit, 1, 5)
        nursery.start_soon(job, manager, clock, "download 3", one_unit, 2, 2)

        # Tick 3: both units are held and download 3 is queued for one.
        await trio.sleep(3 * TICK)
        try:
            lease = manager.acquire_nowait(one_unit)
        except trio.WouldBlock:
            clock.log("impatient", "acquire_nowait() raised trio.WouldBlock: no unit is free")
        else:  # not expected here, but never leak a lease
            clock.log("impatient", "got a unit at once")
            lease.release()

        clock.log("deadline", f"asks for 1 of {NETWORK}, waiting at most {TICK:.1f}s")
        with trio.move_on_after(TICK) as scope:
            async with manager.acquire(one_unit):
                clock.log("deadline", "granted")
        if scope.cancelled_caught:
            waiting = manager.statistics().waiting
            clock.log("deadline", f"gave up and left the queue; still waiting: {waiting}")


async def main() -> None:
    manager = LockManager(pools={"network": 2})
    clock = Clock()
    await files(manager, clock)
    clock = Clock()
    await network(manager, clock)
    stats = manager.statistics()
    print()
    print(f"At the end: {stats.held} leases held, {stats.waiting} waiting.")
    assert stats.held == stats.waiting == 0


if __name__ == "__main__":
    trio.run(main)

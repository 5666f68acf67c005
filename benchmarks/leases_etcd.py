"""Leases on etcd: round trip, grants per second, and how soon a dead client's leases return.

Measured side by side in one run, on a real etcd started on loopback (one member, then a cluster
of three), against the in-process ``LockManager`` as the baseline:

a. **Round trip** — one client acquires an exclusive lease on a file nobody holds and releases
   it, again and again (distinct files, so a release still on its way delays nobody): the median
   time from ``acquire`` to the grant.
b. **Hand-off** — two clients take turns on one file: the median time from one's ``release`` to
   the other's grant (a delete, a watch event, the mirror's decision).
c. **Grants per second** — several clients, each with many tasks acquiring and releasing
   distinct files as fast as they can, for a fixed time. Beside it, for scale, what etcd alone
   does on the same machine: puts of fresh keys through the gateway, as many at a time as there
   are tasks (a grant costs a put and a share of a batched delete, each a write to etcd's log).
d. **A dead client's leases** — a client in a process of its own holds a file and is killed
   (SIGKILL); the time until a waiting client is granted the file, against the TTL. It is the
   TTL after the dead client's last keepalive (sent every third of it), plus etcd's expiry sweep.

Run from the repository root::

    .venv/bin/python benchmarks/leases_etcd.py            # full run, about a minute
    .venv/bin/python benchmarks/leases_etcd.py --quick    # smoke run, a few seconds

Last full run (etcd 3.4.23 from Debian, data on a virtual disk, a shared 2-core machine under
load; medians)::

    in-process             round trip (median)               27.05 us
    etcd, 1 member         round trip (median)               10.93 ms
    etcd, 1 member         hand-off between clients            6.37 ms
    etcd, 1 member         grants/s (4 clients)                 109
    etcd, 1 member         etcd alone: puts/s (for scale)        108
    etcd, 1 member         dead client's leases back, ttl=1 s   1.12 s (1.12 x ttl)
    etcd, 1 member         dead client's leases back, ttl=2 s   1.96 s (0.98 x ttl)
    etcd, 1 member         dead client's leases back, ttl=5 s   5.19 s (1.04 x ttl)
    etcd, 3 members        round trip (median)               14.23 ms
    etcd, 3 members        hand-off between clients            7.45 ms
    etcd, 3 members        grants/s (4 clients)                 118
    etcd, 3 members        etcd alone: puts/s (for scale)        128
    etcd, 3 members        dead client's leases back, ttl=1 s   0.97 s (0.97 x ttl)
    etcd, 3 members        dead client's leases back, ttl=2 s   2.10 s (1.05 x ttl)
    etcd, 3 members        dead client's leases back, ttl=5 s   5.36 s (1.07 x ttl)

A grant costs about what one write to etcd costs (its log's fsync): grants per second follow
etcd's own put rate on the machine. A dead client's leases come back about one TTL after it
died: between TTL minus a third (its last keepalive) and TTL plus etcd's expiry sweep.

Needs the ``etcd`` binary (Debian: ``apt-get install etcd-server``); without it the etcd rows
are skipped, saying so. etcd writes its log with fsync: the figures depend on the disk under the
temporary directory (``TMPDIR``).
"""

from __future__ import annotations

import argparse
import base64
import pathlib
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

import anyio
import httpx

from toolkernel.leases import Grant, LeaseBackend, open_leases
from toolkernel.locks import LockManager, writes

# The etcd launcher and the client process are the tests' own.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from tests.leases.etcd_cluster import ETCD, MISSING, running_cluster
from tests.leases.etcd_harness import ClientProcess


async def in_process_round_trip(n: int) -> float:
    manager = LockManager()
    times = []
    for i in range(n):
        started = time.perf_counter()
        async with manager.acquire([writes(f"f{i}")]):
            times.append(time.perf_counter() - started)
    return statistics.median(times)


async def round_trip(backend: LeaseBackend, n: int) -> float:
    times = []
    for i in range(n):
        started = time.perf_counter()
        grant = await backend.acquire([writes(f"rt/f{i}")])
        times.append(time.perf_counter() - started)
        backend.release(grant)
    return statistics.median(times)


async def hand_off(a: LeaseBackend, b: LeaseBackend, n: int) -> float:
    times: list[float] = []
    grant = await a.acquire([writes("hot")])
    holder, other = a, b
    for _ in range(n):
        granted: list[tuple[Grant, float]] = []

        async def take(backend: LeaseBackend, into: list[tuple[Grant, float]]) -> None:
            taken = await backend.acquire([writes("hot")])
            into.append((taken, time.perf_counter()))

        async with anyio.create_task_group() as tg:
            tg.start_soon(take, other, granted)
            await anyio.sleep(0.01)  # let its request queue behind the holder
            released = time.perf_counter()
            holder.release(grant)
        grant, at = granted[0]
        times.append(at - released)
        holder, other = other, holder
    holder.release(grant)
    return statistics.median(times)


async def grants_per_second(backends: list[LeaseBackend], tasks: int, seconds: float) -> float:
    count = 0

    async def worker(backend: LeaseBackend, name: str) -> None:
        nonlocal count
        i = 0
        while True:
            grant = await backend.acquire([writes(f"gps/{name}/{i}")])
            backend.release(grant)
            count += 1
            i += 1

    started = time.perf_counter()
    with anyio.move_on_after(seconds):
        async with anyio.create_task_group() as tg:
            for b, backend in enumerate(backends):
                for t in range(tasks):
                    tg.start_soon(worker, backend, f"{b}-{t}")
    return count / (time.perf_counter() - started)


def raw_puts_per_second(client_url: str, threads: int, seconds: float) -> float:
    """etcd alone, for scale: puts of fresh keys through the gateway, ``threads`` at a time."""
    count = 0
    lock = threading.Lock()
    # One client, made before the clock starts (making one loads certificates: ~0.1 s).
    with httpx.Client(limits=httpx.Limits(max_connections=threads)) as client:
        stop = time.perf_counter() + seconds

        def put(name: int) -> None:
            nonlocal count
            i = 0
            while time.perf_counter() < stop:
                key = base64.b64encode(f"/raw/{name}/{i}".encode()).decode()
                client.post(f"{client_url}/v3/kv/put", json={"key": key, "value": ""})
                i += 1
                with lock:
                    count += 1

        workers = [threading.Thread(target=put, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    return count / seconds


async def dead_client(url: str, ttl: int, root: pathlib.Path) -> float:
    (holder,) = await anyio.to_thread.run_sync(ClientProcess.start, 1, f"{url}?ttl={ttl}", root)
    try:
        async with open_leases(f"{url}?ttl={ttl}", root) as waiter:
            assert waiter is not None
            holder.send(acquire="H", claims=[["w", "dead"]])
            await anyio.to_thread.run_sync(holder.expect, "granted", "H")
            killed = time.perf_counter()
            holder.kill()
            grant = await waiter.acquire([writes("dead")])
            returned = time.perf_counter() - killed
            waiter.release(grant)
            return returned
    finally:
        holder.close()


async def measure(
    label: str, url: str, client_url: str, root: pathlib.Path, quick: bool
) -> list[str]:
    rows = []
    async with AsyncExitStack() as stack:
        backends: list[LeaseBackend] = []
        for _ in range(2 if quick else 4):
            backend = await stack.enter_async_context(open_leases(f"{url}?ttl=5", root))
            assert backend is not None
            backends.append(backend)
        n = 20 if quick else 200
        rt = await round_trip(backends[0], n)
        rows.append(f"{label:<22} round trip (median)           {rt * 1e3:9.2f} ms")
        ho = await hand_off(backends[0], backends[1], 5 if quick else 50)
        rows.append(f"{label:<22} hand-off between clients       {ho * 1e3:9.2f} ms")
        tasks, seconds = (8, 1.0) if quick else (32, 5.0)
        gps = await grants_per_second(backends, tasks, seconds)
        rows.append(f"{label:<22} grants/s ({len(backends)} clients)           {gps:9.0f}")
        raw = await anyio.to_thread.run_sync(
            raw_puts_per_second, client_url, len(backends) * tasks, seconds
        )
        rows.append(f"{label:<22} etcd alone: puts/s (for scale)  {raw:9.0f}")
    for ttl in (1,) if quick else (1, 2, 5):
        returned = await dead_client(url, ttl, root)
        rows.append(
            f"{label:<22} dead client's leases back, ttl={ttl} s {returned:6.2f} s "
            f"({returned / ttl:.2f} x ttl)"
        )
    return rows


async def main(quick: bool) -> None:
    print(f"python {platform.python_version()}, {platform.machine()}, etcd: {ETCD or 'absent'}")
    baseline = await in_process_round_trip(1000)
    print(f"{'in-process':<22} round trip (median)           {baseline * 1e6:9.2f} us")
    if ETCD is None:
        print(f"etcd rows skipped: {MISSING}")
        return
    with tempfile.TemporaryDirectory() as scratch:
        directory = pathlib.Path(scratch)
        root = directory / "root"
        root.mkdir()
        for size in (1, 3):
            label = "etcd, 1 member" if size == 1 else "etcd, 3 members"
            with running_cluster(directory / f"etcd{size}", size) as cluster:
                for row in await measure(
                    label, cluster.url(0), cluster.members[0].client_url, root, quick
                ):
                    print(row, flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    arguments = parser.parse_args()
    run: Callable[[], Awaitable[None]] = lambda: main(arguments.quick)  # noqa: E731
    anyio.run(run, backend="trio")

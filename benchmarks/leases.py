"""Leases across processes on one machine: the lease service against in-process leases.

What is measured, side by side in one run (trio; the service is a real
``python -m toolkernel serve`` process, the clients are this process):

a. **Round trip** — one ``acquire`` + ``release`` of an exclusive lease on a free path, one at a
   time: in-process (``LockManager``) against the lease service over its Unix socket.
b. **Grants per second** — 64 tasks each taking and giving back leases on their own paths as fast
   as they can, pipelined on the one connection; in-process against the service.
c. **A dead client's leases** — a client process holds a lease, a waiter in this process wants
   it; the holder is killed (SIGKILL). The time from the kill to the waiter's grant (no TTL: the
   service sees the socket close).
d. **Fenced write** — making one written file visible: a plain ``rename`` of a temporary file
   over its target (no fence: what the in-process kernel does), against checking the grant with
   the service and then renaming in the client (one round trip; leaves a window in which a
   paused client writes late), against asking the service to do the rename itself (one round
   trip; no window: the choice made). Each from a worker thread, as ``ctx.fs`` writes are.

Run from the repository root::

    .venv/bin/python benchmarks/leases.py            # full run, about half a minute
    .venv/bin/python benchmarks/leases.py --quick    # smoke run, a few seconds

Timing is by ``time.perf_counter``; each figure is the best of a few rounds. Benchmarks are
never asserted as tests: read the ratios.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

import anyio
import anyio.to_thread

from toolkernel.leases import Rename, open_leases
from toolkernel.leases._client import UnixLeaseClient
from toolkernel.locks import LockManager, writes

HOLDER = """
import sys, anyio
from toolkernel.leases import open_leases
from toolkernel.locks import writes
async def main():
    async with open_leases(sys.argv[1], sys.argv[2]) as backend:
        await backend.acquire([writes("dead")])
        print("held", flush=True)
        await anyio.sleep_forever()
anyio.run(main, backend="trio")
"""


class Settings(NamedTuple):
    rounds: int
    pairs: int
    burst: int
    deaths: int
    writes: int


FULL = Settings(rounds=3, pairs=1000, burst=6400, deaths=3, writes=500)
QUICK = Settings(rounds=1, pairs=200, burst=2000, deaths=1, writes=100)


async def in_process_pair(s: Settings) -> float:
    manager = LockManager()
    claims = [writes("a/b/c/f")]
    started = time.perf_counter()
    for _ in range(s.pairs):
        async with manager.acquire(claims):
            pass
    return (time.perf_counter() - started) / s.pairs


async def service_pair(s: Settings, client: UnixLeaseClient) -> float:
    claims = [writes("a/b/c/f")]
    started = time.perf_counter()
    for _ in range(s.pairs):
        client.release(await client.acquire(claims))
    await client.ping()
    return (time.perf_counter() - started) / s.pairs


async def burst(s: Settings, client: UnixLeaseClient | None) -> float:
    manager = LockManager()
    tasks_n = 64
    each = s.burst // tasks_n

    async def churn(n: int) -> None:
        claims = [writes(f"t{n}/f")]
        for _ in range(each):
            if client is None:
                async with manager.acquire(claims):
                    pass
            else:
                client.release(await client.acquire(claims))

    started = time.perf_counter()
    async with anyio.create_task_group() as tasks:
        for n in range(tasks_n):
            tasks.start_soon(churn, n)
    if client is not None:
        await client.ping()
    return tasks_n * each / (time.perf_counter() - started)


def _start_holder(url: str, root: str) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, root], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    line = holder.stdout.readline()
    assert line.strip() == "held", line
    return holder


async def _granted_at(client: UnixLeaseClient, done: anyio.Event, when: list[float]) -> None:
    grant = await client.acquire([writes("dead")])
    when.append(time.perf_counter())
    client.release(grant)
    done.set()


async def dead_client(s: Settings, url: str, root: str, client: UnixLeaseClient) -> float:
    best = float("inf")
    for _ in range(s.deaths):
        holder = await anyio.to_thread.run_sync(_start_holder, url, root)
        done = anyio.Event()
        when: list[float] = []
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_granted_at, client, done, when)
            await client.ping()
            while (await client.status())["waiting"] != 1:  # noqa: ASYNC110 - another process
                await anyio.sleep(0.001)
            killed_at = time.perf_counter()
            holder.send_signal(signal.SIGKILL)
            await done.wait()
        await anyio.to_thread.run_sync(holder.wait)
        if holder.stdout is not None:
            holder.stdout.close()
        best = min(best, when[0] - killed_at)
    return best


def _prepare(root: str, n: int) -> list[str]:
    names = []
    for i in range(n):
        name = f".f{i}.bench.tktmp"
        with open(os.path.join(root, name), "wb") as file:
            file.write(b"x" * 100)
        names.append(name)
    return names


async def fenced_writes(s: Settings, root: str, client: UnixLeaseClient) -> dict[str, float]:
    grant = await client.acquire([writes("target")])
    fence = client.fence(grant)
    results = {}

    def plain(names: list[str]) -> None:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for name in names:
                os.replace(name, "target", src_dir_fd=root_fd, dst_dir_fd=root_fd)
        finally:
            os.close(root_fd)

    def check_then_rename(names: list[str]) -> None:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for name in names:
                anyio.from_thread.run(client.ping)  # "still held?": the round trip of a check
                os.replace(name, "target", src_dir_fd=root_fd, dst_dir_fd=root_fd)
        finally:
            os.close(root_fd)

    def service_renames(names: list[str]) -> None:
        for name in names:
            fence.publish(Rename((name,), ("target",)))

    for label, run in (
        ("plain", plain),
        ("check then rename", check_then_rename),
        ("service renames", service_renames),
    ):
        names = await anyio.to_thread.run_sync(_prepare, root, s.writes)
        started = time.perf_counter()
        await anyio.to_thread.run_sync(run, names)
        results[label] = (time.perf_counter() - started) / s.writes
    client.release(grant)
    return results


async def measure(s: Settings, url: str, root: str) -> dict[str, float]:
    best: dict[str, float] = {}

    def keep(key: str, value: float, *, most: bool = False) -> None:
        old = best.get(key)
        best[key] = value if old is None else (max(old, value) if most else min(old, value))

    async with open_leases(url, root) as client:
        assert isinstance(client, UnixLeaseClient)
        for _ in range(s.rounds):
            keep("pair in-process", await in_process_pair(s))
            keep("pair service", await service_pair(s, client))
            keep("rate in-process", await burst(s, None), most=True)
            keep("rate service", await burst(s, client), most=True)
            for label, value in (await fenced_writes(s, root, client)).items():
                keep(f"write {label}", value)
        best["dead client"] = await dead_client(s, url, root, client)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    args = parser.parse_args(argv)
    s = QUICK if args.quick else FULL
    print(f"toolkernel leases benchmark ({'quick' if s is QUICK else 'full'} run)")
    print(f"Python {platform.python_version()}, {sys.platform}, best of {s.rounds} rounds")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tkbench-", dir="/tmp") as scratch:
        root = os.path.join(scratch, "ws")
        os.mkdir(root)
        socket_path = os.path.join(scratch, "s.sock")
        command = [sys.executable, "-m", "toolkernel", "serve", "--root", root]
        service = subprocess.Popen(
            [*command, "--socket", socket_path], stdout=subprocess.PIPE, text=True
        )
        try:
            assert service.stdout is not None
            assert service.stdout.readline().strip() == socket_path
            best = anyio.run(measure, s, f"unix:{socket_path}", root, backend="trio")
        finally:
            service.send_signal(signal.SIGTERM)
            service.wait(timeout=10)
            if service.stdout is not None:
                service.stdout.close()

    us = 1e6
    rows = [
        ("a. acquire+release, in-process", f"{best['pair in-process'] * us:8.1f} us", ""),
        (
            "   acquire+release, Unix socket",
            f"{best['pair service'] * us:8.1f} us",
            f"{best['pair service'] / best['pair in-process']:.0f}x in-process",
        ),
        ("b. grants/s, in-process", f"{best['rate in-process']:8,.0f}", ""),
        (
            "   grants/s, Unix socket (pipelined)",
            f"{best['rate service']:8,.0f}",
            f"{best['rate in-process'] / best['rate service']:.0f}x fewer",
        ),
        ("c. dead client's lease to a waiter", f"{best['dead client'] * 1e3:8.2f} ms", "no TTL"),
        ("d. plain rename (no fence)", f"{best['write plain'] * us:8.1f} us", ""),
        (
            "   check, then rename in the client",
            f"{best['write check then rename'] * us:8.1f} us",
            f"{best['write check then rename'] / best['write plain']:.1f}x plain (has a window)",
        ),
        (
            "   the service renames (fenced)",
            f"{best['write service renames'] * us:8.1f} us",
            f"{best['write service renames'] / best['write plain']:.1f}x plain",
        ),
    ]
    width = max(len(label) for label, _, _ in rows)
    for label, value, ratio in rows:
        print(f"{label:<{width}}  {value:>12}  {ratio}")
    print(f"the run took {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

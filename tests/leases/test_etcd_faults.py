"""Leases on etcd under faults, on a real etcd: clients in processes of their own, a client
killed, a client cut off from etcd, an etcd member killed and restarted, and a recorder across
processes. Real clock, TTLs of one or two seconds. Skipped where etcd is not installed."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from toolkernel.errors import FencedOutError
from toolkernel.leases import EtcdLeases, Grant, LeaseBackend, Rename, open_leases
from toolkernel.leases._etcd import connect as connect_etcd
from toolkernel.locks import claims_conflict, exclusive, path, shared, writes

from .etcd_cluster import ETCD, MISSING, Cluster, queue_keys, running_cluster
from .etcd_harness import ClientProcess, PausableProxy

pytestmark = pytest.mark.skipif(ETCD is None, reason=MISSING)


@pytest.fixture
def anyio_backend() -> str:
    return "trio"  # these tests are about etcd and processes, not the event loop: run them once


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("etcd"), 1, in_memory=True) as cluster:
        yield cluster


@pytest.fixture
def clients() -> Iterator[list[ClientProcess]]:
    started: list[ClientProcess] = []
    yield started
    for client in started:
        client.close()


def test_all_or_nothing_and_conflict_aware_fifo_across_processes(
    etcd: Cluster, tmp_path: Path, clients: list[ClientProcess]
) -> None:
    clients += ClientProcess.start(2, etcd.url(ttl=2), tmp_path)
    p, q = clients
    p.send(acquire="A", claims=[["w", "a"]])
    q.send(acquire="R", claims=[["r", "b"]])
    p.expect("granted", "A")
    q.expect("granted", "R")
    q.send(acquire="B", claims=[["w", "a"], ["w", "b"]])
    time.sleep(0.2)
    p.send(acquire="C", claims=[["r", "b"]])  # a later reader waits behind the waiting writer
    time.sleep(0.2)
    p.send(acquire="D", claims=[["w", "c"]])  # conflicts with nobody: overtakes
    p.expect("granted", "D")
    p.send(release="A")
    # a is free now, but B needs b as well: it takes nothing until it can take both.
    assert q.poll("granted", "B", timeout=0.5) is None
    q.send(release="R")
    b = q.expect("granted", "B")
    assert p.poll("granted", "C", timeout=0.3) is None
    q.send(release="B")
    c = p.expect("granted", "C")
    assert b["token"] < c["token"]


async def test_a_killed_client_s_leases_return_within_its_ttl(
    etcd: Cluster, tmp_path: Path, clients: list[ClientProcess]
) -> None:
    ttl = 1
    clients += await anyio.to_thread.run_sync(ClientProcess.start, 1, etcd.url(ttl=ttl), tmp_path)
    holder = clients[0]
    async with open_leases(etcd.url(ttl=ttl), tmp_path) as waiter:
        assert waiter is not None
        # Two requests: etcd deletes both keys of the session in one revision.
        holder.send(acquire="H1", claims=[["w", "x"]])
        holder.send(acquire="H2", claims=[["w", "y"]])
        await anyio.to_thread.run_sync(holder.expect, "granted", "H1")
        await anyio.to_thread.run_sync(holder.expect, "granted", "H2")
        with anyio.move_on_after(0.2) as scope:
            await waiter.acquire([writes("x")])
        assert scope.cancelled_caught
        killed_at = time.monotonic()
        holder.kill()
        with anyio.fail_after(5):
            grant = await waiter.acquire([writes("x"), writes("y")])
        returned_after = time.monotonic() - killed_at
        waiter.release(grant)
    # At most the TTL after the last keepalive, plus etcd's expiry sweep (every 0.5 s).
    assert returned_after < ttl + 1.0


async def test_a_client_cut_off_from_etcd_can_t_publish_once_its_ttl_runs_out(
    etcd: Cluster, tmp_path: Path
) -> None:
    ttl = 1
    proxy = PausableProxy(etcd.members[0].client_port)
    cut_off = await connect_etcd(EtcdLeases("127.0.0.1", proxy.port, ttl), tmp_path, discover=False)
    try:
        async with open_leases(etcd.url(ttl=ttl), tmp_path) as other:
            assert other is not None
            grant = await cut_off.acquire([writes("f")])
            await publish(cut_off.fence(grant).publish, tmp_path, "f", "before")

            proxy.pause()
            paused_at = time.monotonic()
            with anyio.fail_after(5):
                taken = await other.acquire([writes("f")])
            taken_at = time.monotonic()
            # Not a message from etcd, its own reckoning: refused at once, without a round trip.
            started = time.monotonic()
            with pytest.raises(FencedOutError, match="unheard"):
                await publish(cut_off.fence(grant).publish, tmp_path, "f", "late")
            assert time.monotonic() - started < 0.2
            assert taken_at - paused_at > ttl - cut_off.margin - 0.4
            await publish(other.fence(taken).publish, tmp_path, "f", "other")
            assert (tmp_path / "f").read_text() == "other"

            # Back in touch: the old session is gone for good; a new request opens a new one.
            proxy.resume()
            with pytest.raises(FencedOutError):
                await publish(cut_off.fence(grant).publish, tmp_path, "f", "later")
            other.release(taken)
            with anyio.fail_after(5):
                again = await cut_off.acquire([writes("f")])
            await publish(cut_off.fence(again).publish, tmp_path, "f", "again")
            assert (tmp_path / "f").read_text() == "again"
    finally:
        proxy.resume()
        await cut_off.aclose()
        proxy.close()


counter = itertools.count()


async def publish(publish: object, root: Path, name: str, text: str) -> None:
    scratch = f".{name}.{next(counter)}.tktmp"
    (root / scratch).write_text(text)
    await anyio.to_thread.run_sync(publish, Rename((scratch,), (name,)))  # type: ignore[arg-type]


async def test_clients_carry_on_while_an_etcd_member_is_killed_and_restarted(
    tmp_path: Path,
) -> None:
    ttl = 2
    with running_cluster(tmp_path / "etcd", 3, in_memory=True) as cluster:
        root = tmp_path / "root"
        root.mkdir()
        async with (
            open_leases(cluster.url(0, ttl=ttl), root) as a,
            open_leases(cluster.url(1, ttl=ttl), root) as b,
        ):
            assert a is not None and b is not None
            held = await a.acquire([writes("x")])
            taken: list[Grant] = []
            got_x = anyio.Event()

            async def wait_for_x() -> None:
                taken.append(await b.acquire([writes("x")]))
                got_x.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait_for_x)
                cluster.kill(0)  # the member a was given (and maybe the leader)
                await anyio.sleep(0.3)
                a.release(held)  # sent to another member
                with anyio.fail_after(6):
                    await got_x.wait()

            # a's session outlives its TTL with its first member down: keepalives fail over.
            other = await a.acquire([writes("y")])
            await anyio.sleep(ttl + 0.5)
            await publish(a.fence(other).publish, root, "y", "still held")

            cluster.start(0)
            await anyio.to_thread.run_sync(cluster.wait_ready)
            b.release(taken[0])
            with anyio.fail_after(6):
                again = await a.acquire([writes("x")])
            await publish(a.fence(again).publish, root, "x", "after the restart")
            a.release(again)
            a.release(other)


def test_no_two_conflicting_grants_overlap_across_processes(
    etcd: Cluster, tmp_path: Path, clients: list[ClientProcess]
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    paths = ["a", "a/b", "a/c", "b"]
    clients += ClientProcess.start(3, etcd.url(ttl=2), root)
    for seed, client in enumerate(clients):
        client.send(stress=12, seed=seed, paths=paths, log=str(tmp_path / f"log{seed}"))
    for client in clients:
        client.expect("stressed", timeout=30)
    records = []
    for seed in range(3):
        for line in (tmp_path / f"log{seed}").read_text().splitlines():
            items, token, start, end = json.loads(line)
            claims = [(exclusive if m == "w" else shared)(path(p)) for m, p in items]
            records.append((claims, token, start, end))
    assert len(records) == 36
    conflicting = 0
    for (c1, t1, s1, e1), (c2, t2, s2, e2) in itertools.combinations(records, 2):
        if any(claims_conflict(x, y) for x in c1 for y in c2):
            conflicting += 1
            assert e1 <= s2 or e2 <= s1, f"{c1} (token {t1}) overlapped {c2} (token {t2})"
            # The earlier request (lower token) held first.
            assert (s1 < s2) == (t1 < t2)
    assert conflicting > 0


async def test_hundreds_of_waiters_are_granted_by_one_release(
    etcd: Cluster, tmp_path: Path
) -> None:
    n = 300
    async with (
        open_leases(etcd.url(ttl=2), tmp_path) as a,
        open_leases(etcd.url(ttl=2), tmp_path) as b,
    ):
        assert a is not None and b is not None
        writer = await a.acquire([writes("hot")])
        granted: list[Grant] = []
        queued = anyio.Event()

        async def read(done: anyio.Event) -> None:
            granted.append(await b.acquire([shared(path("hot"))]))
            if len(granted) == n:
                done.set()

        all_granted = anyio.Event()
        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(read, all_granted)
            await until_queued(etcd, tmp_path, n + 1)
            # A later writer of another client waits behind every reader (FIFO), not before.
            tg.start_soon(wait_then_set, a, queued)
            await until_queued(etcd, tmp_path, n + 2)
            assert not granted
            a.release(writer)
            with anyio.fail_after(10):
                await all_granted.wait()
            assert not queued.is_set()
            for grant in granted:
                b.release(grant)
            with anyio.fail_after(10):
                await queued.wait()


async def wait_then_set(backend: LeaseBackend, event: anyio.Event) -> None:
    grant = await backend.acquire([writes("hot")])
    event.set()
    backend.release(grant)


async def until_queued(etcd: Cluster, root: Path, count: int) -> None:
    """Poll etcd (nothing to wait on across clients) until ``count`` requests are queued."""
    with anyio.fail_after(20):
        while len(await anyio.to_thread.run_sync(queue_keys, etcd, root)) < count:  # noqa: ASYNC110
            await anyio.sleep(0.05)

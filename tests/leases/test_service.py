"""The lease service on a Unix socket: real ``python -m toolkernel serve`` processes, clients in
this process and in others."""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from toolkernel.errors import CapacityError, LeaseReleaseError, UnknownPoolError
from toolkernel.leases import (
    Grant,
    Op,
    find_service,
    open_leases,
)
from toolkernel.leases._client import UnixLeaseClient
from toolkernel.leases._service import serve
from toolkernel.locks import Claim, pool, reads, units, writes

from .service_harness import Service, running_service, short_directory, start_service

WORKER = Path(__file__).with_name("lease_worker.py")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One service for the module's tests (it starts in about a second): each test's clients
    close before the next test, and that releases everything they held."""
    with running_service(tmp_path_factory.mktemp("ws"), pools="net=2") as running:
        yield running


@asynccontextmanager
async def client(service: Service) -> AsyncIterator[UnixLeaseClient]:
    async with open_leases(service.url, service.root) as backend:
        assert isinstance(backend, UnixLeaseClient)
        yield backend


async def publish(backend: UnixLeaseClient, grant: Grant, op: Op) -> None:
    await anyio.to_thread.run_sync(backend.fence(grant).publish, op)


async def wait_for_waiting(backend: UnixLeaseClient, n: int) -> None:
    """Until the service has ``n`` requests waiting (requests sent by tasks just started are
    sent when those tasks first run)."""
    with anyio.fail_after(10):
        while (await backend.status())["waiting"] != n:  # noqa: ASYNC110 - polls another process
            await anyio.sleep(0.01)


# -- the command ---------------------------------------------------------------------------------


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_its_socket_and_exits_cleanly_removing_it(
    workspace: Path, how: signal.Signals
) -> None:
    directory = short_directory()
    try:
        service = start_service(workspace, os.path.join(directory, "s.sock"))
        assert stat.S_IMODE(os.stat(service.socket).st_mode) == 0o600
        assert service.stop(how) == 0
        assert not os.path.exists(service.socket)
    finally:
        os.rmdir(directory)


async def test_serve_cancelled_removes_its_socket(workspace: Path) -> None:
    directory = short_directory()
    path = os.path.join(directory, "s.sock")
    printed = io.StringIO()
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: serve(workspace, socket_path=path, out=printed))
            with anyio.fail_after(5):
                while not printed.getvalue():  # noqa: ASYNC110 (it prints once it listens)
                    await anyio.sleep(0.01)
            tasks.cancel_scope.cancel()
        assert not await anyio.Path(path).exists()
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.rmdir(directory)


def test_the_default_socket_is_found_from_any_spelling_of_the_root(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = short_directory()
    monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
    (tmp_path / "link").symlink_to(workspace)
    assert find_service(workspace) is None
    command = [sys.executable, "-m", "toolkernel", "serve", "--root", str(workspace)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        printed = process.stdout.readline().strip()
        assert printed.startswith(os.path.join(runtime, "toolkernel") + "/")
        assert len(printed.encode()) < 108
        assert find_service(tmp_path / "link") == f"unix:{printed}"
        assert stat.S_IMODE(os.stat(os.path.dirname(printed)).st_mode) == 0o700
        # A second service for the same root refuses to start.
        second = subprocess.run(command, capture_output=True, text=True, timeout=20)
        assert second.returncode == 1 and "already" in second.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        assert process.stdout is not None
        process.stdout.close()
    assert find_service(workspace) is None


# -- grants ----------------------------------------------------------------------------------------


async def test_conflicting_grants_wait_and_are_handed_off_in_arrival_order(
    service: Service,
) -> None:
    async with client(service) as a, client(service) as b:
        writer = await a.acquire([writes("src/x.py")])
        order: list[str] = []

        async def wait(backend: UnixLeaseClient, claim: Claim, name: str) -> None:
            grant = await backend.acquire([claim])
            order.append(name)
            await anyio.sleep(0.05)
            backend.release(grant)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(wait, b, reads("src"), "reader")
            await b.ping()
            tasks.start_soon(wait, a, writes("src/x.py"), "writer2")
            await a.ping()
            # Does not conflict with anything: overtakes.
            free = await b.acquire([writes("docs")])
            assert order == []
            b.release(free)
            a.release(writer)
        assert order == ["reader", "writer2"]
        later = await b.acquire([writes("src")])
        assert later.token > writer.token
        b.release(later)


async def test_a_cancelled_acquire_is_withdrawn_and_lets_others_through(service: Service) -> None:
    async with client(service) as a, client(service) as b:
        held = await a.acquire([writes("f")])
        with anyio.move_on_after(0.1):
            await b.acquire([writes("f")])
        await b.ping()
        # A reader queued behind the withdrawn writer is no longer behind anyone but a.
        status = await a.status()
        assert (status["held"], status["waiting"]) == (1, 0)
        a.release(held)
        grant = await b.acquire([reads("f")])
        b.release(grant)
        with pytest.raises(LeaseReleaseError):
            b.release(grant)


async def test_pools_count_units_and_a_capacity_mismatch_is_refused(service: Service) -> None:
    gpu = f"gpu-{os.urandom(4).hex()}"  # a pool no earlier test named
    async with client(service) as a:
        one = await a.acquire([units(pool("net"), 2)])
        with anyio.move_on_after(0.1) as scope:
            await a.acquire([units(pool("net"), 1)])
        assert scope.cancelled_caught
        a.release(one)
        with pytest.raises(UnknownPoolError):
            await a.acquire([units(pool(gpu), 1)])
    with pytest.raises(ValueError, match="capacity"):
        async with open_leases(service.url, service.root, pools={"net": 3}):
            pass
    async with open_leases(service.url, service.root, pools={gpu: 1}) as first:
        assert first is not None
        grant = await first.acquire([units(pool(gpu), 1)])
        first.release(grant)


@pytest.mark.parametrize("capacity", [0, -1, "2", 1.5, True])
async def test_a_client_s_pool_capacity_follows_the_pool_rule(
    service: Service, capacity: object
) -> None:
    gpu = f"gpu-{os.urandom(4).hex()}"  # a pool no earlier test named
    message = f"capacity of pool {gpu!r} must be a positive int, not {capacity!r}"
    with pytest.raises(CapacityError, match=re.escape(message)):  # the service's own checker
        async with open_leases(service.url, service.root, pools={gpu: capacity}):  # type: ignore[dict-item]
            pass  # pragma: no cover - never reached
    async with client(service) as a:  # and the pool was not made
        with pytest.raises(UnknownPoolError):
            await a.acquire([units(pool(gpu), 1)])


async def test_a_client_of_another_root_is_refused(service: Service, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(ValueError, match="root"):
        async with open_leases(service.url, other):
            pass


async def test_closing_a_client_releases_its_leases_and_withdraws_its_waiters(
    service: Service,
) -> None:
    async with client(service) as a:
        async with open_leases(service.url, service.root) as b:
            assert b is not None
            await b.acquire([writes("x")])
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(b.acquire, [writes("x")])  # waits behind its own lease
                await anyio.sleep(0.05)
                tasks.cancel_scope.cancel()
        with anyio.fail_after(2):
            grant = await a.acquire([writes("x")])
        status = await a.status()
        assert (status["connections"], status["held"], status["waiting"]) == (1, 1, 0)
        a.release(grant)


async def test_thousands_of_waiters_are_granted_and_withdrawn(service: Service) -> None:
    async with client(service) as a, client(service) as b:
        writer = await a.acquire([writes("hot")])
        granted: list[Grant] = []

        async def read() -> None:
            granted.append(await b.acquire([reads("hot")]))

        async with anyio.create_task_group() as tasks:
            for _ in range(2000):
                tasks.start_soon(read)
            await wait_for_waiting(b, 2000)
            a.release(writer)
        assert len(granted) == 2000
        for grant in granted:
            b.release(grant)
        held = await a.acquire([writes("hot")])
        with anyio.move_on_after(0.3):
            async with anyio.create_task_group() as tasks:
                for _ in range(2000):
                    tasks.start_soon(b.acquire, [writes("hot")])
        await b.ping()
        assert (await b.status())["waiting"] == 0
        a.release(held)


async def test_a_higher_priority_request_overtakes_other_clients_waiters(service: Service) -> None:
    async with client(service) as a, client(service) as b, client(service) as c:
        held = await a.acquire([writes("prio")])
        order: list[str] = []

        async def wait(backend: UnixLeaseClient, priority: int, name: str) -> None:
            grant = await backend.acquire([writes("prio")], priority=priority)
            order.append(name)
            backend.release(grant)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(wait, b, 0, "low")
            await wait_for_waiting(a, 1)
            tasks.start_soon(wait, c, 1, "high")
            await wait_for_waiting(a, 2)
            a.release(held)
        assert order == ["high", "low"]

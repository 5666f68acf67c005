"""Leases on etcd, in one process, on a real single-member etcd: grants, order, withdrawal,
release, the fence. Skipped where etcd is not installed."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import pytest

import toolkernel as tk
from toolkernel._extras import install_command
from toolkernel.errors import FencedOutError, LeaseReleaseError
from toolkernel.leases import LeaseBackend, Rename, open_leases
from toolkernel.leases._etcd import EtcdLeaseBackend
from toolkernel.locks import device, exclusive, reads, writes
from toolkernel.tools import builtin_tools

from .etcd_cluster import (
    ETCD,
    MISSING,
    Cluster,
    delete_key,
    put_key,
    queue_keys,
    running_cluster,
)


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if ETCD is None:
        pytest.skip(MISSING)
    with running_cluster(tmp_path_factory.mktemp("etcd"), 1, in_memory=True) as cluster:
        yield cluster


@pytest.fixture
async def pair(etcd: Cluster, tmp_path: Path) -> AsyncIterator[tuple[LeaseBackend, LeaseBackend]]:
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(open_leases(etcd.url(ttl=2), tmp_path))
        b = await stack.enter_async_context(open_leases(etcd.url(ttl=2), tmp_path))
        assert a is not None and b is not None
        yield a, b


async def wait_until_gone(cluster: Cluster, root: Path, key: str) -> None:
    with anyio.fail_after(5):
        # etcd's state, read from outside: nothing to wait on but the next read
        while key in await anyio.to_thread.run_sync(queue_keys, cluster, root):  # noqa: ASYNC110
            await anyio.sleep(0.02)


async def test_conflicting_requests_are_granted_in_arrival_order_across_clients(
    pair: tuple[LeaseBackend, LeaseBackend],
) -> None:
    a, b = pair
    first = await a.acquire([writes("src/x.py")])
    order: list[str] = []

    async def take(backend: LeaseBackend, name: str, claims: list[object]) -> None:
        grant = await backend.acquire(claims)  # type: ignore[arg-type]
        order.append(name)
        await anyio.sleep(0.05)
        backend.release(grant)

    async with anyio.create_task_group() as tg:
        tg.start_soon(take, b, "writer of src", [writes("src")])
        await anyio.sleep(0.2)
        # A reader of a file beneath it arrives later: it waits behind the writer, not beside.
        tg.start_soon(take, a, "reader of src/x.py", [reads("src/x.py")])
        await anyio.sleep(0.2)
        # Nothing ahead of this one conflicts: it overtakes both (no head-of-line blocking).
        tg.start_soon(take, b, "reader of docs", [reads("docs")])
        await anyio.sleep(0.3)
        assert order == ["reader of docs"]
        a.release(first)
    assert order == ["reader of docs", "writer of src", "reader of src/x.py"]


async def test_tokens_grow_with_every_later_grant(pair: tuple[LeaseBackend, LeaseBackend]) -> None:
    a, b = pair
    tokens = []
    for backend in (a, b, a, b):
        grant = await backend.acquire([exclusive(device("phone"))])
        tokens.append(grant.token)
        backend.release(grant)
    assert tokens == sorted(tokens) and len(set(tokens)) == 4


async def test_a_cancelled_waiter_is_withdrawn_and_holds_nothing(
    pair: tuple[LeaseBackend, LeaseBackend], etcd: Cluster, tmp_path: Path
) -> None:
    a, b = pair
    held = await a.acquire([writes("f")])
    with anyio.move_on_after(0.3) as scope:
        await b.acquire([writes("f"), writes("g")])
    assert scope.cancelled_caught
    # The withdrawn request named g too: had it held g, this would wait.
    other = await a.acquire([writes("g")])
    assert len(await anyio.to_thread.run_sync(queue_keys, etcd, tmp_path)) == 2
    a.release(held)
    a.release(other)
    with anyio.fail_after(5):
        grant = await b.acquire([writes("f")])
    b.release(grant)


async def test_release_twice_raises(pair: tuple[LeaseBackend, LeaseBackend]) -> None:
    a, _ = pair
    grant = await a.acquire([writes("f")])
    a.release(grant)
    with pytest.raises(LeaseReleaseError, match="not held"):
        a.release(grant)


async def test_the_fence_publishes_while_held_and_refuses_after(
    pair: tuple[LeaseBackend, LeaseBackend], etcd: Cluster, tmp_path: Path
) -> None:
    a, _ = pair
    grant = await a.acquire([writes("f.txt")])
    fence = a.fence(grant)
    (tmp_path / ".f.txt.1.tktmp").write_text("new")
    await anyio.to_thread.run_sync(fence.publish, Rename((".f.txt.1.tktmp",), ("f.txt",)))
    assert (tmp_path / "f.txt").read_text() == "new"

    (tmp_path / ".g.2.tktmp").write_text("not mine")
    with pytest.raises(PermissionError, match="does not hold it"):
        await anyio.to_thread.run_sync(fence.publish, Rename((".g.2.tktmp",), ("g",)))

    a.release(grant)
    await wait_until_gone(etcd, tmp_path, grant.id)
    (tmp_path / ".f.txt.3.tktmp").write_text("late")
    with pytest.raises(FencedOutError):
        await anyio.to_thread.run_sync(fence.publish, Rename((".f.txt.3.tktmp",), ("f.txt",)))
    assert (tmp_path / "f.txt").read_text() == "new"


async def test_a_client_that_starts_later_sees_the_queue(
    etcd: Cluster, tmp_path: Path, pair: tuple[LeaseBackend, LeaseBackend]
) -> None:
    a, _ = pair
    held = await a.acquire([writes("f")])
    async with open_leases(etcd.url(ttl=2), tmp_path) as late:
        assert isinstance(late, EtcdLeaseBackend)
        with anyio.move_on_after(0.3) as scope:
            await late.acquire([reads("f")])
        assert scope.cancelled_caught
        a.release(held)
        with anyio.fail_after(5):
            late.release(await late.acquire([reads("f")]))


async def test_a_request_value_too_deep_or_misshapen_holds_nothing(
    etcd: Cluster, tmp_path: Path, pair: tuple[LeaseBackend, LeaseBackend]
) -> None:
    """Values another client wrote: one nested too deep for json (its RecursionError escaped
    the watch, which read the same event again for ever, and the connect of a client reading
    the queue) or of the wrong shape holds nothing, in every client's mirror."""
    a, _ = pair  # follows the queue through its watch
    values = {
        "deep": b"[" * 200_000,
        "nested": b'{"claims": ' + b"[" * 500 + b"]" * 500 + b"}",
        "not-an-object": b"[1, 2]",
        "claims-an-object": b'{"claims": {"r": "everything", "m": "exclusive"}}',
        "not-json": b"{",
    }
    keys = [
        await anyio.to_thread.run_sync(put_key, etcd, tmp_path, name, value)
        for name, value in values.items()
    ]
    try:
        with anyio.fail_after(5):
            held = await a.acquire([writes("x")])
        async with open_leases(etcd.url(ttl=2), tmp_path) as late:  # reads them with the queue
            assert late is not None
            with anyio.move_on_after(0.3) as scope:
                await late.acquire([writes("x")])
            assert scope.cancelled_caught
            a.release(held)
            with anyio.fail_after(5):
                late.release(await late.acquire([writes("x")]))
    finally:
        for key in keys:
            await anyio.to_thread.run_sync(delete_key, etcd, key)


def test_without_httpx_the_etcd_backend_names_its_extra() -> None:
    code = "import sys; sys.modules['httpx'] = None; import toolkernel.leases._etcd"
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    last = ran.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: leases=\"etcd://...\" needs the 'etcd' extra"), last
    assert install_command("etcd") in last


async def test_two_kernels_on_etcd_take_turns_on_a_file(etcd: Cluster, tmp_path: Path) -> None:
    started: list[str] = []
    go = anyio.Event()
    holding = anyio.Event()

    @tk.tool(claims=lambda a: [tk.writes(a["path"])])
    async def hold(ctx: tk.ToolContext, path: str) -> str:
        """Hold ``path`` until told to let go."""
        started.append(ctx.call_id)
        holding.set()
        await go.wait()
        return "held"

    tools = [hold, *builtin_tools()]
    with anyio.fail_after(20):
        async with (
            tk.open_kernel(tools, root=tmp_path, leases=etcd.url(ttl=2)) as a,
            tk.open_kernel(tools, root=tmp_path, leases=etcd.url(ttl=2)) as b,
        ):
            first = a.submit(tk.ToolCall("a1", "hold", {"path": "notes.txt"}))
            await holding.wait()
            write = b.submit(
                tk.ToolCall("b1", "Write", {"file_path": "notes.txt", "content": "from b\n"})
            )
            other = b.submit(
                tk.ToolCall("b2", "Write", {"file_path": "other.txt", "content": "free\n"})
            )
            assert (await other.wait_finished()).ok  # another file: it overlaps a's call
            await anyio.sleep(0.3)
            assert not write.finished and not (tmp_path / "notes.txt").exists()
            go.set()
            assert (await first.wait_finished()).ok
            result = await write.wait_finished()
            assert result.ok, result.error
    assert (tmp_path / "notes.txt").read_text() == "from b\n"
    assert (tmp_path / "other.txt").read_text() == "free\n"


async def test_priorities_do_not_reorder_requests_across_clients(
    pair: tuple[LeaseBackend, LeaseBackend],
) -> None:
    # What a priority overtake decides depends on who waited when, which a client starting later
    # can't read from the keys present: across clients, etcd's order of arrival is the order.
    a, b = pair
    held = await a.acquire([writes("prio")])
    order: list[str] = []

    async def wait(backend: LeaseBackend, priority: int, name: str) -> None:
        grant = await backend.acquire([writes("prio")], priority=priority)
        order.append(name)
        backend.release(grant)

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait, b, 0, "low, first")
        await anyio.sleep(0.2)
        tg.start_soon(wait, a, 5, "high, second")
        await anyio.sleep(0.2)
        a.release(held)
    assert order == ["low, first", "high, second"]

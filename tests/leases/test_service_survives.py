"""The lease service outlives any one client and any input, and its client outlives any
service's: real service processes on the real clock, with short waits."""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import anyio
import anyio.abc
import anyio.to_thread
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from toolkernel.errors import LeaseServiceError, PathEscapeError, UnknownPoolError
from toolkernel.leases import Grant, Rename, open_leases
from toolkernel.leases._client import UnixLeaseClient
from toolkernel.leases._service import LeaseService, serve
from toolkernel.leases._wire import HEADER_SIZE, frame, frame_length, parse_frame
from toolkernel.locks import pool, units, writes

from .service_harness import (
    Worker,
    memory,
    raw,
    raw_exchange,
    running_service,
    send_until_blocked,
    short_directory,
)


@pytest.fixture
def anyio_backend() -> str:
    return "trio"  # these tests are about the service and its processes, not the client's loop


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def nested(depth: int) -> bytes:
    """JSON arrays ``depth`` deep, written out (``json.dumps`` would recurse that deep too)."""
    return b"[" * depth + b"]" * depth


# -- frames ----------------------------------------------------------------------------------------


async def test_a_frame_nested_too_deep_gets_an_error_and_harms_no_one(workspace: Path) -> None:
    with running_service(workspace) as service:
        async with open_leases(service.url, workspace) as bystander:
            assert isinstance(bystander, UnixLeaseClient)
            held = await bystander.acquire([writes("x")])
            frames = [
                raw(b"[" * 200_000),  # json.loads raises RecursionError: the service died of it
                raw(b'{"v":1,"op":"ping","n":1,"pad":' + nested(40) + b"}"),
                raw(
                    b'{"v":1,"op":"acquire","n":2,"claims":[{"r":"device","m":'
                    + nested(500)
                    + b"}]}"
                ),
                frame({"op": "ping", "n": 3}),
            ]
            replies = await anyio.to_thread.run_sync(
                raw_exchange, service.socket, b"".join(frames), 4
            )
            assert [r["ok"] for r in replies] == [False, False, False, True]
            for reply in replies[:3]:
                assert reply["error"]["type"] == "ProtocolError"  # type: ignore[index]
                assert "nested deeper than" in reply["error"]["message"]  # type: ignore[index]
            assert (await bystander.status())["held"] == 1
            bystander.release(held)
            bystander.release(await bystander.acquire([writes("x")]))


async def publish_raw(client: UnixLeaseClient, grant: Grant, **change: object) -> None:
    """Ask the service to make ``change`` under ``grant``, as a hostile client would (this
    client sends only what its ops encode to)."""
    message = {"op": "publish", "of": client._held[grant.id], "token": grant.token, **change}
    number, pending = client._send(message)
    await pending.event.wait()
    client._answer(number, pending)


async def test_a_time_to_publish_past_time_t_is_an_error_reply(workspace: Path) -> None:
    (workspace / "a").write_text("")
    with running_service(workspace) as service:
        async with open_leases(service.url, workspace) as client:
            assert isinstance(client, UnixLeaseClient)
            grant = await client.acquire([writes("a")])
            # os.utime raised OverflowError, and the service died of it.
            with pytest.raises(ValueError, match="time_t"):
                await publish_raw(client, grant, kind="utime", target=["a"], ns=[10**30, 0])
            await publish_raw(client, grant, kind="utime", target=["a"], ns=[10**9, 2 * 10**9])
            assert (workspace / "a").stat().st_mtime == 2
            client.release(grant)


async def test_a_change_to_publish_outside_the_root_is_refused(workspace: Path) -> None:
    (workspace / "a").mkdir()
    with running_service(workspace) as service:
        async with open_leases(service.url, workspace) as client:
            assert isinstance(client, UnixLeaseClient)
            grant = await client.acquire([writes("a")])
            # Covered by the claim on "a"; the directories to it were opened from the root one
            # component at a time, so the service made "outside" beside the root.
            with pytest.raises(PathEscapeError):
                target = ["a", "..", "..", "outside"]
                await publish_raw(client, grant, kind="mkdir", target=target, mode=0o755)
            assert not (workspace.parent / "outside").exists()
            await publish_raw(client, grant, kind="mkdir", target=["a", ".", "b"], mode=0o755)
            assert (workspace / "a" / "b").is_dir()  # a key spelled another way is that key
            client.release(grant)


@asynccontextmanager
async def serving_here(workspace: Path) -> AsyncIterator[str]:
    """:func:`serve` in this process (so a test can patch it); yields its socket's path."""
    path = os.path.join(short_directory(), "s.sock")
    printed = io.StringIO()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(lambda: serve(workspace, socket_path=path, out=printed))
        with anyio.fail_after(5):
            while not printed.getvalue():  # noqa: ASYNC110 (it prints once it listens)
                await anyio.sleep(0.01)
        yield path
        tasks.cancel_scope.cancel()
    os.rmdir(os.path.dirname(path))


@pytest.mark.parametrize("where", ["reader", "writer"])
async def test_a_bug_met_by_one_connection_drops_that_connection_only(
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    """An exception nothing expects (a bug) in one connection's tasks: that connection is
    dropped, its leases released, a line on stderr; the service and its other clients go on."""
    import toolkernel.leases._service as service_module

    handle_message, batched = LeaseService.handle_message, service_module.batched

    def buggy_handle(self: LeaseService, connection: object, message: dict[str, object]) -> object:
        if message.get("n") == 666:
            raise RuntimeError("a bug in a handler")
        return handle_message(self, connection, message)  # type: ignore[arg-type]

    def buggy_batched(first: bytes, frames: object) -> bytes:
        data = batched(first, frames)
        if b'"re":666' in data:
            raise RuntimeError("a bug in the writer")
        return data

    if where == "reader":
        monkeypatch.setattr(LeaseService, "handle_message", buggy_handle)
    else:
        monkeypatch.setattr(service_module, "batched", buggy_batched)
    async with (
        serving_here(workspace) as path,
        open_leases(f"unix:{path}", workspace) as bystander,
    ):
        assert isinstance(bystander, UnixLeaseClient)
        held = await bystander.acquire([writes("x")])
        victim = frame(
            {"op": "acquire", "n": 1, "claims": [{"r": "path", "p": ["y"], "m": "exclusive"}]}
        ) + frame({"op": "ping", "n": 666})
        replies = await anyio.to_thread.run_sync(raw_exchange, path, victim)
        assert all(r.get("re") == 1 for r in replies)  # the grant at most: then dropped
        with anyio.fail_after(2):
            bystander.release(await bystander.acquire([writes("y")]))  # its lease went back
        assert (await bystander.status())["connections"] == 1
        bystander.release(held)
    [line] = capsys.readouterr().err.splitlines()
    assert "dropped after an unexpected error: RuntimeError: a bug in" in line


# -- a client that takes more than its share -------------------------------------------------------


def acquire_frame(number: int, target: str) -> bytes:
    return frame(
        {"op": "acquire", "n": number, "claims": [{"r": "path", "p": [target], "m": "exclusive"}]}
    )


async def test_a_client_that_never_reads_its_replies_costs_the_service_little(
    workspace: Path,
) -> None:
    """Its replies wait for it, within a bound: past it, the service reads no more of its
    frames, and the TTL ends it, as it is not heard. The others are served meanwhile."""
    with running_service(workspace, ttl=1.0) as service:
        async with open_leases(service.url, workspace) as bystander:
            assert bystander is not None
            before = memory(service)
            # Each reply is three times its frame: the unknown op is quoted back, escaped.
            payload = raw(b'{"v":1,"n":2,"op":"' + "é".encode() * 4000 + b'"}')
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as hog:
                hog.connect(service.socket)
                hog.sendall(acquire_frame(1, "x"))
                await anyio.to_thread.run_sync(send_until_blocked, hog, payload, 64 << 20)
                # It sent all 64 MiB, each frame read and answered: 190 MiB more, kept for it.
                assert memory(service) - before < 16 << 20
                with anyio.fail_after(1):  # not delayed by the replies waiting for the hog
                    bystander.release(await bystander.acquire([writes("y")]))
                with anyio.fail_after(3):
                    bystander.release(await bystander.acquire([writes("x")]))


def read_slowly(sock: socket.socket, grants: int, slow_for: float) -> int:
    """Read 32 KiB every 50 ms for ``slow_for`` seconds, with a ping every 0.1 s, then as fast
    as it comes until ``grants`` grants came; how many came (fewer if the service hung up)."""
    sock.settimeout(5)
    data = bytearray()
    got = 0
    started = next_ping = time.monotonic()
    while got < grants:
        slow = time.monotonic() - started < slow_for
        if slow and time.monotonic() >= next_ping:
            sock.sendall(frame({"op": "ping", "n": 0}))
            next_ping += 0.1
        chunk = sock.recv(1 << 15 if slow else 1 << 20)
        if not chunk:
            break
        data += chunk
        while len(data) >= HEADER_SIZE and len(data) >= HEADER_SIZE + frame_length(data[:4]):
            end = HEADER_SIZE + frame_length(data[:4])
            got += "lease" in parse_frame(bytes(data[HEADER_SIZE:end]))
            del data[:end]
        if slow:
            time.sleep(0.05)
    return got


async def test_a_client_slow_to_read_its_grants_is_not_taken_for_silent(workspace: Path) -> None:
    """40,000 grants at once (2.7 MiB) to a client reading 640 KiB a second: its frames wait
    unread for two TTLs, and it keeps every grant (writes it takes are signs of life)."""
    with running_service(workspace, ttl=1.0) as service:
        async with open_leases(service.url, workspace) as writer:
            assert writer is not None
            held = await writer.acquire([writes("hot")])
            shared = [{"r": "path", "p": ["hot"], "m": "shared"}]
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as reader:
                reader.connect(service.socket)
                requests = b"".join(
                    frame({"op": "acquire", "n": n, "claims": shared}) for n in range(1, 40_001)
                )
                await anyio.to_thread.run_sync(reader.sendall, requests)
                while (await writer.status())["waiting"] < 40_000:  # noqa: ASYNC110 (a socket)
                    await anyio.sleep(0.05)
                writer.release(held)
                got = await anyio.to_thread.run_sync(read_slowly, reader, 40_000, 2.0)
                assert got == 40_000
                assert (await writer.status())["held"] == 40_000


async def test_one_connection_may_hold_and_wait_for_so_many_requests(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past its limit, a connection's next request gets an error naming it; its requests held
    and waiting stand, other connections have limits of their own."""
    import toolkernel.leases._service as service_module

    monkeypatch.setattr(service_module, "MAX_REQUESTS", 10)
    async with (
        serving_here(workspace) as path,
        open_leases(f"unix:{path}", workspace) as hog,
        open_leases(f"unix:{path}", workspace) as other,
    ):
        assert isinstance(hog, UnixLeaseClient) and isinstance(other, UnixLeaseClient)
        blocker = await other.acquire([writes("w")])
        held = [await hog.acquire([writes(f"f{n}")]) for n in range(9)]
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(hog.acquire, [writes("w")])  # the tenth: waiting
            await hog.ping()
            with pytest.raises(LeaseServiceError, match="10 requests held or waiting"):
                await hog.acquire([writes("g")])
            more = [await other.acquire([writes(f"f{n}x")]) for n in range(9)]
            hog.release(held.pop())
            held.append(await hog.acquire([writes("g")]))  # room again
            status = await other.status()
            assert (status["held"], status["waiting"]) == (19, 1)
            tasks.cancel_scope.cancel()
        for grant in held:
            hog.release(grant)
        for grant in [blocker, *more]:
            other.release(grant)


async def test_one_connection_s_requests_may_take_so_many_bytes(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the frames of a connection's requests held and waiting add up to is bounded too
    (what a request costs the table grows with its frame)."""
    import toolkernel.leases._service as service_module

    monkeypatch.setattr(service_module, "MAX_REQUEST_BYTES", 4096)
    async with (
        serving_here(workspace) as path,
        open_leases(f"unix:{path}", workspace) as hog,
    ):
        assert isinstance(hog, UnixLeaseClient)
        # Each request's frame is 1 KB and a little: three fit, not a fourth.
        held = [await hog.acquire([writes(name * 1000)]) for name in "abc"]
        with pytest.raises(LeaseServiceError, match="over the 4,096 bytes"):
            await hog.acquire([writes("d" * 1000)])
        hog.release(held.pop())
        held.append(await hog.acquire([writes("d" * 1000)]))
        for grant in held:
            hog.release(grant)


async def test_a_connection_past_the_service_s_limit_gets_an_error_and_is_closed(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import toolkernel.leases._service as service_module

    monkeypatch.setattr(service_module, "MAX_CONNECTIONS", 3)
    async with serving_here(workspace) as path:
        url = f"unix:{path}"
        async with open_leases(url, workspace) as a, open_leases(url, workspace) as b:
            assert isinstance(a, UnixLeaseClient) and b is not None
            async with open_leases(url, workspace):
                with pytest.raises(LeaseServiceError, match="3 connections, the most"):
                    async with open_leases(url, workspace):
                        pass
                # A hello sent after the refusal is heard out (closing on it unread failed the
                # client's write, and it never read why), then the connection is closed.
                hello = frame({"op": "ping", "n": 1})
                [reply] = await anyio.to_thread.run_sync(
                    partial(raw_exchange, path, hello, pause=0.2)
                )
                assert reply["error"]["type"] == "LeaseServiceError"  # type: ignore[index]
                assert (await a.status())["connections"] == 3
                a.release(await a.acquire([writes("x")]))
            while (await a.status())["connections"] > 2:  # noqa: ASYNC110 (the service's count)
                await anyio.sleep(0.01)
            async with open_leases(url, workspace) as newcomer:
                assert newcomer is not None
                newcomer.release(await newcomer.acquire([writes("x")]))


async def test_the_pools_clients_name_are_bounded_in_number(workspace: Path) -> None:
    """A pool a client's hello names stays in the table after it leaves: clients naming new
    ones again and again grew it without bound. Past the limit a hello is refused whole."""
    with running_service(workspace, pools="fixed=1") as service:
        many = {f"a{n}": 1 for n in range(1000)}
        async with open_leases(service.url, workspace, pools=many) as first:
            assert first is not None
            with pytest.raises(LeaseServiceError, match="1,024 pools at the most"):
                async with open_leases(
                    service.url,
                    workspace,
                    pools={"a1": 1, "b": 1, **{f"c{n}": 1 for n in range(30)}},
                ):
                    pass
            last = {"a1": 1, **{f"c{n}": 1 for n in range(23)}}  # 1 + 1,000 + 23
            async with open_leases(service.url, workspace, pools=last) as third:
                assert third is not None
                third.release(await third.acquire([units(pool("c3"), 1)]))
                with pytest.raises(UnknownPoolError):
                    await third.acquire([units(pool("b"), 1)])  # not made by the one refused


def trickle(sock: socket.socket, seconds: float) -> bytes:
    """Send a byte every 50 ms for ``seconds`` (or until the peer hangs up); then what the
    peer sends, b"" once it has closed the connection."""
    started = time.monotonic()
    try:
        while time.monotonic() - started < seconds:
            sock.sendall(b" ")
            time.sleep(0.05)
        sock.settimeout(5)
        return sock.recv(1 << 16)
    except (BrokenPipeError, ConnectionResetError):
        return b""


async def test_a_frame_begun_and_never_finished_delays_no_one_and_ends_in_the_ttl(
    workspace: Path,
) -> None:
    """A slow loris: the header of a 1 MiB frame, then a byte now and then. Only whole frames
    are heard from a client, so it is dropped after its TTL, its lease released."""
    with running_service(workspace, ttl=0.5) as service:
        async with open_leases(service.url, workspace) as bystander:
            assert bystander is not None
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as loris:
                loris.connect(service.socket)
                loris.sendall(acquire_frame(1, "x") + (1 << 20).to_bytes(4, "big"))
                heard: list[bytes] = []

                async def send_slowly() -> None:
                    heard.append(await anyio.to_thread.run_sync(trickle, loris, 1.5))

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(send_slowly)
                    await anyio.sleep(0.1)
                    for _ in range(10):  # not delayed: its frame is read as it comes
                        with anyio.fail_after(0.5):
                            bystander.release(await bystander.acquire([writes("y")]))
                    with anyio.fail_after(1.5):  # its TTL and a quarter more, then x is free
                        bystander.release(await bystander.acquire([writes("x")]))
                assert heard == [b""]  # closed, though it was still sending


# -- descriptors -----------------------------------------------------------------------------------


async def test_out_of_descriptors_the_service_serves_its_clients_then_accepts_again(
    workspace: Path,
) -> None:
    # 400 connections where 256 descriptors are allowed: accept fails with EMFILE.
    with running_service(workspace, nofile=(256, 256)) as service:
        async with open_leases(service.url, workspace) as existing:
            assert existing is not None
            held = await existing.acquire([writes("x")])
            flood = []
            try:
                for _ in range(400):
                    extra = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    flood.append(extra)
                    extra.settimeout(5)
                    extra.connect(service.socket)  # queued in the backlog past the limit
                await anyio.sleep(0.3)
                assert service.process.poll() is None
                assert await anyio.Path(service.socket).exists()
                existing.release(held)
                existing.release(await existing.acquire([writes("x")]))
            finally:
                for extra in flood:
                    extra.close()
            with anyio.fail_after(5):
                async with open_leases(service.url, workspace) as newcomer:
                    assert newcomer is not None
                    newcomer.release(await newcomer.acquire([writes("x")]))


async def test_the_service_raises_its_soft_descriptor_limit_to_the_hard_one(
    workspace: Path,
) -> None:
    with running_service(workspace, nofile=(256, 1024)) as service:
        limits = resource.prlimit(service.process.pid, resource.RLIMIT_NOFILE)
        assert limits == (1024, 1024)


# -- the service stopped ---------------------------------------------------------------------------


async def test_time_the_service_was_stopped_is_not_its_clients_silence(workspace: Path) -> None:
    ttl = 0.5
    with running_service(workspace, ttl=ttl) as service:
        worker = Worker(service, "y")
        try:
            async with (
                open_leases(service.url, workspace) as a,
                open_leases(service.url, workspace) as b,
                open_leases(service.url, workspace) as c,
            ):
                assert isinstance(a, UnixLeaseClient) and isinstance(b, UnixLeaseClient)
                assert isinstance(c, UnixLeaseClient)
                held = await a.acquire([writes("x")])
                order: list[str] = []
                done = anyio.Event()

                async def wait_for_x(client: UnixLeaseClient, name: str) -> None:
                    grant = await client.acquire([writes("x")])
                    order.append(name)
                    await anyio.sleep(0.05)
                    client.release(grant)
                    if name == "c":
                        done.set()

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(wait_for_x, b, "b")
                    await b.ping()  # b's request is in before c's
                    tasks.start_soon(wait_for_x, c, "c")
                    await c.ping()
                    # The worker goes really silent; the service stops for three TTLs.
                    worker.process.send_signal(signal.SIGSTOP)
                    service.process.send_signal(signal.SIGSTOP)
                    await anyio.sleep(3 * ttl)
                    service.process.send_signal(signal.SIGCONT)
                    await anyio.sleep(ttl / 2)  # every client was dropped by now
                    # a still holds x: its write is made; then b and c get x, in order.
                    (workspace / ".x.a.tktmp").write_text("from a")
                    await anyio.to_thread.run_sync(
                        a.fence(held).publish, Rename((".x.a.tktmp",), ("x",))
                    )
                    assert (workspace / "x").read_text() == "from a"
                    assert order == []
                    a.release(held)
                    with anyio.fail_after(2):
                        await done.wait()
                assert order == ["b", "c"]
                # The worker, silent since, is dropped after its TTL: y comes free.
                with anyio.fail_after(2 * ttl + 1):
                    a.release(await a.acquire([writes("y")]))
        finally:
            worker.process.send_signal(signal.SIGCONT)
            worker.close()


# -- a hostile service -----------------------------------------------------------------------------


@asynccontextmanager
async def fake_service(answer: Callable[[int, dict[str, object]], bytes]) -> AsyncIterator[str]:
    """A listener on a Unix socket that answers each frame a client sends with ``answer(n,
    message)``; yields its ``unix:`` URL."""
    directory = short_directory()
    path = os.path.join(directory, "s.sock")

    async def serve_one(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            reader = BufferedByteReceiveStream(stream)
            try:
                while True:
                    header = await reader.receive_exactly(HEADER_SIZE)
                    message = parse_frame(await reader.receive_exactly(frame_length(header)))
                    await stream.send(answer(int(message["n"]), message))
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                pass

    listener = await anyio.create_unix_listener(path)
    try:
        async with listener, anyio.create_task_group() as tasks:
            tasks.start_soon(listener.serve, serve_one)
            yield f"unix:{path}"
            tasks.cancel_scope.cancel()
    finally:
        os.unlink(path)
        os.rmdir(directory)


def hello_then(grant: bytes) -> Callable[[int, dict[str, object]], bytes]:
    """Answers a hello as the service does, an acquire with ``grant`` (``{n}`` for its number)."""

    def answer(number: int, message: dict[str, object]) -> bytes:
        if message["op"] == "hello":
            return frame({"re": number, "ok": True, "ttl": 10.0, "pid": 1})
        if message["op"] == "acquire":
            return raw(grant.replace(b"{n}", str(number).encode()))
        return b""  # a heartbeat's ping: no answer

    return answer


@pytest.mark.parametrize(
    "grant",
    [
        b"[" * 200_000,  # RecursionError out of json.loads, out of the client's reader
        b'{"v":1,"re":{n},"ok":true,"lease":' + nested(100) + b',"token":1}',
        b'{"v":1,"re":[{n}],"ok":true,"lease":1,"token":1}',  # unhashable: TypeError
        b'{"v":1,"re":true,"ok":true,"lease":1,"token":1}',  # True == 1
        b'{"v":1,"re":{n},"ok":"yes","lease":1,"token":1}',
        b'{"v":1,"re":{n},"ok":true,"token":1}',  # KeyError
        b'{"v":1,"re":{n},"ok":true,"lease":1,"token":"1e9"}',  # ValueError from int()
    ],
    ids=["deep-frame", "deep-field", "re-list", "re-bool", "ok-string", "no-lease", "token-str"],
)
async def test_a_malformed_reply_loses_the_connection_with_a_clear_error(
    workspace: Path, grant: bytes
) -> None:
    async with fake_service(hello_then(grant)) as url, open_leases(url, workspace) as client:
        assert isinstance(client, UnixLeaseClient)
        with anyio.fail_after(5), pytest.raises(LeaseServiceError, match="lost the lease"):
            await client.acquire([writes("x")])
        with pytest.raises(LeaseServiceError):
            await client.acquire([writes("x")])  # the connection is gone


@pytest.mark.parametrize("ttl", [0, -1, "10", None, 1e400])
async def test_a_hello_answered_with_no_usable_ttl_is_a_clear_error(
    workspace: Path, ttl: object
) -> None:
    def answer(number: int, message: dict[str, object]) -> bytes:
        hello = {"re": number, "ok": True, "pid": 1}
        if ttl is not None:
            hello["ttl"] = ttl
        return frame(hello)

    async with fake_service(answer) as url:
        with anyio.fail_after(5), pytest.raises(LeaseServiceError, match="lost the lease"):
            async with open_leases(url, workspace):
                pass


async def test_an_error_reply_naming_a_signal_is_a_refusal_not_that_signal(
    workspace: Path,
) -> None:
    error = json.dumps({"type": "HoldMore", "message": "more"}).encode()
    grant = b'{"v":1,"re":{n},"ok":false,"error":' + error + b"}"
    async with fake_service(hello_then(grant)) as url, open_leases(url, workspace) as client:
        assert client is not None
        with pytest.raises(ValueError, match="refused the request: more"):
            await client.acquire([writes("x")])

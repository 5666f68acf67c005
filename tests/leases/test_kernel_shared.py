"""Kernels sharing leases through a real lease service (``open_kernel(leases="unix:...")``):
conflicting calls of different kernels and processes never overlap, the rest do, and a call's
wait there is bounded, cancellable and fails clearly when the service is gone."""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

import toolkernel as tk
from toolkernel.leases import find_service, open_leases
from toolkernel.leases._client import UnixLeaseClient

from .service_harness import Service, running_service


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One service for the module (it takes a second or more to start): each test's kernels
    close before the next test begins, and that gives back everything they held."""
    with running_service(tmp_path_factory.mktemp("ws")) as running:
        yield running


@pytest.fixture
def own_service(tmp_path: Path) -> Iterator[Service]:
    """A service of the test's own, for a test that kills it."""
    with running_service(tmp_path) as running:
        yield running


class Gates:
    """Events tools wait on and set, by name; and which tools have started."""

    def __init__(self) -> None:
        self.events: dict[str, anyio.Event] = {}
        self.started: list[str] = []

    def __getitem__(self, name: str) -> anyio.Event:
        return self.events.setdefault(name, anyio.Event())


def tools_for(gates: Gates) -> list[tk.KernelTool]:
    @tk.tool(claims=lambda a: [tk.writes(a["path"])])
    async def hold(ctx: tk.ToolContext, path: str, until: str = "", then: str = "") -> str:
        """Hold ``path``: set ``then``, wait for ``until``."""
        gates.started.append(ctx.call_id)
        if then:
            gates[then].set()
        if until:
            await gates[until].wait()
        return "held"

    return [hold]


async def waiting_at_service(service: Service) -> int:
    async with open_leases(service.url, service.root) as backend:
        assert isinstance(backend, UnixLeaseClient)
        status = await backend.status()
        return int(status["waiting"])


async def until_waiting_at_service(service: Service, count: int) -> None:
    """Poll the service (nothing to wait on across processes) until ``count`` requests wait."""
    while await waiting_at_service(service) != count:  # noqa: ASYNC110
        await anyio.sleep(0.02)


async def test_conflicting_calls_of_two_kernels_take_turns_and_the_rest_overlap(
    service: Service,
) -> None:
    gates = Gates()
    tools = tools_for(gates)
    with anyio.fail_after(20):
        async with (
            tk.open_kernel(tools, root=service.root, leases=service.url) as a,
            tk.open_kernel(tools, root=service.root, leases=service.url) as b,
        ):
            first = a.submit(tk.ToolCall("a1", "hold", {"path": "x", "until": "go", "then": "a"}))
            await gates["a"].wait()
            same = b.submit(tk.ToolCall("b1", "hold", {"path": "x"}))
            # On another file, b's call runs while a's holds x: it sets what a's waits for.
            other = b.submit(tk.ToolCall("b2", "hold", {"path": "y", "then": "go"}))
            assert (await other.wait_finished()).ok
            assert (await first.wait_finished()).ok
            assert (await same.wait_finished()).ok
    assert gates.started == ["a1", "b2", "b1"]


async def test_a_call_waiting_at_the_service_is_still_held_back_until_the_holder_ends(
    service: Service,
) -> None:
    gates = Gates()
    tools = tools_for(gates)
    with anyio.fail_after(20):
        async with (
            tk.open_kernel(tools, root=service.root, leases=service.url) as a,
            tk.open_kernel(tools, root=service.root, leases=service.url) as b,
        ):
            first = a.submit(tk.ToolCall("a1", "hold", {"path": "d", "until": "go", "then": "a"}))
            await gates["a"].wait()
            # A file inside the directory a's call holds: hierarchical, across kernels.
            inside = b.submit(tk.ToolCall("b1", "hold", {"path": "d/f.txt"}))
            await until_waiting_at_service(service, 1)
            assert gates.started == ["a1"] and not inside.finished
            gates["go"].set()
            assert (await first.wait_finished()).ok
            assert (await inside.wait_finished()).ok
    assert gates.started == ["a1", "b1"]


async def test_a_wait_at_the_service_times_out_and_is_cancelled_like_any_wait(
    service: Service,
) -> None:
    gates = Gates()
    tools = tools_for(gates)
    with anyio.fail_after(20):
        async with (
            tk.open_kernel(tools, root=service.root, leases=service.url) as a,
            tk.open_kernel(tools, root=service.root, leases=service.url) as b,
        ):
            a.submit(tk.ToolCall("a1", "hold", {"path": "x", "until": "go", "then": "a"}))
            await gates["a"].wait()
            [timed] = await b.run([tk.ToolCall("b1", "hold", {"path": "x"}, wait_timeout=0.2)])
            assert timed.status is tk.Status.TIMEOUT
            assert timed.error_type == "LeaseWaitTimeoutError"
            assert "another process" in (timed.error or "")
            cancelled = b.submit(tk.ToolCall("b2", "hold", {"path": "x"}))
            await until_waiting_at_service(service, 1)
            cancelled.cancel()
            result = await cancelled.wait_finished()
            assert result.status is tk.Status.CANCELLED
            assert await waiting_at_service(service) == 0  # withdrawn there too
            gates["go"].set()
    assert gates.started == ["a1"]


async def test_a_call_fails_clearly_when_the_service_is_gone(own_service: Service) -> None:
    gates = Gates()
    service = own_service
    with anyio.fail_after(20):
        async with tk.open_kernel(tools_for(gates), root=service.root, leases=service.url) as k:
            service.stop(signal.SIGKILL)
            [result] = await k.run([tk.ToolCall("c1", "hold", {"path": "x"})])
    assert result.status is tk.Status.ERROR
    assert result.error_type == "LeaseServiceError"
    assert gates.started == []


def test_leases_need_a_root_and_a_url_we_can_read() -> None:
    async def open_with(**options: object) -> None:
        async with tk.open_kernel([], **options):  # type: ignore[arg-type]
            pass

    with pytest.raises(ValueError, match="needs a root"):
        anyio.run(lambda: open_with(leases="unix:/tmp/x.sock"))
    with pytest.raises(ValueError, match="etcd://host:port"):
        anyio.run(lambda: open_with(root=".", leases="http://example"))


async def test_a_socket_no_service_listens_on_says_how_to_start_one(tmp_path: Path) -> None:
    missing = tmp_path / "missing.sock"
    with pytest.raises(tk.errors.LeaseServiceError) as raised:
        async with tk.open_kernel([], root=tmp_path, leases=f"unix:{missing}"):
            pass
    message = str(raised.value)
    assert f"no lease service listens at {missing} (there is no such socket)" in message
    assert f"python -m toolkernel serve --root {tmp_path} --socket {missing}" in message
    assert 'leases="auto"' in message
    assert isinstance(raised.value.__cause__, FileNotFoundError)


async def test_an_etcd_that_does_not_answer_is_a_lease_service_error(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once it is closed
    with pytest.raises(tk.errors.LeaseServiceError) as raised:
        async with tk.open_kernel([], root=tmp_path, leases=f"etcd://127.0.0.1:{port}"):
            pass
    message = str(raised.value)
    assert message.startswith(f"no session could be opened with etcd at http://127.0.0.1:{port} (")
    assert message.endswith("or keep the leases in this process (leases=None)")
    assert type(raised.value.__cause__).__name__ == "ConnectError"  # httpx's, kept as the cause


async def test_a_socket_left_by_a_stopped_service_says_so(tmp_path: Path) -> None:
    stale = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bound:
        bound.bind(str(stale))  # bound, never listening: connecting is refused
        with pytest.raises(tk.errors.LeaseServiceError, match="nothing accepts on it"):
            async with tk.open_kernel([], root=tmp_path, leases=f"unix:{stale}"):
                pass


_HOLDER = textwrap.dedent(
    """
    import sys, time, trio
    import toolkernel as tk

    @tk.tool(claims=lambda a: [tk.writes("x")])
    async def hold(ctx: tk.ToolContext) -> None:
        print("started", flush=True)
        await trio.sleep(float(sys.argv[3]))
        print("done", time.time(), flush=True)

    async def main() -> None:
        async with tk.open_kernel([hold], root=sys.argv[1], leases=sys.argv[2]) as k:
            [result] = await k.run([tk.ToolCall("p1", "hold", {})])
            assert result.ok, result.error

    trio.run(main)
    """
)


def _holder(service: Service, seconds: float) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(service.root), service.url, str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "started"
    return process


@pytest.mark.parametrize("killed", [False, True])
async def test_a_call_waits_for_another_process_holding_its_file_or_for_its_death(
    service: Service, killed: bool
) -> None:
    gates = Gates()
    holder = _holder(service, 30.0 if killed else 0.5)
    try:
        async with tk.open_kernel(tools_for(gates), root=service.root, leases=service.url) as k:
            assert k.leases == service.url
            if killed:
                holder.kill()  # its leases return the moment its connection goes
            with anyio.fail_after(20):
                [result] = await k.run([tk.ToolCall("c1", "hold", {"path": "x"})])
            started_at = time.time()
        assert result.ok
        holder.wait(10)
        if not killed:
            assert holder.stdout is not None
            done_line = holder.stdout.read().split()
            assert done_line[0] == "done" and float(done_line[1]) <= started_at
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def _serve_at_the_default_socket(root: Path) -> Service:
    command = [sys.executable, "-m", "toolkernel", "serve", "--root", str(root)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return Service(process, root, process.stdout.readline().strip())


async def test_auto_finds_the_service_serving_the_root_or_keeps_leases_in_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gates = Gates()
    tools = tools_for(gates)
    caplog.set_level(logging.INFO, logger="toolkernel.leases")
    with anyio.fail_after(20):
        async with tk.open_kernel(tools, root=tmp_path, leases="auto") as alone:
            [result] = await alone.run([tk.ToolCall("c0", "hold", {"path": "x"})])
            assert result.ok  # no service: in-process leases
            assert alone.leases == "in-process"
    # The fall-back is said once, at the open, with why and what to do.
    [fell_back] = caplog.records
    assert fell_back.levelno == logging.WARNING
    said = fell_back.getMessage()
    assert said.startswith(f'leases="auto": no lease service serves {tmp_path}')
    assert "keeps its leases in-process" in said
    assert f"python -m toolkernel serve --root {tmp_path}" in said
    caplog.clear()
    service = _serve_at_the_default_socket(tmp_path)
    try:
        assert find_service(tmp_path) == service.url
        with anyio.fail_after(20):
            async with (
                tk.open_kernel(tools, root=tmp_path, leases="auto") as a,
                tk.open_kernel(tools, root=tmp_path, leases="auto") as b,
            ):
                assert a.leases == b.leases == service.url
                assert [r.levelno for r in caplog.records] == [logging.INFO] * 2
                assert service.url in caplog.records[0].getMessage()
                first = a.submit(
                    tk.ToolCall("a1", "hold", {"path": "x", "until": "go", "then": "a"})
                )
                await gates["a"].wait()
                second = b.submit(tk.ToolCall("b1", "hold", {"path": "x"}))
                await until_waiting_at_service(service, 1)  # b's call waits there, behind a's
                gates["go"].set()
                assert (await first.wait_finished()).ok and (await second.wait_finished()).ok
    finally:
        service.stop()
    assert gates.started == ["c0", "a1", "b1"]

"""The lease service under faults, with clients in other processes: a client killed or paused
mid-hold, the service killed and restarted, hostile frames; and the fence's checks."""

from __future__ import annotations

import itertools
import json
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from toolkernel import InvalidClaimError
from toolkernel.errors import FencedOutError, LeaseServiceError, PathChangedError
from toolkernel.leases import (
    Chmod,
    MakeDirectory,
    RemoveDirectory,
    Rename,
    SetTimes,
    Unlink,
    open_leases,
)
from toolkernel.leases._client import UnixLeaseClient
from toolkernel.leases._fencing import SCRATCH_SUFFIX, is_scratch
from toolkernel.leases._wire import frame
from toolkernel.locks import device, exclusive, reads, writes
from toolkernel.tools import _fileops

from .service_harness import (
    WORKER,
    Service,
    Worker,
    raw,
    raw_exchange,
    running_service,
    start_service,
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def worker_of(workspace: Path) -> Iterator[object]:
    workers: list[Worker] = []

    def start(service: Service, target: str) -> Worker:
        workers.append(Worker(service, target))
        return workers[-1]

    yield start
    for worker in workers:
        worker.close()


async def test_a_client_killed_mid_hold_releases_at_once(
    workspace: Path, worker_of: object
) -> None:
    with running_service(workspace) as service:
        worker = worker_of(service, "x")  # type: ignore[operator]
        async with open_leases(service.url, workspace) as mine:
            assert mine is not None
            with anyio.move_on_after(0.2) as scope:
                await mine.acquire([writes("x")])
            assert scope.cancelled_caught  # it is held over there
            worker.process.send_signal(signal.SIGKILL)
            started = time.monotonic()
            with anyio.fail_after(3):
                grant = await mine.acquire([writes("x")])
            assert time.monotonic() - started < 1.5  # no TTL wait: the socket closed
            assert grant.token > worker.token
            mine.release(grant)


async def test_a_client_paused_past_its_ttl_is_fenced_out(
    workspace: Path, worker_of: object
) -> None:
    with running_service(workspace, ttl=0.6) as service:
        worker = worker_of(service, "x")  # type: ignore[operator]
        assert worker.tell("publish from-worker") == "ok"
        assert (workspace / "x").read_text() == "from-worker"
        worker.process.send_signal(signal.SIGSTOP)
        try:
            async with open_leases(service.url, workspace) as mine:
                assert isinstance(mine, UnixLeaseClient)
                with anyio.fail_after(5):
                    grant = await mine.acquire([writes("x")])  # after the worker's TTL
                assert grant.token > worker.token
                (workspace / ".x.mine.tktmp").write_text("mine")
                await anyio.to_thread.run_sync(
                    mine.fence(grant).publish, Rename((".x.mine.tktmp",), ("x",))
                )
                worker.process.send_signal(signal.SIGCONT)
                # Its late write is refused, and ours stands.
                reply = await anyio.to_thread.run_sync(worker.tell, "publish late")
                assert reply == "fenced"
                assert (workspace / "x").read_text() == "mine"
                mine.release(grant)
        finally:
            worker.process.send_signal(signal.SIGCONT)


async def test_a_restarted_service_loses_every_grant_and_clients_learn_it(
    workspace: Path, tmp_path: Path
) -> None:
    socket_path = str(tmp_path / "s.sock") if len(str(tmp_path)) < 90 else None
    with running_service(workspace) as service:
        async with open_leases(service.url, workspace) as client:
            assert isinstance(client, UnixLeaseClient)
            grant = await client.acquire([writes("x")])
            service.stop(signal.SIGKILL)
            os.unlink(service.socket)  # a killed service leaves its socket behind
            restarted = start_service(workspace, service.socket)
            try:
                (workspace / ".x.tktmp").write_text("late")
                with pytest.raises(FencedOutError):
                    await anyio.to_thread.run_sync(
                        client.fence(grant).publish, Rename((".x.tktmp",), ("x",))
                    )
                assert not (workspace / "x").exists()
                client.release(grant)  # lost: no error
                with pytest.raises(LeaseServiceError):
                    await client.acquire([writes("x")])
                async with open_leases(restarted.url, workspace) as fresh:
                    assert fresh is not None
                    again = await fresh.acquire([writes("x")])
                    assert again.token > grant.token
                    fresh.release(again)
            finally:
                restarted.stop()
    del socket_path


def test_no_two_conflicting_grants_overlap_across_processes(
    workspace: Path, tmp_path: Path
) -> None:
    """Three client processes churn random claims; each records its holds (monotonic times,
    which every process on the machine shares); no two conflicting holds overlap."""
    with running_service(workspace, pools="net=2") as service:
        outs = [tmp_path / f"holds-{n}.jsonl" for n in range(3)]
        processes = [
            subprocess.Popen(
                [
                    sys.executable,
                    WORKER,
                    "churn",
                    service.url,
                    str(workspace),
                    str(n),
                    "40",
                    str(out),
                ],
                stdin=subprocess.PIPE,
            )
            for n, out in enumerate(outs)
        ]
        # Every worker connected before any churns: else, on a loaded machine, one may be done
        # before the next has started and nothing overlaps.
        deadline = time.monotonic() + 60
        while not all(out.with_name(out.name + ".ready").exists() for out in outs):
            assert time.monotonic() < deadline and all(p.poll() is None for p in processes)
            time.sleep(0.005)
        for process in processes:
            assert process.stdin is not None
            process.stdin.write(b"go\n")
            process.stdin.close()
        for process in processes:
            assert process.wait(timeout=60) == 0
    holds = [
        (n, json.loads(line)) for n, out in enumerate(outs) for line in out.read_text().splitlines()
    ]
    assert len(holds) == 120
    assert len({hold["token"] for _, hold in holds}) == 120
    overlapping = 0
    for (n, a), (m, b) in itertools.combinations(holds, 2):
        if a["start"] < b["end"] and b["start"] < a["end"]:
            overlapping += 1
            assert not conflict(a["claims"], b["claims"]), (n, a, m, b)
    assert overlapping > 0  # the test did run holds side by side


def conflict(a: list[list[object]], b: list[list[object]]) -> bool:
    net = sum(int(u) for name, _, u in a + b if str(name).startswith("pool:"))  # type: ignore[call-overload]
    if net > 2:
        return True
    for (x, x_exclusive, _), (y, y_exclusive, _) in itertools.product(a, b):
        if str(x).startswith("pool:") or str(y).startswith("pool:"):
            continue
        xs, ys = str(x).split("/"), str(y).split("/")
        overlaps = xs[: len(ys)] == ys or ys[: len(xs)] == xs
        if overlaps and (x_exclusive or y_exclusive):
            return True
    return False


# -- hostile frames --------------------------------------------------------------------------------


async def test_malformed_frames_get_errors_and_harm_no_one(workspace: Path) -> None:
    with running_service(workspace) as service:
        async with open_leases(service.url, workspace) as bystander:
            assert isinstance(bystander, UnixLeaseClient)
            held = await bystander.acquire([writes("x")])
            frames = [
                raw(b"not json"),
                raw(b"[1, 2]"),
                raw(json.dumps({"v": 99, "op": "ping", "n": 1}).encode()),
                raw(json.dumps({"v": 1, "op": "nope", "n": 2}).encode()),
                raw(json.dumps({"v": 1, "op": "acquire", "n": "three"}).encode()),
                frame(
                    {
                        "op": "acquire",
                        "n": 4,
                        "claims": [{"r": "path", "p": ["..", "etc"], "m": "exclusive"}],
                    }
                ),
                frame({"op": "acquire", "n": 5, "claims": [{"r": "moon", "m": "shared"}]}),
                frame({"op": "acquire", "n": 6, "claims": "all"}),
                frame(
                    {
                        "op": "publish",
                        "n": 7,
                        "of": 1,
                        "token": 1,
                        "kind": "unlink",
                        "target": ["x"],
                    }
                ),
                frame({"op": "release", "n": 8, "of": 12345}),
                frame({"op": "ping", "n": 9}),
            ]
            replies = await anyio.to_thread.run_sync(
                raw_exchange, service.socket, b"".join(frames), 10
            )
            assert [r.get("ok") for r in replies] == [False] * 9 + [True]
            assert replies[-1]["re"] == 9
            errors = [r["error"]["type"] for r in replies[:9]]  # type: ignore[index]
            assert errors[5] == "PathEscapeError" and errors[8] == "FencedOutError"
            # A length prefix past the limit: an error, and the connection is closed.
            replies = await anyio.to_thread.run_sync(
                raw_exchange, service.socket, struct.pack(">I", 1 << 30) + b"x" * 100, 1
            )
            assert [r["ok"] for r in replies] == [False]
            # A truncated frame, then the peer goes: nothing held, nothing broken.
            await anyio.to_thread.run_sync(raw_exchange, service.socket, b"\x00\x00\x01")
            with anyio.fail_after(10):  # the service sees those peers go
                while (status := await bystander.status())["connections"] != 1:  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            assert status["held"] == 1
            bystander.release(held)
            with pytest.raises(InvalidClaimError):
                await bystander.acquire([writes("a/../../b")])  # refused before sending


# -- the fence -------------------------------------------------------------------------------------


async def test_the_fence_makes_each_kind_of_change_beneath_the_root_only_if_covered(
    workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "escape").symlink_to(outside)
    (workspace / "f").write_text("old")
    with running_service(workspace) as service:
        async with open_leases(service.url, workspace) as client:
            assert isinstance(client, UnixLeaseClient)

            async def publish(grant: object, op: object) -> None:
                await anyio.to_thread.run_sync(client.fence(grant).publish, op)  # type: ignore[arg-type]

            grant = await client.acquire([writes("d"), writes("f"), writes("escape")])
            await publish(grant, MakeDirectory(("d",), 0o755))
            await publish(grant, Chmod(("d",), 0o700))
            assert (workspace / "d").stat().st_mode & 0o777 == 0o700
            await publish(grant, SetTimes(("f",), (10**9, 2 * 10**9)))
            assert (workspace / "f").stat().st_mtime == 2
            (workspace / "d" / ".g.tktmp").write_text("new")
            await publish(grant, Rename(("d", ".g.tktmp"), ("d", "g")))
            await publish(grant, Unlink(("d", "g")))
            await publish(grant, RemoveDirectory(("d",)))
            assert not (workspace / "d").exists()
            # A link is never followed out of the root.
            (outside / ".h.tktmp").write_text("x")
            with pytest.raises(PathChangedError):
                await publish(grant, Unlink(("escape", "h")))
            with pytest.raises(PathChangedError):
                await publish(grant, Chmod(("escape",), 0o777))
            # Not covered: refused, nothing changed.
            with pytest.raises(PermissionError):
                await publish(grant, Unlink(("other",)))
            with pytest.raises(PermissionError):
                await publish(grant, Rename(("f",), ("g",)))
            # From a directory outside the workspace (a sandbox's upper layer): staged beside
            # the target first, then made visible by the service.
            upper = tmp_path / "upper"
            upper.mkdir()
            (upper / "new").write_text("from the sandbox")
            fd = os.open(upper, os.O_RDONLY | os.O_DIRECTORY)
            try:
                await publish(grant, Rename(("new",), ("f",), source_dir=fd))
            finally:
                os.close(fd)
            assert (workspace / "f").read_text() == "from the sandbox"
            assert sorted(os.listdir(workspace)) == ["escape", "f"]
            client.release(grant)
            with pytest.raises(FencedOutError):
                await publish(grant, Unlink(("f",)))
            shared = await client.acquire([reads("f"), exclusive(device("phone"))])
            with pytest.raises(PermissionError):
                await publish(shared, Unlink(("f",)))
            client.release(shared)


def test_scratch_names_are_the_ones_the_write_paths_use() -> None:
    assert SCRATCH_SUFFIX == _fileops.TEMP_SUFFIX
    assert is_scratch((".a.txt.0123456789ab" + _fileops.TEMP_SUFFIX,))
    aside = ".build" + _fileops._ASIDE_INFIX + "0123456789ab"
    assert _fileops.moved_aside(aside) and is_scratch(("d", aside))
    assert not is_scratch(("a.txt",)) and not is_scratch(("x.tktmp",))

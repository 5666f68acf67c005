"""A real etcd on loopback for the tests and the benchmark: one member or a cluster of three.

Uses the ``etcd`` binary on PATH (Debian: ``apt-get install etcd-server``); ``ETCD`` is None
without one, and callers skip. Members run with short heartbeats and elections, so a lease TTL
of one second is allowed (etcd's minimum TTL is 1.5 election timeouts) and a killed member's
absence is noticed quickly.
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import attrs

from toolkernel.leases._etcd import root_id

ETCD = shutil.which("etcd")
MISSING = "etcd is not installed (Debian: apt-get install etcd-server)"


def free_ports(n: int) -> list[int]:
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@attrs.define
class Member:
    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def client_url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"


@attrs.define
class Cluster:
    members: list[Member]
    initial_cluster: str

    def url(self, index: int = 0, ttl: float | None = None) -> str:
        """The ``leases=`` URL of member ``index``."""
        url = f"etcd://127.0.0.1:{self.members[index].client_port}"
        return url if ttl is None else f"{url}?ttl={ttl:g}"

    def start(self, index: int) -> None:
        member = self.members[index]
        assert ETCD is not None
        with member.log.open("ab") as log:
            member.process = subprocess.Popen(
                [
                    ETCD,
                    "--name", member.name,
                    "--data-dir", str(member.data_dir),
                    "--listen-client-urls", member.client_url,
                    "--advertise-client-urls", member.client_url,
                    "--listen-peer-urls", member.peer_url,
                    "--initial-advertise-peer-urls", member.peer_url,
                    "--initial-cluster", self.initial_cluster,
                    "--initial-cluster-state", "new",
                    "--heartbeat-interval", "50",
                    "--election-timeout", "500",
                    "--log-level", "warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip

    def kill(self, index: int) -> None:
        """SIGKILL member ``index`` and wait for it to be gone."""
        process = self.members[index].process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()

    def wait_ready(self, deadline: float = 15.0) -> None:
        """Wait until every running member says it is healthy (it has a leader)."""
        end = time.monotonic() + deadline
        for member in self.members:
            if member.process is None or member.process.poll() is not None:
                continue
            while True:
                health = member.client_url + "/health"
                with contextlib.suppress(OSError, ValueError), urllib.request.urlopen(health) as r:
                    if json.loads(r.read()).get("health") == "true":
                        break
                if time.monotonic() > end:
                    raise TimeoutError(f"etcd member {member.name} not healthy: see {member.log}")
                time.sleep(0.05)

    def stop(self) -> None:
        for index in range(len(self.members)):
            self.kill(index)


def start_cluster(directory: Path, size: int = 1, data: Path | None = None) -> Cluster:
    """Start ``size`` members on free loopback ports, their logs beneath ``directory`` and
    their data beneath ``data`` (default: ``directory``)."""
    directory.mkdir(parents=True, exist_ok=True)
    data = directory if data is None else data
    ports = free_ports(2 * size)
    members = [
        Member(
            f"m{i}",
            ports[2 * i],
            ports[2 * i + 1],
            data / f"m{i}",
            directory / f"m{i}.log",
        )
        for i in range(size)
    ]
    cluster = Cluster(members, ",".join(f"{m.name}={m.peer_url}" for m in members))
    for index in range(size):
        cluster.start(index)
    try:
        cluster.wait_ready()
    except BaseException:
        cluster.stop()
        raise
    return cluster


@contextlib.contextmanager
def running_cluster(
    directory: Path, size: int = 1, *, in_memory: bool = False
) -> Iterator[Cluster]:
    """A cluster for the length of the block. With ``in_memory`` (the tests), its data is kept
    on a memory file system (``/dev/shm``) where the system has one: etcd syncs every write to
    disk, and a disk busy with the rest of the suite made a write slower than the client's
    limit (TTL / 3). The benchmark keeps it on disk, as etcd is run."""
    shm = Path("/dev/shm")
    place = in_memory and shm.is_dir()
    data = Path(tempfile.mkdtemp(prefix="toolkernel-etcd-", dir=shm)) if place else None
    try:
        cluster = start_cluster(directory, size, data)
        try:
            yield cluster
        finally:
            cluster.stop()
    finally:
        if data is not None:
            shutil.rmtree(data, ignore_errors=True)


def queue_keys(cluster: Cluster, root: Path) -> list[str]:
    """The request keys etcd holds for ``root``, read past the client under test."""
    prefix = f"/toolkernel/{root_id(root)}/queue/".encode()
    body = {
        "key": base64.b64encode(prefix).decode(),
        "range_end": base64.b64encode(prefix[:-1] + b"0").decode(),
        "keys_only": True,
    }
    request = urllib.request.Request(
        cluster.members[0].client_url + "/v3/kv/range", json.dumps(body).encode()
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        answer = json.loads(response.read())
    return [base64.b64decode(kv["key"]).decode() for kv in answer.get("kvs", ())]


def put_key(cluster: Cluster, root: Path, name: str, value: bytes) -> str:
    """Put a request key of ``root`` holding ``value``, as a broken or hostile client might (in
    no session: it stays until :func:`delete_key`); its key."""
    key = f"/toolkernel/{root_id(root)}/queue/{name}"
    body = {
        "key": base64.b64encode(key.encode()).decode(),
        "value": base64.b64encode(value).decode(),
    }
    request = urllib.request.Request(
        cluster.members[0].client_url + "/v3/kv/put", json.dumps(body).encode()
    )
    with urllib.request.urlopen(request, timeout=5):
        pass
    return key


def delete_key(cluster: Cluster, key: str) -> None:
    body = {"key": base64.b64encode(key.encode()).decode()}
    request = urllib.request.Request(
        cluster.members[0].client_url + "/v3/kv/deleterange", json.dumps(body).encode()
    )
    with urllib.request.urlopen(request, timeout=5):
        pass

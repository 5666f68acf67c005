"""Start a real lease service (``python -m toolkernel serve``) in a child process, for tests;
a client of it in a process of its own (:class:`Worker`); raw frames sent to it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import attrs


@attrs.define
class Service:
    process: subprocess.Popen[str]
    root: Path
    socket: str

    @property
    def url(self) -> str:
        return f"unix:{self.socket}"

    def stop(self, how: signal.Signals = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(how)
        try:
            return self.process.wait(timeout=10)
        finally:
            if self.process.stdout is not None:
                self.process.stdout.close()


# Sets the descriptor limit (soft, hard) given after it, then becomes the command after that,
# as `ulimit -n` before a command would (same process, so the pid is the service's).
_LIMITED = (
    "import os, resource, sys; "
    "resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[2]))); "
    "os.execv(sys.argv[3], sys.argv[3:])"
)


def start_service(
    root: Path,
    socket: str,
    *,
    ttl: float = 10.0,
    pools: str = "",
    nofile: tuple[int, int] | None = None,
) -> Service:
    """``nofile``: the service's RLIMIT_NOFILE (soft, hard) as it starts."""
    command = [sys.executable, "-m", "toolkernel", "serve", "--root", str(root)]
    command += ["--socket", socket, "--ttl", str(ttl)]
    for item in filter(None, pools.split(",")):
        command += ["--pool", item]
    if nofile is not None:
        command = [sys.executable, "-c", _LIMITED, *map(str, nofile), *command]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    printed = process.stdout.readline().strip()
    assert printed == socket, f"the service printed {printed!r}"
    return Service(process, root, socket)


def short_directory() -> str:
    """A directory for sockets: pytest's temporary paths can pass sun_path's 108 bytes."""
    return tempfile.mkdtemp(prefix="tkl-", dir="/tmp")


@contextlib.contextmanager
def running_service(
    root: Path, *, ttl: float = 10.0, pools: str = "", nofile: tuple[int, int] | None = None
) -> Iterator[Service]:
    directory = short_directory()
    service = start_service(
        root, os.path.join(directory, "s.sock"), ttl=ttl, pools=pools, nofile=nofile
    )
    try:
        yield service
    finally:
        if service.process.poll() is None:
            service.stop(signal.SIGKILL)
        for left in (service.socket, service.socket + ".lock"):  # a killed service's
            with contextlib.suppress(OSError):
                os.unlink(left)
        os.rmdir(directory)


WORKER = str(Path(__file__).with_name("lease_worker.py"))


class Worker:
    """A client process holding an exclusive lease on one path (``lease_worker.py hold``)."""

    def __init__(self, service: Service, target: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, WORKER, "hold", service.url, str(service.root), target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.token = int(self.line().split()[1])

    def line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def tell(self, command: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.line()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


def raw_exchange(
    path: str, payload: bytes, expect: int = 0, *, pause: float = 0.0
) -> list[dict[str, object]]:
    """Send ``payload`` on a fresh connection (``pause`` seconds after connecting); read
    ``expect`` replies, or until the service closes the connection (or, expecting none, a short
    while)."""
    replies: list[dict[str, object]] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        time.sleep(pause)
        sock.sendall(payload)
        sock.settimeout(10 if expect else 0.5)
        data = b""
        try:
            while len(replies) < expect or not expect:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
                while len(data) >= 4 and len(data) >= 4 + struct.unpack(">I", data[:4])[0]:
                    (length,) = struct.unpack(">I", data[:4])
                    replies.append(json.loads(data[4 : 4 + length]))
                    data = data[4 + length :]
        except (TimeoutError, ConnectionResetError):
            pass  # reset: the service closed on a frame it can't read past
    return replies


def raw(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def memory(service: Service) -> int:
    """The service's resident memory, in bytes (Linux)."""
    with open(f"/proc/{service.process.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise LookupError("no VmRSS")


def send_until_blocked(sock: socket.socket, payload: bytes, most: int) -> int:
    """Send ``payload`` again and again on ``sock``, reading nothing, until ``most`` bytes are
    sent or a send waits a second (the peer stopped reading); the bytes sent."""
    sock.settimeout(1)
    sent = 0
    try:
        while sent < most:
            rest = memoryview(payload)
            while rest:  # whole frames only: a part sent is finished before the next
                done = sock.send(rest)
                sent, rest = sent + done, rest[done:]
    except TimeoutError:
        pass
    return sent

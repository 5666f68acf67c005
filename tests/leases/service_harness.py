"""Start a real lease service (``python -m toolkernel serve``) in a child process, for tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
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


def start_service(root: Path, socket: str, *, ttl: float = 10.0, pools: str = "") -> Service:
    command = [sys.executable, "-m", "toolkernel", "serve", "--root", str(root)]
    command += ["--socket", socket, "--ttl", str(ttl)]
    for item in filter(None, pools.split(",")):
        command += ["--pool", item]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    printed = process.stdout.readline().strip()
    assert printed == socket, f"the service printed {printed!r}"
    return Service(process, root, socket)


def short_directory() -> str:
    """A directory for sockets: pytest's temporary paths can pass sun_path's 108 bytes."""
    return tempfile.mkdtemp(prefix="tkl-", dir="/tmp")


@contextlib.contextmanager
def running_service(root: Path, *, ttl: float = 10.0, pools: str = "") -> Iterator[Service]:
    directory = short_directory()
    service = start_service(root, os.path.join(directory, "s.sock"), ttl=ttl, pools=pools)
    try:
        yield service
    finally:
        if service.process.poll() is None:
            service.stop(signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.unlink(service.socket)
        os.rmdir(directory)

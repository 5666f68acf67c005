"""A command dies with the process that started it, and only with it: not with the *thread*
that started it. (Linux's parent-death signal follows the thread; trio starts processes from
worker threads, which end after ten idle seconds, and every command running then was killed.)

Real launchers over real commands, on an overlay and without one.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from toolkernel import sandbox
from toolkernel.sandbox import Overlay
from toolkernel.shell._confine import _LAUNCHER

from ..tools.processes import running_with

COMMAND = ["/bin/sh", "-c", "echo started; sleep 0.3; echo done"]


@pytest.fixture(params=["overlay", "plain"])
def options(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> list[str]:
    if request.param == "plain":
        return []
    if sandbox.unavailable() is not None:
        pytest.skip(f"no sandbox here: {sandbox.unavailable()}")
    (tmp_path / "root").mkdir()
    return Overlay.create(tmp_path / "root").launcher_options()


def test_a_command_outlives_the_thread_that_started_it(options: list[str]) -> None:
    started: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        process = subprocess.Popen(
            [*_LAUNCHER, "--parent", str(os.getpid()), *options, "--", *COMMAND],
            stdout=subprocess.PIPE,
        )
        started.append(process)
        assert process.stdout is not None
        # The launcher has asked to die with its parent by now: the thread ends after that.
        assert process.stdout.readline() == b"started\n"

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    [process] = started
    rest, _ = process.communicate(timeout=30)
    assert (process.returncode, rest) == (0, b"done\n")


def test_a_command_dies_with_the_process_that_started_it(options: list[str]) -> None:
    marker = f"{30 + uuid.uuid4().int % 1000 / 1000:.3f}"  # the command's own `sleep` argument
    command = ["/bin/sh", "-c", f"echo started; sleep {marker}"]
    # The starter names itself as ``--parent``: its pid is known only once it runs.
    starter = (
        "import os, subprocess, sys\n"
        "argv = [str(os.getpid()) if a == 'PARENT' else a for a in sys.argv[1:]]\n"
        "subprocess.Popen(argv).wait()\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", starter, *_LAUNCHER, "--parent", "PARENT", *options, "--", *command],
        stdout=subprocess.PIPE,
    )
    assert parent.stdout is not None
    assert parent.stdout.readline() == b"started\n"
    assert running_with(f"sleep {marker}")
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    parent.stdout.close()
    deadline = time.monotonic() + 5
    while running_with(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert running_with(f"sleep {marker}") == []

"""Virtual time and real child processes: ``assert_serializable`` runs a lone Bash call (the
clock used to leap over the command's real run to the next deadline and time out), and a clock
told to follow processes moves at the real rate only while a child process lives."""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
import time

import anyio
import pytest
import trio

import toolkernel as tk
from toolkernel.testing import (
    VirtualClockEventLoop,
    assert_serializable,
    real_time_for_processes,
    virtual_clock,
)
from toolkernel.tools import builtin_tools


def bash_tools() -> list[tk.Tool]:
    return builtin_tools(bash=True)


def empty_root() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="toolkernel-test-")


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_a_lone_bash_call_is_serializable(backend: str) -> None:
    command = "sleep 0.2; echo hi > a.txt; cat a.txt"
    began = time.perf_counter()
    assert_serializable(
        bash_tools, [tk.ToolCall("c1", "Bash", {"command": command})], empty_root, backend=backend
    )
    assert time.perf_counter() - began >= 0.4  # both runs waited for the command, for real


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_bash_calls_on_one_file_are_serializable(backend: str) -> None:
    calls = [
        tk.ToolCall("c1", "Bash", {"command": "echo one >> log.txt"}),
        tk.ToolCall("c2", "Bash", {"command": "sleep 0.1; echo two >> log.txt"}),
        tk.ToolCall("c3", "Read", {"file_path": "log.txt"}),
    ]
    assert_serializable(bash_tools, calls, empty_root, backend=backend)


async def _sleeps(follow: bool) -> tuple[float, float, float]:
    """(real seconds a virtual 0.3 s sleep takes beside a live child, a virtual 1,000 s sleep
    after it has gone, the virtual time then)."""
    if follow:
        await real_time_for_processes()
    process = await anyio.open_process(["sleep", "0.5"], stdout=subprocess.DEVNULL)
    async with process:
        began = time.perf_counter()
        await anyio.sleep(0.3)
        beside = time.perf_counter() - began
        await process.wait()
    began = time.perf_counter()
    await anyio.sleep(1000)
    return beside, time.perf_counter() - began, anyio.current_time()


def _run(backend: str, follow: bool) -> tuple[float, float, float]:
    if backend == "trio":
        return trio.run(_sleeps, follow, clock=virtual_clock())
    with asyncio.Runner(loop_factory=VirtualClockEventLoop) as runner:
        return runner.run(_sleeps(follow))


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_a_following_clock_moves_at_the_real_rate_only_beside_a_child(backend: str) -> None:
    beside, after, now = _run(backend, follow=True)
    assert 0.25 <= beside < 2.0
    assert after < 0.5  # no child: it leaps again
    assert now >= 1000.45  # the sleep, and the child's last 0.2 s (less its start-up)


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_a_clock_not_told_to_follow_leaps_as_before(backend: str) -> None:
    beside, after, _ = _run(backend, follow=False)
    assert beside < 0.2 and after < 0.5


def test_real_time_for_processes_does_nothing_under_a_real_clock() -> None:
    async def main() -> float:
        await real_time_for_processes()
        began = anyio.current_time()
        await anyio.sleep(0.05)
        return anyio.current_time() - began

    assert 0.05 <= anyio.run(main, backend="trio") < 1
    assert 0.05 <= anyio.run(main, backend="asyncio") < 1

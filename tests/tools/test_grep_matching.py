"""Grep matches off the event loop, and its run timeout (or a cancellation) stops it.

``(a|aa)+$`` on a line of a's followed by something else backtracks exponentially: about 2 s
here for 32 a's with ``re`` on the event-loop thread, which stalled every other call and let the
Grep overrun its own timeout. These tests use the real clock with short durations: the matching
happens in worker threads.
"""

from __future__ import annotations

import pathlib
import time

import anyio
import pytest

import toolkernel as tk
from toolkernel.tools import _search, builtin_tools

CATASTROPHIC = r"(a|aa)+$"


@pytest.fixture
def root(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "slow.txt").write_text("a" * 32 + "!\n")
    (tmp_path / "other.txt").write_text("other\n")
    return tmp_path


async def cpu_seconds_over(seconds: float) -> float:
    """The process's CPU time spent while this (idle) test sleeps ``seconds``."""
    before = time.process_time()
    await anyio.sleep(seconds)
    return time.process_time() - before


async def test_a_catastrophic_pattern_neither_stalls_other_calls_nor_overruns_its_timeout(
    root: pathlib.Path,
) -> None:
    async with tk.open_kernel(builtin_tools(), root=root, run_timeout=0.3) as kernel:
        started = anyio.current_time()
        grep, read = await kernel.run(
            [
                tk.ToolCall("g", "Grep", {"pattern": CATASTROPHIC, "output_mode": "content"}),
                tk.ToolCall("r", "Read", {"file_path": "other.txt"}),
            ]
        )
        took = anyio.current_time() - started
    assert read.status is tk.Status.OK
    assert read.finished_at is not None and grep.finished_at is not None
    assert read.finished_at < grep.finished_at, "the Read waited for the Grep's matching"
    assert grep.status is tk.Status.TIMEOUT, grep.error
    assert took < 1.5, f"the Grep overran its 0.3 s timeout: {took:.2f} s"
    # The search itself was bounded by the deadline: no thread is still grinding (a little
    # room for a thread the loaded machine has not scheduled yet).
    await anyio.sleep(0.2)
    assert await cpu_seconds_over(0.3) < 0.15


async def test_cancelling_a_grinding_grep_returns_at_once_and_its_thread_stops(
    root: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_search, "SEARCH_TIME_LIMIT", 0.6)
    async with tk.open_kernel(builtin_tools(), root=root) as kernel:
        handle = kernel.submit(tk.ToolCall("g", "Grep", {"pattern": CATASTROPHIC}))
        await anyio.sleep(0.1)
        assert not handle.finished
        cancelled_at = anyio.current_time()
        handle.cancel()
        result = await handle.wait_finished()
        assert anyio.current_time() - cancelled_at < 0.3, "cancelling waited for the thread"
    assert result.status is tk.Status.CANCELLED
    await anyio.sleep(1.2)  # the abandoned search runs into SEARCH_TIME_LIMIT (with room to spare)
    assert await cpu_seconds_over(0.3) < 0.15


async def test_a_search_over_the_time_limit_is_an_error_that_says_why(
    root: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_search, "SEARCH_TIME_LIMIT", 0.1)
    async with tk.open_kernel(builtin_tools(), root=root) as kernel:
        (result,) = await kernel.run([tk.ToolCall("g", "Grep", {"pattern": CATASTROPHIC})])
    assert result.status is tk.Status.ERROR
    assert result.error is not None
    assert "pattern '(a|aa)+$' took more than 0.1 s on one file of slow.txt" in result.error
    assert "simplify it" in result.error


async def test_ordinary_patterns_still_match_through_the_worker_threads(
    root: pathlib.Path,
) -> None:
    (root / "many.txt").write_text("".join(f"line {i}\n" for i in range(5000)))
    async with tk.open_kernel(builtin_tools(), root=root) as kernel:
        (result,) = await kernel.run(
            [tk.ToolCall("g", "Grep", {"pattern": r"^line 49\d\d$", "output_mode": "count"})]
        )
    assert result.status is tk.Status.OK, result.error
    assert result.output == "many.txt:100"

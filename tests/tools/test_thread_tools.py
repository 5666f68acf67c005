"""A plain ``def`` tool with ``thread=True`` runs in a worker thread, holding its leases until
the thread returns, even when its call is cancelled or times out meanwhile.

Real threads, so real time: the waits are short.
"""

from __future__ import annotations

import gc
import threading
import warnings
from pathlib import Path

import anyio
import anyio.from_thread
import pytest

import toolkernel as tk
from toolkernel._errors import ToolDeclarationError


async def test_a_plain_def_with_thread_true_runs_in_a_worker_thread(tmp_path: Path) -> None:
    loop_thread = threading.get_ident()

    @tk.tool(claims=lambda args: [], thread=True)
    def where(ctx: tk.ToolContext, tag: str) -> str:
        """Say which thread ran it."""
        return f"{tag} {'worker' if threading.get_ident() != loop_thread else 'loop'}"

    async with tk.open_kernel([where], root=tmp_path) as kernel:
        [result] = await kernel.run([tk.ToolCall("c1", "where", {"tag": "ran in"})])
    assert (result.status, result.output) == (tk.Status.OK, "ran in worker")
    assert where.parameters_schema()["properties"] == {"tag": {"type": "string"}}


async def test_the_context_is_reached_from_the_thread_through_the_loop(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello")

    @tk.tool(reads=["path"], thread=True)
    def shout(ctx: tk.ToolContext, path: str) -> str:
        """Read a file, louder."""
        return anyio.from_thread.run(ctx.fs.read_text, path).upper()

    async with tk.open_kernel([shout], root=tmp_path) as kernel:
        [result] = await kernel.run([tk.ToolCall("c1", "shout", {"path": "a.txt"})])
    assert (result.status, result.output) == (tk.Status.OK, "HELLO")


async def test_a_cancelled_thread_call_holds_its_leases_until_the_thread_returns(
    tmp_path: Path,
) -> None:
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []

    @tk.tool(writes=["path"], thread=True)
    def slow_write(ctx: tk.ToolContext, path: str) -> str:
        """Block until released, then write through the context."""
        entered.set()
        release.wait(10)
        # Cancelled meanwhile, it still holds the file: its context works to the end.
        anyio.from_thread.run(ctx.fs.write_text, path, "from the thread\n")
        order.append("thread returned")
        return "written"

    @tk.tool(writes=["path"])
    async def quick_write(ctx: tk.ToolContext, path: str) -> str:
        """Write at once."""
        order.append("second write started")
        return "written"

    async with tk.open_kernel([slow_write, quick_write], root=tmp_path) as kernel:
        first = kernel.submit(tk.ToolCall("c1", "slow_write", {"path": "a.txt"}))
        second = kernel.submit(tk.ToolCall("c2", "quick_write", {"path": "a.txt"}))
        await anyio.to_thread.run_sync(entered.wait, 10)
        first.cancel()
        await anyio.sleep(0.1)  # time enough for a wrongly released lease to start c2
        assert not first.finished and not second.finished
        assert order == []
        release.set()
        with anyio.fail_after(10):
            cancelled, done = await first.wait_finished(), await second.wait_finished()
    assert order == ["thread returned", "second write started"]
    assert (tmp_path / "a.txt").read_text() == "from the thread\n"
    assert (cancelled.status, cancelled.output) == (tk.Status.CANCELLED, None)
    assert done.status is tk.Status.OK


async def test_a_thread_call_past_its_run_timeout_ends_timeout_when_the_thread_returns(
    tmp_path: Path,
) -> None:
    returned = threading.Event()

    @tk.tool(claims=lambda args: [], thread=True, run_timeout=0.05)
    def sleepy(ctx: tk.ToolContext) -> str:
        """Sleep past the limit."""
        threading.Event().wait(0.3)
        returned.set()
        return "late"

    async with tk.open_kernel([sleepy], root=tmp_path) as kernel:
        [result] = await kernel.run([tk.ToolCall("c1", "sleepy", {})])
    assert returned.is_set()  # the result waited for the thread
    assert (result.status, result.output) == (tk.Status.TIMEOUT, None)


async def test_a_thread_tool_that_raises_is_an_error_result(tmp_path: Path) -> None:
    @tk.tool(claims=lambda args: [], thread=True)
    def broken(ctx: tk.ToolContext) -> str:
        """Fail."""
        raise ValueError("no such thing")

    async with tk.open_kernel([broken], root=tmp_path) as kernel:
        [result] = await kernel.run([tk.ToolCall("c1", "broken", {})])
    assert (result.status, result.error_type) == (tk.Status.ERROR, "ValueError")
    assert "no such thing" in (result.error or "")


async def test_a_tool_subclass_may_run_in_a_thread(tmp_path: Path) -> None:
    class Counter(tk.Tool):
        """Count in a worker thread."""

        name = "Counter"
        thread = True

        def __init__(self) -> None:
            super().__init__(claims=lambda args: [tk.exclusive(tk.device("counter"))])
            self.total = 0

        def run(self, ctx: tk.ToolContext, step: int = 1) -> int:  # type: ignore[override]
            self.total += step
            return self.total

    counter = Counter()
    async with tk.open_kernel([counter], root=tmp_path) as kernel:
        results = await kernel.run([tk.ToolCall(f"c{i}", "Counter", {"step": 2}) for i in range(3)])
    assert [result.output for result in results] == [2, 4, 6]


def test_thread_true_on_an_async_def_is_refused() -> None:
    with pytest.raises(ToolDeclarationError, match="thread=True runs a plain def"):

        @tk.tool(thread=True)
        async def already_async(ctx: tk.ToolContext) -> None: ...


def test_thread_must_be_a_bool() -> None:
    with pytest.raises(ToolDeclarationError, match="thread must be True or False"):

        @tk.tool(thread="yes")  # type: ignore[call-overload]
        def blocking(ctx: tk.ToolContext) -> None: ...


def test_a_plain_def_without_thread_is_still_refused_naming_the_option() -> None:
    with pytest.raises(ToolDeclarationError, match="thread=True") as caught:

        @tk.tool
        def blocking(ctx: tk.ToolContext) -> None: ...

    assert "must be async def" in str(caught.value)


async def test_a_thread_tool_returning_a_coroutine_is_an_error_naming_the_fix(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.txt").write_text("hello")

    @tk.tool(reads=["path"], thread=True)
    def forgot(ctx: tk.ToolContext, path: str) -> str:
        """Read a file without going back to the loop."""
        return ctx.fs.read_text(path)  # type: ignore[return-value]

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine ... was never awaited" would be one
        async with tk.open_kernel([forgot], root=tmp_path) as kernel:
            [result] = await kernel.run([tk.ToolCall("c1", "forgot", {"path": "a.txt"})])
        gc.collect()  # a coroutine left unclosed would warn as it goes
    # The same on both loops: not OK with a coroutine for output, nor trio's own words.
    assert (result.status, result.output, result.error_type) == (
        tk.Status.ERROR,
        None,
        "WrongLoopError",
    )
    assert result.error is not None
    assert "tool 'forgot' runs in a worker thread (thread=True)" in result.error
    assert "FileAccess.read_text" in result.error
    assert "anyio.from_thread.run(ctx.fs.read_text, path)" in result.error


async def test_ctx_fs_run_by_hand_in_the_thread_says_it_needs_the_loop(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello")

    @tk.tool(reads=["path"], thread=True)
    def by_hand(ctx: tk.ToolContext, path: str) -> str:
        """Drive ctx.fs's coroutine in the worker thread, where no loop runs."""
        coroutine = ctx.fs.read_text(path)
        try:
            coroutine.send(None)
        except StopIteration as stop:
            return str(stop.value)
        finally:
            coroutine.close()
        return "suspended"

    async with tk.open_kernel([by_hand], root=tmp_path) as kernel:
        [result] = await kernel.run([tk.ToolCall("c1", "by_hand", {"path": "a.txt"})])
    assert (result.status, result.error_type) == (tk.Status.ERROR, "WrongLoopError")
    assert result.error == (
        "can't read 'a.txt': ctx.fs's methods are async and run on the kernel's event loop, "
        "but this one ran in a thread where no event loop runs; from a worker thread (a "
        "thread=True tool), call them through the loop, as in "
        "anyio.from_thread.run(ctx.fs.read_text, path)"
    )

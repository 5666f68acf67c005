"""Code on the wrong event loop fails saying so, naming the loop the kernel runs on and the one
used: a trio tool under asyncio (and the other way round), a kernel called from a worker thread
or from another event loop, ``ctx.fs`` in a kernel that has no workspace.

The first tests start each loop themselves (``asyncio.run``, ``trio.run``), as an application
does; the others run on both loops through anyio's plugin.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import pytest
import sniffio
import trio

import toolkernel as tk
from toolkernel.errors import WrongLoopError
from toolkernel.tools import builtin_tools


@tk.tool(claims=lambda args: [])
async def trio_nap(ctx: tk.ToolContext) -> str:
    """A tool written for trio."""
    await trio.sleep(0.001)
    return "napped"


@tk.tool(claims=lambda args: [])
async def asyncio_nap(ctx: tk.ToolContext) -> str:
    """A tool written for asyncio."""
    await asyncio.sleep(0)
    return "napped"


@tk.tool(claims=lambda args: [])
async def asyncio_loop_time(ctx: tk.ToolContext) -> float:
    """A tool asking asyncio for its loop (a C function: no frame of asyncio's is left)."""
    return asyncio.get_running_loop().time()


async def _run_one(name: str) -> tk.ToolResult:
    async with tk.open_kernel([trio_nap, asyncio_nap, asyncio_loop_time]) as kernel:
        [result] = await kernel.run([tk.ToolCall("c1", name, {})])
    return result


def test_a_trio_tool_on_an_asyncio_kernel_is_an_error_naming_both_loops() -> None:
    result = asyncio.run(_run_one("trio_nap"))
    assert (result.status, result.error_type) == (tk.Status.ERROR, "WrongLoopError")
    assert result.error is not None
    assert result.error.startswith(
        "tool 'trio_nap' called trio's sleep, but this kernel runs on asyncio: trio's async "
        "functions work only on trio's own event loop"
    )
    assert "Write the tool with anyio, which runs on both" in result.error


def test_an_asyncio_tool_on_a_trio_kernel_is_an_error_naming_both_loops() -> None:
    napped, timed = trio.run(_run_one, "asyncio_nap"), trio.run(_run_one, "asyncio_loop_time")
    assert (napped.error_type, timed.error_type) == ("WrongLoopError", "WrongLoopError")
    assert napped.error is not None and timed.error is not None
    assert napped.error.startswith(
        "tool 'asyncio_nap' called asyncio's sleep, but this kernel runs on trio: asyncio's "
        "async functions work only on asyncio's own event loop"
    )
    assert timed.error.startswith("tool 'asyncio_loop_time' used asyncio, but this kernel runs")


def test_each_loops_own_tools_still_run_on_it() -> None:
    assert asyncio.run(_run_one("asyncio_nap")).output == "napped"
    assert trio.run(_run_one, "trio_nap").output == "napped"


def test_trio_running_in_a_tools_own_thread_is_no_loop_mix_up() -> None:
    async def misuse_a_lock() -> None:
        trio.Lock().release()  # a RuntimeError of trio's own, with its loop running

    @tk.tool(claims=lambda args: [])
    async def trio_inside(ctx: tk.ToolContext) -> None:
        """Run trio in a worker thread of its own."""
        await anyio.to_thread.run_sync(trio.run, misuse_a_lock)

    async def main() -> tk.ToolResult:
        async with tk.open_kernel([trio_inside]) as kernel:
            [result] = await kernel.run([tk.ToolCall("c1", "trio_inside", {})])
        return result

    result = asyncio.run(main())
    assert (result.status, result.error_type) == (tk.Status.ERROR, "RuntimeError")


@tk.tool(claims=lambda args: [])
async def echo(ctx: tk.ToolContext, text: str) -> str:
    """Say it back."""
    return text


async def test_the_kernel_called_from_a_worker_thread_says_which_loop_it_runs_on() -> None:
    library = sniffio.current_async_library()
    async with tk.open_kernel([echo]) as kernel:

        def submit() -> None:
            kernel.submit(tk.ToolCall("t1", "echo", {"text": "hi"}))

        with pytest.raises(WrongLoopError) as caught:
            await anyio.to_thread.run_sync(submit)
        # The kernel is untouched: it runs calls from its own loop as before.
        [result] = await kernel.run([tk.ToolCall("c1", "echo", {"text": "still here"})])
    message = str(caught.value)
    assert message.startswith("kernel.submit was called from thread ")
    assert ", where no event loop runs, but this kernel runs on " + library in message
    assert message.endswith(
        "a kernel works only on the event loop it was opened on; from a worker thread, go back "
        "to the kernel's loop: anyio.from_thread.run_sync(kernel.submit, call)"
    )
    assert isinstance(caught.value, RuntimeError)
    assert result.output == "still here"


async def test_the_kernel_called_from_another_event_loop_says_which_loops() -> None:
    library = sniffio.current_async_library()
    async with tk.open_kernel([echo]) as kernel:
        calls = [tk.ToolCall("t1", "echo", {"text": "hi"})]

        def on_asyncio() -> object:
            return asyncio.run(kernel.run(calls))

        def on_trio() -> object:
            return trio.run(kernel.run, calls)

        with pytest.raises(WrongLoopError) as from_asyncio:
            await anyio.to_thread.run_sync(on_asyncio)
        with pytest.raises(WrongLoopError) as from_trio:
            await anyio.to_thread.run_sync(on_trio)
        assert kernel.snapshot().running == kernel.snapshot().queued == ()
    for caught, used in ((from_asyncio, "asyncio"), (from_trio, "trio")):
        message = str(caught.value)
        other = "another" if used == library else "a"
        assert message.startswith(f"kernel.run was called from {other} {used} event loop, in ")
        assert f"but this kernel runs on {library}, in thread " in message


async def test_ctx_fs_in_a_kernel_without_a_workspace_says_how_to_give_one() -> None:
    @tk.tool(reads=["path"])
    async def read(ctx: tk.ToolContext, path: str) -> str:
        """Read a file."""
        return await ctx.fs.read_text(path)

    async with tk.open_kernel([read, *builtin_tools()]) as kernel:
        mine, builtin = await kernel.run(
            [
                tk.ToolCall("c1", "read", {"path": "a.txt"}),
                tk.ToolCall("c2", "Read", {"file_path": "a.txt"}),
            ]
        )
    assert (mine.status, mine.error_type) == (tk.Status.ERROR, "NoWorkspaceError")
    assert mine.error == (
        "call c1 (read) can't use ctx.fs: the kernel has no workspace, as it was opened "
        "without a root; give it the directory its tools work in: open_kernel(tools, root=...)"
    )
    # The built-in file tools said so already, for the model: they still do.
    assert (builtin.error_type, builtin.error) == (
        "ToolError",
        "Read needs a workspace: open the kernel with root=...",
    )


async def test_ctx_fs_with_a_workspace_is_the_file_access(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello")

    @tk.tool(reads=["path"])
    async def read(ctx: tk.ToolContext, path: str) -> str:
        """Read a file."""
        return await ctx.fs.read_text(path)

    async with tk.open_kernel([read], root=tmp_path) as kernel:
        [result] = await kernel.run([tk.ToolCall("c1", "read", {"path": "a.txt"})])
    assert result.output == "hello"

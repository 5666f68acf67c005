"""What the ``async with open_kernel(...)`` block raises comes out as itself, not wrapped in an
``ExceptionGroup`` by the kernel's nursery or task group, so ``except KeyError`` matches."""

from __future__ import annotations

import traceback

import anyio
import pytest

import toolkernel as tk

from .fakes import Recorder, edit, make_tools


async def test_a_lone_exception_of_the_block_comes_out_as_itself() -> None:
    with pytest.raises(KeyError) as caught:
        async with tk.open_kernel():
            {}["missing"]
    assert type(caught.value) is KeyError
    frames = traceback.extract_tb(caught.value.__traceback__)
    assert frames[-1].line == '{}["missing"]'
    assert not isinstance(caught.value.__context__, BaseExceptionGroup)


async def test_it_comes_out_as_itself_with_a_workspace_and_calls_running(tmp_path) -> None:
    rec = Recorder()
    with pytest.raises(LookupError, match="no such thing"):
        async with tk.open_kernel(tools=make_tools(rec), root=tmp_path) as kernel:
            handle = kernel.submit(edit("c1", "a", 10))
            await anyio.sleep(0.01)
            raise LookupError("no such thing")
    assert handle.result.status is tk.Status.CANCELLED  # and the call still got its result
    assert rec.spans["c1"].cancelled


async def test_a_group_the_block_raises_comes_out_unchanged() -> None:
    group = ExceptionGroup("two", [KeyError("a"), ValueError("b")])
    with pytest.raises(ExceptionGroup) as caught:
        async with tk.open_kernel():
            raise group
    assert caught.value is group


async def test_a_deadline_around_the_block_still_stops_it() -> None:
    with anyio.move_on_after(0.01) as scope:
        async with tk.open_kernel():
            await anyio.sleep(10)
    assert scope.cancelled_caught


async def test_the_open_kernel_core_block_unwraps_too() -> None:
    with pytest.raises(KeyError):
        async with tk.kernel.open_kernel_core():
            raise KeyError("x")


@pytest.mark.trio_only
async def test_an_exception_from_the_kernels_own_tasks_keeps_the_group() -> None:
    # A tool's KeyboardInterrupt goes on up through the kernel's nursery (it is not a call's
    # failure); with the block's own exception beside it, neither is dropped.
    @tk.tool(claims=lambda args: [])
    async def interrupt(ctx: tk.ToolContext) -> str:
        raise KeyboardInterrupt

    with pytest.raises(BaseExceptionGroup) as caught:
        async with tk.open_kernel(tools=[interrupt]) as kernel:
            kernel.submit(tk.ToolCall("c1", "interrupt", {}))
            try:
                await anyio.sleep(10)
            except anyio.get_cancelled_exc_class():
                raise KeyError("the block's") from None
    kinds = {type(e) for e in caught.value.exceptions}
    assert kinds == {KeyboardInterrupt, KeyError}

"""A blocking (plain ``def``) tool whose framework run is cancelled while the framework's worker
thread runs it: the adapters' shared check that its call keeps its leases until the thread has
returned, though the cancellation goes on at once. Real threads, on the real clock."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import toolkernel as tk
from toolkernel.tools import builtin_tools

THINKS = 0.6  # seconds the tool blocks between its read and its write


class SlowAppend:
    """What a blocking tool does: read a file, block, write it back with a line added."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self.started = threading.Event()
        self.ended = threading.Event()
        (root / "n.txt").write_text("start\n")

    def __call__(self, path: str, line: str) -> str:
        file = self.root / path
        try:
            old = file.read_text()
            self.started.set()
            time.sleep(THINKS)
            file.write_text(old + line + "\n")
            return "added"
        finally:
            self.ended.set()


async def check_cancelled_while_threaded(
    root: pathlib.Path, tool: SlowAppend, run: Callable[[tk.Kernel], Awaitable[Any]]
) -> None:
    """Start ``run`` (the framework's run, calling ``tool`` on ``n.txt``), cancel it once the
    tool's thread has read the file, then write the file with the kernel's Write."""
    async with tk.open_kernel(builtin_tools(), root=root) as kernel:
        finished: list[tk.ToolResult] = []
        kernel.add_listener(
            lambda event: (
                finished.append(event.result) if type(event) is tk.kernel.CallFinished else None
            )
        )
        task = asyncio.ensure_future(run(kernel))
        assert await asyncio.to_thread(tool.started.wait, 10)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        # The cancellation went on at once, while the thread still runs, holding the leases.
        held = kernel.lease_statistics().held
        assert not tool.ended.is_set()
        assert held >= 1
        [write] = await kernel.run(
            [tk.ToolCall("w", "Write", {"file_path": "n.txt", "content": "written by Write\n"})]
        )
        assert write.status is tk.Status.OK
        assert tool.ended.is_set()  # Write waited for the thread
        assert (root / "n.txt").read_text() == "written by Write\n"
        assert [r.status for r in finished if r.name == "slow_add"] == [tk.Status.CANCELLED]
        held_after = kernel.lease_statistics()
        assert (held_after.held, held_after.waiting) == (0, 0)

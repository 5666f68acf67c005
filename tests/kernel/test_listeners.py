"""A kernel listener: any callable taking an event, and the protocols of its optional methods."""

from __future__ import annotations

import pathlib

import anyio.lowlevel

import toolkernel as tk
from toolkernel.kernel import CallEvent, FileAccessListener, KernelListener, LeaseListener
from toolkernel.testing import Recorder
from toolkernel.tools import FileAccessed, builtin_tools


class Watcher(FileAccessListener, LeaseListener):
    """Every kind of thing a listener can be told, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, event: CallEvent) -> None:
        self.seen.append(f"{type(event).__name__} {event.call_id}")

    def file_accessed(self, access: FileAccessed) -> None:
        self.seen.append(f"{access.verb} {access.path}")

    def leases_returned(self, call_id: str) -> None:
        self.seen.append(f"leases_returned {call_id}")


async def _keep(call: tk.ToolCall, result: tk.ToolResult) -> None:
    return None


async def test_a_plain_function_is_a_listener_and_watches_only_events(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "a.txt").write_text("A\n")
    events: list[CallEvent] = []
    assert isinstance(events.append, KernelListener)
    assert not isinstance(events.append, FileAccessListener | LeaseListener)
    async with tk.open_kernel(tools=builtin_tools(), root=tmp_path) as kernel:
        remove = kernel.add_listener(events.append)
        (result,) = await kernel.run([tk.ToolCall("c1", "Read", {"file_path": "a.txt"})])
        remove()
        await kernel.run([tk.ToolCall("c2", "Read", {"file_path": "a.txt"})])
    assert result.ok
    assert [type(e).__name__ for e in events] == ["CallQueued", "CallStarted", "CallFinished"]


async def test_a_listener_with_the_optional_methods_sees_file_accesses_and_lease_returns(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "a.txt").write_text("A\n")
    watcher = Watcher()
    async with tk.open_kernel(tools=builtin_tools(), root=tmp_path, after_hooks=[_keep]) as kernel:
        remove = kernel.add_listener(watcher)
        (result,) = await kernel.run([tk.ToolCall("c1", "Read", {"file_path": "a.txt"})])
        remove()
        await kernel.run([tk.ToolCall("c2", "Read", {"file_path": "a.txt"})])
    assert result.ok
    assert watcher.seen[:2] == ["CallQueued c1", "CallStarted c1"]
    assert any(s.startswith("read ") for s in watcher.seen)
    assert watcher.seen[-2:] == ["leases_returned c1", "CallFinished c1"]
    assert not any("c2" in s for s in watcher.seen)  # removed: all three of its hooks


async def test_a_method_set_to_none_is_not_watched(tmp_path: pathlib.Path) -> None:
    class Half:
        file_accessed = None

        def __init__(self) -> None:
            self.events = 0

        def __call__(self, event: CallEvent) -> None:
            self.events += 1

    half = Half()
    assert not isinstance(half, FileAccessListener)
    (tmp_path / "a.txt").write_text("A\n")
    async with tk.open_kernel(tools=builtin_tools(), root=tmp_path) as kernel:
        kernel.add_listener(half)
        (result,) = await kernel.run([tk.ToolCall("c1", "Read", {"file_path": "a.txt"})])
    assert result.ok and half.events == 3


def test_the_recorder_declares_both_optional_methods() -> None:
    recorder = Recorder()
    assert isinstance(recorder, FileAccessListener)
    assert isinstance(recorder, LeaseListener)


async def test_a_listener_with_the_optional_methods_needs_no_workspace() -> None:
    @tk.tool(claims=lambda args: [])
    async def noop(ctx: tk.ToolContext) -> str:
        await anyio.lowlevel.checkpoint()
        return "ok"

    watcher = Watcher()
    async with tk.open_kernel(tools=[noop]) as kernel:
        kernel.add_listener(watcher)
        await kernel.run([tk.ToolCall("c1", "noop", {})])
    assert watcher.seen == ["CallQueued c1", "CallStarted c1", "CallFinished c1"]

"""Only regular files are read: a fifo or a device would block a worker thread for good.

Before the fix, each of these would have hung; a watchdog thread gives the fifo a writer after a
while, so a regression fails the test instead of hanging the suite.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import anyio.to_thread
import pytest

import toolkernel as tk
from toolkernel.locks import reads
from toolkernel.tools import FileAccess, Workspace, builtin_tools

WATCHDOG_SECONDS = 3.0


@contextlib.contextmanager
def watchdog(fifo: pathlib.Path) -> Iterator[None]:
    """After a while, open ``fifo`` for writing: a reader stuck on it then sees an end of file."""
    done = threading.Event()

    def unblock() -> None:
        while not done.wait(WATCHDOG_SECONDS):
            with contextlib.suppress(OSError):  # ENXIO: nobody is reading it
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    thread = threading.Thread(target=unblock, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


@pytest.fixture
def root(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "a.txt").write_text("needle\n")
    os.mkfifo(tmp_path / "dir" / "pipe")
    (tmp_path / "dir" / "to-pipe").symlink_to("pipe")
    (tmp_path / "dir" / "to-a").symlink_to("a.txt")
    return tmp_path


async def test_reading_a_fifo_is_refused_at_once(root: pathlib.Path) -> None:
    with Workspace(root) as ws, watchdog(root / "dir" / "pipe"):
        fs = FileAccess(ws, [reads("dir")])
        start = anyio.current_time()
        with pytest.raises(OSError, match="not a regular file but a fifo") as info:
            await fs.read_bytes("dir/pipe")
        assert anyio.current_time() - start < WATCHDOG_SECONDS, "it waited for a writer"
        assert info.value.filename == "dir/pipe"
        # Through a link too: the link is resolved to the fifo, which is refused the same way.
        with pytest.raises(OSError, match="not a regular file"):
            await fs.read_bytes("dir/to-pipe")


async def test_reading_a_unix_socket_is_refused(root: pathlib.Path) -> None:
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(root / "dir" / "sock"))
        with (
            Workspace(root) as ws,
            pytest.raises(OSError, match="not a regular file but a socket"),
        ):
            await FileAccess(ws, [reads("dir")]).read_bytes("dir/sock")
    finally:
        server.close()


async def test_reading_a_device_is_refused() -> None:
    with (
        Workspace("/dev", fold_case=False, unicode_form="none") as ws,
        pytest.raises(OSError, match="not a regular file but a character device"),
    ):
        await FileAccess(ws, [reads("null")]).read_bytes("null")


async def test_walk_lists_only_regular_files_and_links_to_them(root: pathlib.Path) -> None:
    with Workspace(root) as ws:
        assert await FileAccess(ws, [reads(".")]).walk("dir") == ["dir/a.txt", "dir/to-a"]
        assert await FileAccess(ws, [reads(".")]).walk("dir/pipe") == []


@pytest.mark.parametrize("path", ["dir", "dir/pipe", "dir/to-pipe"])
async def test_grep_never_blocks_on_a_fifo(root: pathlib.Path, path: str) -> None:
    with watchdog(root / "dir" / "pipe"):
        async with tk.open_kernel(builtin_tools(), root=root) as kernel:
            start = anyio.current_time()
            (result,) = await kernel.run(
                [tk.ToolCall("g", "Grep", {"pattern": "needle", "path": path})]
            )
            assert anyio.current_time() - start < WATCHDOG_SECONDS, "it waited for a writer"
    assert result.status is tk.Status.OK, result.error
    assert result.output == (
        "dir/a.txt\ndir/to-a" if path == "dir" else f"no matches for 'needle' under {path}"
    )


def counting_thread_hops(monkeypatch: pytest.MonkeyPatch) -> list[Callable[..., Any]]:
    """Record every function sent to a worker thread (each still runs as before)."""
    hops: list[Callable[..., Any]] = []
    real = anyio.to_thread.run_sync

    async def run_sync(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        hops.append(function)
        return await real(function, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", run_sync)
    return hops


async def test_a_read_makes_one_thread_hop(
    root: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with tk.open_kernel(builtin_tools(), root=root) as kernel:
        hops = counting_thread_hops(monkeypatch)
        (result,) = await kernel.run([tk.ToolCall("r", "Read", {"file_path": "dir/a.txt"})])
    assert result.status is tk.Status.OK, result.error
    assert len(hops) == 1

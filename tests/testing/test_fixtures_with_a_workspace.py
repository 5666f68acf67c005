"""The ``kernel`` fixture over a workspace, with the fixtures overridden as a user would."""

from __future__ import annotations

import pathlib

import pytest

import toolkernel as tk
from toolkernel.testing import FakeTool, Recorder


@pytest.fixture
def kernel_root(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "a.txt").write_text("")
    return tmp_path


@pytest.fixture
def kernel_tools() -> list[tk.Tool]:
    return [FakeTool("read", reads=True), FakeTool("edit", writes=True, duration=1)]


async def test_file_io_in_threads_takes_no_virtual_time(
    kernel: tk.Kernel, recorder: Recorder
) -> None:
    calls = [tk.ToolCall(f"c{i}", "edit", {"paths": ["a.txt"]}) for i in range(1, 6)]
    results = await kernel.run(calls)
    assert [r.finished_at for r in results] == [1, 2, 3, 4, 5]  # exactly, thread hops and all
    assert all(len(c.accesses) == 2 for c in recorder.recording)

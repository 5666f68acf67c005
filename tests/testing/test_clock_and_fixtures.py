"""Virtual time that waits for worker threads, and the pytest fixtures built on it."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap
import time

import anyio
import anyio.to_thread

import toolkernel as tk
from toolkernel.testing import Recorder, hold_virtual_time_for_threads


async def test_virtual_time_stands_still_while_a_worker_thread_works() -> None:
    await hold_virtual_time_for_threads()
    start = anyio.current_time()
    with anyio.fail_after(5):  # virtual seconds: it would fire if the clock jumped to it
        await anyio.to_thread.run_sync(time.sleep, 0.05)  # real work in a thread
    assert anyio.current_time() == start
    await anyio.sleep(3)
    assert anyio.current_time() == start + 3


async def test_the_kernel_fixture_runs_on_virtual_time_and_records(
    kernel: tk.Kernel, recorder: Recorder
) -> None:
    results = await kernel.run(
        [
            tk.ToolCall("c1", "edit", {"paths": ["a"], "duration": 2}),
            tk.ToolCall("c2", "read", {"paths": ["a"]}),
            tk.ToolCall("c3", "sync", {"duration": 0.5}),
        ]
    )
    assert [(r.started_at, r.finished_at) for r in results] == [(0, 2), (2, 3), (3, 3.5)]
    assert [c.call_id for c in recorder.recording] == ["c1", "c2", "c3"]


PLUGIN_USER = """
import toolkernel as tk

pytest_plugins = ["toolkernel.testing.pytest_plugin"]


async def test_runs(kernel):
    (result,) = await kernel.run([tk.ToolCall("c1", "edit", {"paths": ["a"]})])
    assert result.ok


async def test_a_race_in_the_recording_fails_the_test(kernel, recorder):
    writes = (tk.writes("a"),)
    for event in (
        tk.kernel.CallQueued("x1", "edit", 0, writes),
        tk.kernel.CallQueued("x2", "edit", 0, writes),
        tk.kernel.CallStarted("x1", "edit", 0),
        tk.kernel.CallStarted("x2", "edit", 0),
    ):
        recorder(event)
    for call_id in ("x1", "x2"):
        result = tk.ToolResult(call_id, "edit", tk.Status.OK, None, None, 0, 0, 1)
        recorder(tk.kernel.CallFinished(call_id, "edit", 1, result))
"""


def test_the_plugin_loads_from_a_users_conftest(tmp_path: pathlib.Path) -> None:
    (tmp_path / "test_user.py").write_text(textwrap.dedent(PLUGIN_USER))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    out = done.stdout
    # Each test ran on both loops; the race test's teardown failed on both.
    assert "4 passed, 2 errors" in out, out
    for backend in ("trio", "asyncio"):
        assert f"ERROR test_user.py::test_a_race_in_the_recording_fails_the_test[{backend}]" in out
    assert "the kernel's recording shows races:" in out
    assert "x1 (edit) ran 0-1 and x2 (edit) ran 0-1 at the same time" in out

"""Calls of different batches may share an id (two agents on one kernel, each with its ``c1``):
the recording keeps each call's run, files and nested calls its own, and ``check_race_free``
finds no race the kernel did not make."""

from __future__ import annotations

import contextvars
import pathlib

import anyio
import pytest

import toolkernel as tk
from toolkernel.locks import Path
from toolkernel.testing import (
    CallRecording,
    FakeTool,
    Interval,
    OverlappingConflict,
    Recorder,
    Recording,
    check_race_free,
)
from toolkernel.tools import FileAccessed


@tk.tool(writes=["path"])
async def outer(ctx: tk.ToolContext, path: str) -> str:
    """Edits a file by way of another tool."""
    result = await ctx.call("edit", paths=[path], duration=2)
    return result.status.value


@pytest.fixture
def kernel_root(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "d").mkdir()
    for name in ("a.txt", "b.txt", "d/a.txt", "d/b.txt"):
        (tmp_path / name).write_text("")
    return tmp_path


@pytest.fixture
def kernel_tools() -> list[tk.Tool]:
    return [FakeTool("read", reads=True), FakeTool("edit", writes=True), outer]


def accessed(call: CallRecording) -> list[tuple[str, str]]:
    return [(access.verb, str(access.path)) for access in call.accesses]


def run_of(call: CallRecording) -> tuple[float, float]:
    assert call.run is not None
    return (call.run.start, call.run.end)


async def test_two_batches_running_a_call_each_with_one_id_keep_their_own_runs_and_files(
    kernel: tk.Kernel, recorder: Recorder
) -> None:
    # The first c1 writes a.txt at its end, t=2, while the second c1 (queued at t=1) runs.
    first = kernel.submit(tk.ToolCall("c1", "edit", {"paths": ["a.txt"], "duration": 2}))
    await anyio.sleep(1)
    second = kernel.submit(tk.ToolCall("c1", "edit", {"paths": ["b.txt"], "duration": 2}))
    results = [await first.wait_finished(), await second.wait_finished()]
    recording = recorder.recording
    assert check_race_free(recording) == []
    a, b = recording
    assert (a.claims, b.claims) == ((tk.writes("a.txt"),), (tk.writes("b.txt"),))
    assert [a.result, b.result] == results
    assert (run_of(a), run_of(b)) == ((0, 2), (1, 3))
    assert accessed(a) == [("read", "a.txt"), ("write", "a.txt")]
    assert accessed(b) == [("read", "b.txt"), ("write", "b.txt")]
    assert (a.serial, b.serial) == (1, 2)


async def test_two_runs_at_once_with_one_id_queued_at_one_instant_keep_their_own_runs(
    kernel: tk.Kernel, recorder: Recorder
) -> None:
    # Two agents run a c1 each at t=0: the one on a.txt waits behind c0, the one on b.txt
    # starts at once. When it starts, neither c1 has, as far as the events tell.
    held = kernel.submit(tk.ToolCall("c0", "edit", {"paths": ["a.txt"]}))
    async with anyio.create_task_group() as agents:
        agents.start_soon(kernel.run, [tk.ToolCall("c1", "edit", {"paths": ["a.txt"]})])
        agents.start_soon(
            kernel.run, [tk.ToolCall("c1", "edit", {"paths": ["b.txt"], "duration": 3})]
        )
    await held.wait_finished()
    recording = recorder.recording
    assert check_race_free(recording) == []
    calls = {str(call.claims[0].resource): call for call in recording if call.call_id == "c1"}
    assert (run_of(calls["a.txt"]), run_of(calls["b.txt"])) == ((1, 2), (0, 3))
    assert accessed(calls["a.txt"]) == [("read", "a.txt"), ("write", "a.txt")]
    assert accessed(calls["b.txt"]) == [("read", "b.txt"), ("write", "b.txt")]


async def test_calls_with_one_id_submitted_one_after_the_other_keep_their_own_runs(
    kernel: tk.Kernel, recorder: Recorder
) -> None:
    # Two batches queued by one task with nothing between them: each c1 is its own batch's.
    first = kernel.submit(tk.ToolCall("c1", "edit", {"paths": ["a.txt"]}))
    second = kernel.submit(tk.ToolCall("c1", "edit", {"paths": ["b.txt"], "duration": 3}))
    then = kernel.submit(tk.ToolCall("c2", "edit", {"paths": ["a.txt"]}))
    results = [await handle.wait_finished() for handle in (first, second, then)]
    recording = recorder.recording
    assert check_race_free(recording) == []
    assert [call.result for call in recording] == results
    assert [run_of(call) for call in recording] == [(0, 1), (0, 3), (1, 2)]
    assert [accessed(call)[-1] for call in recording] == [
        ("write", "a.txt"),
        ("write", "b.txt"),
        ("write", "a.txt"),
    ]


async def test_two_runs_at_once_with_one_id_granted_together_keep_their_own_runs_and_files(
    kernel: tk.Kernel, recorder: Recorder
) -> None:
    # Both c1s wait behind c0 and are granted together at t=1; which starts first is up to the
    # event loop (trio shuffles), and nothing in a CallStarted says which c1 it is.
    async def run_after(delay: float, call: tk.ToolCall) -> None:
        await anyio.sleep(delay)
        await kernel.run([call])

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run_after, 0, tk.ToolCall("c0", "edit", {"paths": ["d/a.txt", "d/b.txt"]}))
        tasks.start_soon(
            run_after, 0.25, tk.ToolCall("c1", "read", {"paths": ["d/a.txt"], "duration": 2})
        )
        tasks.start_soon(
            run_after, 0.5, tk.ToolCall("c1", "read", {"paths": ["d/b.txt"], "duration": 1})
        )
    recording = recorder.recording
    assert check_race_free(recording) == []
    _, a, b = recording
    assert (a.claims, b.claims) == ((tk.reads("d/a.txt"),), (tk.reads("d/b.txt"),))
    assert (run_of(a), run_of(b)) == ((1, 3), (1, 2))
    assert accessed(a) == [("read", "d/a.txt")]
    assert accessed(b) == [("read", "d/b.txt")]
    assert a.result is not None and a.result.output == {"d/a.txt": "c0\n"}
    assert (a.result.queued_at, b.result and b.result.queued_at) == (0.25, 0.5)


async def test_nested_calls_of_two_calls_with_one_id_name_their_own_parent(
    kernel: tk.Kernel, recorder: Recorder
) -> None:
    first = kernel.submit(tk.ToolCall("c1", "outer", {"path": "a.txt"}))
    await anyio.sleep(1)
    second = kernel.submit(tk.ToolCall("c1", "outer", {"path": "b.txt"}))
    assert [(await h.wait_finished()).status for h in (first, second)] == [tk.Status.OK] * 2
    recording = recorder.recording
    assert check_race_free(recording) == []
    for path, start in (("a.txt", 0), ("b.txt", 1)):
        parent, child = [c for c in recording if str(c.claims[0].resource) == path]
        assert (parent.call_id, child.call_id, child.parent) == ("c1", "c1.1", "c1")
        assert child.parent_serial == parent.serial is not None
        assert (run_of(parent), run_of(child)) == ((start, start + 2), (start, start + 2))
        assert accessed(child) == [("read", path), ("write", path)]
        assert accessed(parent) == []


def finished(call_id: str, queued: float, start: float, end: float) -> tk.kernel.CallFinished:
    result = tk.ToolResult(call_id, "read", tk.Status.OK, None, None, queued, start, end)
    return tk.kernel.CallFinished(call_id, "read", end, result)


def test_which_of_two_calls_with_one_id_started_is_put_right_when_one_finishes() -> None:
    # Two tasks (each its own context) start a c1 each at t=2: the one queued second first.
    # The recorder takes the first start for the c1 queued first, and learns otherwise from
    # the queue time in the first result.
    recorder = Recorder()
    recorder(tk.kernel.CallQueued("c1", "read", 0, (tk.reads("a"),)))
    recorder(tk.kernel.CallQueued("c1", "read", 1, (tk.reads("b"),)))
    task_a, task_b = contextvars.Context(), contextvars.Context()
    task_b.run(recorder, tk.kernel.CallStarted("c1", "read", 2))
    task_a.run(recorder, tk.kernel.CallStarted("c1", "read", 2))
    task_b.run(recorder.file_accessed, FileAccessed("c1", Path(("b",)), False, "read", True))
    task_a.run(recorder.file_accessed, FileAccessed("c1", Path(("a",)), False, "read", True))
    task_b.run(recorder, finished("c1", 1, 2, 3))
    task_a.run(recorder, finished("c1", 0, 2, 4))
    a, b = recorder.recording
    assert (accessed(a), accessed(b)) == ([("read", "a")], [("read", "b")])
    assert (run_of(a), run_of(b)) == ((2, 4), (2, 3))
    assert a.run is not None and b.run is not None
    assert (a.run.first, b.run.first) == (4, 3)  # b's CallStarted came first
    assert check_race_free(recorder.recording) == []


def call(serial: int, call_id: str, claim: tk.Claim, parent: int | None) -> CallRecording:
    run = Interval(0, 1, serial, 10 + serial)
    result = tk.ToolResult(call_id, "edit", tk.Status.OK, None, None, 0, 0, 1)
    return CallRecording(
        call_id,
        "edit",
        (claim,),
        None if parent is None else "c1",
        Interval(0, 0, serial, serial),
        run,
        (),
        (),
        (),
        result,
        serial=serial,
        parent_serial=parent,
    )


def test_a_nested_call_is_exempt_only_with_its_own_parent_whatever_their_ids() -> None:
    # The first c1 made c1.1, writing a/x inside its leases; the second c1, writing a/x too at
    # the same time, is a race with both, though it shares its id with c1.1's parent.
    recording = Recording(
        (
            call(1, "c1", tk.writes("a"), None),
            call(2, "c1.1", tk.writes("a/x"), 1),
            call(3, "c1", tk.writes("a/x"), None),
        )
    )
    found = check_race_free(recording)
    pairs = [(v.first.serial, v.second.serial) for v in found if isinstance(v, OverlappingConflict)]
    assert len(found) == len(pairs) and pairs == [(1, 3), (2, 3)]

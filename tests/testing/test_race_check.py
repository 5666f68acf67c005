"""``Recorder`` and ``check_race_free``: what each call held, when, and what it touched; and the
two kinds of race a recording can show."""

from __future__ import annotations

import pathlib

import anyio
import pytest
import trio.testing
from hypothesis import HealthCheck, given, settings

import toolkernel as tk
from toolkernel.locks import Path
from toolkernel.testing import (
    CallBatch,
    FakeTool,
    OverlappingConflict,
    Recorder,
    UndeclaredAccess,
    VirtualClockEventLoop,
    check_race_free,
    hold_virtual_time_for_threads,
)
from toolkernel.testing.strategies import batches, workspace_paths
from toolkernel.tools import FileAccessed

read = FakeTool("read", reads=True)
edit = FakeTool("edit", writes=True)
sync = FakeTool("sync")
tap = FakeTool("tap", claims=[tk.exclusive(tk.device("phone"))])


async def test_the_recording_holds_claims_intervals_and_whom_each_waited_behind(
    autojump_clock: object,
) -> None:
    recorder = Recorder()
    async with tk.open_kernel([read, edit, tap]) as kernel:
        kernel.add_listener(recorder)
        await kernel.run(
            [
                tk.ToolCall("c1", "edit", {"paths": ["a"], "duration": 2}),
                tk.ToolCall("c2", "read", {"paths": ["a/b"]}),
                tk.ToolCall("c3", "tap", {"duration": 3}),
                tk.ToolCall("c4", "edit", {"paths": ["b"], "fail": "end"}),
            ]
        )
    recording = recorder.recording
    assert [c.call_id for c in recording] == ["c1", "c2", "c3", "c4"]
    c1, c2, c3, c4 = recording
    assert c1.claims == (tk.writes("a"),)
    assert c3.claims == (tk.exclusive(tk.device("phone")),)
    assert c1.run is not None and (c1.run.start, c1.run.end) == (0, 2)
    assert c2.wait is not None and (c2.wait.start, c2.wait.end) == (0, 2)
    assert c2.run is not None and (c2.run.start, c2.run.end) == (2, 3)
    assert (c2.waited_behind, c2.contested) == (("c1",), ("a/b",))
    assert c3.waited_behind == () and c3.run is not None and c3.run.duration == 3
    assert c4.status is tk.Status.ERROR and c4.result is not None
    assert c4.result.error_type == "FakeToolError"
    assert recording.peak_running() == 3  # c1, c3 and c4; c2 waited
    assert check_race_free(recording) == []


async def test_what_ctx_fs_touched_is_recorded_per_call(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    recorder = Recorder()
    async with tk.open_kernel([read, edit], root=tmp_path) as kernel:
        kernel.add_listener(recorder)
        await kernel.run(
            [
                tk.ToolCall("c1", "read", {"paths": ["./a.txt"], "duration": 0}),
                tk.ToolCall("c2", "edit", {"paths": ["new/b.txt"], "duration": 0}),
            ]
        )
    c1, c2 = recorder.recording
    assert [(a.verb, str(a.path), a.write, a.allowed) for a in c1.accesses] == [
        ("read", "a.txt", False, True)
    ]
    assert [(a.verb, str(a.path), a.write) for a in c2.accesses] == [
        ("read", "new/b.txt", False),
        ("write", "new/b.txt", True),
    ]
    assert (tmp_path / "new" / "b.txt").read_text() == "c2\n"
    assert check_race_free(recorder.recording) == []


async def test_a_refused_access_is_recorded_and_reported(tmp_path: pathlib.Path) -> None:
    @tk.tool(reads=["path"])
    async def sneaky(ctx: tk.ToolContext, path: str) -> None:
        """Declares a read, tries a write."""
        await ctx.fs.write_text(path, "gotcha")

    recorder = Recorder()
    async with tk.open_kernel([sneaky], root=tmp_path) as kernel:
        kernel.add_listener(recorder)
        (result,) = await kernel.run([tk.ToolCall("c1", "sneaky", {"path": "a.txt"})])
    assert result.error_type == "UndeclaredAccessError"
    (violation,) = check_race_free(recorder.recording)
    assert isinstance(violation, UndeclaredAccess)
    assert not violation.access.allowed
    assert str(violation) == (
        "c1 (sneaky) tried to write 'a.txt', which needs an exclusive claim on it or a "
        "directory above it; it held shared a.txt (ctx.fs refused it)"
    )


async def test_nested_calls_name_their_parent_and_are_no_race_with_it(
    autojump_clock: object,
) -> None:
    @tk.tool(writes=["path"])
    async def outer(ctx: tk.ToolContext, path: str) -> str:
        """Edits a file by way of another tool."""
        result = await ctx.call("edit", paths=[path], duration=1)
        return result.status.value

    recorder = Recorder()
    async with tk.open_kernel([outer, edit]) as kernel:
        kernel.add_listener(recorder)
        await kernel.run([tk.ToolCall("c1", "outer", {"path": "a"})])
    parent, child = recorder.recording
    assert (child.call_id, child.parent, parent.parent) == ("c1.1", "c1", None)
    assert parent.run is not None and child.run is not None
    assert parent.run.overlaps(child.run)
    assert check_race_free(recorder.recording) == []


async def test_ids_may_repeat_across_batches(autojump_clock: object) -> None:
    recorder = Recorder()
    async with tk.open_kernel([edit]) as kernel:
        kernel.add_listener(recorder)
        for _ in range(2):
            await kernel.run([tk.ToolCall("c1", "edit", {"paths": ["a"]})])
    first, second = recorder.recording
    assert first.run is not None and second.run is not None
    assert (first.run.start, second.run.start) == (0, 1)
    assert recorder.recording.by_id("c1") == second
    recorder.clear()
    assert len(recorder.recording) == 0


def feed(recorder: Recorder, *events: object) -> None:
    for event in events:
        recorder(event)  # type: ignore[arg-type]


def ok(call_id: str, name: str, start: float, end: float) -> tk.kernel.CallFinished:
    result = tk.ToolResult(call_id, name, tk.Status.OK, None, None, 0.0, start, end)
    return tk.kernel.CallFinished(call_id, name, end, result)


def test_conflicting_calls_that_overlapped_are_a_violation() -> None:
    # A schedule no kernel should make: two writers of one file at once; a reader of another
    # file beside them is fine.
    recorder = Recorder()
    feed(
        recorder,
        tk.kernel.CallQueued("c1", "edit", 0, (tk.writes("a"),)),
        tk.kernel.CallQueued("c2", "edit", 0, (tk.writes("a/b"),)),
        tk.kernel.CallQueued("c3", "read", 0, (tk.reads("c"),)),
        tk.kernel.CallStarted("c1", "edit", 0),
        tk.kernel.CallStarted("c2", "edit", 0),
        tk.kernel.CallStarted("c3", "read", 0),
        ok("c1", "edit", 0, 1),
        ok("c2", "edit", 0, 1),
        ok("c3", "read", 0, 1),
    )
    (violation,) = check_race_free(recorder.recording)
    assert isinstance(violation, OverlappingConflict)
    assert (violation.first.call_id, violation.second.call_id) == ("c1", "c2")
    assert str(violation) == (
        "c1 (edit) ran 0-1 and c2 (edit) ran 0-1 at the same time, holding conflicting "
        "claims (exclusive a / exclusive a/b)"
    )


def test_runs_that_touch_at_one_instant_do_not_overlap() -> None:
    # c2 starts at t=1, when c1 ends: ordered by the events, not only by the clock.
    recorder = Recorder()
    feed(
        recorder,
        tk.kernel.CallQueued("c1", "edit", 0, (tk.writes("a"),)),
        tk.kernel.CallQueued("c2", "edit", 0, (tk.writes("a"),)),
        tk.kernel.CallStarted("c1", "edit", 0),
        ok("c1", "edit", 0, 1),
        tk.kernel.CallStarted("c2", "edit", 1),
        ok("c2", "edit", 1, 1),
    )
    assert check_race_free(recorder.recording) == []
    # The other way round (c2 said to start before c1 ended) is a race, at the same times.
    recorder = Recorder()
    feed(
        recorder,
        tk.kernel.CallQueued("c1", "edit", 0, (tk.writes("a"),)),
        tk.kernel.CallQueued("c2", "edit", 0, (tk.writes("a"),)),
        tk.kernel.CallStarted("c1", "edit", 0),
        tk.kernel.CallStarted("c2", "edit", 1),
        ok("c1", "edit", 0, 1),
        ok("c2", "edit", 1, 1),
    )
    assert [type(v) for v in check_race_free(recorder.recording)] == [OverlappingConflict]


def test_an_access_outside_the_claims_is_a_violation_even_if_allowed() -> None:
    # The recording is judged on its own: an access ctx.fs let through (allowed=True) that
    # the claims do not cover is still reported, so a broken check in ctx.fs is found.
    recorder = Recorder()
    feed(
        recorder,
        tk.kernel.CallQueued("c1", "read", 0, (tk.reads("src"),)),
        tk.kernel.CallStarted("c1", "read", 0),
    )
    recorder.file_accessed(FileAccessed("c1", Path(("src", "a.py")), False, "read", True))
    recorder.file_accessed(FileAccessed("c1", Path(("src", "a.py")), True, "write", True))
    recorder.file_accessed(FileAccessed("c1", Path(("docs",)), False, "list", True))
    feed(recorder, ok("c1", "read", 0, 1))
    found = check_race_free(recorder.recording)
    assert [(v.access.verb, str(v.access.path)) for v in found] == [  # type: ignore[attr-defined]
        ("write", "src/a.py"),
        ("list", "docs"),
    ]


def test_a_barrier_covers_every_access() -> None:
    recorder = Recorder()
    feed(recorder, tk.kernel.CallQueued("c1", "sync", 0, (tk.exclusive(tk.EVERYTHING),)))
    recorder.file_accessed(FileAccessed("c1", Path(("x",)), True, "delete", True))
    feed(recorder, tk.kernel.CallStarted("c1", "sync", 0), ok("c1", "sync", 0, 1))
    assert check_race_free(recorder.recording) == []


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@given(
    batch=batches([read, edit, sync, tap], paths=workspace_paths(), max_calls=8, cancellations=True)
)
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
def test_random_batches_through_the_kernel_are_race_free(backend: str, batch: CallBatch) -> None:
    recorder = Recorder()

    async def main() -> list[tk.ToolResult]:
        await hold_virtual_time_for_threads()
        async with tk.open_kernel([read, edit, sync, tap], max_concurrency=3) as kernel:
            kernel.add_listener(recorder)
            return await batch.run(kernel)

    options = (
        {"clock": trio.testing.MockClock(autojump_threshold=0)}
        if backend == "trio"
        else {"loop_factory": VirtualClockEventLoop}
    )
    results = anyio.run(main, backend=backend, backend_options=options)
    assert len(results) == len(batch.calls)
    assert check_race_free(recorder.recording) == []
    assert recorder.recording.peak_running() <= 3
    cancelled = {call_id for call_id, _ in batch.cancellations}
    for call, result in zip(batch.calls, results, strict=True):
        if result.status is tk.Status.CANCELLED:
            assert call.id in cancelled


async def test_a_call_granted_while_an_earlier_ones_after_hook_runs_is_no_race(
    autojump_clock: object,
) -> None:
    # A call's leases return before its after-hooks run; the next call on its file starts
    # then, before the first one's CallFinished. That is no overlap: the first held nothing.
    async def after_hook(call: tk.ToolCall, result: tk.ToolResult) -> None:
        await anyio.sleep(1)

    recorder = Recorder()
    async with tk.open_kernel([edit], after_hooks=[after_hook]) as kernel:
        kernel.add_listener(recorder)
        await kernel.run(
            [
                tk.ToolCall("c1", "edit", {"paths": ["a"], "duration": 2}),
                tk.ToolCall("c2", "edit", {"paths": ["a"], "duration": 2}),
            ]
        )
    c1, c2 = recorder.recording
    assert c1.run is not None and c2.run is not None
    assert (c1.run.start, c1.run.end, c2.run.start, c2.run.end) == (0, 2, 2, 4)
    assert not c1.run.overlaps(c2.run)
    assert check_race_free(recorder.recording) == []

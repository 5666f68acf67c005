"""``ctx.fs`` ends with its call: after ``FileAccess.close()`` nothing is read or written.

The kernel closes a call's file access when the call finishes. A task the tool started that
outlives the call must then get a clear error, and an operation already in a worker thread must
stop before its next mutation.
"""

from __future__ import annotations

import os
import pathlib
import re
from collections.abc import Awaitable, Callable, Iterator

import anyio
import anyio.abc
import anyio.from_thread
import pytest

from toolkernel._errors import CallEndedError
from toolkernel.locks import EVERYTHING, exclusive
from toolkernel.tools import FileAccess, Workspace, _fileops, _fs


@pytest.fixture
def ws(tmp_path: pathlib.Path) -> Iterator[Workspace]:
    (tmp_path / "tree" / "sub").mkdir(parents=True)
    for name in ("1", "2", "3"):
        (tmp_path / "tree" / "sub" / name).write_text(name)
    (tmp_path / "a.txt").write_text("old")
    with Workspace(tmp_path, fold_case=False, unicode_form="none") as workspace:
        yield workspace


def names_in(directory: pathlib.Path) -> list[str]:
    return sorted(os.listdir(directory))


async def test_every_operation_fails_once_the_access_is_closed(ws: Workspace) -> None:
    fs = FileAccess(ws, [exclusive(EVERYTHING)], call_id="c1")
    assert await fs.read_text("a.txt") == "old"
    assert not fs.closed
    fs.close()
    fs.close()  # idempotent
    assert fs.closed
    operations: list[tuple[str, str, Callable[[], Awaitable[object]]]] = [
        ("read", "a.txt", lambda: fs.read_bytes("a.txt")),
        ("read", "a.txt", lambda: fs.read_text("a.txt")),
        ("read", "a.txt", lambda: fs.exists("a.txt")),
        ("read", "a.txt", lambda: fs.is_file("a.txt")),
        ("read", "a.txt", lambda: fs.is_dir("a.txt")),
        ("read", "a.txt", lambda: fs.stat("a.txt")),
        ("list", ".", lambda: fs.listdir(".")),
        ("list", "tree", lambda: fs.list_entries("tree")),
        ("read", "tree", lambda: fs.walk("tree")),
        ("write", "a.txt", lambda: fs.write_text("a.txt", "new")),
        ("write", "a.txt", lambda: fs.write_bytes("a.txt", b"new")),
        ("create", "made", lambda: fs.mkdir("made")),
        ("delete", "a.txt", lambda: fs.delete("a.txt")),
        ("move", "a.txt", lambda: fs.move("a.txt", "b.txt")),
    ]
    for verb, spelling, operation in operations:
        with pytest.raises(CallEndedError) as info:
            await operation()
        assert str(info.value) == (
            f"can't {verb} {spelling!r}: call c1 has ended; its file access was revoked (a tool "
            f"must not use ctx.fs after it returns, nor from a task that outlives it)"
        )
    assert (ws.root / "a.txt").read_text() == "old"
    assert names_in(ws.root) == ["a.txt", "tree"]


async def test_the_message_without_a_call_id_still_says_what_happened(ws: Workspace) -> None:
    fs = FileAccess(ws, [exclusive(EVERYTHING)])
    fs.close()
    with pytest.raises(CallEndedError, match=re.escape("can't read 'a.txt': its call has ended")):
        await fs.read_text("a.txt")


async def test_a_write_in_flight_is_stopped_before_its_rename(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The call ends while the worker thread is still writing the temporary file."""
    fs = FileAccess(ws, [exclusive(EVERYTHING)], call_id="c1")
    real_fsync = os.fsync

    def fsync_then_end_the_call(fd: int) -> None:
        real_fsync(fd)
        anyio.from_thread.run_sync(fs.close)

    monkeypatch.setattr(_fileops.os, "fsync", fsync_then_end_the_call)
    with pytest.raises(CallEndedError, match=re.escape("can't write 'a.txt': call c1 has ended")):
        await fs.write_text("a.txt", "written after the call ended")
    assert (ws.root / "a.txt").read_text() == "old"
    assert names_in(ws.root) == ["a.txt", "tree"], "the temporary file was left behind"


async def test_a_tree_deletion_in_flight_stops_at_the_next_unlink(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs = FileAccess(ws, [exclusive(EVERYTHING)], call_id="c1")
    real_unlink, real_exit = os.unlink, _fs._Gate.__exit__
    unlinked: list[str] = []

    def unlink(name: str, *, dir_fd: int | None = None) -> None:
        real_unlink(name, dir_fd=dir_fd)
        unlinked.append(name)

    def exit_then_end_the_call(self: _fs._Gate, *exc_info: object) -> None:
        real_exit(self, *exc_info)
        if unlinked:
            fs.close()  # the call ends right after the first file went (close takes the lock)

    monkeypatch.setattr(_fileops.os, "unlink", unlink)
    monkeypatch.setattr(_fs._Gate, "__exit__", exit_then_end_the_call)
    with pytest.raises(CallEndedError, match=re.escape("can't delete 'tree'")):
        await fs.delete("tree")
    assert len(unlinked) == 1
    # The tree was moved aside before its first unlink: gone from its name, its remains hidden.
    (aside,) = [name for name in names_in(ws.root) if _fileops.moved_aside(name)]
    assert names_in(ws.root) == sorted(["a.txt", aside])
    assert len(names_in(ws.root / aside / "sub")) == 2


async def test_a_task_that_outlives_its_access_cannot_write(ws: Workspace) -> None:
    """A tool's background task keeps writing; the call ends; the next write is refused."""
    fs = FileAccess(ws, [exclusive(EVERYTHING)], call_id="c1")
    outcomes: list[str] = []

    async def keeps_writing(task_status: anyio.abc.TaskStatus[None]) -> None:
        await fs.write_text("a.txt", "during the call")
        task_status.started()
        await anyio.sleep(0.01)
        try:
            await fs.write_text("a.txt", "after the call")
        except CallEndedError as exc:
            outcomes.append(str(exc))

    async with anyio.create_task_group() as nursery:
        await nursery.start(keeps_writing)
        fs.close()  # the call finished
    assert (ws.root / "a.txt").read_text() == "during the call"
    assert len(outcomes) == 1 and "call c1 has ended" in outcomes[0]

"""Writes are all or nothing, and a call can only touch what it declared.

A Write that is cancelled or fails at any point leaves the old content whole (or no file, if there
was none) and no temporary file behind. Cancellation is tried both at random real moments during
a big write and at each chosen step of the write, by wrapping the ``os`` functions the file layer
calls; failures are injected the same way.
"""

from __future__ import annotations

import errno
import os
import pathlib
import random
from collections.abc import Callable
from typing import Any

import anyio
import anyio.from_thread
import pytest

import toolkernel as tk
from toolkernel.tools import _fileops, builtin_tools

OLD = "old line\n" * 1000
BIG_NEW = "n" * 20_000_000  # 20 MB: twenty chunks of the file layer's writes


def names_in(directory: pathlib.Path) -> list[str]:
    return sorted(os.listdir(directory))


def write_call(
    content: str, file_path: str = "target.txt", agent: str | None = None
) -> tk.ToolCall:
    return tk.ToolCall("w", "Write", {"file_path": file_path, "content": content}, agent=agent)


# -- cancelling at random moments --------------------------------------------------------------


async def test_writes_cancelled_at_random_moments_leave_old_or_new_content(
    tmp_path: pathlib.Path,
) -> None:
    target = tmp_path / "target.txt"
    rng = random.Random(7)
    outcomes: list[tuple[tk.Status, bool]] = []
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        # How long an uncancelled write takes here, so the cancels land inside one.
        start = anyio.current_time()
        (result,) = await kernel.run([write_call(BIG_NEW)])
        assert result.status is tk.Status.OK
        duration = anyio.current_time() - start
        # At least eight tries, and on until one was cut short mid-write (it nearly always is).
        while len(outcomes) < 8 or (
            (tk.Status.CANCELLED, True) not in outcomes and len(outcomes) < 30
        ):
            # Rewritten from outside, so each try is by an agent of its own: to the agent that
            # wrote before, the file changed since (refused as a write from a stale view).
            target.write_text(OLD)
            handle = kernel.submit(write_call(BIG_NEW, agent=f"try-{len(outcomes)}"))
            await anyio.sleep(rng.uniform(0, duration))
            handle.cancel()
            result = await handle.wait_finished()
            content = target.read_text()
            assert content in (OLD, BIG_NEW), "a torn file"
            if result.status is tk.Status.OK:
                assert content == BIG_NEW
            else:
                assert result.status is tk.Status.CANCELLED
                assert content == OLD, "a cancelled write must leave the old content"
            assert names_in(tmp_path) == ["target.txt"], "a temporary file was left behind"
            outcomes.append((result.status, result.started_at is not None))
    # Something was actually cut short in the middle of writing.
    assert (tk.Status.CANCELLED, True) in outcomes


# -- cancelling or failing at a chosen step ----------------------------------------------------


class SteppedOs:
    """Stands in for ``os`` in the file layer; runs ``action`` at the n-th call of one function."""

    STEPS = ("open", "write", "fsync", "fchmod", "close", "replace")

    def __init__(self, step: str, nth: int, action: Callable[[], None], after: bool) -> None:
        self.step, self.nth, self.action, self.after = step, nth, action, after
        self.counts = dict.fromkeys(self.STEPS, 0)
        self.fired = False
        self.created: set[int] = set()  # descriptors of files the write created

    def __getattr__(self, name: str) -> Any:
        if name in self.STEPS:

            def step(*args: Any, **kwargs: Any) -> Any:
                if name == "open" and not args[1] & os.O_CREAT:
                    return os.open(*args, **kwargs)  # a read, not the write's temporary file
                if name == "close" and args[0] not in self.created:
                    return os.close(*args, **kwargs)  # a directory's descriptor
                self.counts[name] += 1
                due = name == self.step and self.counts[name] == self.nth
                if due and not self.after:
                    self.fired = True
                    self.action()
                result = getattr(os, name)(*args, **kwargs)
                if name == "open":
                    self.created.add(result)
                if due and self.after:
                    self.fired = True
                    self.action()
                return result

            return step
        return getattr(os, name)


def no_space() -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


# (step, n-th call): every step of writing the temporary file and renaming it.
STEPS = [
    ("open", 1),
    ("write", 1),
    ("write", 2),
    ("write", 4),  # the last chunk
    ("fsync", 1),
    ("fchmod", 1),
    ("close", 1),
    ("replace", 1),
]
SMALL_NEW = "new content!" * 5  # 60 bytes: four chunks of 16


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_fileops, "CHUNK", 16)


# A new file keeps its default mode: only an overwrite has an fchmod step.
FAILURES = [
    pytest.param(step, nth, existing, id=f"{'overwrite' if existing else 'create'}-{step}-{nth}")
    for existing in (True, False)
    for step, nth in STEPS
    if existing or step != "fchmod"
]


@pytest.mark.parametrize(("step", "nth", "existing"), FAILURES)
async def test_a_write_failing_at_any_step_leaves_the_old_state(
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    small_chunks: None,
    step: str,
    nth: int,
    existing: bool,
) -> None:
    target = tmp_path / "target.txt"
    if existing:
        target.write_text(OLD)
    before = names_in(tmp_path)
    # The close really happens before the failure is reported, so no descriptor leaks.
    stepped = SteppedOs(step, nth, no_space, after=step == "close")
    monkeypatch.setattr(_fileops, "os", stepped)
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        (result,) = await kernel.run([write_call(SMALL_NEW)])
    assert stepped.fired
    assert result.status is tk.Status.ERROR
    assert result.error is not None and "No space left on device" in result.error
    assert names_in(tmp_path) == before, "a temporary file was left behind"
    if existing:
        assert target.read_text() == OLD


@pytest.mark.parametrize(("step", "nth"), STEPS, ids=[f"{s}-{n}" for s, n in STEPS])
async def test_a_write_cancelled_at_any_step_is_all_or_nothing(
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    small_chunks: None,
    step: str,
    nth: int,
) -> None:
    target = tmp_path / "target.txt"
    target.write_text(OLD)
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:

        def cancel() -> None:
            # From the worker thread, as a cancel from anywhere else would arrive meanwhile.
            anyio.from_thread.run_sync(kernel.cancel, "w")

        stepped = SteppedOs(step, nth, cancel, after=True)
        monkeypatch.setattr(_fileops, "os", stepped)
        (result,) = await kernel.run([write_call(SMALL_NEW)])
    assert stepped.fired
    assert names_in(tmp_path) == ["target.txt"], "a temporary file was left behind"
    if step == "replace":
        # Cancelled once the new file was renamed into place: too late to back out.
        assert result.status is tk.Status.OK
        assert target.read_text() == SMALL_NEW
    else:
        assert result.status is tk.Status.CANCELLED
        assert target.read_text() == OLD


async def test_a_cancelled_multiedit_leaves_the_file_whole(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, small_chunks: None
) -> None:
    target = tmp_path / "target.txt"
    target.write_text(OLD)
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        stepped = SteppedOs(
            "write", 3, lambda: anyio.from_thread.run_sync(kernel.cancel, "w"), after=True
        )
        monkeypatch.setattr(_fileops, "os", stepped)
        edits = [{"old_string": "old", "new_string": "new", "replace_all": True}]
        (result,) = await kernel.run(
            [tk.ToolCall("w", "MultiEdit", {"file_path": "target.txt", "edits": edits})]
        )
    assert stepped.fired
    assert result.status is tk.Status.CANCELLED
    assert target.read_text() == OLD
    assert names_in(tmp_path) == ["target.txt"]


# -- undeclared access ------------------------------------------------------------------------


@tk.tool(reads=["path"])
async def peek_elsewhere(ctx: tk.ToolContext, path: str, other: str) -> str:
    """Declares it reads ``path``, then reads ``other``."""
    return await ctx.fs.read_text(other)  # type: ignore[no-any-return]


@tk.tool(reads=["path"])
async def sneaky_write(ctx: tk.ToolContext, path: str) -> str:
    """Declares it reads ``path``, then writes it."""
    await ctx.fs.write_text(path, "clobbered")
    return "wrote"


@tk.tool(writes=["path"])
async def write_beside(ctx: tk.ToolContext, path: str, other: str) -> str:
    """Declares it writes ``path``, then writes ``other`` too."""
    await ctx.fs.write_text(path, "mine")
    await ctx.fs.write_text(other, "not mine")
    return "wrote"


@pytest.fixture
def two_files(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "a").write_text("A")
    (tmp_path / "b").write_text("B")
    return tmp_path


async def run_custom(root: pathlib.Path, name: str, **arguments: str) -> tk.ToolResult:
    tools = [peek_elsewhere, sneaky_write, write_beside, *builtin_tools()]
    async with tk.open_kernel(tools, root=root) as kernel:
        (result,) = await kernel.run([tk.ToolCall("c", name, arguments)])
        # The kernel keeps serving after a tool broke the rules.
        (after,) = await kernel.run([tk.ToolCall("r", "Read", {"file_path": "b"})])
        assert after.status is tk.Status.OK
    return result


async def test_an_undeclared_read_is_an_error(two_files: pathlib.Path) -> None:
    result = await run_custom(two_files, "peek_elsewhere", path="a", other="b")
    assert result.status is tk.Status.ERROR
    assert result.error == "undeclared access: can't read 'b': the call did not declare it"


async def test_an_undeclared_read_through_another_spelling_is_an_error(
    two_files: pathlib.Path,
) -> None:
    os.symlink("b", two_files / "link-to-b")
    result = await run_custom(two_files, "peek_elsewhere", path="a", other="./link-to-b")
    assert result.status is tk.Status.ERROR
    assert result.error == "undeclared access: can't read 'b': the call did not declare it"


async def test_writing_a_file_declared_only_for_reading_is_an_error(
    two_files: pathlib.Path,
) -> None:
    result = await run_custom(two_files, "sneaky_write", path="a")
    assert result.status is tk.Status.ERROR
    assert result.error == (
        "undeclared access: can't write 'a': the call declared only a shared lease on it"
    )
    assert (two_files / "a").read_text() == "A"
    assert names_in(two_files) == ["a", "b"]


async def test_writing_beside_a_declared_file_is_an_error(two_files: pathlib.Path) -> None:
    result = await run_custom(two_files, "write_beside", path="a", other="b")
    assert result.status is tk.Status.ERROR
    assert result.error == "undeclared access: can't write 'b': the call did not declare it"
    assert (two_files / "b").read_text() == "B"

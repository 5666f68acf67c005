"""pytest fixtures: a kernel on virtual time, on trio and on asyncio, checked for races.

Load it from your ``conftest.py`` (it needs pytest and anyio's pytest plugin, which anyio
installs)::

    pytest_plugins = ["toolkernel.testing.pytest_plugin"]

Then an async test asking for ``kernel`` (no mark needed) runs twice, on trio
(:func:`~toolkernel.testing.virtual_clock`) and on asyncio
(:class:`~toolkernel.testing.VirtualClockEventLoop`), each time on virtual time, so calls that
take seconds take none and their timings are exact (file I/O in worker threads included: the
clock waits for it)::

    @pytest.fixture
    def kernel_tools():
        return [read_file, edit_file]          # yours; default: a few FakeTools

    @pytest.fixture
    def kernel_root(tmp_path):
        (tmp_path / "a.txt").write_text("hello")
        return tmp_path                        # default: None, no workspace

    async def test_edits_wait_for_reads(kernel, recorder):
        await kernel.run([...])
        assert recorder.recording.by_id("c2").wait.duration == 1

When the test ends, the ``kernel`` fixture checks its recording with
:func:`~toolkernel.testing.check_race_free` and fails the test if a race is found.

Fixtures: ``anyio_backend`` (trio and asyncio, virtual time: it replaces anyio's default
for the tests it covers), ``kernel_tools``, ``kernel_root``, ``recorder`` (the
:class:`~toolkernel.testing.Recorder` attached to ``kernel``), ``kernel``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from .._open import open_kernel
from ..kernel import Kernel, KernelTool
from ._clock import (
    VirtualClockEventLoop,
    hold_virtual_time_for_threads,
    real_time_for_processes,
    virtual_clock,
)
from ._fake import FakeTool
from ._race import check_race_free
from ._recorder import Recorder

__all__ = ["anyio_backend", "kernel_tools", "kernel_root", "recorder", "kernel"]


@pytest.fixture(params=["trio", "asyncio"])
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    """Every async test on trio and on asyncio, both on virtual time."""
    if request.param == "trio":
        return ("trio", {"clock": virtual_clock()})
    return ("asyncio", {"loop_factory": VirtualClockEventLoop})


@pytest.fixture
def kernel_tools() -> Sequence[KernelTool]:
    """The tools of the ``kernel`` fixture; override it. Default: ``read`` (shared on its
    paths), ``edit`` (exclusive on its paths), ``sync`` (a barrier): :class:`FakeTool`\\ s."""
    return [FakeTool("read", reads=True), FakeTool("edit", writes=True), FakeTool("sync")]


@pytest.fixture
def kernel_root() -> str | os.PathLike[str] | None:
    """The workspace root of the ``kernel`` fixture; override it (say, with ``tmp_path``).
    Default: None, no workspace (``ctx.fs`` raises ``NoWorkspaceError``)."""
    return None


@pytest.fixture
def recorder() -> Recorder:
    """The :class:`Recorder` listening to the ``kernel`` fixture."""
    return Recorder()


@pytest.fixture
async def kernel(
    anyio_backend: object,  # asked for, so a test using ``kernel`` runs under anyio, unmarked
    kernel_tools: Sequence[KernelTool],
    kernel_root: str | os.PathLike[str] | None,
    recorder: Recorder,
) -> AsyncIterator[Kernel]:
    """An open kernel with ``kernel_tools`` over ``kernel_root``, recorded by ``recorder``;
    the test fails if the recording shows a race (:func:`check_race_free`). Virtual time
    stands still while ``ctx.fs`` works in a thread (:func:`hold_virtual_time_for_threads`),
    and follows real time while a child process works (:func:`real_time_for_processes`: a
    Bash command takes the time it really takes)."""
    await hold_virtual_time_for_threads()
    await real_time_for_processes()
    async with open_kernel(kernel_tools, root=kernel_root) as opened:
        opened.add_listener(recorder)
        yield opened
    violations = check_race_free(recorder.recording)
    if violations:
        pytest.fail(
            "the kernel's recording shows races:\n" + "\n".join(f"  {v}" for v in violations)
        )

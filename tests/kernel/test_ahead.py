"""Calls running ahead of their lease grant, through the async layer (``Kernel._wait_granted``),
on virtual time and both loops: the call starts while an earlier reader of what it writes
runs, waits for its grant without its slot, is told what changed meanwhile, and every way out
(its lease-wait limit, cancellation) returns its leases and its slot."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

import toolkernel as tk
from toolkernel.kernel import Ahead, ChangedMeanwhile, KeyFunction


class Reader(tk.Tool):
    """Read a path, slowly."""

    name = "Reader"
    reads = ("path",)

    async def run(self, ctx: tk.ToolContext, path: str, seconds: float = 10.0) -> str:
        await anyio.sleep(seconds)
        return f"read {path}"


class Committer(tk.Tool):
    """Write a path the way a sandboxed command does: work first, then, holding the leases,
    make it visible; what it saw change meanwhile is its output."""

    name = "Committer"
    writes = ("path",)

    def ahead(self, arguments: Mapping[str, Any], key: KeyFunction) -> Ahead | None:
        return Ahead(speculative=True)

    async def run(self, ctx: tk.ToolContext, path: str, seconds: float = 1.0) -> Any:
        ran_ahead = ctx.ran_ahead
        await anyio.sleep(seconds)
        meanwhile = await ctx.wait_granted()
        ctx.report_changes([tk.exclusive(tk.path(path))])
        return ran_ahead, anyio.current_time(), meanwhile


class Glance(tk.Tool):
    """Read a path at once: its run ends in the step it starts in."""

    name = "Glance"
    reads = ("path",)

    async def run(self, ctx: tk.ToolContext, path: str) -> str:
        return f"saw {path}"


def reader(call_id: str, path: str, seconds: float = 10.0) -> tk.ToolCall:
    return tk.ToolCall(call_id, "Reader", {"path": path, "seconds": seconds})


def committer(call_id: str, path: str, seconds: float = 1.0, **options: Any) -> tk.ToolCall:
    return tk.ToolCall(call_id, "Committer", {"path": path, "seconds": seconds}, **options)


TOOLS = [Reader(), Committer(), Glance()]


async def test_it_starts_beside_an_earlier_reader_and_goes_on_once_that_one_ends(
    autojump_clock: Any,
) -> None:
    async with tk.open_kernel(tools=TOOLS) as kernel:
        read, written = await kernel.run([reader("r", "a"), committer("w", "a")])
        statistics = kernel.statistics()
    assert read.ok and written.ok
    assert written.started_at == read.started_at  # it did not wait for the reader to start
    ran_ahead, granted_at, meanwhile = written.output
    assert ran_ahead and granted_at - written.started_at == 10.0
    assert meanwhile == (ChangedMeanwhile("r", "Reader", ()),)
    assert statistics.ran_ahead == 1


async def test_granted_before_its_task_began_it_runs_as_a_granted_call(
    autojump_clock: Any,
) -> None:
    # The reader it passes may end before the committer's task begins (on asyncio it does:
    # tasks begin in the order they were made, and the reader's never yields): the committer
    # is granted before its task began, and starts then as a call granted after a wait, not
    # ahead. It used to be taken for running already, and never ran.
    async with tk.open_kernel(tools=TOOLS) as kernel:
        with anyio.fail_after(100):
            seen, written = await kernel.run(
                [tk.ToolCall("g", "Glance", {"path": "."}), committer("w", "a")]
            )
        statistics, leases = kernel.statistics(), kernel.lease_statistics()
    assert seen.ok and written.ok, written.error
    ran_ahead, _, meanwhile = written.output
    if ran_ahead:  # its task began first: it ran ahead, and was told of the reader
        assert meanwhile == (ChangedMeanwhile("g", "Glance", ()),)
    else:
        assert meanwhile == ()
    assert statistics.ran_ahead == ran_ahead and (leases.held, leases.waiting) == (0, 0)


async def test_a_command_after_a_command_is_told_what_that_one_changed(
    autojump_clock: Any,
) -> None:
    async with tk.open_kernel(tools=TOOLS) as kernel:
        first, second = await kernel.run([committer("w1", "a", 5), committer("w2", "a", 1)])
    assert first.output[0] is False  # granted at once
    ran_ahead, granted_at, meanwhile = second.output
    assert ran_ahead and second.started_at == first.started_at and granted_at == first.finished_at
    assert meanwhile == (ChangedMeanwhile("w1", "Committer", (tk.exclusive(tk.path("a")),)),)


async def test_waiting_for_its_grant_it_holds_no_slot(autojump_clock: Any) -> None:
    async with tk.open_kernel(tools=TOOLS, max_concurrency=2) as kernel:
        results = await kernel.run([reader("r", "a"), committer("w", "a"), reader("later", "b", 1)])
    r, w, later = results
    assert all(x.ok for x in results)
    # w ran ahead in the second slot, gave it back at 1 s to wait for r, and ``later`` ran in
    # it, not after r's 10 s.
    assert later.started_at is not None and later.started_at - r.started_at == 1.0
    assert w.finished_at == r.finished_at


async def test_with_one_slot_nothing_deadlocks(autojump_clock: Any) -> None:
    async with tk.open_kernel(tools=TOOLS, max_concurrency=1) as kernel:
        with anyio.fail_after(100):
            results = await kernel.run(
                [reader("r", "a"), committer("w1", "a"), committer("w2", "a"), reader("r2", "a")]
            )
        assert kernel.lease_statistics().held == 0
    assert all(r.ok for r in results)


async def test_its_wait_for_the_grant_is_bounded_by_its_lease_wait_limit(
    autojump_clock: Any,
) -> None:
    async with tk.open_kernel(tools=TOOLS) as kernel:
        read, written = await kernel.run([reader("r", "a"), committer("w", "a", wait_timeout=5)])
        leases = kernel.lease_statistics()
    assert read.ok and written.status is tk.Status.TIMEOUT
    assert written.finished_at - written.started_at == 6.0  # 1 s of work, then 5 s of waiting
    assert "for its leases behind r (Reader)" in (written.error or "")
    assert (leases.held, leases.waiting) == (0, 0)


async def test_cancelled_while_running_ahead_or_waiting_it_returns_everything(
    autojump_clock: Any,
) -> None:
    for at in (0.5, 3.0):  # while its work runs; while it waits for its grant
        async with tk.open_kernel(tools=TOOLS, max_concurrency=2) as kernel:
            handles = kernel.submit_batch([reader("r", "a"), committer("w", "a", 2)])
            await anyio.sleep(at)
            (info,) = [i for i in kernel.snapshot().running if i.call_id == "w"]
            assert info.ahead and info.waits_for == ("r",)
            handles[1].cancel()
            written = await handles[1].wait_finished()
            assert written.status is tk.Status.CANCELLED
            assert kernel.lease_statistics().waiting == 0
            after = await kernel.run([reader("x", "b", 1)])
            assert after[0].started_at == anyio.current_time() - 1  # a slot was free
            assert (await handles[0].wait_finished()).ok
            assert kernel.lease_statistics().held == 0

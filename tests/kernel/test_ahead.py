"""Calls running ahead of their lease grant, through the async layer (``Kernel._wait_granted``),
on virtual time and both loops: the call starts while an earlier reader of what it writes
runs, waits for its grant without its slot, is told what changed meanwhile, and every way out
(its lease-wait limit, cancellation) returns its leases and its slot."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import pytest

import toolkernel as tk
from toolkernel.errors import ToolError, UndeclaredAccessError
from toolkernel.kernel import Ahead, ChangedMeanwhile, KeyFunction
from toolkernel.testing import hold_virtual_time_for_threads
from toolkernel.tools import builtin_tools


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


# -- tools that only read (``ahead=True``: the built-in Read, ListDir, Grep and Glob) ----------
# They run beside an earlier call that runs ahead itself and has not committed, and run again,
# holding their leases, exactly when what it committed overlaps what they claim.


class SlowWriter(tk.Tool):
    """Write a file the way a sandboxed command does: work ahead of the grant, write at it,
    and say what it changed (``changed``: those paths; default: what it claims)."""

    name = "SlowWriter"
    writes = ("path",)

    def ahead(self, arguments: Mapping[str, Any], key: KeyFunction) -> Ahead | None:
        return Ahead(speculative=True)

    async def run(
        self,
        ctx: tk.ToolContext,
        path: str,
        file: str,
        text: str,
        seconds: float = 1.0,
        changed: list[str] | None = None,
    ) -> str:
        await anyio.sleep(seconds)
        await ctx.wait_granted()
        await ctx.fs.write_text(file, text)
        if changed is not None:
            ctx.report_changes([tk.exclusive(tk.path(p)) for p in changed])
        return f"wrote {file}"


def slow_write(call_id: str, file: str, text: str, **arguments: Any) -> tk.ToolCall:
    arguments.setdefault("path", file)
    return tk.ToolCall(call_id, "SlowWriter", {"file": file, "text": text, **arguments})


def read(call_id: str, file: str) -> tk.ToolCall:
    return tk.ToolCall(call_id, "Read", {"file_path": file})


def seeded(root: pathlib.Path) -> pathlib.Path:
    root.mkdir()
    (root / "a").write_text("old\n")
    (root / "d").mkdir()
    (root / "d" / "x").write_text("x\n")
    (root / "d" / "y").write_text("y\n")
    return root


def outcomes(results: Sequence[tk.ToolResult]) -> list[tuple[Any, ...]]:
    return [(r.status, r.output, r.error) for r in results]


async def one_at_a_time(root: pathlib.Path, calls: Sequence[tk.ToolCall]) -> list[Any]:
    """What ``calls`` give run one after the other, each alone, on a tree of their own."""
    async with tk.open_kernel(tools=[*builtin_tools(), SlowWriter()], root=root) as kernel:
        return [outcomes(await kernel.run([c]))[0] for c in calls]


async def test_a_read_after_a_writer_running_ahead_starts_at_once_and_reads_its_commit(
    autojump_clock: Any, tmp_path: pathlib.Path
) -> None:
    await hold_virtual_time_for_threads()  # file I/O takes no virtual time
    calls = [slow_write("w", "a", "new\n"), read("r", "a")]
    expected = await one_at_a_time(seeded(tmp_path / "alone"), calls)
    root = seeded(tmp_path / "together")
    async with tk.open_kernel(tools=[*builtin_tools(), SlowWriter()], root=root) as kernel:
        written, got = await kernel.run(calls)
        statistics = kernel.statistics()
    assert got.started_at == written.started_at  # it did not wait for the writer to finish
    assert got.finished_at is not None and written.finished_at is not None
    assert got.finished_at >= written.finished_at  # its result came after the commit
    assert outcomes([written, got]) == expected
    assert got.output == "     1\tnew"
    # Its first run read "old": the writer's commit changed what it read, so it ran again.
    assert (statistics.ran_ahead, statistics.ahead_thrown_away) == (1, 1)


async def test_a_read_runs_again_exactly_when_what_changed_meanwhile_overlaps_what_it_read(
    autojump_clock: Any, tmp_path: pathlib.Path
) -> None:
    await hold_virtual_time_for_threads()  # file I/O takes no virtual time
    # The writer claims all of d, and says it changed d/x (or nothing at all).
    for file, changed, again in (("d/x", ["d/x"], 1), ("d/y", ["d/x"], 0), ("d/x", [], 0)):
        root = seeded(tmp_path / f"{file.replace('/', '-')}-{len(changed)}")
        writer = slow_write("w", "d/x", "new\n", path="d", changed=changed)
        async with tk.open_kernel(tools=[*builtin_tools(), SlowWriter()], root=root) as kernel:
            written, got = await kernel.run([writer, read("r", file)])
            statistics = kernel.statistics()
        assert written.ok and got.ok, got.error
        assert got.started_at == written.started_at
        assert (statistics.ran_ahead, statistics.ahead_thrown_away) == (1, again), file
        if again:
            assert got.output == "     1\tnew"


async def test_a_read_after_a_plain_write_still_waits_for_it(
    autojump_clock: Any, tmp_path: pathlib.Path
) -> None:
    await hold_virtual_time_for_threads()  # file I/O takes no virtual time
    # A Write makes its change visible as it runs: nothing may read beside it.
    root = seeded(tmp_path / "tree")
    calls = [
        slow_write("w1", "b", "b\n", seconds=5),
        tk.ToolCall("w2", "Write", {"file_path": "a", "content": "new\n"}),
        read("r", "a"),
    ]
    async with tk.open_kernel(tools=[*builtin_tools(), SlowWriter()], root=root) as kernel:
        _, write, got = await kernel.run(calls)
        statistics = kernel.statistics()
    assert write.ok and got.ok
    assert got.started_at is not None and write.finished_at is not None
    assert got.started_at >= write.finished_at
    assert got.output == "     1\tnew"
    assert statistics.ran_ahead == 0


async def test_readers_beside_writers_give_what_a_one_at_a_time_run_gives(
    autojump_clock: Any, tmp_path: pathlib.Path
) -> None:
    await hold_virtual_time_for_threads()  # file I/O takes no virtual time
    calls = [
        slow_write("w1", "a", "new\n", seconds=3),
        read("r1", "a"),
        tk.ToolCall("g1", "Grep", {"pattern": "new", "path": "."}),
        slow_write("w2", "d/z", "z\n", path="d"),
        tk.ToolCall("l1", "Glob", {"pattern": "**/*", "path": "d"}),
        tk.ToolCall("ls", "ListDir", {"path": "d"}),
        read("r2", "d/z"),
        tk.ToolCall("r3", "Read", {"file_path": "d/y"}),
    ]
    expected = await one_at_a_time(seeded(tmp_path / "alone"), calls)
    root = seeded(tmp_path / "together")
    async with tk.open_kernel(tools=[*builtin_tools(), SlowWriter()], root=root) as kernel:
        results = await kernel.run(calls)
        statistics = kernel.statistics()
    assert outcomes(results) == expected
    assert statistics.ran_ahead >= 5 and statistics.ahead_thrown_away >= 4


async def test_without_a_workspace_a_read_gives_what_it_gives_alone(autojump_clock: Any) -> None:
    async with tk.open_kernel(tools=[*builtin_tools(), *TOOLS]) as kernel:
        alone = await kernel.run([read("r0", "a")])
        written, got = await kernel.run([committer("w", "a"), read("r", "a")])
    assert written.ok
    assert (got.status, got.error) == (alone[0].status, alone[0].error)
    assert got.finished_at is not None and written.finished_at is not None
    assert got.finished_at >= written.finished_at


async def test_a_tool_of_ones_own_that_only_reads_runs_ahead_and_again(
    autojump_clock: Any,
) -> None:
    store = {"a": "old"}
    runs: list[tuple[str, float]] = []

    @tk.tool(reads=["path"], ahead=True)
    async def look(ctx: tk.ToolContext, path: str) -> str:
        """Look a key up (what Committer writes is the store's only after it)."""
        runs.append((store[path], anyio.current_time()))
        if store[path] == "old":
            raise ToolError(f"{path} is still old")
        return store[path]

    class StoreCommitter(Committer):
        name = "StoreCommitter"

        async def run(self, ctx: tk.ToolContext, path: str, seconds: float = 1.0) -> Any:
            await anyio.sleep(seconds)
            await ctx.wait_granted()
            store[path] = "new"
            return "done"

    async with tk.open_kernel(tools=[look, StoreCommitter()]) as kernel:
        written, got = await kernel.run(
            [
                tk.ToolCall("w", "StoreCommitter", {"path": "a"}),
                tk.ToolCall("l", "look", {"path": "a"}),
            ]
        )
        statistics = kernel.statistics()
    assert written.ok and got.ok and got.output == "new"
    # Its first run (at once) failed: held till the grant, thrown away, and run again.
    assert runs == [("old", 0.0), ("new", 1.0)]
    assert (statistics.ran_ahead, statistics.ahead_thrown_away) == (1, 1)


async def test_a_reader_that_fails_ahead_fails_after_the_grant_when_nothing_changed(
    autojump_clock: Any,
) -> None:
    @tk.tool(reads=["path"], ahead=True)
    async def missing(ctx: tk.ToolContext, path: str) -> str:
        """Fail."""
        raise ToolError(f"no {path}")

    class Unchanged(Committer):
        name = "Unchanged"

        async def run(self, ctx: tk.ToolContext, path: str, seconds: float = 1.0) -> Any:
            await anyio.sleep(seconds)
            await ctx.wait_granted()
            ctx.report_changes([])  # its command changed nothing, as it turned out
            return "done"

    async with tk.open_kernel(tools=[missing, Unchanged(), *TOOLS]) as kernel:
        read_first, got = await kernel.run(
            [reader("r", "a", 4), tk.ToolCall("m", "missing", {"path": "a"})]
        )
        written, failed = await kernel.run(
            [
                tk.ToolCall("w", "Unchanged", {"path": "b"}),
                tk.ToolCall("m2", "missing", {"path": "b"}),
            ]
        )
        statistics = kernel.statistics()
    # Behind a plain reader it does not run ahead (nothing conflicts: granted at once).
    assert got.error == "no a" and read_first.ok
    # Behind a call running ahead that changed nothing, it ran ahead, and its failure waited
    # for the grant, and stood.
    assert failed.started_at == written.started_at
    assert failed.status is tk.Status.ERROR and failed.error == "no b"
    assert failed.finished_at is not None and written.finished_at is not None
    assert failed.finished_at >= written.finished_at
    assert (statistics.ran_ahead, statistics.ahead_thrown_away) == (1, 0)


async def test_before_its_grant_ctx_fs_reads_and_writes_nothing(
    autojump_clock: Any, tmp_path: pathlib.Path
) -> None:
    await hold_virtual_time_for_threads()  # file I/O takes no virtual time
    (tmp_path / "a").write_text("old\n")
    seen: list[Any] = []

    class EarlyWriter(Committer):
        name = "EarlyWriter"

        async def run(self, ctx: tk.ToolContext, path: str, seconds: float = 1.0) -> Any:
            early = ctx.fs
            seen.append(await early.read_text(path))
            try:
                await early.write_text(path, "too early\n")
            except UndeclaredAccessError as exc:
                seen.append(str(exc))
            await ctx.wait_granted()
            await ctx.fs.write_text(path, "new\n")
            seen.append(await early.read_text(path))  # it reads on, till the call ends
            with pytest.raises(UndeclaredAccessError):
                await early.write_text(path, "late\n")
            return "done"

    async with tk.open_kernel(tools=[Reader(), EarlyWriter()], root=tmp_path) as kernel:
        first, written = await kernel.run(
            [reader("r", "a", 2), tk.ToolCall("w", "EarlyWriter", {"path": "a"})]
        )
    assert first.ok and written.ok, written.error
    assert written.started_at == first.started_at
    assert seen[0] == "old\n" and seen[2] == "new\n"
    assert "before its leases were granted" in seen[1]
    assert (tmp_path / "a").read_text() == "new\n"


async def test_a_handle_awaited_while_its_call_waits_for_its_grant_waits_for_its_end(
    autojump_clock: Any,
) -> None:
    # Its grant wakes its tool, not whoever waits for its result (the MCP server does).
    async with tk.open_kernel(tools=TOOLS) as kernel:
        first, second = kernel.submit_batch([committer("w1", "a", 5), committer("w2", "a", 1)])
        await anyio.sleep(2)  # w2 ran ahead, and waits for its grant
        (info,) = [i for i in kernel.snapshot().running if i.call_id == "w2"]
        assert info.ahead
        written = await second.wait_finished()
        assert written.ok and written.finished_at == (await first.wait_finished()).finished_at


# -- what a commit may change beyond the claims (``Ahead.commits_beyond``) --------------------
# A tool committing what a run really changed (the Bash tool) may commit a path its claims
# missed: every later call is ordered after that commit, validated against what it really
# changed if it runs ahead itself, waiting for it otherwise.


class Builder(tk.Tool):
    """Build ``out`` the way a sandboxed ``make`` does: work ahead of the grant, then, holding
    the leases, commit ``out`` and a by-product ``log`` its claims do not name, and say so."""

    name = "Builder"
    writes = ("path",)

    def __init__(self, beyond: bool = True) -> None:
        super().__init__()
        self.beyond = beyond

    def ahead(self, arguments: Mapping[str, Any], key: KeyFunction) -> Ahead | None:
        beyond = (tk.writes(key(".")),) if self.beyond else ()
        return Ahead(speculative=False, commits_beyond=beyond)

    async def run(self, ctx: tk.ToolContext, path: str, seconds: float = 5.0) -> str:
        await anyio.sleep(seconds)
        await ctx.wait_granted()
        root = ctx.fs.workspace.root
        (root / path).write_text("built\n")
        log = root / "log"  # what a Makefile does beyond its rule
        log.write_text(log.read_text() + "built\n")
        ctx.report_changes([tk.exclusive(tk.path(path)), tk.exclusive(tk.path("log"))])
        return "built"


async def test_a_later_call_is_ordered_after_what_an_earlier_commit_changed_beyond_its_claims(
    autojump_clock: Any, tmp_path: pathlib.Path
) -> None:
    await hold_virtual_time_for_threads()  # file I/O takes no virtual time
    calls = [
        tk.ToolCall("b", "Builder", {"path": "out"}),
        read("r", "log"),
        read("untouched", "a"),
        tk.ToolCall("w", "Write", {"file_path": "log", "content": "mine\n"}),
    ]
    tools = [*builtin_tools(), Builder()]
    expected = []
    alone = seeded(tmp_path / "alone")
    (alone / "log").write_text("start\n")
    async with tk.open_kernel(tools=tools, root=alone) as kernel:
        for call in calls:
            expected += outcomes(await kernel.run([call]))
    root = seeded(tmp_path / "together")
    (root / "log").write_text("start\n")
    async with tk.open_kernel(tools=tools, root=root) as kernel:
        results = await kernel.run(calls)
        statistics = kernel.statistics()
    built, got, untouched, write = results
    assert outcomes(results) == expected
    assert got.output == "     1\tstart\n     2\tbuilt"
    assert (root / "log").read_text() == "mine\n"  # the Write came after the build's commit
    # The reads ran beside the build; the one of what it changed ran again after its commit.
    assert got.started_at == untouched.started_at == built.started_at
    assert (statistics.ran_ahead, statistics.ahead_thrown_away) == (2, 1)
    # The Write can't be validated: it waited for the commit.
    assert write.started_at is not None and built.finished_at is not None
    assert write.started_at >= built.finished_at


class Watcher(tk.Tool):
    """Write a path as ``Committer`` does, but stop working the moment an earlier call tells
    it what it changed (``ctx.wait_changed``): its output is when it stopped, and what it saw."""

    name = "Watcher"
    writes = ("path",)

    def ahead(self, arguments: Mapping[str, Any], key: KeyFunction) -> Ahead | None:
        return Ahead(speculative=True)

    async def run(self, ctx: tk.ToolContext, path: str, seconds: float = 10.0) -> Any:
        seen: tuple[ChangedMeanwhile, ...] = ()
        with anyio.move_on_after(seconds):
            seen = await ctx.wait_changed()
        stopped_at = anyio.current_time()
        meanwhile = await ctx.wait_granted()
        return stopped_at, seen, meanwhile


async def test_a_call_running_ahead_is_woken_when_an_earlier_call_tells_what_it_changed(
    autojump_clock: Any,
) -> None:
    async with tk.open_kernel(tools=[*TOOLS, Watcher()]) as kernel:
        first, second = await kernel.run(
            [committer("w1", "a", 3), tk.ToolCall("w2", "Watcher", {"path": "a"})]
        )
    assert first.ok and second.ok, second.error
    stopped_at, seen, meanwhile = second.output
    told = ChangedMeanwhile("w1", "Committer", (tk.exclusive(tk.path("a")),))
    assert seen == meanwhile == (told,)
    assert first.finished_at is not None and stopped_at == first.finished_at  # not 10 s on


async def test_a_call_that_can_be_told_nothing_waits_for_changes_until_cancelled(
    autojump_clock: Any,
) -> None:
    # Granted at once (nothing before it), it never runs ahead: no change can come.
    async with tk.open_kernel(tools=[Watcher()]) as kernel:
        (alone,) = await kernel.run([tk.ToolCall("w", "Watcher", {"path": "a", "seconds": 4})])
    assert alone.ok
    stopped_at, seen, meanwhile = alone.output
    assert seen == meanwhile == () and alone.started_at is not None
    assert stopped_at == alone.started_at + 4


async def test_a_change_told_before_the_wait_is_given_at_once(autojump_clock: Any) -> None:
    @tk.tool(writes=["path"], ahead=lambda arguments, key: Ahead(speculative=True))
    async def late(ctx: tk.ToolContext, path: str) -> Any:
        """Look for changes only after the earlier call has finished."""
        await anyio.sleep(5)
        return await ctx.wait_changed()

    async with tk.open_kernel(tools=[*TOOLS, late]) as kernel:
        first, second = await kernel.run(
            [committer("w1", "a", 1), tk.ToolCall("w2", "late", {"path": "a"})]
        )
    assert first.ok and second.ok, second.error
    assert second.output == (ChangedMeanwhile("w1", "Committer", (tk.exclusive(tk.path("a")),)),)


async def test_cancelled_while_it_waits_for_a_change_it_returns_everything(
    autojump_clock: Any,
) -> None:
    async with tk.open_kernel(tools=[*TOOLS, Watcher()]) as kernel:
        first, second = kernel.submit_batch(
            [committer("w1", "a", 30), tk.ToolCall("w2", "Watcher", {"path": "a", "seconds": 60})]
        )
        await anyio.sleep(1)  # w2 runs ahead, waiting to hear of w1
        kernel.cancel("w2")
        watched = await second.wait_finished()
        committed = await first.wait_finished()
        leases = kernel.lease_statistics()
    assert watched.status is tk.Status.CANCELLED and committed.ok
    assert watched.finished_at is not None and watched.finished_at < 2
    assert (leases.held, leases.waiting) == (0, 0)


@pytest.mark.parametrize("seen", [-1, 1.5, "1", True])
async def test_wait_changed_wants_a_count(autojump_clock: Any, seen: Any) -> None:
    @tk.tool(claims=lambda arguments: [])
    async def asks(ctx: tk.ToolContext) -> None:
        """Ask with a wrong count."""
        await ctx.wait_changed(seen)

    async with tk.open_kernel(tools=[asks]) as kernel:
        (result,) = await kernel.run([tk.ToolCall("a", "asks", {})])
    assert result.status is tk.Status.ERROR and result.error_type == "TypeError"
    assert "an int >= 0" in (result.error or "")

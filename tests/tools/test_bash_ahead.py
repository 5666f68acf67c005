"""Bash commands running ahead of their lease grant and committing under it (``_ahead``,
``_shell_commit``): a command starts before an earlier reader of what it writes has finished,
and lands after it; a confined command starts before an earlier command has committed, and runs
again if that commit changed what it may have read. Whatever overlapped, the batch ends as a
one-at-a-time run in emission order ends: every file and every call's result, where the claims
cover what the commands read, writes they miss included (a command commits whatever it changed
in the workspace, and later calls are ordered after that commit: ``Ahead.commits_beyond``).

Real processes, so the real clock; the waits that order the calls are events, not sleeps.
"""

from __future__ import annotations

import os
import pathlib
import shlex
import shutil
import sys
import tempfile
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import toolkernel as tk
from toolkernel import sandbox
from toolkernel.kernel import CallEvent, CallFinished, CallStarted, ToolContext
from toolkernel.shell import ShellRules
from toolkernel.testing import Recorder, check_race_free
from toolkernel.tools import builtin_tools

from ..trees import snapshot

pytestmark = pytest.mark.skipif(
    sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}"
)


def bash_tool(tools: list[Any]) -> Any:
    (found,) = [t for t in tools if t.name == "Bash"]
    return found


def call(call_id: str, command: str) -> tk.ToolCall:
    return tk.ToolCall(call_id, "Bash", {"command": command})


async def test_a_command_starts_before_an_earlier_reader_ends_and_lands_after_it(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    bash_ran = anyio.Event()
    events: list[CallEvent] = []

    @tk.tool(reads=["path"])
    async def slow_read(ctx: tk.ToolContext, path: str) -> str:
        """Read a file once the command has run (it can only if it ran ahead of this)."""
        with anyio.fail_after(20):
            await bash_ran.wait()
        return await ctx.fs.read_text(path)

    def listen(event: CallEvent) -> None:
        events.append(event)
        if isinstance(event, CallStarted) and event.call_id == "b":
            bash_ran.set()

    tools = [*builtin_tools(bash=True), slow_read]
    async with tk.open_kernel(tools=tools, root=tmp_path) as kernel:
        kernel.add_listener(listen)
        read, command = await kernel.run(
            [
                tk.ToolCall("r", "slow_read", {"path": "a.txt"}),
                call("b", "sed -i s/x/y/ a.txt"),
            ]
        )
        statistics = kernel.statistics()
    assert (read.status, command.status) == (tk.Status.OK, tk.Status.OK), command.error
    assert read.output == "x\n"  # it read what was there before the command's commit
    assert (tmp_path / "a.txt").read_text() == "y\n"
    (started,) = [e for e in events if isinstance(e, CallStarted) and e.call_id == "b"]
    assert started.ahead
    order = [(type(e).__name__, e.call_id) for e in events if isinstance(e, CallFinished)]
    assert order == [("CallFinished", "r"), ("CallFinished", "b")]
    assert statistics.ran_ahead == 1
    shell = bash_tool(tools).statistics
    assert (shell.ran_ahead, shell.ahead_thrown_away) == (1, 0)


async def test_two_appends_both_land_in_order(tmp_path: pathlib.Path) -> None:
    tools = builtin_tools(bash=True)
    async with tk.open_kernel(tools=tools, root=tmp_path) as kernel:
        results = await kernel.run(
            [call("b1", "echo 1 >> log"), call("b2", "echo 2 >> log"), call("b3", "cat log")]
        )
    assert [r.status for r in results] == [tk.Status.OK] * 3, [r.error for r in results]
    assert (tmp_path / "log").read_text() == "1\n2\n"
    assert results[2].output == "1\n2\n"
    shell = bash_tool(tools).statistics
    # b2 and b3 ran beside b1 (speculatively: their runs read no commit of b1's), so were
    # thrown away and run again once b1, then b2, had committed.
    assert shell.ran_ahead == 2 and shell.ahead_thrown_away == 2
    assert shell.commands == 5


async def test_a_run_ahead_an_earlier_commit_spoils_is_stopped_at_that_commit(
    tmp_path: pathlib.Path,
) -> None:
    # c2 reads a.txt, which c1 writes: c2 runs ahead beside c1, and c1's commit spoils that
    # run. It is stopped then, not finished first (2 s more) and thrown away at its grant.
    tools = builtin_tools(bash=True)
    async with tk.open_kernel(tools=tools, root=tmp_path) as kernel:
        began = anyio.current_time()
        results = await kernel.run(
            [call("c1", "sleep 0.3; echo one > a.txt"), call("c2", "cat a.txt; sleep 2")]
        )
        took = anyio.current_time() - began
    assert [r.status for r in results] == [tk.Status.OK] * 2, [r.error for r in results]
    assert results[1].output == "one\n"
    shell = bash_tool(tools).statistics
    assert (shell.ran_ahead, shell.ahead_thrown_away, shell.discarded) == (1, 1, 0)
    assert shell.commands == 3 and shell.committed == 2
    assert took < 3.5, took  # about 2.3 s: 0.3 s, then the run that counts


async def test_cancelled_while_it_runs_ahead_watching_for_changes_it_commits_nothing(
    tmp_path: pathlib.Path,
) -> None:
    started = anyio.Event()

    def listen(event: CallEvent) -> None:
        if isinstance(event, CallStarted) and event.call_id == "c2" and event.ahead:
            started.set()

    tools = builtin_tools(bash=True)
    async with tk.open_kernel(tools=tools, root=tmp_path) as kernel:
        kernel.add_listener(listen)
        first, second = kernel.submit_batch(
            [call("c1", "sleep 1; echo one > a.txt"), call("c2", "cat a.txt; sleep 5; echo > b")]
        )
        with anyio.fail_after(20):
            await started.wait()
            await anyio.sleep(0.3)  # its command runs, and it watches for c1's commit
            kernel.cancel("c2")
            cancelled, committed = await second.wait_finished(), await first.wait_finished()
        leases = kernel.lease_statistics()
    assert cancelled.status is tk.Status.CANCELLED and committed.ok
    assert (tmp_path / "a.txt").read_text() == "one\n" and not (tmp_path / "b").exists()
    assert (leases.held, leases.waiting) == (0, 0)


async def test_what_ran_ahead_holds_its_leases_from_its_grant_for_the_race_check(
    tmp_path: pathlib.Path,
) -> None:
    recorder = Recorder()
    async with tk.open_kernel(tools=builtin_tools(bash=True), root=tmp_path) as kernel:
        kernel.add_listener(recorder)
        results = await kernel.run(
            [call("b1", "echo 1 >> log"), call("b2", "echo 2 >> log"), call("b3", "cat log")]
        )
    assert all(r.ok for r in results)
    assert check_race_free(recorder.recording) == []
    b1, b2 = recorder.recording.by_id("b1"), recorder.recording.by_id("b2")
    assert b1.run is not None and b2.run is not None and b2.run.first > b1.run.last


async def test_a_command_with_effects_beyond_the_sandbox_is_not_speculated(
    tmp_path: pathlib.Path,
) -> None:
    # ``curl`` sends data out: it must not run twice, so it never runs beside an earlier
    # command whose writes are not committed (its request would be refused anyway here).
    tools = builtin_tools(bash=True)
    tool = bash_tool(tools)
    key = tk.Workspace(tmp_path).key
    assert tool.ahead({"command": "echo 1 >> log"}, key) == tk.kernel.Ahead(speculative=True)
    found = tool.ahead({"command": "curl -d @log http://127.0.0.1:9/ >> log"}, key)
    assert found == tk.kernel.Ahead(speculative=False)
    # One whose effects the rules can't know whole may commit anything in the workspace.
    found = tool.ahead({"command": "sh ./build.sh"}, key)
    assert found == tk.kernel.Ahead(speculative=False, commits_beyond=(tk.writes(key(".")),))


async def test_cancelled_while_it_waits_for_its_grant_it_commits_nothing(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    release, waiting = anyio.Event(), anyio.Event()
    wait_granted = ToolContext.wait_granted

    async def noted(ctx: ToolContext) -> Any:
        waiting.set()
        return await wait_granted(ctx)

    monkeypatch.setattr(ToolContext, "wait_granted", noted)

    @tk.tool(reads=["path"])
    async def held_read(ctx: tk.ToolContext, path: str) -> str:
        """Read a file when the test says so."""
        await release.wait()
        return await ctx.fs.read_text(path)

    tools = [*builtin_tools(bash=True), held_read]
    async with tk.open_kernel(tools=tools, root=tmp_path) as kernel:
        handles = kernel.submit_batch(
            [tk.ToolCall("r", "held_read", {"path": "a.txt"}), call("b", "sed -i s/x/y/ a.txt")]
        )
        with anyio.fail_after(20):
            await waiting.wait()  # its run is over: it waits for its grant
        (info,) = [i for i in kernel.snapshot().running if i.call_id == "b"]
        assert info.ahead and info.waits_for == ("r",)
        handles[1].cancel()
        command = await handles[1].wait_finished()
        release.set()
        read = await handles[0].wait_finished()
        leases = kernel.lease_statistics()
    assert command.status is tk.Status.CANCELLED and read.status is tk.Status.OK
    assert read.output == "x\n" and (tmp_path / "a.txt").read_text() == "x\n"
    assert (leases.held, leases.waiting) == (0, 0)


async def test_a_read_after_a_command_runs_beside_it_and_reads_what_it_wrote(
    tmp_path: pathlib.Path,
) -> None:
    # The Read starts at once, beside the command (whose write lands only at its commit), so
    # its first run finds no file; the commit changed what it read, so it runs again, granted.
    batch = [call("b", "echo x > a"), tk.ToolCall("r", "Read", {"file_path": "a"})]
    for root in (tmp_path / "alone", tmp_path / "together"):
        root.mkdir()
    events: list[CallEvent] = []
    async with tk.open_kernel(tools=builtin_tools(bash=True), root=tmp_path / "alone") as kernel:
        expected = [seen((await kernel.run([c]))[0]) for c in batch]
    tools = builtin_tools(bash=True)
    async with tk.open_kernel(tools=tools, root=tmp_path / "together") as kernel:
        kernel.add_listener(events.append)
        found = [seen(r) for r in await kernel.run(batch)]
        statistics = kernel.statistics()
    assert found == expected
    assert expected[1] == (tk.Status.OK, "     1\tx", None)
    (started,) = [e for e in events if isinstance(e, CallStarted) and e.call_id == "r"]
    assert started.ahead
    assert (statistics.ran_ahead, statistics.ahead_thrown_away) == (1, 1)
    assert bash_tool(tools).statistics.ahead_thrown_away == 0  # the command ran once


async def test_searches_after_a_command_give_what_they_give_after_it(
    tmp_path: pathlib.Path,
) -> None:
    batch = [
        call("b", "mkdir -p d && echo needle > d/found && echo hay > kept"),
        tk.ToolCall("g", "Grep", {"pattern": "needle"}),
        tk.ToolCall("l", "Glob", {"pattern": "**/*"}),
        tk.ToolCall("ls", "ListDir", {"path": "."}),
        tk.ToolCall("r", "Read", {"file_path": "kept"}),
    ]
    for root in (tmp_path / "alone", tmp_path / "together"):
        root.mkdir()
        seed(root)
    async with tk.open_kernel(tools=builtin_tools(bash=True), root=tmp_path / "alone") as kernel:
        expected = [seen((await kernel.run([c]))[0]) for c in batch]
    async with tk.open_kernel(tools=builtin_tools(bash=True), root=tmp_path / "together") as kernel:
        found = [seen(r) for r in await kernel.run(batch)]
        statistics = kernel.statistics()
    assert found == expected
    assert expected[1][1] == "d/found"
    # Each ran beside the command, and again after its commit, which changed what it read.
    assert (statistics.ran_ahead, statistics.ahead_thrown_away) == (4, 4)


# -- the promise, as a property: a batch ends as its calls run one at a time, in order ---------
NAMES = ("a", "b", "d/x", "d", "e", "log")
TEXTS = ("one", "two")
MAKE = shutil.which("make") is not None
# The interpreter running the tests, by its real path (a shim on PATH may cost a second).
PYTHON = shlex.quote(os.path.realpath(sys.executable))

# A project's rule for its build: ``make`` reads the Makefile and ``a`` and writes ``out``. The
# Makefile also appends to ``log``, which the rule does not say: a by-product the prediction
# misses, which later calls of a batch read and write too (``NAMES``).
RULES = ShellRules(
    {
        **{name: rule for name, rule in ShellRules.default().tables.items() if name != "make"},
        "make": {
            "reads": ["Makefile", "a"],
            "writes": ["out"],
            "unknown-effects": "it runs what the Makefile says",
        },
    }
)
MAKEFILE = "out: a\n\tcat a > out\n\techo built >> log\n"
SCRIPT = "#!/bin/sh\ncat a >> b\nmkdir -p e\necho s > e/x\nls d\n"


def calls() -> st.SearchStrategy[tuple[str, dict[str, str]]]:
    """A Bash command (most), or a built-in call that reads or writes directly."""
    name = st.sampled_from(NAMES)
    bash = st.builds(lambda command: ("Bash", {"command": command}), commands())
    read = st.builds(lambda path: ("Read", {"file_path": path}), name)
    write = st.builds(
        lambda path, text: ("Write", {"file_path": path, "content": text}),
        name,
        st.sampled_from(TEXTS),
    )
    return st.one_of(bash, bash, bash, read, write)


def commands() -> st.SearchStrategy[str]:
    """A command of what the promise covers: writes, appends, reads, deletions, renames of
    files and directories, copies, edits in place, through pipes, ``&&`` and ``;``, in ``sh -c``,
    ``bash -c`` and ``eval``, a script in the tree, a build, an interpreter. Left out: what a
    shell alone leaves to chance, whatever runs it. A pipeline's stages run at once, so only
    one of them may print an error, and none reads the file another truncates; a directory is
    not copied into itself (what that copies follows the order the directory lists in)."""
    name = st.sampled_from(NAMES)
    text = st.sampled_from(TEXTS)
    simple = st.one_of(
        st.builds("echo {1} > {0}".format, name, text),
        st.builds("echo {1} >> {0}".format, name, text),
        st.builds("cat {}".format, name),
        st.builds("rm -f {}".format, name),
        st.builds("rm -rf {}".format, name),
        st.builds("rm -r {}".format, name),
        st.builds("mv {} {}".format, name, name),
        st.builds("mv {} d/".format, name),
        st.builds("mkdir -p {}".format, name),
        st.builds("cat {} > {}".format, name, name),
        st.builds("cp {} {}".format, name, name),
        st.builds("cp -r {} {}".format, name, name).filter(lambda c: not _into_itself(c)),
        st.builds("touch {}".format, name),
        st.builds("sed -i s/o/0/ {}".format, name),
        st.builds("echo {1} | tee -a {0}".format, name, text),
        st.builds(lambda two: "cat {} 2>&1 | wc -l > {}".format(*two[:2]), st.permutations(NAMES)),
        st.just("ls d"),
        st.just("ls d 2>&1 | sort > b"),
    )
    compound = st.builds("{} && {}".format, simple, simple) | st.builds(
        "{}; {}".format, simple, simple
    )
    nested = st.one_of(
        st.builds("sh -c '{}'".format, simple),
        st.builds("bash -c '{}'".format, compound),
        st.builds("eval '{}'".format, simple),
    )
    programs = [st.just("sh script.sh"), st.just("./script.sh")]
    if MAKE:
        programs += [st.just("make -s"), st.just("cat out")]
    python = "{} -c \"open('{}', 'a').write('{}')\"".format
    programs.append(st.builds(python, st.just(PYTHON), st.sampled_from(("a", "b")), text))
    return st.one_of(simple, simple, compound, nested, *programs)


def _into_itself(command: str) -> bool:
    source, target = command.split()[-2:]
    return target == source or target.startswith(f"{source}/")


def seed(root: pathlib.Path) -> None:
    (root / "a").write_text("a\n")
    (root / "d").mkdir()
    (root / "d" / "x").write_text("x\n")
    (root / "script.sh").write_text(SCRIPT)
    (root / "script.sh").chmod(0o755)
    (root / "Makefile").write_text(MAKEFILE)


def seen(result: tk.ToolResult) -> tuple[Any, ...]:
    return (result.status, result.output, result.error)


async def run_batch(
    root: pathlib.Path, batch: list[tuple[str, dict[str, str]]], one_at_a_time: bool
) -> list[Any]:
    calls = [tk.ToolCall(f"c{i}", name, arguments) for i, (name, arguments) in enumerate(batch)]
    tools = builtin_tools(bash=True, shell_rules=RULES)
    async with tk.open_kernel(tools=tools, root=root) as kernel:
        if one_at_a_time:
            return [seen((await kernel.run([c]))[0]) for c in calls]
        found = [seen(r) for r in await kernel.run(calls)]
    shell = bash_tool(tools).statistics
    # How often the batches overlap at all (``--hypothesis-show-statistics``).
    event(f"commands run ahead: {shell.ran_ahead if shell.ran_ahead < 2 else '2 or more'}")
    event(f"runs thrown away: {'some' if shell.ahead_thrown_away else 'none'}")
    return found


@settings(
    max_examples=int(os.environ.get("TOOLKERNEL_SANDBOX_EXAMPLES", "12")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@given(batch=st.lists(calls(), min_size=2, max_size=6))
def test_a_batch_ends_as_its_calls_run_one_at_a_time_in_order(
    batch: list[tuple[str, dict[str, str]]], backend: str
) -> None:
    place = pathlib.Path(tempfile.mkdtemp(prefix="toolkernel-ahead-"))
    try:
        alone, together = place / "alone", place / "together"
        for root in (alone, together):
            root.mkdir()
            seed(root)
        expected = anyio.run(run_batch, alone, batch, True, backend=backend)
        found = anyio.run(run_batch, together, batch, False, backend=backend)
        assert found == expected
        assert snapshot(together) == snapshot(alone)
    finally:
        shutil.rmtree(place)


@pytest.mark.skipif(not MAKE, reason="no make here")
async def test_a_later_call_sees_what_an_earlier_command_changed_beyond_its_prediction(
    tmp_path: pathlib.Path,
) -> None:
    root, gate = tmp_path / "root", tmp_path / "gate"
    root.mkdir()
    seed(root)
    (root / "log").write_text("start\n")
    # The build goes on once the later calls have ended (or after 20 s): no race in the test.
    wait = f"for i in $$(seq 400); do test -e {shlex.quote(str(gate))} && break; sleep 0.05; done"
    (root / "Makefile").write_text(f"out: a\n\t{wait}\n\tcat a > out\n\techo built >> log\n")
    ended: set[str] = set()

    def listen(event: CallEvent) -> None:
        if isinstance(event, CallFinished) and event.call_id in ("r", "c"):
            ended.add(event.call_id)
            if ended == {"r", "c"}:
                gate.touch()

    tools = builtin_tools(bash=True, shell_rules=RULES)
    async with tk.open_kernel(tools=tools, root=root) as kernel:
        kernel.add_listener(listen)
        build, read, copy = await kernel.run(
            [
                call("m", "make -s"),
                tk.ToolCall("r", "Read", {"file_path": "log"}),
                call("c", "cp log copy"),
            ]
        )
    assert (build.status, read.status, copy.status) == (tk.Status.OK,) * 3
    assert "log" in (build.output or "")  # the miss is reported
    # One at a time, in emission order: the build, then the Read and the copy see its log.
    assert (root / "log").read_text() == "start\nbuilt\n"
    assert (root / "copy").read_text() == "start\nbuilt\n"
    assert "built" in (read.output or "")


@pytest.mark.skipif(not MAKE, reason="no make here")
async def test_what_a_command_wrote_is_as_new_as_its_commit(tmp_path: pathlib.Path) -> None:
    # The edit runs beside the slow build and ends first, but commits after it: by the times
    # of the runs, ``a`` would be older than the ``out`` built from it, and the second build
    # would find ``out`` up to date. Stamped at their commits, ``a`` is newer, as one at a
    # time, so the second build builds again.
    seed(tmp_path)
    (tmp_path / "Makefile").write_text("out: a\n\tsleep 0.5\n\tcat a > out\n")
    tools = builtin_tools(bash=True, shell_rules=RULES)
    async with tk.open_kernel(tools=tools, root=tmp_path) as kernel:
        results = await kernel.run(
            [call("m1", "make -s"), call("e", "echo new > a"), call("m2", "make -s")]
        )
    assert [r.status for r in results] == [tk.Status.OK] * 3
    first, edit = results[0], results[1]
    assert edit.started_at is not None and first.finished_at is not None
    assert edit.started_at < first.finished_at  # it ran beside the build
    assert (tmp_path / "out").read_text() == "new\n"


@pytest.fixture(params=["trio", "asyncio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)

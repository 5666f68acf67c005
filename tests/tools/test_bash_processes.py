"""Bash: no process of a command outlives its call, and its output costs bounded memory.

Also: a read-only git command shares the workspace and runs none of the programs a repository
can name.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import tracemalloc
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.to_thread
import pytest

import toolkernel as tk
from toolkernel import sandbox
from toolkernel.shell import _confine
from toolkernel.tools import ShellRules, builtin_tools

from .processes import wait_none_running

needs_proc = pytest.mark.skipif(not pathlib.Path("/proc").is_dir(), reason="needs /proc")


@pytest.fixture(autouse=True, params=["sandbox", "fallback"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test in both modes: in the sandbox (a PID namespace ends what the command started)
    and without it (the launcher, a child subreaper, kills it)."""
    if request.param == "fallback":
        monkeypatch.setenv("TOOLKERNEL_SANDBOX", "off")
        monkeypatch.setattr(_confine, "_noted", True)  # said already: outputs are the commands'
    elif sandbox.unavailable() is not None:
        pytest.skip(f"no sandbox here: {sandbox.unavailable()}")
    sandbox.unavailable.cache_clear()
    yield str(request.param)
    sandbox.unavailable.cache_clear()


def marked_sleep() -> tuple[str, str]:
    """A ``sleep`` whose command line no other process has, and that line: a process of the
    command is found by it from outside, whatever PID namespace it ran in."""
    marker = f"30.{uuid.uuid4().int % 10**9:09d}"
    return f"sleep {marker}", marker


@pytest.fixture
async def kernel(tmp_path: pathlib.Path) -> AsyncIterator[tk.Kernel]:
    async with tk.open_kernel(builtin_tools(bash=True), root=tmp_path) as k:
        yield k


async def bash(k: tk.Kernel, command: str, **arguments: Any) -> tk.ToolResult:
    (result,) = await k.run([tk.ToolCall("b", "Bash", {"command": command, **arguments})])
    return result


@pytest.fixture(params=["pidfd", "waitid", "reap"])
def exit_watch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How the tool learns the shell exited: each way the platforms offer, all tried here."""
    if request.param != "pidfd":
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    if request.param == "reap":
        monkeypatch.delattr(os, "waitid", raising=False)
    return str(request.param)


@needs_proc
async def test_a_background_child_holding_the_output_neither_delays_nor_outlives_the_call(
    kernel: tk.Kernel, exit_watch: str
) -> None:
    sleep, marker = marked_sleep()
    with anyio.fail_after(5):  # before: the call waited for the sleep (or its 60 s timeout)
        result = await bash(kernel, f"{sleep} & echo started", timeout=60_000)
    assert result.status is tk.Status.OK, result.error
    assert result.output == "started\n"
    await wait_none_running(marker)


@needs_proc
async def test_a_timeout_kills_the_group_when_the_shell_waits_on_a_pipe_holder(
    kernel: tk.Kernel,
) -> None:
    sleep, marker = marked_sleep()
    with anyio.fail_after(5):
        result = await bash(kernel, f"({sleep}; echo late) & {sleep} | cat", timeout=300)
    assert result.status is tk.Status.ERROR
    assert result.error is not None and "timed out after 300 ms and was killed" in result.error
    await wait_none_running(marker)


async def test_output_is_streamed_so_memory_stays_bounded(kernel: tk.Kernel) -> None:
    size = 20_000_000
    tracemalloc.start()
    try:
        result = await bash(kernel, f"head -c {size} /dev/zero | tr '\\0' x")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.status is tk.Status.OK, result.error
    assert peak < 2_000_000, f"{peak} bytes at the peak: the output was buffered"
    assert isinstance(result.output, str)
    head, marker, tail = result.output.split("\n")
    assert head == tail == "x" * 15_000
    assert marker == (
        f"... ({size - 30_000} bytes of output cut here, of {size}; send long output to a file "
        f"and read parts of it) ..."
    )


async def test_endless_output_is_cut_and_the_timeout_reports_it(kernel: tk.Kernel) -> None:
    with anyio.fail_after(5):
        result = await bash(kernel, "cat /dev/zero | tr '\\0' x", timeout=300)
    assert result.status is tk.Status.ERROR
    assert result.error is not None
    first, *_ = result.error.split("\n")
    assert first.startswith("command timed out after 300 ms and was killed")
    assert first.endswith(": cat /dev/zero | tr '\\0' x")
    assert "bytes of output cut here" in result.error


# -- read-only commands and programs the repository names ----------------------------------------


def fifo(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "hold"
    os.mkfifo(path)
    return path


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
async def test_git_status_shares_the_workspace_and_runs_none_of_the_repositorys_programs(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    def git(*arguments: str) -> None:
        subprocess.run(["git", *arguments], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q", ".")
    (tmp_path / "a.txt").write_text("A\n")
    git("add", "a.txt")
    hook = tmp_path / "fsmonitor.sh"
    # What a hostile (or just busy) repository can make `git status` run.
    hook.write_text("#!/bin/sh\necho ran > fsmonitor-ran\n")
    hook.chmod(0o755)
    git("config", "core.fsmonitor", str(hook))
    with anyio.fail_after(10):
        status, read = kernel.submit_batch(
            [
                tk.ToolCall("status", "Bash", {"command": "git status --short"}),
                tk.ToolCall("read", "Read", {"file_path": "a.txt"}),
            ]
        )
        # Both read: the Read does not wait behind `git status`.
        assert not kernel.snapshot().queued
        status_result = await status.wait_finished()
        assert (await read.wait_finished()).status is tk.Status.OK
    assert status_result.status is tk.Status.OK, status_result.error
    assert not (tmp_path / "fsmonitor-ran").exists()


# -- the shell that runs commands ---------------------------------------------------------------


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
async def test_commands_run_in_bash_whose_grammar_their_claims_are_read_with(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "sub").mkdir()
    # dash reads `&>` as `&` then `>`: out would land in the root, beside the claims.
    result = await bash(kernel, "cd sub && echo hi &> out; [[ -n x ]] && echo bash")
    assert result.status is tk.Status.OK, result.error
    assert result.output == "bash\n"
    assert (tmp_path / "sub" / "out").read_text() == "hi\n"
    assert not (tmp_path / "out").exists()


@needs_proc
async def test_a_command_starts_as_in_a_shell_its_signals_at_their_defaults_and_0_bash(
    kernel: tk.Kernel,
) -> None:
    """The launcher is Python, which ignores SIGPIPE and SIGXFSZ at start-up: inherited, a
    writer into a closed pipe would not die of it (``yes | head`` says "Broken pipe" and ends
    1, and ``set -o pipefail`` fails), and ``$0`` was bash's path, in every message it prints."""
    command = "yes | head -c 3 >/dev/null; echo ${PIPESTATUS[*]}; grep SigIgn /proc/self/status"
    result = await bash(kernel, f"{command}; echo $0; nosuchcommand")
    assert result.status is tk.Status.ERROR  # the last command's 127
    said = result.error or ""
    assert "\n141 0\nSigIgn:\t" in said and "\nbash\n" in said, said
    # Ignored as the caller's own signals may be (a job in the background ignores SIGINT and
    # SIGQUIT, nohup SIGHUP), but never SIGPIPE (13) or SIGXFSZ (25).
    ignored = int(said.split("SigIgn:\t")[1].split("\n")[0], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1)), hex(ignored)
    assert "bash: line 1: nosuchcommand: command not found" in said and "Broken pipe" not in said


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
async def test_inherited_startup_variables_run_nothing_before_the_command(
    kernel: tk.Kernel, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    startup = tmp_path / "startup.sh"
    startup.write_text("echo ran > ran.txt\n")
    monkeypatch.setenv("BASH_ENV", str(startup))
    monkeypatch.setenv("BASH_FUNC_echo%%", "() { builtin echo shadowed; }")
    result = await bash(kernel, "echo hi")
    assert result.status is tk.Status.OK, result.error
    assert result.output == "hi\n"
    assert not (tmp_path / "ran.txt").exists()


# -- processes that leave the group --------------------------------------------------------------


def escape(sleep: str) -> str:
    """Start ``sleep`` in a session of its own, then wait until it runs."""
    return (
        f"setsid sh -c 'exec {sleep}' > /dev/null 2>&1 "
        f"< /dev/null & while ! pgrep -f '{sleep}' > /dev/null; do sleep 0.01; done;"
    )


@needs_proc
@pytest.mark.skipif(shutil.which("setsid") is None, reason="needs setsid")
async def test_a_process_that_left_the_session_does_not_outlive_the_call(
    kernel: tk.Kernel,
) -> None:
    sleep, marker = marked_sleep()
    with anyio.fail_after(5):
        result = await bash(kernel, f"{escape(sleep)} echo left")
    assert result.status is tk.Status.OK, result.error
    await wait_none_running(marker)


@needs_proc
@pytest.mark.skipif(shutil.which("setsid") is None, reason="needs setsid")
async def test_a_timeout_kills_a_process_that_left_the_session(kernel: tk.Kernel) -> None:
    sleep, marker = marked_sleep()
    with anyio.fail_after(5):
        result = await bash(kernel, f"{escape(sleep)} sleep 30", timeout=500)
    assert result.status is tk.Status.ERROR
    await wait_none_running(marker)


@needs_proc
@pytest.mark.skipif(shutil.which("setsid") is None, reason="needs setsid")
async def test_a_confined_command_that_daemonises_does_not_outlive_the_call(
    tmp_path: pathlib.Path,
) -> None:
    # A rule says `daemon` only writes a file: it runs confined (or in the sandbox), and starts
    # a process in a new session.
    sleep, marker = marked_sleep()
    (tmp_path / "bin").mkdir()
    daemon = tmp_path / "bin" / "daemon"
    daemon.write_text(f"#!/bin/sh\n{escape(sleep)}\necho > done.txt\n")
    daemon.chmod(0o755)
    rules = ShellRules.default().extended('[daemon]\nwrites = ["done.txt"]\n')
    async with tk.open_kernel(builtin_tools(bash=True, shell_rules=rules), root=tmp_path) as k:
        with anyio.fail_after(5):
            result = await bash(k, "bin/daemon")
    assert result.status is tk.Status.OK, result.error
    await wait_none_running(marker)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
async def test_an_inherited_cdpath_does_not_move_a_cd(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, elsewhere = tmp_path / "workspace", tmp_path / "elsewhere"
    (workspace / "sub").mkdir(parents=True)
    (elsewhere / "sub").mkdir(parents=True)
    monkeypatch.setenv("CDPATH", str(elsewhere))
    async with tk.open_kernel(builtin_tools(bash=True), root=workspace) as k:
        result = await bash(k, "cd sub && pwd")
    assert result.status is tk.Status.OK, result.error
    assert result.output == f"{workspace / 'sub'}\n"

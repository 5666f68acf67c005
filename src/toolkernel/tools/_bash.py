"""The built-in Bash tool: a shell command in the workspace root, bounded in time and output.

The command runs as ``bash -c`` (``/bin/sh -c`` where there is no bash) in a session (and so a
process group) of its own, on Linux under a small launcher (``toolkernel/sandbox/_launcher.py``):
in the sandbox, the first process of a PID namespace, whose end ends every process of it;
otherwise a child subreaper. No process of it may outlive its call:

- when the shell exits, the launcher kills every process the command left, even one that left
  the group (``setsid``), since orphans are reparented to it; then the group is killed:
  background children (``sleep 100 &``) that still hold the output pipe would otherwise keep the
  call waiting for an end of file, and live on after it;
- on a timeout, a cancellation or the kernel closing, the launcher is sent SIGTERM (it kills the
  same way) and, at most :data:`DRAIN_GRACE` seconds later, the group is killed.

The group is killed *before* the launcher is reaped: while it is an unreaped zombie its pid
(the group's id) can't be given to another process, so the signal can't reach a stranger. After
the kill the pipe is drained for at most :data:`DRAIN_GRACE` seconds.

Output (stdout and stderr together) is streamed, never buffered whole: the first and the last
``BASH_OUTPUT_LIMIT / 2`` bytes are kept, and the result says how many were cut in between, so
``cat /dev/zero`` costs a bounded amount of memory.

What a command touches is the ``shell`` package's business: its claims come from
``shell_claims`` (a parse and a rule table). Where the system gives the sandbox
(``toolkernel.sandbox.unavailable()`` is None), every command runs on a copy-on-write view of
the workspace and what it changed is committed under leases (``_shell_commit``): its effects
hold whatever the prediction missed. Elsewhere it runs on the workspace itself with the claims
its rules give, and a command whose effects the rules can't fully know is a barrier. In both, a
write outside the workspace is policy (``shell._confine.Launch``). This module runs the process
and picks the mode.

In the sandbox a command may run ahead of its grant (``BashTool.ahead``), and the commits come
in emission order, each validated against what committed while it ran: a batch ends exactly as
if its calls had run one at a time in emission order, every file and every call's result, as
long as each command's claims cover what it reads and nothing outside the kernel changes the tree
meanwhile, writes the claims missed included: a command whose effects the rules can't know whole
commits whatever it changed, so its call holds the whole workspace in the kernel's own lease
table until then (``Ahead.commits_beyond``), and every later call is validated against its
commit or waits for it. A command with effects beyond the sandbox is never speculated on (it
runs once); no command runs more than twice (``docs/design/sandbox.md``, "What is promised").
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Final

import anyio
import anyio.abc
import anyio.to_thread
import sniffio

from .._errors import ToolError
from ..kernel import Ahead, KeyFunction, ToolContext
from ..kernel._protocol import key_owner
from ..locks import Claim, exclusive
from ..sandbox import unavailable as sandbox_unavailable
from ..shell import ShellRules, analyse
from ..shell._claims import barrier_claims, keyed_claims
from ..shell._confine import Launch, unenforced_note
from ..shell._syntax import missing_parser, parse
from ._declare import FunctionTool
from ._file_tools import fs_of
from ._shell_commit import ShellStatistics, run_and_commit, with_notes
from ._workspace import Workspace

__all__ = ["BASH_OUTPUT_LIMIT", "HeadAndTail", "make_bash_tool"]

BASH_OUTPUT_LIMIT: Final = 30_000
"""Bytes of output kept: the first half and the last half; the middle is cut."""
BASH_DEFAULT_TIMEOUT_MS: Final = 120_000
BASH_MAX_TIMEOUT_MS: Final = 600_000
DRAIN_GRACE: Final = 1.0
"""Seconds to wait for the end of the output once the command's process group was killed."""
_READ_SIZE: Final = 1 << 16


class HeadAndTail:
    """Keeps the first and the last ``limit // 2`` bytes of a stream, and counts the rest."""

    def __init__(self, limit: int) -> None:
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0
        """Bytes seen."""

    def add(self, data: bytes | bytearray) -> None:
        self.total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            # Trim only now and then, so keeping the tail costs O(1) a byte.
            if len(self._tail) > 2 * self._tail_limit:
                del self._tail[: -self._tail_limit]

    def text(self) -> str:
        """The output kept, decoded, with a line saying how much was cut from the middle."""
        tail = self._tail[len(self._tail) - self._tail_limit :]
        cut = self.total - len(self._head) - len(tail)
        if not cut:
            return (self._head + tail).decode("utf-8", errors="replace")
        return (
            f"{self._head.decode('utf-8', errors='replace')}\n... ({cut} bytes of output cut "
            f"here, of {self.total}; send long output to a file and read parts of it) ...\n"
            f"{tail.decode('utf-8', errors='replace')}"
        )


def _terminate(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it has been reaped
        os.kill(pid, signal.SIGTERM)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # every process of it has ended
        os.killpg(pgid, signal.SIGKILL)


async def _exited(process: anyio.abc.Process) -> None:
    """Wait until ``process`` has exited, if the platform allows without reaping it (so its pid,
    the group's id, stays reserved while the group is killed).

    On asyncio the loop's child watcher reaps it anyway; the group's id then stays taken while
    any process of the group lives, which is when the kill matters.
    """
    if sniffio.current_async_library() != "trio":
        await process.wait()
        return
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is not None:
        with contextlib.suppress(OSError):  # no pidfd in this kernel: try the next way
            fd = pidfd_open(process.pid)
            try:
                await anyio.wait_readable(fd)
            finally:
                anyio.notify_closing(fd)
                os.close(fd)
            return
    if hasattr(os, "waitid"):
        # A thread in waitid(WNOWAIT), abandoned if we are cancelled (the group is killed then,
        # which ends its wait).
        await anyio.to_thread.run_sync(
            os.waitid, os.P_PID, process.pid, os.WEXITED | os.WNOWAIT, abandon_on_cancel=True
        )
        return
    # Neither (macOS): reap it. The group's id stays taken while any member lives, so the kill
    # that follows still reaches only the command's processes.
    await process.wait()


async def _drain(stream: anyio.abc.ByteReceiveStream, output: HeadAndTail) -> None:
    with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError):
        while True:
            output.add(await stream.receive(_READ_SIZE))


async def _run(
    argv: Sequence[str], cwd: str, seconds: float, env: Mapping[str, str] | None = None
) -> tuple[int | None, HeadAndTail]:
    """Run ``argv`` (``bash -c command``, maybe behind the sandbox launcher); its exit
    status (None if it timed out) and its output."""
    output = HeadAndTail(BASH_OUTPUT_LIMIT)
    process = await anyio.open_process(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert process.stdout is not None
    try:
        with anyio.move_on_after(seconds) as timer:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_drain, process.stdout, output)
                await _exited(process)
                _kill_group(process.pid)  # what the shell left running dies with it
                tasks.cancel_scope.deadline = anyio.current_time() + DRAIN_GRACE
    finally:
        # Every way out (timeout, cancellation, the kernel closing) first asks the launcher to
        # kill what the command started, even what left the group, then kills the group.
        _terminate(process.pid)
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(DRAIN_GRACE):
                await _exited(process)
            _kill_group(process.pid)
            await process.wait()
            await process.aclose()
    return (None if timer.cancelled_caught else process.returncode), output


def parser_missing_note() -> str:
    """What the Bash tool says, once, when it can't read what a command touches."""
    return f"Every command runs alone, holding the whole workspace (a barrier): {missing_parser()}."


_parser_warned = False


def _parser_missing() -> bool:
    # The parser is imported on first use; a parse of anything says whether it is there.
    return parse(b"true")[1] == missing_parser()


class BashTool(FunctionTool):
    """The Bash tool, declaring each command's claims from a parse and a table of rules.

    ``statistics`` counts what its sandbox saw: commands run, misses of the prediction (each
    also a ``CallProgress`` event of its call, with the paths), runs again, changes thrown
    away, runs ahead of the grant and how many of those were thrown away.

    Without the shell parser (the ``shell`` extra) every command is a barrier; the tool says
    so once: a ``RuntimeWarning`` when the first such tool is made, a line of its description,
    and a note after the output of its first result (``parser_missing`` is then True)."""

    def __init__(self, rules: ShellRules | None, writable: Sequence[str] = ()) -> None:
        self.rules = ShellRules.default() if rules is None else rules
        self.writable = tuple(writable)
        self.statistics = ShellStatistics()
        rules_of_this_tool = self.rules
        this = self

        async def bash(
            ctx: ToolContext,
            command: str,
            timeout: int | None = None,  # noqa: ASYNC109 - the argument models are trained to send
        ) -> str:
            """Run a shell command in the workspace root.

            Args:
                command: The command line (run by bash).
                timeout: Milliseconds before the command and all its children are killed
                    (default 120000, at most 600000).
            """
            return await _bash(ctx, command, timeout, rules_of_this_tool, this)

        super().__init__(bash, name="Bash")
        self.parser_missing = _parser_missing()
        self._note_pending = self.parser_missing
        if self.parser_missing:
            self.description = f"{self.description}\n\n{parser_missing_note()}"
            global _parser_warned
            if not _parser_warned:
                _parser_warned = True
                warnings.warn(f"the Bash tool: {parser_missing_note()}", RuntimeWarning, 2)

    def ahead(self, arguments: Mapping[str, Any], key: KeyFunction) -> Ahead | None:
        """In the sandbox, a command's writes land only when its change set is committed, so
        it may run ahead of its grant (``toolkernel.kernel.Ahead``) and commit under it; it
        is speculated on (run before earlier commands have committed, and run again if they
        changed what it may have read) only if it is confined: a command with effects beyond
        the sandbox runs once. Without the sandbox, never."""
        workspace = key_owner(key)
        if not isinstance(workspace, Workspace) or sandbox_unavailable():
            return None
        analysis = analyse(arguments["command"], self.rules, root=workspace.root)
        # What it changes is committed whatever the prediction said. Where the rules can't
        # know that whole (it runs the project's code, a script, what a Makefile says), that
        # may be anything in the workspace: a later call is then ordered after the commit
        # (validated against what it really changed, if it runs ahead itself).
        beyond = () if analysis.effects_known else (exclusive(key(".")),)
        return Ahead(speculative=analysis.confined, commits_beyond=beyond)

    def claims(self, arguments: Mapping[str, Any], key: KeyFunction) -> Sequence[Claim] | None:
        # Keyed here rather than re-keyed from lexical paths: an absolute path, or one under ~,
        # inside the workspace is then a claim on what it names, not on the whole workspace.
        # The key of a kernel with a workspace is its ``Workspace.key``, maybe wrapped.
        workspace = key_owner(key)
        in_workspace = isinstance(workspace, Workspace)
        root = workspace.root if isinstance(workspace, Workspace) else None
        # With the workspace, the project's configuration is read where it decides what runs
        # (hooks, drivers, a tool's configured output); the kernel computes a call's claims
        # again once they are granted, and requeues it if they changed meanwhile.
        analysis = analyse(arguments["command"], self.rules, root=root)
        if not analysis.effects_known and (not in_workspace or sandbox_unavailable()):
            # Nothing will see what it really changes: what the rules can't know, it may touch.
            return barrier_claims()
        return keyed_claims(analysis, key)


def make_bash_tool(rules: ShellRules | None = None, *, writable: Sequence[str] = ()) -> BashTool:
    """A Bash tool whose commands' claims follow ``rules`` (default: the built-in table).

    ``writable``: directories outside the workspace its commands may write in the sandbox,
    beside their temporary directory and the toolchains' caches (``~`` and ``$VARIABLES``
    are expanded)."""
    return BashTool(rules, writable)


async def _bash(
    ctx: ToolContext,
    command: str,
    timeout: int | None,  # noqa: ASYNC109 - the Bash tool's argument, in milliseconds
    rules: ShellRules,
    tool: BashTool,
) -> str:
    fs = fs_of(ctx)
    limit = BASH_DEFAULT_TIMEOUT_MS if timeout is None else timeout
    if not 0 < limit <= BASH_MAX_TIMEOUT_MS:
        raise ToolError(f"timeout must be between 1 and {BASH_MAX_TIMEOUT_MS} ms, not {timeout}")
    root = str(fs.workspace.root)
    analysis = analyse(command, rules, root=root)
    if sandbox_unavailable.cache_info().currsize:  # asked already: no worker thread needed
        why_not = sandbox_unavailable()
    else:
        why_not = await anyio.to_thread.run_sync(sandbox_unavailable)
    if why_not is None:
        committed = await run_and_commit(
            ctx, command, analysis, limit / 1000, _run, tool.statistics, tool.writable
        )
        return with_notes(committed, _parser_note(tool))
    launch = await anyio.to_thread.run_sync(Launch.prepare, command, analysis, root)
    try:
        launch.allow(tool.writable)
        status, output = await _run(launch.argv, root, limit / 1000, launch.env)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(launch.finish)
    text = output.text()
    note = unenforced_note(why_not)
    notes = [] if note is None else [note]
    if status is None:
        message = f"command timed out after {limit} ms and was killed: {command}\n{text}"
        raise ToolError(with_notes(message.rstrip(), notes))
    if status != 0:
        refused = launch.explain(text, root)
        message = f"exit code {status}\n{text}".rstrip()
        raise ToolError(with_notes(f"{message}\n{refused}" if refused else message, notes))
    return with_notes(text, [*notes, *_parser_note(tool)])


def _parser_note(tool: BashTool) -> list[str]:
    """The note that commands are barriers, if the tool has not said it yet."""
    if not tool._note_pending:
        return []
    tool._note_pending = False
    return [f"({parser_missing_note()})"]

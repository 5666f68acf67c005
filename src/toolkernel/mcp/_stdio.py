"""``stdio_tools``: start an MCP server as a subprocess and give its tools to the kernel.

The server runs for as long as the ``async with`` block; its tools, listed once when it starts,
are :class:`~toolkernel.mcp.MCPTool` objects to pass to ``open_kernel``. Open the kernel inside
the block, so that it is closed (and its calls finished) before the server is stopped.

If the server dies, only its calls fail: the ones it was running end ERROR with
:class:`~toolkernel.errors.MCPServerGoneError`, whose message quotes the end of what it wrote
on stderr,
and every later call of its tools fails the same way at once, without waiting for a lease. The
kernel, and the calls of every other tool, go on.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TextIO

from .._errors import MCPServerGoneError
from ._claims import ServerPlace
from ._server import ToolOptions, check_roots, open_server, sdk
from ._tool import ClaimsFunction, MCPTool, ServerConnection, ToolClaimsFunction

__all__ = ["stdio_tools"]


def _check_command(command: object) -> tuple[str, ...]:
    if isinstance(command, str):
        raise TypeError(
            f"stdio_tools takes the command as a list of words, such as "
            f"['mcp-server-git', '--repository', '.'], not one string ({command!r}); "
            f"shlex.split() splits a command line into one"
        )
    if not isinstance(command, Sequence) or not command:
        raise TypeError(f"stdio_tools needs a command: [program, *arguments], not {command!r}")
    words = tuple(command)
    for word in words:
        if not isinstance(word, str | os.PathLike):
            raise TypeError(
                f"stdio_tools: every word of the command must be a string, not {word!r}"
            )
    return tuple(os.fspath(word) for word in words)


def _working_directory(cwd: str | os.PathLike[str] | None) -> str:
    return os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd())


@asynccontextmanager
async def stdio_tools(
    command: Sequence[str],
    *,
    name: str | None = None,
    prefix: str = "",
    reads: Mapping[str, Sequence[str]] | None = None,
    writes: Mapping[str, Sequence[str]] | None = None,
    claims: Mapping[str, ClaimsFunction] | ToolClaimsFunction | None = None,
    roots: Sequence[str | os.PathLike[str]] | None = None,
    preset: str | None = "auto",
    serial: bool = False,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    errlog: TextIO | None = None,
    wait_timeout: float | None = None,
    run_timeout: float | None = None,
) -> AsyncIterator[list[MCPTool]]:
    """Run the MCP server ``command`` over stdio and yield its tools as kernel tools.

    ::

        async with stdio_tools(["mcp-server-git", "--repository", "."]) as git_tools:
            async with open_kernel([*builtin_tools(), *git_tools], root=".") as kernel:
                results = await kernel.run([ToolCall("c1", "git_status", {"repo_path": "."})])

    What a call claims, in order (tool names here are the server's, without ``prefix``):

    - ``reads`` / ``writes``: ``{tool name: [argument names]}``, arguments holding paths a call
      reads or writes, keyed through the kernel's workspace like ``@tool(reads=...)``; or
      ``claims``: ``{tool name: function of the arguments returning claims}``, or one function
      ``(tool, arguments) -> claims`` for every tool (None for a call leaves it to what
      follows). Such a call also shares the server's device.
    - a preset, for the reference servers (filesystem, git, fetch, memory, time), found by the
      name the server gives itself; ``preset=`` names one (``"git"``) or turns them off (None).
    - inference, for a tool whose arguments are named as paths (``path``, ``file_path``,
      ``paths``...): read when its ``readOnlyHint`` says so, written otherwise.
    - otherwise the call is a barrier: it holds the whole workspace and the server's device,
      shared when its ``readOnlyHint`` says so, exclusive otherwise, so it is ordered against
      every file tool in the order the model emitted the calls.

    Presets and inference key a path only where the server reads it as the kernel does: its one
    root is the kernel's workspace, and so is its working directory for relative paths (the
    defaults, when the kernel's root is the current directory); any other call is a barrier.

    Other options:

    - ``name``: the server's name in claims and messages; default: the name the server gives
      itself, else the program's. Two servers with one name share one device.
    - ``prefix``: put before every tool's name (for two servers with tools of the same name).
    - ``roots``: the directories the server is told it may work in (the MCP roots capability);
      default: its working directory. ``roots=()`` tells it none.
    - ``serial``: the server can't take two calls at once: every call holds its device alone.
    - ``env``: environment variables added to the few the SDK passes on (``PATH``, ``HOME``...);
      ``cwd``: the server's working directory (default: this process's).
    - ``errlog``: where the server's stderr goes; default: a temporary file whose end is quoted
      in the error of calls that fail because the server went away.
    - ``wait_timeout`` / ``run_timeout``: defaults for the tools' calls, as for ``@tool``.

    Raises ``TypeError`` for a command that is not a list of words, ``OSError`` when the
    program can't be started (``FileNotFoundError`` naming the command and the ``PATH``
    searched when there is no such program), :class:`~toolkernel.errors.MCPServerGoneError`
    when it exits before answering, and :class:`~toolkernel.ToolDeclarationError` when
    ``reads``/``writes``/``claims`` name a tool or an argument the server does not have, or
    when the server lists its tools in a form the MCP SDK refuses. A tool listed with an empty
    name, or a name listed before, is left out with a warning (logger ``toolkernel.mcp``).
    """
    words = _check_command(command)
    mcp = sdk()
    directory = _working_directory(cwd)
    options = ToolOptions(
        name=name,
        prefix=prefix,
        reads=reads or {},
        writes=writes or {},
        claims=claims,
        roots=check_roots([directory] if roots is None else roots),
        preset=preset,
        serial=serial,
        wait_timeout=wait_timeout,
        run_timeout=run_timeout,
    )
    async with AsyncExitStack() as stack:
        log = errlog
        if log is None:
            log = stack.enter_context(tempfile.TemporaryFile("w+"))  # noqa: SIM115
        connection = ServerConnection(
            name or os.path.basename(words[0]),
            words,
            log,
            place=ServerPlace(roots=options.roots, cwd=directory),
            serial=serial,
        )
        if errlog is None:
            connection.capture_stderr(log)
        parameters = mcp.StdioServerParameters(
            command=words[0],
            args=list(words[1:]),
            env=dict(env) if env is not None else None,
            cwd=os.fspath(cwd) if cwd is not None else None,
        )

        def gone_before_answer(cause: BaseException) -> BaseException:
            if isinstance(cause, (FileNotFoundError, PermissionError)) and cause.filename in (
                None,
                words[0],
            ):
                return _not_started(words[0], cause, env)
            tail = connection.stderr_tail()
            return MCPServerGoneError(
                f"the MCP server {list(words)} exited before it answered"
                + (f"; the last it wrote on stderr: {tail}" if tail else "")
            )

        transport = mcp.client.stdio.stdio_client(parameters, errlog=log)
        async with open_server(
            transport, connection, options, gone_before_answer=gone_before_answer
        ) as tools:
            yield tools


def _not_started(
    program: str, cause: FileNotFoundError | PermissionError, env: Mapping[str, str] | None
) -> OSError:
    """The error for a server's program that could not be started: which, and why."""
    if isinstance(cause, PermissionError):
        return PermissionError(
            f"the MCP server's command {program!r} can't be run: {cause.strerror or cause} "
            f"(is it an executable file?)"
        )
    if os.sep in program:
        where = "there is no such file"
    else:
        search = (env or {}).get("PATH", os.environ.get("PATH", os.defpath))
        where = f"there is no program of that name on PATH ({search})"
    return FileNotFoundError(
        f"the MCP server's command {program!r} was not found: {where}; install it, or give "
        f"the command's full path"
    )

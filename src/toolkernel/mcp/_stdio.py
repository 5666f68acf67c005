"""``stdio_tools``: start an MCP server as a subprocess and give its tools to the kernel.

The server runs for as long as the ``async with`` block; its tools, listed once when it starts,
are :class:`~toolkernel.mcp.MCPTool` objects to pass to ``open_kernel``. Open the kernel inside
the block, so that it is closed (and its calls finished) before the server is stopped.

If the server dies, only its calls fail: the ones it was running end ERROR with
:class:`~toolkernel.MCPServerGoneError`, whose message quotes the end of what it wrote on stderr,
and every later call of its tools fails the same way at once, without waiting for a lease. The
kernel, and the calls of every other tool, go on.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, TextIO

import pydantic

from .._errors import MCPServerGoneError, ToolDeclarationError
from ._content import first_problem
from ._tool import ClaimsFunction, MCPTool, ServerConnection, ToolClaimsFunction

__all__ = ["stdio_tools"]

_log = logging.getLogger("toolkernel.mcp")

_MAX_PAGES = 100  # of tools/list: a server whose cursor never ends can't hang the start
_CONNECTION_CLOSED = -32000  # mcp_types.CONNECTION_CLOSED: the transport ended


def _sdk() -> Any:
    try:
        import mcp.client.stdio

        import mcp
    except ImportError:  # pragma: no cover - the dev set-up installs it
        raise ImportError(
            "toolkernel.mcp needs the MCP SDK: pip install 'toolkernel[mcp]'"
        ) from None
    return mcp


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


def _check_names(option: str, given: Mapping[str, Any] | None, tools: Sequence[str]) -> None:
    for tool_name in given or {}:
        if tool_name not in tools:
            raise ToolDeclarationError(
                f"{option}= names tool {tool_name!r}, but the MCP server has no tool by that "
                f"name; its tools are {', '.join(tools) or 'none'}"
            )


@asynccontextmanager
async def stdio_tools(
    command: Sequence[str],
    *,
    name: str | None = None,
    prefix: str = "",
    reads: Mapping[str, Sequence[str]] | None = None,
    writes: Mapping[str, Sequence[str]] | None = None,
    claims: Mapping[str, ClaimsFunction] | ToolClaimsFunction | None = None,
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

    Claims follow each tool's ``readOnlyHint``: read-only tools share the server's device
    (``device("mcp:<name>")``), every other tool holds it alone. Finer claims, from the
    arguments, replace that exclusive lease for the tools they name (their calls share the
    server's device and take what is declared):

    - ``reads`` / ``writes``: ``{tool name: [argument names]}``, arguments holding paths a call
      reads or writes, keyed through the kernel's workspace like ``@tool(reads=...)``;
    - ``claims``: ``{tool name: function of the arguments returning claims}``, or one function
      ``(tool, arguments) -> claims`` for every tool (returning None keeps the hints' claims).

    Tool names here are the server's, without ``prefix``. Other options:

    - ``name``: the server's name in claims and messages; default: the name the server gives
      itself, else the program's. Two servers with one name share one device.
    - ``prefix``: put before every tool's name (for two servers with tools of the same name).
    - ``env``: environment variables added to the few the SDK passes on (``PATH``, ``HOME``...);
      ``cwd``: the server's working directory.
    - ``errlog``: where the server's stderr goes; default: a temporary file whose end is quoted
      in the error of calls that fail because the server went away.
    - ``wait_timeout`` / ``run_timeout``: defaults for the tools' calls, as for ``@tool``.

    Raises ``TypeError`` for a command that is not a list of words, ``OSError`` when the
    program can't be started, :class:`~toolkernel.MCPServerGoneError` when it exits before
    answering, and :class:`~toolkernel.ToolDeclarationError` when ``reads``/``writes``/
    ``claims`` name a tool or an argument the server does not have, or when the server lists its
    tools in a form the MCP SDK refuses.
    """
    words = _check_command(command)
    mcp = _sdk()
    from mcp_types import Implementation

    from .. import __version__

    failure: BaseException | None = None  # starting failed: raised once the server is stopped
    thrown: BaseException | None = None  # what the block raised
    try:
        async with AsyncExitStack() as stack:
            log = errlog
            if log is None:
                log = stack.enter_context(tempfile.TemporaryFile("w+"))  # noqa: SIM115
            connection = ServerConnection(name or os.path.basename(words[0]), words, log)
            if errlog is None:
                connection.capture_stderr(log)
            parameters = mcp.StdioServerParameters(
                command=words[0],
                args=list(words[1:]),
                env=dict(env) if env is not None else None,
                cwd=os.fspath(cwd) if cwd is not None else None,
            )
            client = mcp.Client(
                mcp.client.stdio.stdio_client(parameters, errlog=log),
                client_info=Implementation(name="toolkernel", version=__version__),
            )
            try:
                await stack.enter_async_context(client)
                if name is None and client.server_info is not None and client.server_info.name:
                    connection.rename(client.server_info.name)
                specs = await _list_tools(client)
                connection.client = client
                tools = _make_tools(
                    connection,
                    specs,
                    prefix=prefix,
                    reads=reads or {},
                    writes=writes or {},
                    claims=claims,
                    wait_timeout=wait_timeout,
                    run_timeout=run_timeout,
                )
            except Exception as exc:
                failure = exc
                refused = _unwrapped(exc)
                if isinstance(refused, pydantic.ValidationError):
                    failure = ToolDeclarationError(
                        f"the MCP server {connection.name!r} lists its tools in a form that is "
                        f"not valid MCP ({first_problem(refused)}), which the MCP SDK refuses; "
                        f"none of its tools can be used until the server is fixed"
                    )
                    failure.__cause__ = refused
                if _connection_closed(exc, mcp.MCPError):
                    tail = connection.stderr_tail()
                    failure = MCPServerGoneError(
                        f"the MCP server {list(words)} exited before it answered"
                        + (f"; the last it wrote on stderr: {tail}" if tail else "")
                    )
            if failure is None:
                stack.callback(setattr, connection, "gone", True)  # later calls fail clearly
                try:
                    yield tools
                except BaseException as exc:
                    thrown = exc
                    raise
    except BaseExceptionGroup as group:
        # The SDK's task groups wrap what passes through them; what the block raised, or
        # the start's failure, comes out as it was.
        if not _wraps_only(group, thrown or failure):
            raise
    if thrown is not None:
        raise thrown
    if failure is not None:
        raise failure


def _unwrapped(exc: BaseException) -> BaseException:
    """``exc`` out of the SDK's groups of one."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _connection_closed(exc: BaseException, error_type: type[BaseException]) -> bool:
    """Whether ``exc`` says the connection closed (the SDK's groups of one unwrapped)."""
    exc = _unwrapped(exc)
    return isinstance(exc, error_type) and getattr(exc, "code", None) == _CONNECTION_CLOSED


def _wraps_only(group: BaseExceptionGroup[Any], target: BaseException | None) -> bool:
    """Whether ``group`` is ``target`` wrapped in groups of one, one or more times."""
    inner: BaseException = group
    while isinstance(inner, BaseExceptionGroup) and inner is not target:
        if len(inner.exceptions) != 1:
            return False
        inner = inner.exceptions[0]
    return inner is target


def _make_tools(
    connection: ServerConnection,
    specs: list[Any],
    *,
    prefix: str,
    reads: Mapping[str, Sequence[str]],
    writes: Mapping[str, Sequence[str]],
    claims: Mapping[str, ClaimsFunction] | ToolClaimsFunction | None,
    wait_timeout: float | None,
    run_timeout: float | None,
) -> list[MCPTool]:
    names = [spec.name for spec in specs]
    by_tool = claims if isinstance(claims, Mapping) else {}
    for option, given in (("reads", reads), ("writes", writes), ("claims", by_tool)):
        _check_names(option, given, names)
    return [
        MCPTool(
            connection,
            spec,
            prefix=prefix,
            reads=reads.get(spec.name, ()),
            writes=writes.get(spec.name, ()),
            claims=by_tool.get(spec.name),
            tool_claims=None if isinstance(claims, Mapping) else claims,
            wait_timeout=wait_timeout,
            run_timeout=run_timeout,
        )
        for spec in specs
    ]


async def _list_tools(client: Any) -> list[Any]:
    """The server's tools, each name once: a server that lists a name twice (the spec says
    names are unique) would otherwise stop the kernel from opening; the first is kept."""
    specs: dict[str, Any] = {}
    cursor = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        for spec in page.tools:
            if spec.name in specs:
                _log.warning(
                    "toolkernel.mcp: the MCP server lists the tool %r twice; the first is kept",
                    spec.name,
                )
                continue
            specs[spec.name] = spec
        cursor = page.next_cursor
        if cursor is None:
            break
    return list(specs.values())

"""Open an MCP server over any transport and make its tools: what ``stdio_tools`` and
``http_tools`` share.

The server is told its roots (the MCP roots capability), its tools are listed once, and each
becomes an :class:`~toolkernel.mcp.MCPTool`. One server breaks only itself: a tool listed with
an empty name, or a name listed before, is left out with a warning naming it; a tool list the
SDK refuses is a :class:`~toolkernel.ToolDeclarationError` naming the server and the field.
"""

from __future__ import annotations

import logging
import os
import pathlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import attrs
import pydantic

from .._errors import ToolDeclarationError
from .._extras import missing_extra
from ._content import first_problem
from ._presets import PRESETS, Preset, preset_for
from ._tool import ClaimsFunction, MCPTool, ServerConnection, ToolClaimsFunction

__all__ = ["ToolOptions", "open_server", "check_roots"]

_log = logging.getLogger("toolkernel.mcp")

_MAX_PAGES = 100  # of tools/list: a server whose cursor never ends can't hang the start
_CONNECTION_CLOSED = -32000  # mcp_types.CONNECTION_CLOSED: the transport ended


def sdk() -> Any:
    """The ``mcp`` package, or an ImportError saying which extra brings it."""
    try:
        import mcp.client.stdio
        import mcp.client.streamable_http

        import mcp
    except ImportError:  # pragma: no cover - toolkernel.mcp's import checked it is there
        raise ImportError(
            missing_extra("mcp", "toolkernel.mcp", "mcp") or "the mcp SDK does not import"
        ) from None
    return mcp


def check_roots(roots: object) -> tuple[str, ...]:
    """Absolute directories from ``roots=`` (strings or paths)."""
    if isinstance(roots, str | os.PathLike) or not isinstance(roots, Sequence):
        raise TypeError(f"roots= takes a list of directories, not {roots!r}")
    found = []
    for root in roots:
        if not isinstance(root, str | os.PathLike):
            raise TypeError(f"roots= takes directories as strings or paths, not {root!r}")
        found.append(os.path.abspath(os.fspath(root)))
    return tuple(found)


def _check_preset(preset: object) -> None:
    if preset is not None and preset != "auto" and preset not in PRESETS:
        raise ValueError(
            f"preset={preset!r} is not a preset; the presets are "
            f"{', '.join(sorted(PRESETS))}, 'auto' (by the name the server gives itself) "
            f"and None (none)"
        )


@attrs.frozen
class ToolOptions:
    """The options every way of opening a server takes, checked."""

    name: str | None = None
    prefix: str = ""
    reads: Mapping[str, Sequence[str]] = attrs.field(factory=dict)
    writes: Mapping[str, Sequence[str]] = attrs.field(factory=dict)
    claims: Mapping[str, ClaimsFunction] | ToolClaimsFunction | None = None
    roots: tuple[str, ...] = ()
    preset: str | None = "auto"
    serial: bool = False
    wait_timeout: float | None = None
    run_timeout: float | None = None

    def __attrs_post_init__(self) -> None:
        _check_preset(self.preset)

    def chosen_preset(self, server_name: str | None) -> Preset | None:
        if self.preset is None:
            return None
        if self.preset == "auto":
            return preset_for(server_name)
        return PRESETS[self.preset]


@asynccontextmanager
async def open_server(
    transport: Any,
    connection: ServerConnection,
    options: ToolOptions,
    *,
    gone_before_answer: Callable[[BaseException], BaseException],
) -> AsyncIterator[list[MCPTool]]:
    """Connect through ``transport`` (an SDK transport), list the server's tools and yield
    them; the server is told ``options.roots``. ``gone_before_answer`` makes the error for a
    server that could not be reached or started, or went away before it answered, from what
    failed (the transport's own error: an ``OSError`` from starting it, a closed connection).

    The connection lives in a task of its own: when the transport fails (a server over HTTP
    that dies mid-call makes the SDK's transport raise), that task ends, the server's calls
    fail, and the caller's block, with the kernel in it, goes on."""
    thrown: BaseException | None = None  # what starting, or the block, raised
    try:
        async with anyio.create_task_group() as task_group:
            stop = anyio.Event()
            try:
                tools = await task_group.start(
                    _serve, transport, connection, options, gone_before_answer, stop
                )
            except BaseException as exc:
                thrown = exc
                raise
            try:
                yield tools
            except BaseException as exc:
                thrown = exc
                raise
            finally:
                stop.set()
    except BaseExceptionGroup as group:
        # Task groups wrap what passes through them; what starting or the block raised comes
        # out as it was.
        if not _wraps_only(group, thrown):
            raise
    if thrown is not None:
        raise thrown


async def _serve(
    transport: Any,
    connection: ServerConnection,
    options: ToolOptions,
    gone_before_answer: Callable[[BaseException], BaseException],
    stop: anyio.Event,
    *,
    task_status: anyio.abc.TaskStatus[list[MCPTool]] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Open the client, report the tools, and keep the connection until ``stop``; a failure
    before the tools are reported is raised (unwrapped), one after it ends the connection."""
    mcp = sdk()
    from mcp_types import Implementation

    from .. import __version__

    client = mcp.Client(
        transport,
        client_info=Implementation(name="toolkernel", version=__version__),
        list_roots_callback=_roots_answer(options.roots),
    )
    started = False
    try:
        async with client:
            server_name = client.server_info.name if client.server_info is not None else None
            if options.name is None and server_name:
                connection.rename(server_name)
            connection.preset = options.chosen_preset(server_name)
            specs = await _list_tools(client, connection.name)
            tools = _make_tools(connection, specs, options)
            connection.client = client
            task_status.started(tools)
            started = True
            try:
                await stop.wait()
            finally:
                connection.gone = True  # later calls fail clearly
    except Exception as exc:
        connection.gone = True
        if started:
            _log.warning(
                "toolkernel.mcp: the connection to the MCP server %r ended: %s",
                connection.name,
                _unwrapped(exc),
            )
            return
        failure, cause = _start_failure(exc, connection, gone_before_answer, mcp.MCPError)
        raise failure from cause


def _roots_answer(roots: tuple[str, ...]) -> Any:
    """The client's answer to ``roots/list``: ``roots`` as ``file://`` URIs; None (the
    capability not declared) when there are none."""
    if not roots:
        return None
    from mcp_types import ListRootsResult, Root

    answer = ListRootsResult(
        roots=[
            Root(uri=pathlib.Path(root).as_uri(), name=os.path.basename(root) or root)  # type: ignore[arg-type]
            for root in roots
        ]
    )

    async def list_roots(context: Any) -> Any:
        return answer

    return list_roots


def _start_failure(
    exc: Exception,
    connection: ServerConnection,
    gone_before_answer: Callable[[BaseException], BaseException],
    error_type: type[BaseException],
) -> tuple[BaseException, BaseException | None]:
    """What to raise for a start that failed with ``exc``, and its cause."""
    inner = _unwrapped(exc)
    if isinstance(inner, pydantic.ValidationError):
        refused = ToolDeclarationError(
            f"the MCP server {connection.name!r} lists its tools in a form that is not valid "
            f"MCP ({first_problem(inner)}), which the MCP SDK refuses; none of its tools can "
            f"be used until the server is fixed"
        )
        return refused, inner
    if _connection_closed(inner, error_type) or _unreachable(inner):
        return gone_before_answer(inner), inner
    return inner, None


def _unwrapped(exc: BaseException) -> BaseException:
    """``exc`` out of the SDK's groups of one."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _connection_closed(exc: BaseException, error_type: type[BaseException]) -> bool:
    """Whether ``exc`` says the connection closed (the SDK's groups of one unwrapped)."""
    exc = _unwrapped(exc)
    return isinstance(exc, error_type) and getattr(exc, "code", None) == _CONNECTION_CLOSED


def _unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` is the HTTP client failing to reach the server (refused, reset)."""
    return isinstance(exc, OSError) or type(exc).__name__ in {
        "ConnectError",
        "ReadError",
        "RemoteProtocolError",
        "ConnectTimeout",
    }


def _wraps_only(group: BaseExceptionGroup[Any], target: BaseException | None) -> bool:
    """Whether ``group`` is ``target`` wrapped in groups of one, one or more times."""
    inner: BaseException = group
    while isinstance(inner, BaseExceptionGroup) and inner is not target:
        if len(inner.exceptions) != 1:
            return False
        inner = inner.exceptions[0]
    return inner is target


def _check_names(option: str, given: Mapping[str, Any] | None, tools: Sequence[str]) -> None:
    for tool_name in given or {}:
        if tool_name not in tools:
            raise ToolDeclarationError(
                f"{option}= names tool {tool_name!r}, but the MCP server has no tool by that "
                f"name; its tools are {', '.join(tools) or 'none'}"
            )


def _make_tools(
    connection: ServerConnection, specs: list[Any], options: ToolOptions
) -> list[MCPTool]:
    names = [spec.name for spec in specs]
    claims = options.claims
    by_tool = claims if isinstance(claims, Mapping) else {}
    for option, given in (("reads", options.reads), ("writes", options.writes)):
        _check_names(option, given, names)
    _check_names("claims", by_tool, names)
    return [
        MCPTool(
            connection,
            spec,
            prefix=options.prefix,
            reads=options.reads.get(spec.name, ()),
            writes=options.writes.get(spec.name, ()),
            claims=by_tool.get(spec.name),
            tool_claims=None if isinstance(claims, Mapping) else claims,
            wait_timeout=options.wait_timeout,
            run_timeout=options.run_timeout,
        )
        for spec in specs
    ]


async def _list_tools(client: Any, server: str) -> list[Any]:
    """The server's tools, each usable name once. A tool with an empty name (it can't be
    called) and a name listed before (the spec says names are unique; two would stop the
    kernel from opening) are each left out with a warning naming it; the server's other tools
    are kept."""
    specs: dict[str, Any] = {}
    cursor = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        for spec in page.tools:
            if not spec.name.strip():
                _log.warning(
                    "toolkernel.mcp: the MCP server %r lists a tool with an empty name (%r); "
                    "it is left out",
                    server,
                    spec.name,
                )
            elif spec.name in specs:
                _log.warning(
                    "toolkernel.mcp: the MCP server %r lists the tool %r twice; the first is "
                    "kept and the other left out",
                    server,
                    spec.name,
                )
            else:
                specs[spec.name] = spec
        cursor = page.next_cursor
        if cursor is None:
            break
    return list(specs.values())

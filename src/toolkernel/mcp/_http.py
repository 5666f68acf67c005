"""``http_tools``: connect to an MCP server over streamable HTTP and give its tools to the kernel.

The same tools, claims and guarantees as :func:`~toolkernel.mcp.stdio_tools`: a server that
can't be reached, or goes away, fails its own calls with
:class:`~toolkernel.errors.MCPServerGoneError`
and the kernel goes on.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

from .._errors import MCPServerGoneError
from ._claims import ServerPlace
from ._server import ToolOptions, check_roots, open_server, sdk
from ._tool import ClaimsFunction, MCPTool, ServerConnection, ToolClaimsFunction

__all__ = ["http_tools"]


def _check_url(url: object) -> str:
    if not isinstance(url, str):
        raise TypeError(f"http_tools takes the server's URL as a string, not {url!r}")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"http_tools needs an http:// or https:// URL of the server's MCP endpoint, such as "
            f"'http://127.0.0.1:8000/mcp', not {url!r}"
        )
    return url


@asynccontextmanager
async def http_tools(
    url: str,
    *,
    name: str | None = None,
    prefix: str = "",
    reads: Mapping[str, Sequence[str]] | None = None,
    writes: Mapping[str, Sequence[str]] | None = None,
    claims: Mapping[str, ClaimsFunction] | ToolClaimsFunction | None = None,
    roots: Sequence[str | os.PathLike[str]] = (),
    preset: str | None = "auto",
    serial: bool = False,
    headers: Mapping[str, str] | None = None,
    wait_timeout: float | None = None,
    run_timeout: float | None = None,
) -> AsyncIterator[list[MCPTool]]:
    """Connect to the MCP server at ``url`` (streamable HTTP) and yield its tools as kernel
    tools.

    ::

        async with http_tools("http://127.0.0.1:8000/mcp") as tools:
            async with open_kernel([*builtin_tools(), *tools], root=".") as kernel:
                results = await kernel.run([ToolCall("c1", "search", {"query": "lease"})])

    Options are those of :func:`~toolkernel.mcp.stdio_tools`, with two differences: a server
    reached over HTTP is told no roots unless ``roots=`` names them (it may run on another
    machine, with files of its own), so its path arguments are claims only when you declare
    them or when it shares this machine's files and ``roots=[the kernel's root]`` says so
    (absolute paths then; a relative path is a barrier, as its working directory is unknown);
    and ``headers`` are sent with every request (an ``Authorization`` header, say). The
    server's name, in claims and messages, defaults to the name it gives itself, else the URL's
    host and port.

    Raises ``TypeError``/``ValueError`` for a URL that is not an http(s) URL,
    :class:`~toolkernel.errors.MCPServerGoneError` when the server can't be reached or closes the
    connection before it answers, and :class:`~toolkernel.ToolDeclarationError` as
    ``stdio_tools`` does.
    """
    url = _check_url(url)
    mcp = sdk()
    options = ToolOptions(
        name=name,
        prefix=prefix,
        reads=reads or {},
        writes=writes or {},
        claims=claims,
        roots=check_roots(roots),
        preset=preset,
        serial=serial,
        wait_timeout=wait_timeout,
        run_timeout=run_timeout,
    )
    connection = ServerConnection(
        name or (urlsplit(url).netloc or url),
        (url,),
        place=ServerPlace(roots=options.roots, cwd=None),
        serial=serial,
    )

    def gone_before_answer(cause: BaseException) -> MCPServerGoneError:
        return MCPServerGoneError(
            f"the MCP server at {url} could not be reached, or closed the connection before "
            f"it answered"
        )

    async with AsyncExitStack() as stack:
        client: Any = None
        if headers:
            import httpx2  # the MCP SDK's HTTP client

            # The SDK's own timeouts: a server may hold a response stream open for long.
            timeout = httpx2.Timeout(30.0, read=300.0)
            client = await stack.enter_async_context(
                httpx2.AsyncClient(headers=dict(headers), timeout=timeout)
            )
        transport = mcp.client.streamable_http.streamable_http_client(url, http_client=client)
        async with open_server(
            transport, connection, options, gone_before_answer=gone_before_answer
        ) as tools:
            yield tools

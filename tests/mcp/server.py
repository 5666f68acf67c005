"""An MCP server for the tests, written with the SDK's ``MCPServer`` and run as a subprocess over
stdio: ``python tests/mcp/server.py``.

Its tools keep a little key-value store in memory and files in its working directory, and take
``seconds`` to answer where a test needs calls to last. ``read``, ``read_file``, ``pid`` and
``stall`` say ``readOnlyHint: true``; the others say nothing (not read-only, by the spec's
default).
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import ListRoots, Resolve
from mcp.types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ListRootsResult,
    ResourceLink,
    ToolAnnotations,
)

READ_ONLY = ToolAnnotations(read_only_hint=True)

server = MCPServer("test-store", log_level="WARNING")
store: dict[str, str] = {}


@server.tool(annotations=READ_ONLY, structured_output=False)
async def read(key: str, seconds: float = 0.0) -> str:
    """Read a key of the store."""
    await anyio.sleep(seconds)
    return store.get(key, "")


@server.tool(structured_output=False)
async def write(key: str, value: str, seconds: float = 0.0) -> str:
    """Set a key of the store."""
    await anyio.sleep(seconds)
    store[key] = value
    return f"{key} = {value}"


@server.tool(annotations=READ_ONLY, structured_output=False)
async def read_file(path: str) -> str:
    """Read a file of the server's working directory."""
    return await anyio.Path(path).read_text()


@server.tool(structured_output=False)
async def write_file(path: str, content: str, seconds: float = 0.0) -> str:
    """Write a file of the server's working directory."""
    await anyio.sleep(seconds)
    await anyio.Path(path).write_text(content)
    return f"wrote {path}"


@server.tool()
async def count(text: str) -> dict[str, int]:
    """Count the words and characters of a text (structured output)."""
    return {"words": len(text.split()), "characters": len(text)}


@server.tool(structured_output=False)
async def picture() -> Image:
    """A one-pixel PNG."""
    return Image(data=b"\x89PNG\r\n\x1a\n", format="png")


@server.tool()
async def greet(name: str) -> str:
    """Greet someone (structured output: the SDK sends ``{"result": ...}`` beside the text)."""
    return f"hello, {name}"


@server.tool(structured_output=False)
async def report() -> list[object]:
    """A caption, a chart (PNG), the report as a PDF, and a link to its data."""
    return [
        "the quarter in one chart:",
        Image(data=b"\x89PNG\r\n\x1a\n", format="png"),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri="file:///reports/q3.pdf", mime_type="application/pdf", blob="JVBERi0xLjQK"
            ),
        ),
        ResourceLink(type="resource_link", uri="file:///reports/q3.csv", name="q3.csv"),
    ]


@server.tool()
async def conflict() -> CallToolResult:
    """Fail with structured content and no text."""
    return CallToolResult(
        content=[], structured_content={"code": 409, "reason": "stale"}, is_error=True
    )


@server.tool(structured_output=False)
async def refuse(reason: str) -> str:
    """Fail with ``reason``."""
    raise ToolError(reason)


@server.tool(structured_output=False)
async def steps(count: int, ctx: Context) -> str:
    """Report progress ``count`` times."""
    for done in range(1, count + 1):
        await ctx.report_progress(done, count, f"step {done} of {count}")
        await anyio.sleep(0.01)
    return "done"


@server.tool(annotations=READ_ONLY, structured_output=False)
async def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool(annotations=READ_ONLY, structured_output=False)
async def stall(seconds: float = 60.0) -> str:
    """Answer after a long while."""
    await anyio.sleep(seconds)
    return "stalled"


def ask_for_roots() -> ListRoots:
    return ListRoots()


@server.tool(annotations=READ_ONLY, structured_output=False)
async def roots(given: Annotated[ListRootsResult, Resolve(ask_for_roots)]) -> str:
    """The roots the client gave this server, one URI a line (asked over stdio's back channel,
    or as an input the client answers over HTTP)."""
    return "\n".join(str(root.uri) for root in given.roots)


@server.tool(annotations=READ_ONLY, structured_output=False)
async def header(name: str, ctx: Context) -> str:
    """The value of an HTTP request header of this call (empty over stdio)."""
    return (ctx.headers or {}).get(name.lower(), "")


@server.tool(structured_output=False)
async def crash(message: str) -> str:
    """Write ``message`` on stderr and exit at once, mid-call."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    os._exit(3)


async def serve_http() -> None:
    """Serve streamable HTTP on a free loopback port, printing its URL on stdout once it
    listens."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    print(f"http://127.0.0.1:{port}/mcp", flush=True)
    await web.serve(sockets=[sock])


if __name__ == "__main__":
    if sys.argv[1:] == ["--http"]:
        anyio.run(serve_http)
    else:
        server.run()

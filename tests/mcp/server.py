"""An MCP server for the tests, written with the SDK's ``MCPServer`` and run as a subprocess over
stdio: ``python tests/mcp/server.py``.

Its tools keep a little key-value store in memory and files in its working directory, and take
``seconds`` to answer where a test needs calls to last. ``read``, ``read_file``, ``pid`` and
``stall`` say ``readOnlyHint: true``; the others say nothing (not read-only, by the spec's
default).
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

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


@server.tool(structured_output=False)
async def crash(message: str) -> str:
    """Write ``message`` on stderr and exit at once, mid-call."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    os._exit(3)


if __name__ == "__main__":
    server.run()

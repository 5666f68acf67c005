"""MCP servers' tools as kernel tools, through the official ``mcp`` SDK (2.x; the
``toolkernel[mcp]`` extra).

- :func:`stdio_tools`: start a server over stdio and yield its tools, for ``open_kernel``;
  :func:`http_tools`: the same for a server reached over streamable HTTP.
- :class:`MCPTool`: one such tool. What its calls claim: the finer claims you declare from its
  arguments, else a preset's (the reference servers), else what its schema's path arguments
  say, else the whole workspace and the server (a barrier: shared for a read-only tool,
  exclusive otherwise), so it is ordered against the kernel's file tools.
- :class:`~toolkernel.errors.MCPToolError`: the server answered a call with an error;
  :class:`~toolkernel.errors.MCPServerGoneError`: the server exited, so its calls fail.

The other direction, the kernel's own tools served to MCP clients (``python -m toolkernel
mcp``), is ``_serving`` (the tools, their calls, ``Batch``) and ``_serve`` (the SDK's server
over stdio and HTTP, and the HTTP guard); neither is imported here.
"""

from .._errors import MCPServerGoneError as MCPServerGoneError
from .._errors import MCPToolError as MCPToolError
from ._http import http_tools as http_tools
from ._stdio import stdio_tools as stdio_tools
from ._tool import ClaimsFunction as ClaimsFunction
from ._tool import MCPTool as MCPTool
from ._tool import ToolClaimsFunction as ToolClaimsFunction

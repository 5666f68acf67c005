"""MCP servers' tools as kernel tools, through the official ``mcp`` SDK (2.x; the
``toolkernel[mcp]`` extra).

- :func:`stdio_tools`: start a server over stdio and yield its tools, for ``open_kernel``.
- :class:`MCPTool`: one such tool; its claims follow the tool's ``readOnlyHint`` (a shared lease
  on the server's device for read-only tools, exclusive otherwise), or the finer claims you
  declare from its arguments.
- :class:`~toolkernel.MCPToolError`: the server answered a call with an error;
  :class:`~toolkernel.MCPServerGoneError`: the server exited, so its calls fail.
"""

from .._errors import MCPServerGoneError as MCPServerGoneError
from .._errors import MCPToolError as MCPToolError
from ._stdio import stdio_tools as stdio_tools
from ._tool import ClaimsFunction as ClaimsFunction
from ._tool import MCPTool as MCPTool
from ._tool import ToolClaimsFunction as ToolClaimsFunction

"""toolkernel: run the tool calls of LLM agents concurrently, without races.

The top level holds what a user of the kernel annotates with and catches: the kernel and its
calls (``open_kernel``, ``Kernel``, ``ToolCall``, ``ToolResult``, ...), declaring tools (``tool``,
``Tool``, ``ToolContext``, ``Workspace``), claims (``reads``, ``writes``, ``path``, ``pool``, ...)
and the errors worth catching by name, with their two bases (``CallFailedError``, what a call's
result can carry; ``UsageError``, a mistake in the code using the kernel). Everything else lives
in the public module of its layer, one idea a module:

* ``toolkernel.errors``: every exception, the rare ones included;
* ``toolkernel.kernel``: the kernel's events, snapshots, statistics, hooks and listeners;
* ``toolkernel.locks``: the lock manager and its lease table, used without a kernel;
* ``toolkernel.tools``: the built-in tools and the shell analysis;
* ``toolkernel.leases``, ``.formats``, ``.mcp``, ``.agent``, ``.integrations``, ``.testing``,
  ``.trace``: leases shared between processes, wire formats, MCP, the agent loop, other
  frameworks' adapters, testing helpers and traces (each loaded on first import).

A name that left the top level still imports from it for one release, with a
``DeprecationWarning`` naming its new place.
"""

import importlib as _importlib
import warnings as _warnings

from . import errors as errors
from ._errors import CallCancelledError as CallCancelledError
from ._errors import CallFailedError as CallFailedError
from ._errors import CallTimeoutError as CallTimeoutError
from ._errors import DependencyFailedError as DependencyFailedError
from ._errors import FencedOutError as FencedOutError
from ._errors import HookError as HookError
from ._errors import InvalidCallError as InvalidCallError
from ._errors import InvalidClaimError as InvalidClaimError
from ._errors import KernelClosedError as KernelClosedError
from ._errors import ModelError as ModelError
from ._errors import PermissionDeniedError as PermissionDeniedError
from ._errors import StaleViewError as StaleViewError
from ._errors import ToolDeclarationError as ToolDeclarationError
from ._errors import ToolError as ToolError
from ._errors import ToolkernelError as ToolkernelError
from ._errors import UndeclaredAccessError as UndeclaredAccessError
from ._errors import UsageError as UsageError
from ._open import open_kernel as open_kernel
from .kernel import CallEvent as CallEvent
from .kernel import CallHandle as CallHandle
from .kernel import Content as Content
from .kernel import Decision as Decision
from .kernel import Kernel as Kernel
from .kernel import Permission as Permission
from .kernel import Status as Status
from .kernel import ToolCall as ToolCall
from .kernel import ToolContext as ToolContext
from .kernel import ToolResult as ToolResult
from .locks import EVERYTHING as EVERYTHING
from .locks import Claim as Claim
from .locks import Mode as Mode
from .locks import device as device
from .locks import exclusive as exclusive
from .locks import path as path
from .locks import pool as pool
from .locks import reads as reads
from .locks import shared as shared
from .locks import units as units
from .locks import writes as writes
from .tools import Tool as Tool
from .tools import Workspace as Workspace
from .tools import tool as tool

__version__ = "0.1.0.dev0"

# Names that left the top level, each with its new home: kept for one release, with a warning.
_MOVED = {
    "ApprovalRequiredError": ("toolkernel.errors", "ApprovalRequiredError"),
    "ApprovalTimeoutError": ("toolkernel.errors", "ApprovalTimeoutError"),
    "Block": ("toolkernel.kernel", "Block"),
    "CallBlocked": ("toolkernel.kernel", "CallBlocked"),
    "CallEndedError": ("toolkernel.errors", "CallEndedError"),
    "CallFinished": ("toolkernel.kernel", "CallFinished"),
    "CallInfo": ("toolkernel.kernel", "CallInfo"),
    "CallProgress": ("toolkernel.kernel", "CallProgress"),
    "CallQueued": ("toolkernel.kernel", "CallQueued"),
    "CallStarted": ("toolkernel.kernel", "CallStarted"),
    "CallState": ("toolkernel.kernel", "CallState"),
    "CapacityError": ("toolkernel.errors", "CapacityError"),
    "DeadlockError": ("toolkernel.errors", "DeadlockError"),
    "DependencyCycleError": ("toolkernel.errors", "DependencyCycleError"),
    "FencedOut": ("toolkernel.errors", "FencedOutError"),
    "ForeignLeaseError": ("toolkernel.errors", "ForeignLeaseError"),
    "IllegalTransitionError": ("toolkernel.errors", "IllegalTransitionError"),
    "InvalidArgumentsError": ("toolkernel.errors", "InvalidArgumentsError"),
    "KernelSnapshot": ("toolkernel.kernel", "KernelSnapshot"),
    "KernelStatistics": ("toolkernel.kernel", "KernelStatistics"),
    "Lease": ("toolkernel.locks", "Lease"),
    "LeaseReleaseError": ("toolkernel.errors", "LeaseReleaseError"),
    "LeaseServiceError": ("toolkernel.errors", "LeaseServiceError"),
    "LeaseTable": ("toolkernel.locks", "LeaseTable"),
    "LeaseWaitTimeoutError": ("toolkernel.errors", "LeaseWaitTimeoutError"),
    "LockManager": ("toolkernel.locks", "LockManager"),
    "MCPServerGoneError": ("toolkernel.errors", "MCPServerGoneError"),
    "MCPToolError": ("toolkernel.errors", "MCPToolError"),
    "NestingDepthError": ("toolkernel.errors", "NestingDepthError"),
    "PathChangedError": ("toolkernel.errors", "PathChangedError"),
    "PathEscapeError": ("toolkernel.errors", "PathEscapeError"),
    "ResourceContention": ("toolkernel.kernel", "ResourceContention"),
    "RewriteArguments": ("toolkernel.kernel", "RewriteArguments"),
    "RunTimeoutError": ("toolkernel.errors", "RunTimeoutError"),
    "SchemaError": ("toolkernel.errors", "SchemaError"),
    "ShellRulesError": ("toolkernel.errors", "ShellRulesError"),
    "SupplyResult": ("toolkernel.kernel", "SupplyResult"),
    "UnknownPoolError": ("toolkernel.errors", "UnknownPoolError"),
    "UnknownToolError": ("toolkernel.errors", "UnknownToolError"),
    "WouldBlock": ("toolkernel.locks", "WouldBlock"),
}


def __getattr__(name: str) -> object:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _MOVED[name]
    message = f"toolkernel.{name} is deprecated: use {module}.{attribute}"
    _warnings.warn(message, DeprecationWarning, stacklevel=2)
    return getattr(_importlib.import_module(module), attribute)

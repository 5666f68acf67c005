"""The kernel: tool calls in, one result per call out, each call run as soon as its leases are
granted (or, for a tool whose writes land only at a commit of its own, such as the sandboxed
Bash tool, run before and committed under them: ``_ahead.py``).

Two layers. The pure scheduler (``_scheduler.py``, where a call's lifecycle is written, once)
takes every decision about a call and is the only writer of its record (what the call holds and
waits for, its ``Hold``, is ``_leasing.py``'s to write; admission returns what it found and
sets nothing); each of its operations
returns the actions (``_actions.py``) the async layer (``_kernel.py``: tasks, cancel scopes,
events) must take, events for the listeners among them. What the scheduler decides with:

- ``_call.py``: calls, results, states; ``_record.py``: what is kept of a live call, its stages
  and their legal moves;
- ``_admission.py``: arguments, claims and ``after=`` links (and outputs passed between calls);
- ``_leasing.py``: what calls hold and wait for (leases, slots, the wait-for graph, wait limits);
- ``_policy.py``: hooks, the permission policy and approvers, as users write them;
- ``_messages.py``: every failure in words a model reads; ``_events.py`` and ``_observe.py``:
  what the kernel tells (events, listener protocols, snapshots, statistics).

Around them: ``_context.py`` (what a tool is given), ``_content.py`` (rich outputs),
``_protocol.py`` and ``_environment.py`` (what the kernel needs of tools and a workspace),
``_ahead.py`` (what a tool that may run a call ahead of its grant declares, and learns),
``_options.py`` (checked options), ``_loop.py`` (trio or asyncio).
"""

from .._errors import HoldMore as HoldMore
from ._ahead import Ahead as Ahead
from ._ahead import ChangedMeanwhile as ChangedMeanwhile
from ._call import CallState as CallState
from ._call import Status as Status
from ._call import ToolCall as ToolCall
from ._call import ToolResult as ToolResult
from ._content import Content as Content
from ._context import ToolContext as ToolContext
from ._events import CallBlocked as CallBlocked
from ._events import CallEvent as CallEvent
from ._events import CallFinished as CallFinished
from ._events import CallProgress as CallProgress
from ._events import CallQueued as CallQueued
from ._events import CallStarted as CallStarted
from ._events import FileAccessListener as FileAccessListener
from ._events import KernelListener as KernelListener
from ._events import LeaseListener as LeaseListener
from ._kernel import CallHandle as CallHandle
from ._kernel import Kernel as Kernel
from ._kernel import open_kernel_core as open_kernel_core
from ._observe import CallInfo as CallInfo
from ._observe import KernelSnapshot as KernelSnapshot
from ._observe import KernelStatistics as KernelStatistics
from ._observe import ResourceContention as ResourceContention
from ._observe import ToolStatistics as ToolStatistics
from ._options import KernelOptions as KernelOptions
from ._policy import AfterHook as AfterHook
from ._policy import Approver as Approver
from ._policy import BeforeHook as BeforeHook
from ._policy import Block as Block
from ._policy import Decision as Decision
from ._policy import Permission as Permission
from ._policy import Policy as Policy
from ._policy import RewriteArguments as RewriteArguments
from ._policy import SupplyResult as SupplyResult
from ._protocol import Environment as Environment
from ._protocol import KernelTool as KernelTool
from ._protocol import KeyFunction as KeyFunction

"""pydantic-ai toolsets whose calls hold their leases in a kernel (``toolkernel[pydantic-ai]``).

:class:`LeasedToolset` wraps any pydantic-ai toolset for ``Agent(toolsets=[...])``: each call of
its tools holds the leases its claims name in a kernel for its whole run, so calls on one file
run one after the other in the order the model emitted them, and calls on different files run
together, in each of pydantic-ai's execution modes (``parallel``, ``parallel_ordered_events``,
``sequential``, chosen with ``Agent.parallel_tool_call_execution_mode``, and ``sequential=True``
tools).

Emission order. pydantic-ai validates a response's calls, then starts one asyncio task per call
in the order the model emitted them (a segment at a time around sequential tools), and each task
reaches the toolset's ``call_tool`` without waiting on anything on the way. ``call_tool`` submits
the call to the kernel before its first ``await`` (``Kernel.submit`` is synchronous), and asyncio
runs new tasks in the order they were created, so the calls of a response queue for their leases
in emission order. (A capability hook of the agent's that really waits, before the call reaches
this toolset, could reorder calls; pydantic-ai's own hooks don't.)

Where the tool runs. In pydantic-ai's task, as without the wrapper: its context variables (the
run context, tracing spans), its exceptions (``ModelRetry``, ``ToolFailed``, ``CallDeferred``,
``ApprovalRequired``) and its timeout stay pydantic-ai's (a tool's ``timeout`` bounds its run,
not its wait for leases; but a plain ``def`` tool that runs out of it is left running in its
worker thread by pydantic-ai, without its leases: give such a tool no ``timeout``, or make it
``async def``). The kernel's call only holds the leases: it starts when they are
granted, wakes the waiting task, and ends when the tool does. If the kernel ends it first
(``kernel.cancel``, its run limit, the kernel closing), the tool is cancelled, and the leases
return only once it has stopped. If pydantic-ai cancels the call (a cancelled run, a failed
sibling), its kernel call is withdrawn or cancelled and its leases return. A deferred call
(``requires_approval``, ``ApprovalRequired``, ``CallDeferred``) holds no lease while it awaits
approval or its result; approved, it takes them again when it runs.

A call whose path can't be keyed (outside the workspace, a ``~`` path, left out with no default
stated) is not refused: it is a barrier, and the tool serves it as it would without leases (as
the other adapters and ``toolkernel.mcp`` do). A call the kernel refuses or ends becomes what
pydantic-ai tells the model: claims that can't be computed (a ``claims=`` function that
raises), a wait for leases that timed out and the kernel's run limit are a ``ModelRetry`` (the
model may try again, as after pydantic-ai's own timeout); a call denied by the kernel's policy
or cancelled by the kernel is a ``ToolFailed``.
So is a call made from inside a leased tool (an agent used as a tool, whose agent's tools are
leased in the same kernel) that waits for that tool's own leases: it would wait for ever.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio

from .._extras import require_extra
from ..kernel import (
    CallBlocked,
    CallEvent,
    CallFinished,
    CallHandle,
    Kernel,
    KeyFunction,
    Status,
    ToolCall,
    ToolContext,
)
from ..kernel import ToolResult as KernelResult
from ..locks import Claim
from ..tools import Tool
from ._declared import ClaimsFunction as ClaimsFunction
from ._declared import Declaration, check_options, declaration
from ._declared import ToolClaimsFunction as ToolClaimsFunction

require_extra("pydantic-ai", "toolkernel.integrations.pydantic_ai", "pydantic_ai")

from pydantic_ai import RunContext  # noqa: E402 - after saying which extra brings it
from pydantic_ai.exceptions import ModelRetry, ToolFailed  # noqa: E402
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset  # noqa: E402

__all__ = ["LeasedToolset", "ClaimsFunction", "ToolClaimsFunction"]

# Kernel call ids: the model's call id and a number, unique however many agents share a kernel.
_numbers = itertools.count(1)

_holding: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "toolkernel_pydantic_ai_holding", default=frozenset()
)
"""The kernel calls whose leases the tools this task runs inside hold (the tasks a tool starts
inherit it): a call made from inside them, as by an agent used as a tool, must not wait for them."""


class _Lease:
    """One call's meeting point between pydantic-ai's task, which runs the tool, and the
    kernel's, which holds the leases meanwhile."""

    __slots__ = (
        "callers",
        "deadlock",
        "done",
        "granted",
        "handle",
        "revoked",
        "scope",
        "wake",
        "woken",
    )

    def __init__(self) -> None:
        # asyncio's own events: pydantic-ai runs on asyncio only, and they cost less to make.
        self.wake = asyncio.Event()  # the leases are granted, or the call ended without them
        self.done = asyncio.Event()  # pydantic-ai's side is through: the kernel's call may end
        self.handle: CallHandle | None = None
        self.callers = _holding.get()  # the leased calls this one is made from inside
        self.deadlock: str | None = None  # why it would wait for one of them for ever
        self.granted = False
        self.woken = False  # counted out of the calls that wait
        self.scope: anyio.CancelScope | None = None  # around the tool, while it runs
        self.revoked = False  # the kernel ended the call: the tool must not run, or stop

    def revoke(self) -> None:
        self.revoked = True
        if self.scope is not None:
            self.scope.cancel()


class _Calls:
    """The calls of a :class:`LeasedToolset` (and of the copies pydantic-ai makes of it for each
    run) that wait for or hold leases, by kernel call id.

    A call that finishes without its leases (refused, timed out, cancelled while waiting) is
    heard of through a listener of the kernel's, there only while some call waits: a kernel
    nobody listens to builds no events.
    """

    __slots__ = ("_stop_listening", "_waiting", "kernel", "leases")

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.leases: dict[str, _Lease] = {}
        self._waiting = 0  # calls submitted and neither granted nor finished
        self._stop_listening: Callable[[], None] | None = None

    def expect(self, call_id: str) -> _Lease:
        """A call about to be submitted (synchronous)."""
        lease = self.leases[call_id] = _Lease()
        if self._waiting == 0:
            self._stop_listening = self.kernel.add_listener(self._heard)
        self._waiting += 1
        return lease

    def woken(self, lease: _Lease) -> None:
        """``lease``'s call was granted its leases, or finished without them."""
        if not lease.woken:
            lease.woken = True
            self._waiting -= 1
            if self._waiting == 0 and self._stop_listening is not None:
                self._stop_listening()
                self._stop_listening = None

    def forget(self, call_id: str, lease: _Lease) -> None:
        """pydantic-ai's side of the call is through, whatever happened."""
        lease.done.set()
        self.woken(lease)
        del self.leases[call_id]

    def _heard(self, event: CallEvent) -> None:
        if type(event) is CallFinished:
            lease = self.leases.get(event.call_id)
            if lease is not None:
                lease.wake.set()
        elif type(event) is CallBlocked:
            lease = self.leases.get(event.call_id)
            if lease is not None and lease.callers:
                held = next((c for c in event.waits_for if c in lease.callers), None)
                if held is not None:
                    lease.deadlock = (
                        f"this call waits for the leases of call {held}, which it was made "
                        f"from inside: that call holds them until this one has ended, so it "
                        f"would wait for ever. Declare what the outer tool itself touches (for "
                        f"a tool that runs an agent whose tools hold their own leases: "
                        f"claims={{'<tool name>': lambda args: []}})"
                    )
                    if lease.handle is not None:
                        lease.handle.cancel()


class _LeaseTool(Tool):
    """A tool of the wrapped toolset as the kernel sees it: its claims, and a call that holds
    them while pydantic-ai's task runs the tool (see the module's docstring)."""

    def __init__(self, name: str, leases: dict[str, _Lease], declared: Declaration | None) -> None:
        super().__init__(name=name, description=f"the pydantic-ai tool {name!r}")
        self._declared = declared
        self._leases = leases

    def parse_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments as pydantic-ai validated them."""
        return dict(arguments)

    def claims(self, arguments: Mapping[str, Any], key: KeyFunction) -> Sequence[Claim] | None:
        """What ``_declared`` says of the call; None (a barrier) for a tool declared nothing."""
        declared = self._declared
        return None if declared is None else declared.claims(arguments, key, self.name)

    async def run(self, ctx: ToolContext, **arguments: Any) -> Any:
        return await self.invoke(ctx, arguments)

    async def invoke(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> Any:
        """Hold the call's leases until pydantic-ai's task is through with the tool."""
        lease = self._leases.get(ctx.call_id)
        if lease is None or lease.done.is_set():
            return None  # pydantic-ai's side left before the grant
        lease.granted = True
        lease.wake.set()
        try:
            await lease.done.wait()
        except BaseException:
            if not lease.done.is_set():
                # Ended by the kernel: stop the tool, and keep the leases until it has stopped.
                lease.revoke()
                with anyio.CancelScope(shield=True):
                    await lease.done.wait()
            raise
        return None


class LeasedToolset(WrapperToolset[Any]):
    """A pydantic-ai toolset whose tool calls each hold their leases in ``kernel``.

    ::

        toolset = LeasedToolset(
            FunctionToolset([read_file, edit_file, run_tests]),
            kernel,
            reads={"read_file": ["path"]},   # arguments holding paths a call reads
            writes={"edit_file": ["path"]},  # ... or writes
        )
        agent = Agent(model, toolsets=[toolset])

    What a call claims (tool names as the wrapped toolset names its tools):

    - ``reads`` / ``writes``: ``{tool name: [argument names]}``, arguments holding paths (a
      string, or a list of strings) a call reads (a shared lease) or writes (an exclusive one),
      keyed through the kernel's workspace like ``@tool(reads=...)``;
    - ``claims``: ``{tool name: function of the arguments returning claims}`` (devices, pools,
      paths built from several arguments; ``[]`` for a call that needs nothing) or ``{tool
      name: list of claims}``, or one function ``(tool name, arguments) -> claims`` for every
      tool (None for a call leaves it to ``reads``/``writes``, or makes it a barrier);
    - a tool given none of these holds the whole workspace exclusively (``EVERYTHING``, a
      barrier): it runs alone, after the calls emitted before it, so wrapping a toolset is never
      less safe than running its calls one at a time. So does a call whose path can't be keyed
      (outside the workspace, a ``~`` path, left out with no default stated): never refused.

    These options are checked and applied as the other adapters' are (``_declared``).

    The kernel need not have been opened with these tools (it runs them beside its own, under
    the same leases), and it must run on the agent's event loop. What becomes of a call the
    kernel refuses, and how emission order is kept, is told in the module's docstring.

    Raises :class:`~toolkernel.ToolDeclarationError` (a ``TypeError`` and a ``ValueError``) for
    options of the wrong shape here, and when a run lists a tool whose ``reads``/``writes``
    name an argument it does not have.
    """

    def __init__(
        self,
        toolset: AbstractToolset[Any],
        kernel: Kernel,
        *,
        claims: Mapping[str, ClaimsFunction | Sequence[Claim]]
        | ToolClaimsFunction[str]
        | None = None,
        reads: Mapping[str, Sequence[str]] | None = None,
        writes: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        if not isinstance(toolset, AbstractToolset):
            raise TypeError(f"LeasedToolset wraps a pydantic-ai toolset, not {toolset!r}")
        if not isinstance(kernel, Kernel):
            raise TypeError(
                f"LeasedToolset needs a kernel (`async with toolkernel.open_kernel(...) as "
                f"kernel:`), not {kernel!r}"
            )
        super().__init__(toolset)
        self.kernel = kernel
        check_options(claims, reads, writes, None)  # the tools are known when a run lists them
        self.reads = reads
        self.writes = writes
        self.claims = claims
        # Shared by the copies pydantic-ai makes for each run (``_around``): each tool's kernel
        # stand-in, made for the schema it was made from.
        self._calls = _Calls(kernel)
        self._tools: dict[str, tuple[object, _LeaseTool]] = {}

    # -- pydantic-ai's side ----------------------------------------------------------------------

    @property
    def label(self) -> str:
        return f"LeasedToolset({self.wrapped.label})"

    def _around(self, wrapped: AbstractToolset[Any]) -> LeasedToolset:
        """This toolset around ``wrapped`` (pydantic-ai's copy of the wrapped one for a run)."""
        twin = copy.copy(self)
        twin.wrapped = wrapped
        return twin

    async def for_run(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        wrapped = await self.wrapped.for_run(ctx)
        return self if wrapped is self.wrapped else self._around(wrapped)

    async def for_run_step(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        wrapped = await self.wrapped.for_run_step(ctx)
        return self if wrapped is self.wrapped else self._around(wrapped)

    def visit_and_replace(
        self, visitor: Callable[[AbstractToolset[Any]], AbstractToolset[Any]]
    ) -> AbstractToolset[Any]:
        return self._around(self.wrapped.visit_and_replace(visitor))

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await self.wrapped.get_tools(ctx)
        for name in (*(self.reads or ()), *(self.writes or ())):
            found = tools.get(name)
            if found is not None:
                self._lease_tool(name, found)  # refuses arguments the tool does not have
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Run the call holding its leases; see the module's docstring."""
        # Everything up to the first await is synchronous: the call queues for its leases in
        # the order pydantic-ai started the calls' tasks, the order the model emitted them.
        calls = self._calls
        call_id = f"{ctx.tool_call_id or name}#{next(_numbers)}"
        lease = calls.expect(call_id)
        try:
            handle = lease.handle = self.kernel.submit(
                ToolCall(call_id, name, tool_args), tools=(self._lease_tool(name, tool),)
            )
            if lease.deadlock is not None:
                handle.cancel()  # found waiting for its callers while it was submitted
            try:
                if not handle.finished:
                    await lease.wake.wait()
            except BaseException:
                handle.cancel()  # pydantic-ai cancelled the call: its leases return
                raise
            calls.woken(lease)
            if lease.granted:
                holding = _holding.set(lease.callers | {call_id})
                try:
                    with anyio.CancelScope() as lease.scope:
                        if not lease.revoked:
                            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
                finally:
                    _holding.reset(holding)
                lease.scope = None  # the kernel ended the call: say how, below
            lease.done.set()
            result = await handle.wait_finished()
        finally:
            calls.forget(call_id, lease)
        if lease.deadlock is not None:
            raise ToolFailed(lease.deadlock)
        return _answer(result)

    def _lease_tool(self, name: str, tool: ToolsetTool[Any]) -> _LeaseTool:
        """The kernel's stand-in for tool ``name``, declared for its schema."""
        schema = tool.tool_def.parameters_json_schema
        found = self._tools.get(name)
        if found is not None and found[0] is schema:
            return found[1]
        properties = schema.get("properties")
        declared = declaration(
            name,
            properties if isinstance(properties, Mapping) else {},
            self.claims,
            self.reads,
            self.writes,
        )
        lease_tool = _LeaseTool(name, self._calls.leases, declared)
        self._tools[name] = (schema, lease_tool)
        return lease_tool


def _answer(result: KernelResult) -> Any:
    """What pydantic-ai is told of a call the kernel ended without running the tool."""
    message = result.error or f"{result.name}: {result.status.name.lower()}"
    if result.status is Status.OK:
        return result.output  # a before-hook of the kernel's supplied the result
    if result.status in (Status.ERROR, Status.TIMEOUT):
        raise ModelRetry(message)
    raise ToolFailed(message)

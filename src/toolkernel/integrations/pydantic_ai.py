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
``async def``). A plain ``def`` tool of a ``FunctionToolset`` (pydantic-ai runs it in a worker
thread, which nothing can stop) runs in a task of its own that no cancellation stops: a
cancellation (a cancelled run, a failed sibling) goes on at once and its kernel call ends
CANCELLED, but the call holds its leases until the function has returned, as the kernel's own
``thread=True`` tools do; cancelled by the kernel, it is answered once the function has
returned. The kernel's call only holds the leases (``_held_calls``, as for the Agents SDK's
tools): it starts when they are granted, wakes the waiting task, and ends when the tool does, OK
or, when the tool raised (``ModelRetry`` and deferrals included), ERROR. If the kernel ends it
first (``kernel.cancel``, its run limit, the kernel closing), the tool is cancelled (a cancel
scope around the tool: pydantic-ai would take its task's cancellation for the whole run's), and
the leases return only once it has stopped. If pydantic-ai cancels the call (a cancelled run, a
failed sibling), its kernel call is withdrawn or cancelled and its leases return (a plain
``def`` tool's once the function has returned, above). A deferred call (``requires_approval``,
``ApprovalRequired``, ``CallDeferred``) holds no lease while it awaits approval or its result;
approved, it takes them again when it runs.

A call whose path can't be keyed (outside the workspace, a ``~`` path, left out with no default
stated) is not refused: it is a barrier, and the tool serves it as it would without leases (as
the other adapters and ``toolkernel.mcp`` do). A call the kernel refuses or ends becomes what
pydantic-ai tells the model: claims that can't be computed (a ``claims=`` function that
raises), a wait for leases that timed out and the kernel's run limit are a ``ModelRetry`` (the
model may try again, as after pydantic-ai's own timeout); a call denied by the kernel's policy
or cancelled by the kernel is a ``ToolFailed``.
A call made from inside a leased tool (an agent used as a tool, whose agent's tools are leased
in the same kernel, or a tool calling another through ``ctx.tool_manager.handle_call``; the
outer tool may be this adapter's, an Agents SDK tool's or a LangGraph node's) runs inside that
tool's leases where they cover it, in its place in ``max_concurrency``, as the kernel's nested
calls do. One they don't cover that would wait behind them for ever is a ``ToolFailed`` giving
the :class:`~toolkernel.errors.DeadlockError`'s message saying so. An agent tool declared as
touching nothing itself (``claims={"delegate": lambda args: []}``) lets calls run beside it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._errors import DeadlockError
from .._extras import require_extra
from ..kernel import Kernel, KeyFunction, Status
from ..kernel import ToolResult as KernelResult
from ..locks import Claim
from ._declared import ClaimsFunction as ClaimsFunction
from ._declared import Declaration, check_options, declaration
from ._declared import ToolClaimsFunction as ToolClaimsFunction
from ._held_calls import Calls, Invocation, blocking, run_held

require_extra("pydantic-ai", "toolkernel.integrations.pydantic_ai", "pydantic_ai")

from pydantic_ai import RunContext  # noqa: E402 - after saying which extra brings it
from pydantic_ai.exceptions import ModelRetry, ToolFailed  # noqa: E402
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset  # noqa: E402
from pydantic_ai.toolsets.function import FunctionToolsetTool  # noqa: E402

__all__ = ["LeasedToolset", "ClaimsFunction", "ToolClaimsFunction"]


class _Claims:
    """What the calls of one tool claim (``_declared``); None for a barrier."""

    __slots__ = ("declared", "name")

    def __init__(self, name: str, declared: Declaration | None) -> None:
        self.name = name
        self.declared = declared

    def __call__(self, arguments: Mapping[str, Any], key: KeyFunction) -> Sequence[Claim] | None:
        declared = self.declared
        return None if declared is None else declared.claims(arguments, key, self.name)


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
        # Shared by the copies pydantic-ai makes for each run (``_around``): each tool's claims,
        # made for the schema they were made from.
        self._calls = Calls.of(kernel)
        self._tools: dict[str, tuple[object, _Claims]] = {}

    # -- pydantic-ai's side ----------------------------------------------------------------------

    @property
    def label(self) -> str:
        return f"LeasedToolset({self.wrapped.label})"

    @property
    def tool_name_conflict_hint(self) -> str:
        """The wrapped toolset's hint (its tools keep their names here): a ``PrefixedToolset``'s
        says to change its prefix, an MCP server's to set its ``tool_prefix``."""
        return self.wrapped.tool_name_conflict_hint

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
                self._claims_of(name, found)  # refuses arguments the tool does not have
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Run the call holding its leases; see the module's docstring."""
        # Submitted before the first await: the call queues for its leases in the order
        # pydantic-ai started the calls' tasks, the order the model emitted them.
        invocation = self._calls.submit(
            name, ctx.tool_call_id or name, tool_args, self._claims_of(name, tool)
        )

        def run() -> Any:
            return self.wrapped.call_tool(name, tool_args, ctx, tool)

        return await run_held(
            invocation,
            blocking(invocation, run) if _blocking(tool) else run,
            lambda error: _failed(invocation, error),
            scoped=True,  # pydantic-ai takes its task's cancellation for the whole run's
        )

    def _claims_of(self, name: str, tool: ToolsetTool[Any]) -> _Claims:
        """What the calls of tool ``name`` claim, declared for its schema."""
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
        claims = _Claims(name, declared)
        self._tools[name] = (schema, claims)
        return claims


def _blocking(tool: ToolsetTool[Any]) -> bool:
    """Whether pydantic-ai runs the tool in a worker thread: a plain ``def`` of a
    ``FunctionToolset`` (found through the toolsets that combine it with others)."""
    seen = 0
    # ``source_tool``: pydantic-ai's combining toolsets keep the tool they wrap there (a
    # private class, so looked for by attribute: a renamed one only misses the thread case).
    while not isinstance(tool, FunctionToolsetTool) and seen < 16:
        inner = getattr(tool, "source_tool", None)
        if inner is None:
            return False
        tool, seen = inner, seen + 1
    return isinstance(tool, FunctionToolsetTool) and not tool.is_async


async def _failed(invocation: Invocation, error: Exception) -> Any:
    """What pydantic-ai is told of a call the kernel ended without the tool's output."""
    if isinstance(error, DeadlockError):
        raise ToolFailed(str(error))
    result = invocation.handle.result if invocation.handle is not None else None
    if result is None:
        raise error  # the kernel was closed before the call could be submitted
    return _answer(result)


def _answer(result: KernelResult) -> Any:
    """What pydantic-ai is told of a call the kernel ended without running the tool."""
    message = result.error or f"{result.name}: {result.status.name.lower()}"
    if result.status is Status.OK:
        return result.output  # a before-hook of the kernel's supplied the result
    if result.status in (Status.ERROR, Status.TIMEOUT):
        raise ModelRetry(message)
    raise ToolFailed(message)

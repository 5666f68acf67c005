"""The OpenAI Agents SDK's function tools, each invocation holding its leases in a kernel.

::

    from agents import Agent, Runner, function_tool
    import toolkernel as tk
    from toolkernel.integrations.openai_agents import leased

    @function_tool
    async def edit_file(path: str, old: str, new: str) -> str: ...

    async with tk.open_kernel(root=".") as kernel:
        agent = Agent(name="coder", tools=leased([edit_file, read_file], kernel,
                                                writes={"edit_file": ["path"]},
                                                reads={"read_file": ["path"]}))
        result = await Runner.run(agent, "...")

The SDK's runner starts every function call of a model response at once (a task per call).
:func:`leased` gives back the same tools whose invocations hold leases in ``kernel`` for the
whole run of the tool: calls on different files still run together, calls that conflict run one
after the other, in the order the model emitted them, behind any earlier call of the kernel
(its own tools', another framework's) that conflicts.

**Order.** A call is submitted to the kernel synchronously, at the moment the runner invokes its
tool, before anything awaits: the runner creates the calls' tasks in emission order and each
reaches its tool after the same steps (its approval decision, input guardrails, ``on_tool_start``
hooks), so conflicting calls of one response are submitted, granted and run in emission order.
What the SDK does not tell a tool is the rest of its response, so a call whose own approval
policy, input guardrail or ``on_tool_start`` hook awaits I/O reaches the kernel when that I/O
ends, and is ordered there.

**What a call claims**: ``reads``/``writes`` map a tool's name to the names of its arguments
holding paths it reads (shared) or writes (exclusive), keyed through the kernel's workspace;
``claims`` maps a tool's name to a function of the arguments returning claims or to a list of
claims, or is one function ``(tool, arguments) -> claims or None`` for every tool (the same
options, checked and applied the same way, as the LangGraph and pydantic-ai adapters', see
``_declared``). A path argument the call leaves out claims the default the tool's schema
states. A call with nothing declared holds the whole workspace exclusively (a barrier), and so
does a call whose path can't be keyed (outside the workspace, a ``~`` path, not a string, left
out with no default stated) or whose arguments are not a JSON object: wrapping a tool is never
less safe than running its calls one at a time, and never refuses a call the tool would have
served.

**What the model sees** is what the SDK gives for the tool: its output, or for a failure the
tool's ``failure_error_function`` (the SDK's default message unless the tool sets its own), be
it the tool's own exception or the kernel's (its policy denied the call, the wait for leases
timed out, the kernel closed). Approvals (``needs_approval``), input and output guardrails,
``is_enabled`` and the rest of what a ``FunctionTool`` carries work as they do without leases.
``timeout_seconds`` bounds the tool's run from the grant, answering as the SDK does (its
message, ``timeout_error_function``, or ``raise_exception``); the runner's own timeout would
count the wait for an earlier call's leases, so the copy's ``timeout_seconds`` is None. A
cancelled invocation (the runner cancels its task: a sibling's failure, the caller's
cancellation) cancels its kernel call; its leases return before the cancellation goes on. A
kernel call cancelled by the kernel (closing, ``kernel.cancel``) cancels the tool (the model
sees the SDK's answer for a cancelled tool), and holds its leases until the tool has ended.
A sync (``def``) tool, which the SDK runs in a worker thread that nothing can stop, is the
exception: once it runs, a cancellation (the runner's or the kernel's) goes on at once and its
kernel call ends CANCELLED, but the call holds its leases until the function has returned (as
the kernel's own ``thread=True`` tools do), so no conflicting call overlaps it.

**Where the tool runs**: in the runner's own task (its context variables, its tracing span), as
without leases; the kernel holds the leases in a call of its own meanwhile, which fills one of
``max_concurrency``'s places (see ``_held_calls``). An agent used as a tool (``Agent.as_tool``)
whose own agent calls leased tools of the same kernel lends them its leases where they cover
their calls, and its place in ``max_concurrency``, as the kernel's nested calls have them:
undeclared, it holds the workspace and its agent's calls run inside it, one at a time where
they conflict; declared as touching nothing itself (``claims={"helper": lambda args: []}``),
calls beside it run too, and its agent's tools hold leases of their own. A call its leases
don't cover that would wait for them for ever fails with a
:class:`~toolkernel.errors.DeadlockError` saying so. So do calls across the adapters sharing
the kernel: a pydantic-ai agent's made from inside a leased tool here, and this SDK's made from
inside a leased pydantic-ai tool or a LangGraph node's call (a LangGraph node run by a tool
here runs its calls in a kernel of its own).
Under asyncio only, as the SDK is. The kernel's before-hooks may block a call or supply its
result, not rewrite its arguments (the SDK parses those itself).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from .._errors import ToolDeclarationError
from ..kernel import Kernel, KeyFunction
from ..locks import Claim
from ._declared import ClaimsFunction as ClaimsFunction
from ._declared import Declaration, check_options, declaration
from ._declared import ToolClaimsFunction as ToolClaimsFunction
from ._held_calls import Calls, Invocation, blocking, run_held

try:
    from agents import FunctionTool
    from agents import tool as _sdk_tool  # its mark of its own messages (``_mark_as_the_sdks_own``)
    from agents.exceptions import ToolTimeoutError

    # The SDK's invoker class is private, but what the SDK does for a tool depends on it
    # (``tool.__wrapped__``, preparing arguments for an approval policy, failure handling):
    # the leased invoker of an ``@function_tool`` tool is one, so all of that keeps working.
    from agents.tool import (
        _FailureHandlingFunctionToolInvoker,
        default_tool_timeout_error_message,
        maybe_invoke_function_tool_failure_error_function,
    )
    from agents.tool_context import ToolContext
except ImportError:  # pragma: no cover - the dev set-up installs it
    from .._extras import install_command

    raise ImportError(
        "toolkernel.integrations.openai_agents needs the OpenAI Agents SDK: "
        + install_command("openai-agents")
    ) from None

__all__ = ["leased", "ClaimsFunction", "ToolClaimsFunction"]

_Invoker = Callable[[ToolContext[Any], str], Awaitable[Any]]


def leased(
    tools: Iterable[FunctionTool],
    kernel: Kernel,
    *,
    claims: Mapping[str, ClaimsFunction | Sequence[Claim]]
    | ToolClaimsFunction[FunctionTool]
    | None = None,
    reads: Mapping[str, Sequence[str]] | None = None,
    writes: Mapping[str, Sequence[str]] | None = None,
) -> list[FunctionTool]:
    """The same tools (copies; the originals are left alone), each invocation holding its
    leases in ``kernel`` while the tool runs. See the module's docstring.

    ``kernel`` need not have been opened with these tools, and may serve other tools meanwhile.

    Raises ``TypeError`` for a tool that is not a ``FunctionTool`` (hosted tools run on the
    provider's side: there is nothing to lease) or a kernel that is not one, and
    :class:`~toolkernel.ToolDeclarationError` when ``reads``/``writes``/``claims`` are not of
    the shapes above or name a tool not given or an argument the tool does not have, or when
    two tools share a name.
    """
    if not isinstance(kernel, Kernel):
        raise TypeError(
            f"leased() takes the kernel to hold leases in (from toolkernel.open_kernel), "
            f"not {kernel!r}"
        )
    given = list(tools) if not isinstance(tools, FunctionTool) else [tools]
    names: dict[str, FunctionTool] = {}
    for tool in given:
        if not isinstance(tool, FunctionTool):
            raise TypeError(
                f"leased() takes the Agents SDK's function tools (FunctionTool, as "
                f"@function_tool makes them), not {tool!r}: hosted tools run on the provider's "
                f"side, with nothing here to hold leases for"
            )
        if tool.name in names:
            raise ToolDeclarationError(f"two tools given to leased() are named {tool.name!r}")
        names[tool.name] = tool
    check_options(claims, reads, writes, names)
    calls = Calls.of(kernel)
    return [
        _leased_copy(
            tool,
            _Declaration(tool, declaration(tool.name, _properties(tool), claims, reads, writes)),
            calls,
        )
        for tool in given
    ]


# -- what a call claims ------------------------------------------------------------------------


def _properties(tool: FunctionTool) -> Mapping[str, Any]:
    """The properties of the tool's arguments' schema: their names, and defaults."""
    properties = tool.params_json_schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


class _Declaration:
    """What the calls of one tool claim (``_declared``), and its ``timeout_seconds``."""

    __slots__ = ("declared", "timeout", "tool")

    def __init__(self, tool: FunctionTool, declared: Declaration | None) -> None:
        self.tool = tool
        self.declared = declared
        self.timeout: float | None = None  # the tool's timeout_seconds

    def of_call(self, arguments: Mapping[str, Any], key: KeyFunction) -> list[Claim] | None:
        """A call's claims, its paths keyed; None for a barrier."""
        declared = self.declared
        return None if declared is None else declared.claims(arguments, key, self.tool)


def _parsed(input_json: str) -> Mapping[str, Any] | None:
    """The arguments as an object, or None when they are not one (the SDK's own parsing then
    reports it to the model)."""
    try:
        arguments = json.loads(input_json) if input_json else {}
    except (ValueError, RecursionError, TypeError):
        return None
    return arguments if isinstance(arguments, dict) else None


def _submit(calls: Calls, declaration: _Declaration, ctx: Any, input_json: str) -> Invocation:
    """Submit an invocation to the kernel, under the SDK's call id (the tool's name for a
    context that has none)."""
    tool = declaration.tool
    call_id = getattr(ctx, "tool_call_id", None) or tool.name
    arguments = _parsed(input_json)
    if arguments is None:
        return calls.submit(tool.name, call_id, {}, _barrier)
    return calls.submit(tool.name, call_id, arguments, declaration.of_call)


def _barrier(arguments: Mapping[str, Any], key: KeyFunction) -> None:
    return None


def _blocking(
    invoker: object, invocation: Invocation, run: Callable[[], Awaitable[Any]]
) -> Callable[[], Awaitable[Any]]:
    """``run``, for a sync tool (the SDK's mark on its invoker: it runs the function in a worker
    thread) in a task that holds the leases until the thread has returned (``_held_calls``)."""
    if getattr(invoker, "__agents_sync_function_tool__", False):
        return blocking(invocation, run)
    return run


def _timed(
    invocation: Invocation,
    declaration: _Declaration,
    ctx: Any,
    run: Callable[[], Awaitable[Any]],
) -> Callable[[], Awaitable[Any]]:
    """``run`` within the tool's ``timeout_seconds``, if it has one."""
    if declaration.timeout is None:
        return run
    return functools.partial(_within, invocation, declaration, ctx, run)


async def _within(
    invocation: Invocation,
    declaration: _Declaration,
    ctx: Any,
    run: Callable[[], Awaitable[Any]],
) -> Any:
    """Run the tool within its ``timeout_seconds``, counted from the grant (a wait for leases
    is the kernel's ``wait_timeout``'s business), answering as the SDK does when time runs out."""
    assert declaration.timeout is not None
    tool = declaration.tool
    task = asyncio.ensure_future(run())
    try:
        return await asyncio.wait_for(task, timeout=declaration.timeout)
    except TimeoutError as exc:
        if task.done() and not task.cancelled():
            return task.result()  # the tool's own TimeoutError, or its output just in time
        error = ToolTimeoutError(tool_name=tool.name, timeout_seconds=declaration.timeout)
        invocation.end(error)  # the kernel's result says so too
        if tool.timeout_behavior == "raise_exception":
            raise error from exc
        if tool.timeout_error_function is None:
            _mark_as_the_sdks_own(ctx)
            return default_tool_timeout_error_message(
                tool_name=tool.name, timeout_seconds=declaration.timeout
            )
        answer = tool.timeout_error_function(ctx, error)
        return await answer if inspect.isawaitable(answer) else answer


def _mark_as_the_sdks_own(ctx: Any) -> None:
    """Mark the output about to be returned as the SDK's own message, as the SDK marks its
    timeout message: the runner then gives it to the model without checking it against the
    tool's output schema (which a message could never match)."""
    attribute = getattr(_sdk_tool, "_DEFAULT_FAILURE_HANDLED_ATTR", None)
    if isinstance(attribute, str) and isinstance(ctx, ToolContext):
        setattr(ctx, attribute, True)


# -- the leased copies -------------------------------------------------------------------------


class _LeasedInvoker(_FailureHandlingFunctionToolInvoker):
    """The SDK's invoker of a tool made by ``@function_tool`` (or ``Agent.as_tool``), whose
    invocations hold leases.

    It is the SDK's own class, kept so that what the SDK does with such an invoker keeps
    working (``tool.__wrapped__``, preparing arguments for an approval policy, sync tools'
    checks, failure handling); ``__call__`` is synchronous, submitting the call before
    anything awaits.
    """

    def __init__(
        self,
        original: _FailureHandlingFunctionToolInvoker,
        declaration: _Declaration,
        calls: Calls,
        *,
        function_tool: FunctionTool | None = None,
    ) -> None:
        super().__init__(
            original._invoke_tool_impl, original._on_handled_error, function_tool=function_tool
        )
        self._original = original
        self._declaration = declaration
        self._calls = calls
        for name, value in vars(original).items():  # the SDK's markers (a sync tool's)
            if name.startswith("__agents_"):
                setattr(self, name, value)

    def __agents_bind_function_tool__(self, function_tool: FunctionTool) -> _LeasedInvoker:
        if self._function_tool is function_tool:
            return self
        declaration = copy.copy(self._declaration)
        declaration.tool = function_tool
        return _LeasedInvoker(self._original, declaration, self._calls, function_tool=function_tool)

    def __call__(self, ctx: ToolContext[Any], input: str) -> Any:
        invocation = _submit(self._calls, self._declaration, ctx, input)
        invoke = super().__call__
        run = _blocking(self, invocation, lambda: invoke(ctx, input))
        return run_held(
            invocation, _timed(invocation, self._declaration, ctx, run), self._failed(ctx, input)
        )

    def _failed(self, ctx: ToolContext[Any], input_json: str) -> Callable[[Exception], Any]:
        async def failed(error: Exception) -> Any:
            # As the SDK's invoker treats the tool's own exception.
            assert self._function_tool is not None
            result = await maybe_invoke_function_tool_failure_error_function(
                function_tool=self._function_tool, context=ctx, error=error
            )
            if result is None:
                raise error
            self._on_handled_error(self._function_tool, error, input_json, ctx)
            return result

        return failed


def _plain_invoker(original: _Invoker, declaration: _Declaration, calls: Calls) -> _Invoker:
    """An invoker for a ``FunctionTool`` built by hand (its own ``on_invoke_tool``): the same
    signature (the SDK picks the context it passes from it), submitting synchronously."""

    @functools.wraps(original)
    def invoke(ctx: Any, input_json: str) -> Awaitable[Any]:
        invocation = _submit(calls, declaration, ctx, input_json)

        async def failed(error: Exception) -> Any:
            result = await maybe_invoke_function_tool_failure_error_function(
                function_tool=declaration.tool, context=ctx, error=error
            )
            if result is None:
                raise error
            return result

        run = _blocking(original, invocation, lambda: original(ctx, input_json))
        return run_held(invocation, _timed(invocation, declaration, ctx, run), failed)

    # Copied by wraps, an invoker's own binding would replace this one in the SDK's copies.
    vars(invoke).pop("__agents_bind_function_tool__", None)
    return invoke


def _leased_copy(tool: FunctionTool, declaration: _Declaration, calls: Calls) -> FunctionTool:
    leased_tool = copy.copy(tool)  # the SDK's own copy: every field, subclasses kept
    declaration.tool = leased_tool
    # The SDK's timeout would count a wait for leases too: the copy counts from the grant.
    declaration.timeout, leased_tool.timeout_seconds = tool.timeout_seconds, None
    original = tool.on_invoke_tool
    if isinstance(original, _LeasedInvoker):  # leased again: these leases instead
        declaration.timeout, original = original._declaration.timeout, original._original
    if isinstance(original, _FailureHandlingFunctionToolInvoker):
        leased_tool.on_invoke_tool = _LeasedInvoker(
            original, declaration, calls, function_tool=leased_tool
        )
    else:
        leased_tool.on_invoke_tool = _plain_invoker(original, declaration, calls)
    return leased_tool

"""The whole exception hierarchy of toolkernel.

Each exception subclasses the builtin it refines, so code that catches the builtin keeps working:
``InvalidClaimError`` is a ``ValueError``, ``UndeclaredAccessError`` a ``PermissionError``.
Messages are lower-case and name the rule and the object they are about.

The hierarchy, with the builtins each class refines in brackets. Under ``ToolkernelError`` are
two bases: ``CallFailedError``, what a call's result can carry (a model's or a caller's call
that could not do its work), and ``UsageError``, a mistake in the code using the kernel (a tool
or a claim declared wrongly, a lease released twice, work submitted to a closed kernel)::

    * ToolkernelError (Exception)
      x CallFailedError - what a call's result can carry (``ToolResult.error_type``)
        + InvalidCallError (ValueError) - a call that can't be admitted as written
          + UnknownToolError (LookupError)
          + InvalidArgumentsError (TypeError)
          + DependencyCycleError
        + DeadlockError (RuntimeError)
        + NestingDepthError (RecursionError)
        + UndeclaredAccessError (PermissionError)
        + PathChangedError (OSError)
        + FencedOutError (PermissionError) - a write refused: its grant is no longer held
        + LeaseServiceError (ConnectionError) - the shared lease service failed a request
        + PermissionDeniedError (PermissionError) - the policy, the approver or a hook said no
          + ApprovalRequiredError
          + ApprovalTimeoutError (TimeoutError)
        + HookError (RuntimeError) - a user's hook, policy or approver failed
        + CallTimeoutError (TimeoutError)
          + LeaseWaitTimeoutError
          + RunTimeoutError
        + CallCancelledError
        + DependencyFailedError
        + ToolError - raised by a tool to fail its call with a message for the model
          + StaleViewError - a write from a view of the file that is out of date
          + MCPToolError
          + MCPServerGoneError (ConnectionError)
      x UsageError - a mistake in the code that uses the kernel
        + InvalidClaimError (ValueError) - a bad claim, path, mode, unit count or pool name
          + PathEscapeError
          + CapacityError
          + UnknownPoolError (LookupError)
        + LeaseReleaseError (RuntimeError) - a lease released twice or never held
          + ForeignLeaseError
        + CallEndedError (RuntimeError)
        + ToolDeclarationError (TypeError, ValueError) - raised when a tool is declared
        + IllegalTransitionError (RuntimeError)
        + KernelClosedError (RuntimeError)
        + WrongLoopError (RuntimeError) - async code away from the kernel's event loop
        + NoWorkspaceError (AttributeError) - ``ctx.fs`` in a kernel opened without a root
        + KernelNotOpenError (TypeError, AttributeError) - a kernel used without ``async with``
        + InvalidBatchError (TypeError) - calls given to ``run`` that are not a list of calls
        + SchemaError (ValueError)
        + ShellRulesError (ValueError)
      x ModelError (RuntimeError) - a request to a model failed
    * BarrierToolWarning (UserWarning) - a tool declared no claims, so each call runs alone
    * HoldMore (BaseException) - not a failure: a running tool asks to hold more

``HoldMore`` is a signal to the kernel, not an error: like trio's ``Cancelled`` it derives from
``BaseException`` so that a tool's ``except Exception`` can't swallow it. ``FencedOut``, its
old name, stays an alias of ``FencedOutError``.

Most of these are never raised out of ``Kernel.run``: a call that fails ends with a result whose
``error_type`` names the class (section "how a call can fail" below). They are raised to the
code that made the mistake: a claim or a tool declared wrongly, a lease released twice, work
submitted to a closed kernel.
"""

from __future__ import annotations

__all__ = [
    "ToolkernelError",
    "CallFailedError",
    "UsageError",
    "InvalidClaimError",
    "PathEscapeError",
    "CapacityError",
    "UnknownPoolError",
    "LeaseReleaseError",
    "ForeignLeaseError",
    "FencedOutError",
    "LeaseServiceError",
    "InvalidCallError",
    "UnknownToolError",
    "InvalidArgumentsError",
    "DependencyCycleError",
    "DeadlockError",
    "NestingDepthError",
    "UndeclaredAccessError",
    "ToolError",
    "StaleViewError",
    "IllegalTransitionError",
    "KernelClosedError",
    "WrongLoopError",
    "NoWorkspaceError",
    "KernelNotOpenError",
    "InvalidBatchError",
    "CallEndedError",
    "ToolDeclarationError",
    "PathChangedError",
    "PermissionDeniedError",
    "ApprovalRequiredError",
    "ApprovalTimeoutError",
    "HookError",
    "CallTimeoutError",
    "LeaseWaitTimeoutError",
    "RunTimeoutError",
    "CallCancelledError",
    "DependencyFailedError",
    "SchemaError",
    "ModelError",
    "ShellRulesError",
    "MCPToolError",
    "MCPServerGoneError",
    "HoldMore",
    "BarrierToolWarning",
]


class ToolkernelError(Exception):
    """Base class of every error toolkernel raises on purpose."""


class CallFailedError(ToolkernelError):
    """Base class of what a call's result can carry: the call could not do its work (it was
    refused, timed out, cancelled, or its tool failed). ``ToolResult.error_type`` names one."""


class UsageError(ToolkernelError):
    """Base class of the mistakes in the code that uses the kernel: a tool or a claim declared
    wrongly, a lease released twice, work submitted to a closed kernel. Fix the code."""


# -- claims and leases -----------------------------------------------------------------------


class InvalidClaimError(UsageError, ValueError):
    """A claim or a resource name breaks a rule (bad path, bad mode, bad unit count)."""


class PathEscapeError(InvalidClaimError):
    """A path resolves outside the root it must stay inside."""


class CapacityError(InvalidClaimError):
    """A pool claim asks for more units than the pool will ever have, or a capacity change would
    strand a holder or a waiter."""


class UnknownPoolError(InvalidClaimError, LookupError):
    """A claim names a pool whose capacity was never set."""


class LeaseReleaseError(UsageError, RuntimeError):
    """A lease was released twice, or a release named a lease that is not held or waiting."""


class ForeignLeaseError(LeaseReleaseError):
    """A lease was released by someone other than its owner, or through the wrong manager."""


class FencedOutError(CallFailedError, PermissionError):
    """A write was refused because the grant it was made under is no longer held (its holder's
    connection was lost, or its heartbeat fell silent past its TTL, and the leases may have gone
    to another); the change was not made visible."""


# The old name, kept for one release (the public modules warn on it; see CHANGELOG).
FencedOut = FencedOutError


class LeaseServiceError(CallFailedError, ConnectionError):
    """Leases could not be taken from the backend shared with other processes (the lease
    service or etcd unreachable, its connection lost, a request it refused): the call fails,
    nothing is held."""


# -- calls and tools -------------------------------------------------------------------------


class InvalidCallError(CallFailedError, ValueError):
    """A tool call cannot be admitted (duplicate id, unknown dependency, ...)."""


class UnknownToolError(InvalidCallError, LookupError):
    """A call names a tool the kernel does not have."""


class InvalidArgumentsError(InvalidCallError, TypeError):
    """A call's arguments are malformed or do not match the tool's parameters."""


class DependencyCycleError(InvalidCallError):
    """Calls wait for each other through ``after=``."""


class DeadlockError(CallFailedError, RuntimeError):
    """A nested call would wait, through leases, for a call that is waiting for it."""


class NestingDepthError(CallFailedError, RecursionError):
    """Nested calls went deeper than the kernel allows."""


class UndeclaredAccessError(CallFailedError, PermissionError):
    """A tool touched a resource that its call did not declare (or declared only for reading)."""


class PathChangedError(CallFailedError, OSError):
    """A path changed meaning under a call (a directory swapped for a symbolic link, a rename)
    between the moment it was checked and the moment it was used; nothing was touched."""


class CallEndedError(UsageError, RuntimeError):
    """A tool used its context (``ctx.fs``, ``ctx.call``) after its call had ended."""


class ToolDeclarationError(UsageError, TypeError, ValueError):
    """A tool is declared wrongly: no context parameter, a plain ``def``, claims that name
    arguments it does not have, a bad option (a ``TypeError`` or a ``ValueError``, as the mistake
    is one of type or of value). Raised when the tool is declared, not when a model calls it."""


# -- how a call can fail (``ToolResult.error_type`` names one of these, or the tool's own) ------


class PermissionDeniedError(CallFailedError, PermissionError):
    """The permission policy, the approver or a before-hook refused the call."""


class ApprovalRequiredError(PermissionDeniedError):
    """The policy asked for approval, but the kernel has no approver to ask."""


class ApprovalTimeoutError(PermissionDeniedError, TimeoutError):
    """The policy asked for approval and none came in time."""


class HookError(CallFailedError, RuntimeError):
    """A before-hook, after-hook, policy or approver raised, or answered with the wrong type."""


class CallTimeoutError(CallFailedError, TimeoutError):
    """A call took longer than it was allowed."""


class LeaseWaitTimeoutError(CallTimeoutError):
    """A call waited for its leases longer than its wait timeout."""


class RunTimeoutError(CallTimeoutError):
    """A call ran longer than its run timeout."""


class CallCancelledError(CallFailedError):
    """A call was cancelled: by itself, its batch, its parent call, or the kernel closing."""


class DependencyFailedError(CallFailedError):
    """A call it had to wait for through ``after=`` did not succeed, so it was skipped."""


class ToolError(CallFailedError):
    """Raised by a tool to fail its call with a message meant for the model, without a traceback."""


class StaleViewError(ToolError):
    """``Write``, ``Edit`` or ``MultiEdit`` refused a file that changed since this agent last
    read or wrote it, or (where calls come from a model) one it never read; nothing was written.
    ``rule`` names which (a ``toolkernel.tools.StaleRule``)."""

    def __init__(self, message: str, *, rule: object) -> None:
        super().__init__(message)
        self.rule = rule


class IllegalTransitionError(UsageError, RuntimeError):
    """A call's lifecycle was asked to make a move its transition table does not allow."""


class KernelClosedError(UsageError, RuntimeError):
    """Work was submitted to a kernel that is closing or closed."""


class WrongLoopError(UsageError, RuntimeError):
    """Async code ran, or was meant to run, away from the event loop the kernel runs on: the
    kernel used from a worker thread or from another event loop, a tool written for trio run by
    a kernel on asyncio (or the other way round), ``ctx.fs``'s async methods called from a
    ``thread=True`` tool without going back to the loop. The message names both loops."""


class NoWorkspaceError(UsageError, AttributeError):
    """A tool used ``ctx.fs`` in a kernel opened without a workspace (``open_kernel`` with no
    ``root=``): there are no files to give it. An ``AttributeError``, as ``ctx.fs`` was None
    there before, so ``getattr(ctx, "fs", None)`` is None in such a kernel."""


class KernelNotOpenError(UsageError, TypeError, AttributeError):
    """``open_kernel(...)`` was used as if it were the kernel: awaited, entered with a plain
    ``with``, or asked for an attribute (``kernel.run``) without ``async with``. A ``TypeError``
    as awaiting or entering the wrong kind of object is, and an ``AttributeError`` so that
    ``hasattr`` and ``getattr(..., default)`` keep answering."""


class InvalidBatchError(UsageError, TypeError):
    """``Kernel.run``, ``stream`` or ``submit_batch`` was given something other than a list of
    ``ToolCall`` (one ``ToolCall`` alone, or an item that is not a call)."""


# -- integrations ----------------------------------------------------------------------------


class SchemaError(UsageError, ValueError):
    """A tool's parameters can't be written in a wire format's schema dialect (OpenAI's strict
    mode has no free-form objects, for instance). Raised when the tools are exported."""


class ModelError(ToolkernelError, RuntimeError):
    """A request to a model failed: the server answered an error, timed out, or went away.

    ``transient`` says whether trying again may help (429, 5xx, timeouts, dropped connections);
    ``status`` is the HTTP status when there was one; ``retry_after`` the seconds the server
    asked to wait, when it said.
    """

    def __init__(
        self,
        message: str,
        *,
        transient: bool,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.transient = transient
        self.status = status
        self.retry_after = retry_after


class MCPToolError(ToolError):
    """An MCP server answered a call with an error: an ``isError`` result, or a refusal of the
    request itself. The message is the server's own text."""


class MCPServerGoneError(ToolError, ConnectionError):
    """An MCP server's process exited or closed its connection: the calls it was running fail
    with this, and so does every later call of its tools."""


class ShellRulesError(UsageError, ValueError):
    """A table of shell rules that can't be understood; the message names the rule and field."""


# -- warnings -------------------------------------------------------------------------------


class BarrierToolWarning(UserWarning):
    """A tool was declared with no claims (no ``reads``, ``writes``, ``claims`` or
    ``reads_workspace``): each of its calls is a barrier, exclusive on everything, so it runs
    alone. Said once, when the tool is declared; declare what it touches to silence it."""


# -- not a failure --------------------------------------------------------------------------


class HoldMore(BaseException):
    """Raised by a running tool that learns it must hold more than its call claimed: the kernel
    puts the call back in line, in its place (it holds nothing while it waits, so no deadlock),
    and runs the tool again once the call holds ``claims`` as well as what it held. The tool
    finds ``state`` in ``ctx.resumed`` then, to go on where it stopped. Not a failure; a nested
    call can't ask it (its result is an error saying so).

    ::

        if not ctx.resumed:
            draft = await prepare()
            raise HoldMore([tk.writes(draft.extra_path)], state=draft)
        await commit(ctx.resumed)
    """

    def __init__(self, claims: object, state: object = None) -> None:
        super().__init__("the call must hold more claims")
        self.claims = claims
        self.state = state

"""Every failure a call can meet, as the exception its result carries, with the message a model
reads. Pure: each function builds an exception from toolkernel's hierarchy (``_errors``); the
scheduler puts it in the result, so ``ToolResult.error_type`` can name it and ``error`` is
``describe(exc)``, formatted in this one place.

Messages say what happened and what to do next, in words a model can act on. Why a call was
cancelled or skipped travels as a value (``CancelReason``, ``RootCause``) from where it is
decided to here, where it is put in words.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, NamedTuple

from .._errors import (
    ApprovalRequiredError,
    ApprovalTimeoutError,
    CallCancelledError,
    CallTimeoutError,
    DeadlockError,
    DependencyCycleError,
    DependencyFailedError,
    HookError,
    InvalidArgumentsError,
    InvalidBatchError,
    InvalidCallError,
    InvalidClaimError,
    LeaseServiceError,
    LeaseWaitTimeoutError,
    NestingDepthError,
    PathChangedError,
    PermissionDeniedError,
    RunTimeoutError,
    ToolError,
    ToolkernelError,
    UndeclaredAccessError,
    UnknownToolError,
)
from ..locks import Claim, Device, Path, Pool
from ._call import Status, ToolCall

__all__ = ["describe", "Why", "CancelReason", "RootCause", "ASKED", "OUT_OF_TIME"]


# -- Why a call ended early, as values: carried from where it is decided to where a message is ----
# formatted (``_messages``), never parsed back out of one. Pure data.
class Why(enum.Enum):
    """Who or what cancelled a call; the value is the message, formatted with the parent's id
    and tool name where it names them."""

    ASKED = "cancelled"
    CALLER_CANCELLED = "cancelled: the caller of run() was cancelled"
    STREAM_LEFT = "cancelled: the stream was left early"
    KERNEL_CLOSING = "cancelled: the kernel is closing"
    TASK_CANCELLED = "cancelled: the task running it was cancelled"
    WITH_PARENT = "cancelled with its parent call {call_id}"
    PARENT_ENDED = (
        "cancelled: its parent call {call_id} ({name}) ended first; "
        "a tool must await the calls it makes before it returns"
    )
    OUT_OF_TIME = "the time limit of its run() ran out"


class CancelReason(NamedTuple):
    """Why a call was cancelled: ``why``, and the parent call it names, if any."""

    why: Why
    call_id: str = ""
    name: str = ""

    def __str__(self) -> str:
        return self.why.value.format(call_id=self.call_id, name=self.name)


ASKED = CancelReason(Why.ASKED)
"""``handle.cancel()``, ``kernel.cancel(...)``, ``cancel_all()``: nobody said why."""

OUT_OF_TIME = CancelReason(Why.OUT_OF_TIME)
"""The calls a ``run(timeout=...)`` cuts short: they end TIMEOUT, not CANCELLED."""


class RootCause(NamedTuple):
    """The failure at the head of a chain of ``after=`` calls skipped one after another."""

    call_id: str
    name: str
    status: Status
    error: str | None


# Refusals of a call as the model spelled it are named by their type, so the model sees at once
# that the call itself was wrong (``UnknownToolError: there is no tool named 'Raed'; ...``).
_NAMED = (InvalidCallError, InvalidClaimError, DeadlockError, NestingDepthError)


# -- What failures say ----------------------------------------------------------------------------
def describe(exc: BaseException) -> str:
    """The message of a failed call's result: most of toolkernel's own errors speak for
    themselves, the others and a tool's own exceptions are named by their type."""
    if isinstance(exc, UndeclaredAccessError):
        return f"undeclared access: {_text(exc)}"
    if isinstance(exc, _NAMED):
        return f"{type(exc).__name__}: {_text(exc)}"
    if isinstance(exc, ToolError | ToolkernelError):
        return _text(exc)
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    text = _text(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _text(exc: BaseException) -> str:
    """``str(exc)``, or a note that it can't be shown: a tool's exception may have a
    ``__str__`` that raises (or hold an int past Python's digit limit), and one call's message
    must not take the kernel down."""
    try:
        return str(exc)
    except Exception as failure:
        return f"(its message can't be shown: str() raised {type(failure).__name__})"


def seconds(value: float) -> str:
    return f"{value:g} s"


def _preview(value: Any) -> str:
    try:
        text = repr(value)
    except RecursionError:  # nested deeper than its repr goes
        text = f"a {type(value).__name__} nested too deeply to show"
    except Exception:  # a __repr__ that raises
        text = f"a {type(value).__name__} that can't be shown"
    return text if len(text) <= 60 else text[:57] + "..."


# -- admission ------------------------------------------------------------------------------------


def bad_call_id(value: object) -> InvalidCallError:
    return InvalidCallError(f"a call id must be a string, not {_preview(value)}")


def bad_tool_name(value: object) -> InvalidCallError:
    # Malformed, not unknown: no tool could have this name (``UnknownToolError`` is a lookup).
    return InvalidCallError(f"a tool name must be a string, not {_preview(value)}")


def unknown_tool(name: str, known: Iterable[str]) -> UnknownToolError:
    listed = ", ".join(sorted(known)) or "none"
    return UnknownToolError(f"there is no tool named {name!r}; available tools: {listed}")


def bad_json(tool: str, msg: str, position: int) -> InvalidArgumentsError:
    # json's own messages may end in "at" ("Unterminated string starting at").
    where = (
        f"{msg} character {position}" if msg.endswith(" at") else f"{msg} at character {position}"
    )
    return InvalidArgumentsError(
        f"the arguments of {tool} are not valid JSON ({where}); send a JSON object"
    )


def not_an_object(tool: str, value: object) -> InvalidArgumentsError:
    return InvalidArgumentsError(
        f"the arguments of {tool} must be a JSON object, not {_json_type(value)}"
    )


def _json_type(value: object) -> str:
    """What a model wrote, in JSON's terms (it never wrote a Python ``NoneType``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    return type(value).__name__


def arguments_failed(tool: str, exc: BaseException) -> InvalidArgumentsError:
    """The tool's own ``parse_arguments`` raised something else than ``InvalidArgumentsError``:
    the arguments could not be checked, which is this call's error, not a hook's."""
    error = InvalidArgumentsError(f"can't check the arguments of {tool}: {describe(exc)}")
    error.__cause__ = exc
    return error


def claims_not_a_list(tool: str, declared: object) -> InvalidClaimError:
    """A claims function that returned one claim, or anything else that is not a list."""
    if isinstance(declared, Claim):
        spelled = spell_claim(declared)
        got = f"got one claim, {spelled}; wrap it in a list: [{spelled}]"
    else:
        got = f"got {_preview(declared)}"
    return InvalidClaimError(
        f"can't compute the claims of {tool}: claims must return a list of claims "
        f"(such as [writes('a.txt')], or [] for none); {got}"
    )


def spell_claim(claim: Claim) -> str:
    """A claim as it is written with toolkernel's helpers: ``writes('a.txt')``."""
    resource = claim.resource
    if isinstance(resource, Path):
        return f"{'writes' if claim.is_exclusive else 'reads'}({str(resource)!r})"
    if isinstance(resource, Pool) and not claim.is_exclusive:
        return f"units(pool({resource.name!r}), {claim.units})"
    if isinstance(resource, Device | Pool):
        kind = "device" if isinstance(resource, Device) else "pool"
        return f"{claim.mode.value}({kind}({resource.name!r}))"
    return f"{claim.mode.value}({resource!r})"


def not_a_batch(method: str, calls: object) -> InvalidBatchError:
    """``kernel.run(call)``: one call, or anything else that is not a list of calls."""
    if isinstance(calls, ToolCall):
        alone = " or kernel.submit(call)" if method != "stream" else ""
        return InvalidBatchError(
            f"kernel.{method} takes a list of calls; got one ToolCall ({calls.id!r}, "
            f"{calls.name!r}): kernel.{method}([call]){alone}"
        )
    return InvalidBatchError(
        f"kernel.{method} takes a list of calls (ToolCall); got {_preview(calls)}"
    )


def claims_failed(tool: str, exc: BaseException) -> InvalidClaimError:
    error = InvalidClaimError(f"can't compute the claims of {tool}: {describe(exc)}")
    error.__cause__ = exc
    return error


def duplicate_id(call_id: str) -> InvalidCallError:
    return InvalidCallError(f"call id {call_id!r} is used twice in this batch; ids must be unique")


def bad_dependency(value: object) -> InvalidCallError:
    return InvalidCallError(
        f"after= must name earlier calls by their string ids, not {_preview(value)}"
    )


def unknown_dependency(dep_id: str, itself: bool) -> InvalidCallError:
    why = "itself" if itself else "not a known call (finished too long ago, or never submitted)"
    return InvalidCallError(f"it must run after {dep_id!r}, which is {why}")


def output_gone(dep_id: str) -> InvalidCallError:
    return InvalidCallError(
        f"it uses the output of {dep_id!r}, which finished in an earlier batch: outputs are "
        f"passed only between calls of one batch, or from calls still running; put the value "
        f"in the arguments instead"
    )


def dependency_cycle(call_ids: list[str]) -> DependencyCycleError:
    names = " -> ".join([*call_ids, call_ids[0]])
    return DependencyCycleError(f"calls wait for each other through after=: {names}")


_SKIPPED = "skipped: it had to run after "


def dependency_failed(
    call_id: str, name: str, status: Status, error: str | None, root: RootCause | None
) -> DependencyFailedError:
    """Why a call is skipped: ``call_id`` ended ``status``; ``root`` is the failure at the head
    of the chain when that call was skipped in turn (None when it failed itself). Only the head
    is named, so the message stays short however long the chain."""
    if root is None:
        return DependencyFailedError(
            f"{_SKIPPED}{call_id} ({name}), which ended {status.value}: {error or status.value}"
        )
    return DependencyFailedError(
        f"{_SKIPPED}{call_id} ({name}), which was skipped because {root.call_id} ({root.name}) "
        f"ended {root.status.value}: {root.error or root.status.value}"
    )


def too_deep(parent_id: str, parent_name: str, name: str, limit: int) -> NestingDepthError:
    return NestingDepthError(
        f"calls nested more than {limit} deep; {parent_id} ({parent_name}) can't call {name}"
    )


# -- hooks and permission -------------------------------------------------------------------------


def hook_failed(which: str, exc: BaseException) -> HookError:
    error = HookError(f"{which} failed: {describe(exc)}")
    error.__cause__ = exc
    return error


def hook_answer(which: str, answer: object, expected: str) -> HookError:
    return HookError(f"{which} answered {_preview(answer)}, which is not {expected}")


def policy_failed(name: str, failure: HookError) -> HookError:
    """A policy that raised or answered nonsense: the call is denied (it fails closed)."""
    error = HookError(f"permission denied for {name}: {failure}")
    error.__cause__ = failure.__cause__ or failure
    return error


def blocked(reason: str) -> PermissionDeniedError:
    return PermissionDeniedError(f"blocked: {reason}")


def denied(name: str, reason: str) -> PermissionDeniedError:
    why = f": {reason}" if reason else ""
    return PermissionDeniedError(f"permission denied for {name}{why}; do not retry it unchanged")


def not_approved(name: str, reason: str) -> PermissionDeniedError:
    why = f" ({reason})" if reason else ""
    return PermissionDeniedError(
        f"permission denied for {name}{why}: the user was asked and said no; do not retry it "
        f"unchanged"
    )


def no_approver(name: str, reason: str) -> ApprovalRequiredError:
    why = f" ({reason})" if reason else ""
    return ApprovalRequiredError(
        f"permission denied for {name}: it needs a person's approval{why}, and nobody can be "
        f"asked here (the kernel has no approver); it was not run"
    )


def approval_timed_out(name: str, reason: str, limit: float) -> ApprovalTimeoutError:
    why = f" ({reason})" if reason else ""
    return ApprovalTimeoutError(
        f"permission denied for {name}: it needs a person's approval{why}, and none came within "
        f"{seconds(limit)}; it was not run. Ask again later, or do something that needs no "
        f"approval"
    )


# -- waiting and running --------------------------------------------------------------------------


def wait_timed_out(limit: float, behind: str) -> LeaseWaitTimeoutError:
    return LeaseWaitTimeoutError(
        f"timed out after waiting {seconds(limit)} for its leases{behind}; try again later"
    )


def shared_leases_failed(exc: BaseException) -> LeaseServiceError:
    error = LeaseServiceError(
        f"its leases could not be taken from the lease service other processes share: "
        f"{describe(exc)}"
    )
    error.__cause__ = exc
    return error


def shared_wait_timed_out(limit: float) -> LeaseWaitTimeoutError:
    return LeaseWaitTimeoutError(
        f"waited {seconds(limit)} for its leases from the lease service, behind calls of "
        f"another process sharing the workspace"
    )


def run_timed_out(limit: float) -> RunTimeoutError:
    return RunTimeoutError(
        f"timed out after running for {seconds(limit)}; try a smaller piece of work or a longer "
        f"timeout"
    )


def cancelled(reason: CancelReason) -> CallCancelledError:
    return CallCancelledError(str(reason))


def slot_wait_timed_out(limit: float, slots: int | None) -> LeaseWaitTimeoutError:
    return LeaseWaitTimeoutError(
        f"timed out after waiting {seconds(limit)}: its leases were granted, but all "
        f"{slots} of the kernel's concurrency slots stayed busy (max_concurrency={slots}); "
        f"try again later"
    )


def batch_timed_out(
    limit: float, ran_for: float | None, behind: str, slots: int | None = None
) -> CallTimeoutError:
    if ran_for is None:
        if slots is not None:
            where = f"while it waited for one of the kernel's {slots} concurrency slots"
        else:
            where = f"while it waited{' for its leases' + behind if behind else ' to start'}"
        return CallTimeoutError(
            f"timed out: the batch's limit of {seconds(limit)} ran out {where}; it was not run. "
            f"Try it again on its own, or with a longer limit"
        )
    return CallTimeoutError(
        f"timed out: the batch's limit of {seconds(limit)} ran out after it had run for "
        f"{seconds(ran_for)}; it was stopped unfinished. Try a smaller piece of work, or a "
        f"longer limit"
    )


def paths_kept_changing(times: int) -> PathChangedError:
    return PathChangedError(
        f"its paths kept changing meaning while it waited (re-queued {times} times); try again"
    )


def nested_hold_more(tool_name: str) -> InvalidCallError:
    return InvalidCallError(
        f"{tool_name} asked to hold more than its call claimed, which a call made from inside "
        f"another tool (or one cancelled meanwhile) can't do; declare the claims on the call"
    )


def hold_more_before_grant(tool_name: str) -> InvalidCallError:
    return InvalidCallError(
        f"{tool_name} asked to hold more before its leases were granted (it runs ahead of "
        f"its grant); await ctx.wait_granted() first"
    )


def beyond_awaiting_leases(tool_name: str, owner_id: str) -> InvalidCallError:
    return InvalidCallError(
        f"{tool_name} now needs more than the leases of {owner_id}, the running call whose tool "
        f"awaits it and which it runs inside; declare the claims on {owner_id}'s tool, or run "
        f"the call outside it"
    )


def asked_too_often(times: int) -> PathChangedError:
    return PathChangedError(
        f"its tool asked to hold more than it claimed {times} times, and the paths it needed "
        f"kept changing; nothing it did was kept: try again"
    )


def deadlock(chain: list[str], parent_id: str | None) -> DeadlockError:
    return DeadlockError(
        f"waiting for its leases would deadlock: {' -> '.join(chain)} wait for each other; it "
        f"was not run. Retry it after {parent_id or 'the other calls'} finishes, or declare the "
        f"resources on the outer call"
    )

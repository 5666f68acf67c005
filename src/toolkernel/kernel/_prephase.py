"""What before-hooks, the permission policy and the approver answered, and what it means for
the call. Pure: the async layer awaits them, these functions read their answers, and the
scheduler acts on the verdict.

A verdict is None (go on), or a refusal: the status and the exception the call finishes with.
Whatever misbehaves (raises, or answers with the wrong type) is a clear failure of that call,
never an exception out of the kernel; a misbehaving policy fails closed (DENIED).
"""

from __future__ import annotations

from collections.abc import Callable

from . import _messages as messages
from ._call import Status, ToolCall
from ._policy import Block, Decision, Permission, RewriteArguments, SupplyResult, as_decision

__all__ = ["Refusal", "before_hook_verdict", "policy_verdict", "approval_verdict"]

Refusal = tuple[Status, BaseException]
"""How a refused call finishes: its status, and the exception its result carries."""


def before_hook_verdict(answer: object) -> Refusal | SupplyResult | RewriteArguments | None:
    """A before-hook's answer: None (go on), new arguments, a supplied result, or a refusal."""
    if answer is None or isinstance(answer, SupplyResult | RewriteArguments):
        return answer
    if isinstance(answer, Block):
        return Status.DENIED, messages.blocked(answer.reason)
    expected = "None, Block, SupplyResult or RewriteArguments"
    return Status.ERROR, messages.hook_answer("a before-hook", answer, expected)


def policy_verdict(policy: Callable[[ToolCall], object], call: ToolCall) -> Decision | Refusal:
    """Ask ``policy`` about ``call``: its decision to allow or ask, or a refusal."""
    try:
        answer = policy(call)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit included: the policy's bug, this call's denial
        failure = messages.hook_failed("the permission policy", exc)
        return Status.DENIED, messages.policy_failed(call.name, failure)
    decision = as_decision(answer)
    if decision is None:
        failure = messages.hook_answer("the permission policy", answer, "a Decision")
        return Status.DENIED, messages.policy_failed(call.name, failure)
    if decision.permission is Permission.DENY:
        return Status.DENIED, messages.denied(call.name, decision.reason)
    return decision


def approval_verdict(answer: object, name: str, reason: str) -> Refusal | None:
    """An approver's answer: None if it approved, else the refusal (anything but a bool is
    the approver's error: a truthy ``"no"`` must not approve)."""
    if answer is True:
        return None
    if answer is False:
        return Status.DENIED, messages.not_approved(name, reason)
    return Status.ERROR, messages.hook_answer("the approver", answer, "True or False")

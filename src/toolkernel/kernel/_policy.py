"""Permission policy and hooks: what may run, and how arguments and results may be changed.

The policy runs before any lease is requested, so no resource is held while a human decides.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

import attrs

from ._call import ToolCall, ToolResult

__all__ = [
    "Permission",
    "Decision",
    "Policy",
    "Approver",
    "RewriteArguments",
    "Block",
    "SupplyResult",
    "BeforeHook",
    "AfterHook",
    "allow_all",
    "as_decision",
]


class Permission(enum.Enum):
    """What a policy says about a call."""

    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"
    """Ask the kernel's approver (an async callable); no answer in time means no."""


@attrs.frozen
class Decision:
    """A permission with the reason given to the model when it is not ALLOW."""

    permission: Permission
    reason: str = ""

    @classmethod
    def allow(cls) -> Decision:
        return cls(Permission.ALLOW)

    @classmethod
    def deny(cls, reason: str = "") -> Decision:
        return cls(Permission.DENY, reason)

    @classmethod
    def ask(cls, reason: str = "") -> Decision:
        return cls(Permission.ASK, reason)


Policy: TypeAlias = Callable[[ToolCall], "Decision | Permission"]
"""Decides for a call (with its parsed arguments) whether it may run."""

Approver: TypeAlias = Callable[[ToolCall, str], Awaitable[bool]]
"""Asked about calls the policy marks ASK, with the policy's reason; True approves."""


def allow_all(call: ToolCall) -> Decision:
    """The default policy: everything may run."""
    return Decision.allow()


def as_decision(answer: object) -> Decision | None:
    """A policy's answer as a :class:`Decision`; None if it is neither that nor a Permission."""
    if isinstance(answer, Permission):
        return Decision(answer)
    if isinstance(answer, Decision) and isinstance(answer.permission, Permission):
        return answer
    return None


@attrs.frozen
class RewriteArguments:
    """A before-hook's answer: run the call with these arguments instead (validated again)."""

    arguments: Mapping[str, Any]


@attrs.frozen
class Block:
    """A before-hook's answer: do not run the call; the model reads ``reason``."""

    reason: str


@attrs.frozen
class SupplyResult:
    """A before-hook's answer: do not run the tool; use ``output`` as its result."""

    output: Any


BeforeHook: TypeAlias = Callable[
    [ToolCall], "Awaitable[RewriteArguments | Block | SupplyResult | None]"
]
"""Runs before the policy; returns None to let the call through unchanged."""

AfterHook: TypeAlias = Callable[[ToolCall, ToolResult], "Awaitable[ToolResult | None]"]
"""Runs after the call; returns a replacement result, or None to keep it."""

"""Exceptions and outputs whose ``str()`` raises: a tool's own, a hook's, the policy's. The
call they belong to fails (or its text says it can't be shown); no other call, and not the
kernel, notices."""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest

import toolkernel as tk
from toolkernel.formats import anthropic, openai

from .fakes import assert_leases_returned


class ApiError(Exception):
    """An exception whose ``__str__`` reads attributes nobody set."""

    def __str__(self) -> str:
        return f"{self.status}: {self.body}"  # type: ignore[attr-defined]


class Closed:
    def __str__(self) -> str:
        raise RuntimeError("closed handle")


def unprintable(kind: str) -> Exception:
    return ApiError("boom") if kind == "custom" else ValueError(10**5000)  # past the digit limit


@tk.tool(claims=lambda args: [])
async def fails(ctx: tk.ToolContext, kind: str = "custom", where: str = "tool") -> str:
    if where == "tool":
        raise unprintable(kind)
    return "ran"


@tk.tool(claims=lambda args: [])
async def sibling(ctx: tk.ToolContext) -> str:
    await anyio.sleep(0.01)
    return "sibling ok"


@tk.tool(claims=lambda args: [])
async def gives(ctx: tk.ToolContext, what: str) -> Any:
    return math.factorial(2000) if what == "int" else Closed()


def refuse_claims(arguments: Any) -> list[tk.Claim]:
    raise ApiError("no claims")


@tk.tool(claims=refuse_claims)
async def unclaimable(ctx: tk.ToolContext) -> str:
    return "never"


@pytest.mark.parametrize("kind", ["custom", "huge int"])
async def test_a_tool_raising_an_unprintable_exception_fails_its_call_alone(kind: str) -> None:
    async with tk.open_kernel([fails, sibling]) as kernel:
        results = await kernel.run(
            [tk.ToolCall("a", "fails", {"kind": kind}), tk.ToolCall("b", "sibling", {})]
        )
        (lone,) = await kernel.run([tk.ToolCall("c", "fails", {"kind": kind})])
        assert_leases_returned(kernel)
    expected = "ApiError" if kind == "custom" else "ValueError"
    assert [(r.status, r.error_type) for r in results] == [
        (tk.Status.ERROR, expected),
        (tk.Status.OK, None),
    ]
    raised = "AttributeError" if kind == "custom" else "ValueError"
    assert results[0].error == f"{expected}: (its message can't be shown: str() raised {raised})"
    assert (lone.status, lone.error_type) == (tk.Status.ERROR, expected)


def raise_where(where: str) -> Any:
    def hook(call: tk.ToolCall, *rest: Any) -> Any:
        if call.arguments.get("where") == where:
            raise ApiError("hook")
        return None

    return hook


def policy(call: tk.ToolCall) -> Any:
    if call.arguments.get("where") == "policy":
        raise ApiError("policy")
    if call.arguments.get("where") == "approver":
        return tk.Decision.ask("may it?")
    return tk.Permission.ALLOW


async def approver(call: tk.ToolCall, reason: str) -> bool:
    raise ApiError("approver")


@pytest.mark.parametrize("where", ["before", "after", "policy", "approver"])
async def test_a_hook_raising_an_unprintable_exception_fails_its_call_alone(where: str) -> None:
    async with tk.open_kernel(
        [fails, sibling],
        before_hooks=[raise_where("before")],
        after_hooks=[raise_where("after")],
        policy=policy,
        approver=approver,
    ) as kernel:
        failed, other = await kernel.run(
            [tk.ToolCall("a", "fails", {"where": where}), tk.ToolCall("b", "sibling", {})]
        )
        assert_leases_returned(kernel)
    assert failed.error_type == "HookError"
    assert "ApiError: (its message can't be shown" in (failed.error or "")
    assert other.status is tk.Status.OK


async def test_a_claims_function_raising_an_unprintable_exception_is_a_claim_error() -> None:
    async with tk.open_kernel([unclaimable, sibling]) as kernel:
        failed, other = await kernel.run(
            [tk.ToolCall("a", "unclaimable", {}), tk.ToolCall("b", "sibling", {})]
        )
    assert failed.error_type == "InvalidClaimError"
    assert "can't compute the claims of unclaimable: ApiError: (its message" in (failed.error or "")
    assert other.status is tk.Status.OK


async def test_an_output_whose_str_raises_is_shown_as_such_and_the_batch_still_answers() -> None:
    async with tk.open_kernel([gives]) as kernel:
        results = await kernel.run(
            [tk.ToolCall("i", "gives", {"what": "int"}), tk.ToolCall("h", "gives", {"what": "x"})]
        )
    assert [r.status for r in results] == [tk.Status.OK, tk.Status.OK]
    assert results[0].text() == "(int that can't be shown: str() raised ValueError)"
    assert results[1].text() == "(Closed that can't be shown: str() raised RuntimeError)"
    messages = openai.chat_tool_messages(results)
    assert [m["tool_call_id"] for m in messages] == ["i", "h"]
    blocks = anthropic.tool_results(results)
    assert [b["tool_use_id"] for b in blocks] == ["i", "h"]

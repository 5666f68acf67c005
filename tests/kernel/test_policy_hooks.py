"""The permission policy and the hooks run before any lease is requested, and change what runs."""

from __future__ import annotations

import anyio
import attrs
import pytest

import toolkernel as tk
from toolkernel.kernel import Block, RewriteArguments, SupplyResult
from toolkernel.testing import wait_all_tasks_blocked

from .fakes import Recorder, assert_leases_returned, by_id, edit, make_tools, read


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


def deny_id(*call_ids: str):
    def policy(call: tk.ToolCall) -> tk.Decision:
        if call.id in call_ids:
            return tk.Decision.deny("edits of secrets are not allowed")
        return tk.Decision.allow()

    return policy


def ask_for(*call_ids: str, as_permission: bool = False):
    def policy(call: tk.ToolCall) -> tk.Decision | tk.Permission:
        if call.id in call_ids:
            return tk.Permission.ASK if as_permission else tk.Decision.ask("it edits a.txt")
        return tk.Permission.ALLOW

    return policy


# -- policy ---------------------------------------------------------------------------------------


async def test_a_denied_call_is_denied_and_never_requests_its_leases(autojump_clock, rec) -> None:
    events: list[tk.CallEvent] = []
    calls = [edit("bad", "a", 5), edit("good", "a", 1), read("other", "b", 1)]
    async with tk.open_kernel(tools=make_tools(rec), policy=deny_id("bad")) as kernel:
        kernel.add_listener(events.append)
        handles = kernel.submit_batch(calls)
        # Denied synchronously, before any lease: only "good" and "other" hold leases now.
        assert handles[0].finished
        assert kernel.lease_statistics().held == 2
        assert kernel.lease_statistics().waiting == 0
        results = by_id([await h.wait_finished() for h in handles])
    bad = results["bad"]
    assert bad.status is tk.Status.DENIED
    assert bad.error == (
        "permission denied for edit: edits of secrets are not allowed; do not retry it unchanged"
    )
    assert bad.started_at is None and not rec.ran("bad")
    # The call on the same file was never blocked by the denied one.
    assert results["good"].started_at == 0
    assert [e for e in events if e.call_id == "bad" and isinstance(e, tk.kernel.CallBlocked)] == []
    assert [e for e in events if isinstance(e, tk.kernel.CallBlocked)] == []


async def test_the_policy_may_return_a_bare_permission(autojump_clock, rec) -> None:
    def policy(call: tk.ToolCall) -> tk.Permission:
        return tk.Permission.DENY if call.name == "edit" else tk.Permission.ALLOW

    async with tk.open_kernel(tools=make_tools(rec), policy=policy) as kernel:
        e, r = await kernel.run([edit("c1", "a"), read("c2", "a")])
    assert e.status is tk.Status.DENIED and e.error is not None
    assert e.error.startswith("permission denied for edit")
    assert r.ok


async def test_a_policy_that_raises_denies_the_call(autojump_clock, rec) -> None:
    def policy(call: tk.ToolCall) -> tk.Decision:
        raise KeyError("boom")

    async with tk.open_kernel(tools=make_tools(rec), policy=policy) as kernel:
        (result,) = await kernel.run([edit("c1", "a")])
    assert result.status is tk.Status.DENIED
    assert "the permission policy failed" in (result.error or "")


@pytest.mark.parametrize("as_permission", [False, True])
async def test_an_unanswered_ask_is_denied_after_the_approval_timeout(
    autojump_clock, rec, as_permission
) -> None:
    asked: list[tuple[str, str]] = []

    async def approver(call: tk.ToolCall, reason: str) -> bool:
        asked.append((call.id, reason))
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async with tk.open_kernel(
        tools=make_tools(rec),
        policy=ask_for("c1", as_permission=as_permission),
        approver=approver,
        approval_timeout=30,
    ) as kernel:
        c1, c2 = await kernel.run([edit("c1", "a.txt", 1), read("c2", "b.txt", 1)])
        assert_leases_returned(kernel)
    assert asked == [("c1", "" if as_permission else "it edits a.txt")]
    assert c1.status is tk.Status.DENIED
    assert c1.finished_at == 30 and c1.started_at is None
    assert "permission denied for edit" in (c1.error or "")
    assert "none came within 30 s" in (c1.error or "")
    assert c1.error_type == "ApprovalTimeoutError"
    assert not rec.ran("c1")
    # The unrelated call did not wait for the human.
    assert (c2.status, c2.finished_at) == (tk.Status.OK, 1)


async def test_no_lease_is_held_while_the_approver_is_waiting(autojump_clock, rec) -> None:
    asking = anyio.Event()
    answer = anyio.Event()

    async def approver(call: tk.ToolCall, reason: str) -> bool:
        asking.set()
        await answer.wait()
        return True

    async with tk.open_kernel(
        tools=make_tools(rec), policy=ask_for("c1"), approver=approver, approval_timeout=100
    ) as kernel:
        handle = kernel.submit(edit("c1", "a.txt", 1))
        await asking.wait()
        await wait_all_tasks_blocked()
        assert kernel.lease_statistics().held == kernel.lease_statistics().waiting == 0
        snap = kernel.snapshot()
        assert [i.call_id for i in snap.pending] == ["c1"]
        assert snap.running == snap.queued == ()
        # Another batch can use the very file while the human thinks.
        (other,) = await kernel.run([edit("c2", "a.txt", 3)])
        assert (other.started_at, other.finished_at) == (0, 3)
        answer.set()
        result = await handle.wait_finished()
    # An approved ask runs.
    assert result.ok and result.output == "edited a.txt"
    assert (result.started_at, result.finished_at) == (3, 4)


async def test_a_later_conflicting_call_of_the_batch_waits_for_the_approval(
    autojump_clock, rec
) -> None:
    async def approver(call: tk.ToolCall, reason: str) -> bool:
        await anyio.sleep(5)
        return True

    async with tk.open_kernel(
        tools=make_tools(rec), policy=ask_for("c1"), approver=approver
    ) as kernel:
        c1, c2, c3 = await kernel.run([edit("c1", "a", 1), read("c2", "a", 1), read("c3", "b", 1)])
    assert (c1.started_at, c2.started_at, c3.started_at) == (5, 6, 0)
    assert rec.order == ["c3", "c1", "c2"]


async def test_a_refusing_approver_denies_and_an_ask_without_approver_is_denied(
    autojump_clock, rec
) -> None:
    async def approver(call: tk.ToolCall, reason: str) -> bool:
        return False

    async with tk.open_kernel(tools=make_tools(rec), policy=ask_for("c1"), approver=approver) as k:
        (refused,) = await k.run([edit("c1", "a")])
    async with tk.open_kernel(tools=make_tools(rec), policy=ask_for("c1")) as k:
        (nobody,) = await k.run([edit("c1", "a")])
    assert refused.status is nobody.status is tk.Status.DENIED
    assert not rec.spans


async def test_an_approver_that_raises_gives_an_error(autojump_clock, rec) -> None:
    async def approver(call: tk.ToolCall, reason: str) -> bool:
        raise ConnectionError("ui went away")

    async with tk.open_kernel(
        tools=make_tools(rec), policy=ask_for("c1"), approver=approver
    ) as kernel:
        (result,) = await kernel.run([edit("c1", "a")])
        assert_leases_returned(kernel)
    assert result.status is tk.Status.ERROR
    assert result.error == "the approver failed: ConnectionError: ui went away"


# -- before-hooks ---------------------------------------------------------------------------------


async def test_a_call_rewritten_onto_a_later_calls_file_still_runs_first(
    autojump_clock, rec
) -> None:
    # c1's hook takes 2 s and moves it from a to b, where c2 (ready at once) writes: until the
    # hook answers, c1 may claim anything, so c2 waits for it, and then runs after it. c3
    # conflicts with neither: it waits only for c1's hook, not for c1's slow approval.
    async def move(call: tk.ToolCall) -> RewriteArguments | None:
        if call.id == "c1":
            await anyio.sleep(2)
            return RewriteArguments({**call.arguments, "path": "b"})
        return None

    def policy(call: tk.ToolCall) -> tk.Decision:
        return tk.Decision.ask("check") if call.id == "c1" else tk.Decision.allow()

    async def approver(call: tk.ToolCall, reason: str) -> bool:
        await anyio.sleep(3)
        return True

    async with tk.open_kernel(
        tools=make_tools(rec), before_hooks=[move], policy=policy, approver=approver
    ) as kernel:
        c1, c2, c3 = await kernel.run([edit("c1", "a"), edit("c2", "b"), edit("c3", "c")])
        assert_leases_returned(kernel)
    assert c1.output == "edited b" and c2.ok and c3.ok
    assert rec.order == ["c3", "c1", "c2"]
    assert (c1.started_at, c2.started_at, c3.started_at) == (5, 6, 2)


async def test_rewrite_arguments_changes_the_arguments_and_the_claims(autojump_clock, rec) -> None:
    seen: list[tk.ToolCall] = []

    async def redirect(call: tk.ToolCall) -> RewriteArguments | None:
        if call.id == "c2":
            return RewriteArguments({**call.arguments, "path": "b"})
        return None

    def policy(call: tk.ToolCall) -> tk.Decision:
        seen.append(call)  # the policy judges the rewritten call
        return tk.Decision.allow()

    async with tk.open_kernel(
        tools=make_tools(rec), before_hooks=[redirect], policy=policy
    ) as kernel:
        c1, c2 = await kernel.run([edit("c1", "a", 5), edit("c2", "a", 1)])
    assert c1.ok and c2.output == "edited b"
    # It no longer claims "a", so it does not wait for c1.
    assert (c2.started_at, c2.finished_at) == (0, 1)
    assert [str(c.resource) for c in rec.spans["c2"].claims] == ["b"]
    assert {c.id: c.arguments["path"] for c in seen} == {"c1": "a", "c2": "b"}


async def test_rewritten_arguments_are_validated_again(autojump_clock, rec) -> None:
    async def bad(call: tk.ToolCall) -> RewriteArguments:
        return RewriteArguments({"path": 3})

    async with tk.open_kernel(tools=make_tools(rec), before_hooks=[bad]) as kernel:
        (result,) = await kernel.run([edit("c1", "a")])
    assert result.status is tk.Status.ERROR
    assert "argument 'path' must be string, not integer (3)" in (result.error or "")


async def test_block_denies_with_the_reason(autojump_clock, rec) -> None:
    async def guard(call: tk.ToolCall) -> Block | None:
        if call.arguments.get("path") == ".env":
            return Block("the .env file holds secrets")
        return None

    async with tk.open_kernel(tools=make_tools(rec), before_hooks=[guard]) as kernel:
        blocked, fine = await kernel.run([edit("c1", ".env", 5), edit("c2", ".env", 1)])
        assert_leases_returned(kernel)
    assert blocked.status is tk.Status.DENIED
    assert blocked.error == "blocked: the .env file holds secrets"
    assert blocked.finished_at == 0 and not rec.ran("c1")
    assert fine.status is tk.Status.DENIED  # same path, also blocked


async def test_supply_result_answers_without_running_the_tool(autojump_clock, rec) -> None:
    async def cache(call: tk.ToolCall) -> SupplyResult | None:
        if call.name == "read":
            return SupplyResult(f"cached {call.arguments['path']}")
        return None

    async with tk.open_kernel(tools=make_tools(rec), before_hooks=[cache]) as kernel:
        r, e = await kernel.run([read("c1", "a", 5), edit("c2", "a", 1)])
    assert (r.status, r.output, r.started_at, r.finished_at) == (
        tk.Status.OK,
        "cached a",
        None,
        0,
    )
    assert not rec.ran("c1")
    assert e.ok and e.started_at == 0


async def test_a_failing_before_hook_is_an_error_of_that_call(autojump_clock, rec) -> None:
    async def hook(call: tk.ToolCall) -> None:
        if call.id == "c1":
            raise LookupError("no such project")

    async with tk.open_kernel(tools=make_tools(rec), before_hooks=[hook]) as kernel:
        c1, c2 = await kernel.run([edit("c1", "a"), edit("c2", "a")])
    assert c1.status is tk.Status.ERROR
    assert c1.error == "a before-hook failed: LookupError: no such project"
    assert c2.ok and c2.started_at == 0


async def test_hooks_run_in_order_and_see_earlier_rewrites(autojump_clock, rec) -> None:
    async def first(call: tk.ToolCall) -> RewriteArguments:
        return RewriteArguments({**call.arguments, "path": call.arguments["path"] + ".bak"})

    async def second(call: tk.ToolCall) -> RewriteArguments:
        return RewriteArguments({**call.arguments, "path": call.arguments["path"] + "2"})

    async with tk.open_kernel(tools=make_tools(rec), before_hooks=[first, second]) as kernel:
        (result,) = await kernel.run([edit("c1", "a")])
    assert result.output == "edited a.bak2"


# -- after-hooks ----------------------------------------------------------------------------------


async def test_after_hooks_rewrite_the_result(autojump_clock, rec) -> None:
    async def shout(call: tk.ToolCall, result: tk.ToolResult) -> tk.ToolResult | None:
        if result.ok:
            return attrs.evolve(result, output=str(result.output).upper())
        return None

    async def soften(call: tk.ToolCall, result: tk.ToolResult) -> tk.ToolResult | None:
        if result.status is tk.Status.ERROR:
            return attrs.evolve(result, error=f"{result.error} (try again)")
        return None

    failing = tk.ToolCall("c2", "edit", {"path": "b", "fail": True})
    events: list[tk.CallEvent] = []
    async with tk.open_kernel(tools=make_tools(rec), after_hooks=[shout, soften]) as kernel:
        kernel.add_listener(events.append)
        ok, bad = await kernel.run([edit("c1", "a", 1), failing])
    assert ok.output == "EDITED A"
    assert bad.error == "RuntimeError: c2 failed on purpose (try again)"
    # The event carries the rewritten result too.
    finished = by_id(e.result for e in events if isinstance(e, tk.kernel.CallFinished))
    assert finished["c1"].output == "EDITED A"


async def test_a_result_an_after_hook_makes_for_another_call_is_still_this_calls(
    autojump_clock, rec
) -> None:
    # Every call gets one result under its own id and name, whatever a hook built.
    async def stale(call: tk.ToolCall, result: tk.ToolResult) -> tk.ToolResult:
        return tk.ToolResult("cached", "read", tk.Status.OK, output="from the cache")

    async with tk.open_kernel(tools=make_tools(rec), after_hooks=[stale]) as kernel:
        first, second = await kernel.run([edit("c1", "a"), edit("c2", "b")])
    assert [(r.call_id, r.name, r.output) for r in (first, second)] == [
        ("c1", "edit", "from the cache"),
        ("c2", "edit", "from the cache"),
    ]


@pytest.mark.parametrize(
    ("made", "said"),
    [
        (lambda r: tk.ToolResult(r.call_id, r.name, "OK", "x"), "its status is not a Status"),  # type: ignore[arg-type]
        (lambda r: tk.ToolResult(r.call_id, r.name, None, "x"), "its status is not a Status"),  # type: ignore[arg-type]
        (lambda r: tk.ToolResult(r.call_id, r.name, tk.Status.ERROR, error=123), "its error"),  # type: ignore[arg-type]
        (
            lambda r: tk.ToolResult(r.call_id, r.name, tk.Status.OK, queued_at="soon"),  # type: ignore[arg-type]
            "its queued_at or finished_at is not a time",
        ),
        (lambda r: tk.ToolResult.__new__(tk.ToolResult), "its status is not a Status"),
    ],
)
async def test_an_after_hook_answering_a_result_not_made_whole_is_an_error_and_nothing_hangs(
    autojump_clock, rec, made, said
) -> None:
    """A status given as a string failed the machine as the call finished: the batch was
    never told, and ``run`` waited for ever."""

    async def hook(call: tk.ToolCall, result: tk.ToolResult) -> tk.ToolResult:
        return made(result)  # type: ignore[no-any-return]

    async with tk.open_kernel(tools=make_tools(rec), after_hooks=[hook]) as kernel:
        (handle,) = kernel.submit_batch([edit("c1", "a")])
        with anyio.fail_after(5):  # not run(): it waits shielded, and would hang the test
            result = await handle.wait_finished()
        assert result.status is tk.Status.ERROR and result.error_type == "HookError"
        assert said in (result.error or ""), result.error
        assert_leases_returned(kernel)


async def test_a_failing_after_hook_turns_the_result_into_an_error(autojump_clock, rec) -> None:
    async def broken(call: tk.ToolCall, result: tk.ToolResult) -> None:
        raise ValueError("bad hook")

    async with tk.open_kernel(tools=make_tools(rec), after_hooks=[broken]) as kernel:
        (result,) = await kernel.run([edit("c1", "a")])
    assert result.status is tk.Status.ERROR
    assert result.error == "an after-hook failed: ValueError: bad hook"


async def test_a_call_cancelled_as_its_leases_return_runs_no_after_hook(
    autojump_clock, rec
) -> None:
    seen: list[str] = []

    def hook(call: tk.ToolCall, result: tk.ToolResult) -> None:
        seen.append(call.id)

    async with tk.open_kernel(tools=make_tools(rec), after_hooks=[hook]) as kernel:

        class CancelOnReturn:
            def __call__(self, event: tk.CallEvent) -> None:
                pass

            def leases_returned(self, call_id: str) -> None:
                if call_id == "c1":
                    kernel.cancel(call_id)

        kernel.add_listener(CancelOnReturn())
        c1, c2 = await kernel.run([edit("c1", "a"), edit("c2", "b")])
        assert_leases_returned(kernel)
    assert c1.status is tk.Status.CANCELLED and c2.ok
    assert seen == ["c2"]

"""The kernel against careless users and misbehaving code: every mistake is a clear result for
the call that made it (or a plain error when the kernel is opened), never a crash, a hang, or a
lost result of another call. Each test has a deadline on the mock clock, so a hang fails."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping
from typing import Any

import anyio
import pytest
import trio
import trio.testing

import toolkernel as tk
from toolkernel.kernel import KeyFunction
from toolkernel.testing import wait_all_tasks_blocked

from .fakes import Recorder, assert_leases_returned, by_id, edit, make_tools, read

DEADLINE = 1000  # mock seconds: a hang jumps here at once and fails the test


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


# -- a context used after its call ended --------------------------------------------------------


async def test_a_kept_context_cannot_start_nested_calls_or_report_after_its_call(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    kept: list[tk.ToolContext] = []

    @tk.tool(claims=lambda args: [tk.writes("a.txt")])
    async def keeper(ctx: tk.ToolContext) -> str:
        kept.append(ctx)
        return "kept"

    @tk.tool(claims=lambda args: [])
    async def later(ctx: tk.ToolContext) -> str:
        with pytest.raises(tk.errors.CallEndedError, match=r"c1 .* has ended"):
            await kept[0].call("edit", path="a.txt")
        with pytest.raises(tk.errors.CallEndedError):
            kept[0].progress("still here")
        return "refused"

    with anyio.fail_after(DEADLINE):
        async with tk.open_kernel(tools=[keeper, later, *make_tools(rec)]) as kernel:
            first, second = await kernel.run(
                [tk.ToolCall("c1", "keeper"), tk.ToolCall("c2", "later", after=["c1"])]
            )
            assert_leases_returned(kernel)
    assert (first.output, second.output) == ("kept", "refused"), second.error
    assert not rec.ran("c1.1")


async def test_a_kept_context_has_no_file_access_after_its_call(tmp_path: Any) -> None:
    kept: list[tk.ToolContext] = []
    kept_fs: list[Any] = []

    @tk.tool(writes=["path"])
    async def keeper(ctx: tk.ToolContext, path: str) -> str:
        kept.append(ctx)
        kept_fs.append(ctx.fs)
        return await ctx.fs.read_text(path)

    (tmp_path / "a.txt").write_text("old")
    async with tk.open_kernel(tools=[keeper], root=tmp_path) as kernel:
        (result,) = await kernel.run([tk.ToolCall("c1", "keeper", {"path": "a.txt"})])
        assert result.output == "old"
        with pytest.raises(tk.errors.CallEndedError):
            kept[0].fs  # noqa: B018 - the access itself must raise
        with pytest.raises(tk.errors.CallEndedError, match="call c1 has ended"):
            await kept_fs[0].write_text("a.txt", "new")
    assert (tmp_path / "a.txt").read_text() == "old"


# -- hangs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["cancel the call", "close the kernel"])
async def test_an_after_hook_that_waits_can_be_cancelled(
    autojump_clock: trio.testing.MockClock, rec: Recorder, how: str
) -> None:
    async def stuck(call: tk.ToolCall, result: tk.ToolResult) -> None:
        await anyio.sleep_forever()

    with anyio.fail_after(DEADLINE):
        async with tk.open_kernel(tools=make_tools(rec), after_hooks=[stuck]) as kernel:
            handle = kernel.submit(read("c1", "a.txt", 1))
            await anyio.sleep(5)
            assert not handle.finished
            if how == "cancel the call":
                handle.cancel()
                result = await handle.wait_finished()
                assert result.status is tk.Status.CANCELLED
                assert_leases_returned(kernel)
        assert handle.result.status is tk.Status.CANCELLED
    assert rec.ran("c1")


async def test_a_wait_cycle_closed_by_a_later_high_priority_request_is_broken(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    # c0 holds b for a while. c1 holds a and, from inside, calls edit(b): it waits behind c0,
    # which waits for nobody. Then h, with a higher priority than any nested call, asks for
    # a and b: it queues ahead of the nested edit, which now waits for h, which waits for
    # c1, which awaits the nested edit. Nobody could ever move; the nested call must fail.
    @tk.tool(writes=["path"])
    async def outer(ctx: tk.ToolContext, path: str, inner: str) -> str:
        nested = await ctx.call("edit", path=inner, duration=1.0)
        return f"{nested.status.value}: {nested.error_type}"

    @tk.tool(claims=lambda args: [tk.writes("a"), tk.writes("b")])
    async def both(ctx: tk.ToolContext) -> str:
        return "both"

    tools = [outer, both, *make_tools(rec)]
    with anyio.fail_after(DEADLINE):
        async with tk.open_kernel(tools=tools) as kernel:
            holder = kernel.submit(edit("c0", "b", 10))
            parent = kernel.submit(tk.ToolCall("c1", "outer", {"path": "a", "inner": "b"}))
            await anyio.sleep(1)
            assert kernel.snapshot().queued[0].call_id == "c1.1"
            late = kernel.submit(tk.ToolCall("h", "both", priority=10**9))
            result = await parent.wait_finished()
            assert result.output == "error: DeadlockError"
            assert (await late.wait_finished()).status is tk.Status.OK
            assert (await holder.wait_finished()).status is tk.Status.OK
            assert_leases_returned(kernel)


# -- admission is all or nothing ------------------------------------------------------------------


@pytest.mark.parametrize("bad", [["c1"], None, 3, ("c1",)])
async def test_an_after_entry_that_is_not_a_string_is_an_error_of_that_call(
    autojump_clock: trio.testing.MockClock, rec: Recorder, bad: object
) -> None:
    with anyio.fail_after(DEADLINE):
        async with tk.open_kernel(tools=make_tools(rec)) as kernel:
            results = by_id(
                await kernel.run(
                    [read("c1", "a.txt"), edit("c2", "a.txt", after=["c1", bad])]  # type: ignore[list-item]
                )
            )
            assert results["c1"].status is tk.Status.OK
            assert results["c2"].status is tk.Status.ERROR
            assert results["c2"].error_type == "InvalidCallError"
            assert "after=" in (results["c2"].error or "")
            # The kernel is whole: a later call may name the calls of that batch.
            (later,) = await kernel.run([edit("c3", "a.txt", after=["c1"])])
            assert later.status is tk.Status.OK
            assert_leases_returned(kernel)


@pytest.mark.parametrize("name", [["Read"], None, 42, {"n": 1}])
async def test_a_tool_name_that_is_not_a_string_is_an_invalid_call_not_an_unknown_tool(
    autojump_clock: trio.testing.MockClock, rec: Recorder, name: object
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        bad, good = await kernel.run([tk.ToolCall("c1", name), read("c2", "a.txt")])  # type: ignore[arg-type]
        assert_leases_returned(kernel)
    # Malformed, not a name looked up and missed: InvalidCallError, not UnknownToolError.
    assert (bad.status, bad.error_type) == (tk.Status.ERROR, "InvalidCallError")
    assert not isinstance(bad.exception, LookupError)
    assert "must be a string" in (bad.error or "")
    assert good.status is tk.Status.OK


class _Fussy(tk.Tool):
    """A tool whose own argument check fails with something else than InvalidArgumentsError."""

    def __init__(self) -> None:
        super().__init__(name="fussy")

    async def run(self, ctx: tk.ToolContext) -> str:
        return "ran"

    def parse_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        raise ValueError("no fuss allowed")


async def test_a_tool_whose_argument_check_raises_fails_its_call_with_invalid_arguments(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    async with tk.open_kernel(tools=[_Fussy(), *make_tools(rec)]) as kernel:
        bad, good = await kernel.run([tk.ToolCall("c1", "fussy", {}), read("c2", "a.txt")])
        assert_leases_returned(kernel)
    # The tool's own parse failed, not a user's hook: InvalidArgumentsError, not HookError.
    assert (bad.status, bad.error_type) == (tk.Status.ERROR, "InvalidArgumentsError")
    assert isinstance(bad.exception, tk.errors.InvalidArgumentsError)
    assert isinstance(bad.exception.__cause__, ValueError)
    assert bad.error == (
        "InvalidArgumentsError: can't check the arguments of fussy: ValueError: no fuss allowed"
    )
    assert good.status is tk.Status.OK


async def test_a_call_id_that_is_not_a_string_is_an_error_of_that_call(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        bad, good = await kernel.run(
            [tk.ToolCall(["c1"], "read", {"path": "a"}), read("c2", "a.txt")]  # type: ignore[arg-type]
        )
        assert_leases_returned(kernel)
    assert (bad.status, bad.error_type) == (tk.Status.ERROR, "InvalidCallError")
    assert good.status is tk.Status.OK


async def test_argument_keys_that_are_not_strings_blame_the_arguments(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        (result,) = await kernel.run([tk.ToolCall("c1", "read", {"path": "a", 1: "x"})])  # type: ignore[dict-item]
    assert result.error_type == "InvalidArgumentsError"
    assert "read argument names must be strings" in (result.error or "")


# -- crashes --------------------------------------------------------------------------------------


async def test_a_claims_function_failing_after_the_grant_is_an_error_of_that_call(
    tmp_path: Any,
) -> None:
    asked = 0
    release = anyio.Event()

    class Touchy(tk.Tool):
        """Its claims are its own (``claims`` overridden), so they are asked for again after
        the grant: fine at admission, broken then."""

        name = "touchy"

        def claims(self, arguments: Mapping[str, Any], key: KeyFunction) -> list[tk.Claim]:
            nonlocal asked
            asked += 1
            if asked > 1:
                raise OSError("the disk went away")
            return [tk.writes(key("a.txt"))]

        async def run(self, ctx: tk.ToolContext) -> str:
            return "ran"

    touchy = Touchy()
    assert not touchy.claims_follow_keys

    @tk.tool(writes=["path"])
    async def hold(ctx: tk.ToolContext, path: str) -> str:
        await release.wait()
        return "held"

    async with tk.open_kernel(tools=[touchy, hold], root=tmp_path) as kernel:
        holder = kernel.submit(tk.ToolCall("c0", "hold", {"path": "a.txt"}))
        waiter = kernel.submit(tk.ToolCall("c1", "touchy"))  # waits for c0: re-keyed later
        await wait_all_tasks_blocked()
        release.set()
        bad = await waiter.wait_finished()
        assert (await holder.wait_finished()).output == "held"
        (again,) = await kernel.run([tk.ToolCall("c2", "hold", {"path": "a.txt"})])
        assert_leases_returned(kernel)
    assert bad.status is tk.Status.ERROR and bad.started_at is None
    assert bad.error == (
        "InvalidClaimError: can't compute the claims of touchy: OSError: the disk went away"
    )
    assert again.output == "held"


@pytest.mark.parametrize("exit_code", [0, 2, "usage: tool [-h]"])
async def test_a_tool_raising_system_exit_fails_only_its_call(
    autojump_clock: trio.testing.MockClock, rec: Recorder, exit_code: object
) -> None:
    @tk.tool(claims=lambda args: [])
    async def argparse_like(ctx: tk.ToolContext) -> str:
        await anyio.sleep(1)
        raise SystemExit(exit_code)

    async with tk.open_kernel(tools=[argparse_like, *make_tools(rec)]) as kernel:
        bad, good = await kernel.run([tk.ToolCall("c1", "argparse_like"), read("c2", "a", 2)])
        (after,) = await kernel.run([read("c3", "a")])
        assert_leases_returned(kernel)
    assert (bad.status, bad.error_type) == (tk.Status.ERROR, "SystemExit")
    assert isinstance(bad.exception, SystemExit)
    assert (good.status, after.status) == (tk.Status.OK, tk.Status.OK)


@tk.tool(claims=lambda args: [])
async def interrupted(ctx: tk.ToolContext) -> str:
    """Raise KeyboardInterrupt, as a Ctrl-C would."""
    raise KeyboardInterrupt


@pytest.mark.trio_only  # on asyncio it stops the loop itself: see the test below
async def test_keyboard_interrupt_from_a_tool_propagates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with pytest.raises(BaseExceptionGroup) as caught:
        async with tk.open_kernel(tools=[interrupted]) as kernel:
            await kernel.run([tk.ToolCall("c1", "interrupted"), tk.ToolCall("c2", "interrupted")])
    assert caught.value.subgroup(KeyboardInterrupt) is not None


def test_keyboard_interrupt_from_a_tool_stops_an_asyncio_program() -> None:
    async def main() -> None:
        async with tk.open_kernel(tools=[interrupted]) as kernel:
            await kernel.run([tk.ToolCall("c1", "interrupted"), tk.ToolCall("c2", "interrupted")])

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(main())


async def test_a_tool_exception_keeps_its_traceback_and_is_logged_at_debug(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    @tk.tool(claims=lambda args: [])
    async def broken(ctx: tk.ToolContext) -> str:
        raise ValueError("bad value")

    caplog.set_level(logging.DEBUG, logger="toolkernel")
    async with tk.open_kernel(tools=[broken]) as kernel:
        (result,) = await kernel.run([tk.ToolCall("c1", "broken")])
    assert (result.error, result.error_type) == ("ValueError: bad value", "ValueError")
    assert isinstance(result.exception, ValueError)
    assert result.exception.__traceback__ is not None
    assert result == tk.ToolResult(**{**_fields(result), "exception": None})  # not compared
    assert "exception" not in repr(result)
    logged = [r for r in caplog.records if r.levelno == logging.DEBUG and r.exc_info]
    assert logged and logged[0].exc_info is not None and logged[0].exc_info[1] is result.exception


def _fields(result: tk.ToolResult) -> dict[str, Any]:
    import attrs

    return attrs.asdict(result, recurse=False)


# -- hooks and policies that answer nonsense ------------------------------------------------------


async def test_hooks_and_policies_answering_the_wrong_type_fail_only_their_call(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    def policy(call: tk.ToolCall) -> Any:
        return "yes" if call.id == "p" else tk.Permission.ASK if call.id == "a" else None

    async def approver(call: tk.ToolCall, reason: str) -> Any:
        return "no"  # truthy: must not approve

    async def before(call: tk.ToolCall) -> Any:
        return 42 if call.id == "b" else None

    async def after(call: tk.ToolCall, result: tk.ToolResult) -> Any:
        return "replaced" if call.id == "f" else None

    def fixed_policy(call: tk.ToolCall) -> Any:
        answer = policy(call)
        return tk.Permission.ALLOW if answer is None else answer

    async with tk.open_kernel(
        tools=make_tools(rec),
        policy=fixed_policy,
        approver=approver,
        before_hooks=[before],
        after_hooks=[after],
    ) as kernel:
        results = by_id(
            await kernel.run(
                [read("p", "1"), read("a", "2"), read("b", "3"), read("f", "4"), read("ok", "5")]
            )
        )
        assert_leases_returned(kernel)
    assert (results["p"].status, results["p"].error_type) == (tk.Status.DENIED, "HookError")
    assert (results["a"].status, results["a"].error_type) == (tk.Status.ERROR, "HookError")
    assert (results["b"].status, results["b"].error_type) == (tk.Status.ERROR, "HookError")
    assert (results["f"].status, results["f"].error_type) == (tk.Status.ERROR, "HookError")
    assert results["ok"].status is tk.Status.OK
    assert not rec.ran("a") and not rec.ran("b") and not rec.ran("p")
    assert "answered 'no'" in (results["a"].error or "")


async def test_ask_without_an_approver_a_timeout_and_a_no_read_differently(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    def ask(call: tk.ToolCall) -> tk.Decision:
        return tk.Decision.ask("it edits files")

    async def slow_then_no(call: tk.ToolCall, reason: str) -> bool:
        if call.id == "late":
            await anyio.sleep_forever()
        return False

    async with tk.open_kernel(tools=make_tools(rec), policy=ask) as kernel:
        (nobody,) = await kernel.run([edit("nobody", "a")])
    async with tk.open_kernel(
        tools=make_tools(rec), policy=ask, approver=slow_then_no, approval_timeout=5
    ) as kernel:
        late, no = await kernel.run([edit("late", "a"), edit("no", "b")])
    kinds = {r.call_id: (r.status, r.error_type) for r in (nobody, late, no)}
    assert kinds == {
        "nobody": (tk.Status.DENIED, "ApprovalRequiredError"),
        "late": (tk.Status.DENIED, "ApprovalTimeoutError"),
        "no": (tk.Status.DENIED, "PermissionDeniedError"),
    }
    assert "no approver" in (nobody.error or "")
    assert "none came within 5 s" in (late.error or "")
    assert "said no" in (no.error or "")
    assert len({nobody.error, late.error, no.error}) == 3


async def test_every_failure_names_its_exception_type(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    def policy(call: tk.ToolCall) -> tk.Permission:
        return tk.Permission.DENY if call.id == "denied" else tk.Permission.ALLOW

    async with tk.open_kernel(tools=make_tools(rec), policy=policy) as kernel:
        results = by_id(
            await kernel.run(
                [
                    edit("holder", "a", 10),
                    edit("waited", "a", 1, wait_timeout=2),
                    read("ran", "b", 10, run_timeout=3),
                    tk.ToolCall("unknown", "nope"),
                    tk.ToolCall("failed", "read", {"path": "c", "fail": True, "duration": 1}),
                    read("skipped", "d", after=["failed"]),
                    read("denied", "e"),
                ]
            )
        )
        handle = kernel.submit(read("cancelled", "f", 5))
        handle.cancel()
        results["cancelled"] = await handle.wait_finished()
    types = {call_id: r.error_type for call_id, r in results.items()}
    assert types == {
        "holder": None,
        "waited": "LeaseWaitTimeoutError",
        "ran": "RunTimeoutError",
        "unknown": "UnknownToolError",
        "failed": "RuntimeError",
        "skipped": "DependencyFailedError",
        "denied": "PermissionDeniedError",
        "cancelled": "CallCancelledError",
    }
    for result in results.values():
        if result.error_type is not None:
            assert type(result.exception).__name__ == result.error_type


# -- bad options ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"wait_timeout": math.nan},
        {"run_timeout": -1},
        {"approval_timeout": math.nan},
        {"max_concurrency": 0},
        {"max_concurrency": 2.5},
        {"max_depth": -1},
        {"pools": {"net": 0}},
        {"policy": "allow"},
        {"approver": 3},
        {"before_hooks": [None]},
    ],
)
async def test_bad_kernel_options_raise_plainly_when_it_is_opened(options: dict[str, Any]) -> None:
    with pytest.raises((TypeError, ValueError)):
        async with tk.open_kernel(**options):
            pass  # pragma: no cover - never reached


async def test_a_kernel_cannot_be_built_by_hand_or_given_unknown_options() -> None:
    with pytest.raises(TypeError, match="no public constructor"):
        tk.Kernel()
    with pytest.raises(TypeError):
        async with tk.open_kernel(max_concurrrency=2):  # type: ignore[call-arg]
            pass  # pragma: no cover - never reached


# -- memory stays flat -----------------------------------------------------------------------------


async def test_finished_ids_stay_nameable_for_a_bounded_while(
    autojump_clock: trio.testing.MockClock, rec: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolkernel.kernel import _admission

    # The bound is read where it is used: a smaller one walks the same path in fewer calls.
    monkeypatch.setattr(_admission, "REMEMBERED_FINISHED", 300)
    REMEMBERED_FINISHED = _admission.REMEMBERED_FINISHED
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        await kernel.run([read("first", "a", 0)])
        (named,) = await kernel.run([read("n1", "a", 0, after=["first"])])
        assert named.status is tk.Status.OK
        await kernel.run([read(f"x{i}", "a", 0) for i in range(REMEMBERED_FINISHED)])
        (forgotten,) = await kernel.run([read("n2", "a", 0, after=["first"])])
    assert forgotten.error_type == "InvalidCallError"
    assert "finished too long ago" in (forgotten.error or "")


async def test_statistics_do_not_grow_with_invented_tool_names(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        await kernel.run([tk.ToolCall(f"c{i}", f"made_up_{i}") for i in range(300)])
        await kernel.run([read("r", "a", 0)])
        tools = {t.name: t.count for t in kernel.statistics().tools}
    assert tools == {"(unknown tool)": 300, "read": 1}


# -- streams -------------------------------------------------------------------------------------


async def test_leaving_a_stream_early_logs_nothing(
    autojump_clock: trio.testing.MockClock, rec: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    calls = [edit(f"c{i}", "a", 1) for i in range(5)] + [
        read("d", "b", 1, after=["c0"]),
        read("e", "c", 1, after=["d"]),
    ]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        async with kernel.stream(calls) as events:
            async for event in events:
                if isinstance(event, tk.kernel.CallStarted):
                    break
        await anyio.sleep(20)
        assert_leases_returned(kernel)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []

"""Admission: bad calls become ERROR results with messages a model can act on, while the other
calls of the batch run normally."""

from __future__ import annotations

import anyio
import pytest
import trio

import toolkernel as tk

from .fakes import Recorder, assert_leases_returned, by_id, edit, make_tools, read


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


BAD_CALLS = {
    "unknown tool": (
        tk.ToolCall("x", "delete_everything", {"path": "a"}),
        "UnknownToolError: there is no tool named 'delete_everything'; available tools: "
        "barrier, edit, free, lane, read, tap",
    ),
    "malformed json": (
        tk.ToolCall("x", "edit", '{"path": "a", "duration": '),
        "InvalidArgumentsError: the arguments of edit are not valid JSON (Expecting value at "
        "character 26); send a JSON object",
    ),
    "json that is not an object": (
        tk.ToolCall("x", "edit", '["a"]'),
        "InvalidArgumentsError: the arguments of edit must be a JSON object, not an array",
    ),
    "wrong type": (
        tk.ToolCall("x", "edit", {"path": "a", "duration": "10"}),
        "InvalidArgumentsError: edit argument 'duration' must be number, not string ('10')",
    ),
    "bool is not a number": (
        tk.ToolCall("x", "edit", {"path": "a", "duration": True}),
        "InvalidArgumentsError: edit argument 'duration' must be number, not boolean (True)",
    ),
    "missing argument": (
        tk.ToolCall("x", "edit", {"duration": 1}),
        "InvalidArgumentsError: edit is missing required argument 'path'",
    ),
    "extra argument": (
        tk.ToolCall("x", "edit", {"path": "a", "colour": "red"}),
        "InvalidArgumentsError: edit got unexpected argument 'colour'; it takes path, duration, "
        "fail",
    ),
    "path escaping the root": (
        tk.ToolCall("x", "edit", {"path": "../outside"}),
        "PathEscapeError",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
async def test_a_bad_call_is_an_error_result_and_the_others_run(autojump_clock, rec, case) -> None:
    bad, message = BAD_CALLS[case]
    events: list[tk.CallEvent] = []
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        kernel.add_listener(events.append)
        first, result, last = await kernel.run([edit("c1", "a", 1), bad, read("c3", "a", 1)])
        assert_leases_returned(kernel)
    assert result.status is tk.Status.ERROR
    assert result.error is not None and result.error.startswith(message), result.error
    assert (result.queued_at, result.started_at, result.finished_at) == (0, None, 0)
    assert not rec.ran("x")
    assert first.ok and last.ok
    assert (last.started_at, last.finished_at) == (1, 2)
    queued = [e for e in events if isinstance(e, tk.kernel.CallQueued) and e.call_id == "x"]
    assert len(queued) == 1 and queued[0].claims == ()


async def test_arguments_may_come_as_a_json_string(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        as_json, empty_json = await kernel.run(
            [
                tk.ToolCall("c1", "edit", '{"path": "a.txt", "duration": 2}'),
                tk.ToolCall("c2", "free", ""),
            ]
        )
    assert (as_json.output, as_json.finished_at) == ("edited a.txt", 2)
    assert empty_json.ok


async def test_several_bad_calls_in_one_batch_each_get_their_own_error(autojump_clock, rec) -> None:
    calls = [bad for bad, _ in BAD_CALLS.values()]
    calls = [tk.ToolCall(f"x{i}", c.name, c.arguments) for i, c in enumerate(calls)]
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        results = await kernel.run([*calls, edit("ok", "a", 1)])
    assert [r.status for r in results[:-1]] == [tk.Status.ERROR] * len(calls)
    assert len({r.error for r in results[:-1]}) == len(calls)
    assert results[-1].ok


async def test_a_duplicate_call_id_in_a_batch_is_an_error(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        first, second = await kernel.run([edit("c1", "a", 1), edit("c1", "b", 1)])
    assert first.ok
    assert second.status is tk.Status.ERROR
    assert "call id 'c1' is used twice in this batch" in (second.error or "")


async def test_a_claims_function_that_raises_is_an_error_of_that_call(autojump_clock, rec) -> None:
    @tk.tool(claims=lambda args: [tk.writes(args["missing"])])
    async def broken(ctx: tk.ToolContext) -> None:
        raise AssertionError("never runs")

    async with tk.open_kernel(tools=[*make_tools(rec), broken]) as kernel:
        bad, good = await kernel.run([tk.ToolCall("b", "broken"), edit("c2", "a", 1)])
    assert bad.status is tk.Status.ERROR
    assert bad.error == "InvalidClaimError: can't compute the claims of broken: KeyError: 'missing'"
    assert bad.error_type == "InvalidClaimError" and isinstance(bad.exception, tk.InvalidClaimError)
    assert isinstance(bad.exception.__cause__, KeyError)
    assert good.ok


async def test_a_claim_on_a_pool_the_kernel_does_not_have_is_an_error_result(
    autojump_clock, rec
) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        lane, other = await kernel.run(
            [tk.ToolCall("l1", "lane", {"duration": 1}), edit("c2", "a", 1)]
        )
        assert_leases_returned(kernel)
    assert lane.status is tk.Status.ERROR
    assert lane.error == (
        "UnknownPoolError: lane claims pool 'android', which this kernel does not have "
        "(its pools: none); open the kernel with pools={'android': n}"
    )
    assert other.ok


async def test_more_pool_units_than_the_capacity_is_an_error_result(autojump_clock, rec) -> None:
    @tk.tool(claims=lambda args: [tk.units(tk.pool("net"), args["n"])])
    async def fetch(ctx: tk.ToolContext, n: int) -> int:
        await anyio.sleep(1)
        return n

    async with tk.open_kernel(tools=[fetch], pools={"net": 2}) as kernel:
        too_many, fits = await kernel.run(
            [tk.ToolCall("c1", "fetch", {"n": 3}), tk.ToolCall("c2", "fetch", {"n": 2})]
        )
        assert_leases_returned(kernel)
    assert too_many.status is tk.Status.ERROR
    assert too_many.error == (
        "CapacityError: fetch claims 3 units of pool 'net', but its capacity is 2"
    )
    assert fits.ok and fits.output == 2


def test_a_call_priority_must_be_an_int() -> None:
    with pytest.raises(ValueError, match="priority must be an int"):
        tk.ToolCall("c1", "edit", {}, priority="high")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="priority must be an int"):
        tk.ToolCall("c1", "edit", {}, priority=True)


async def test_submitting_something_that_is_not_a_tool_call_raises(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        with pytest.raises(TypeError, match="expected ToolCall, got dict"):
            kernel.submit_batch([{"id": "c1", "name": "edit"}])  # type: ignore[list-item]
        # Nothing of the refused batch was admitted.
        assert kernel.statistics().finished == 0
        assert_leases_returned(kernel)


async def test_one_call_given_to_run_instead_of_a_list_says_to_wrap_it(rec) -> None:
    call = edit("c1", "a", 0)
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        with pytest.raises(tk.errors.InvalidBatchError) as raised:
            await kernel.run(call)  # type: ignore[arg-type]
        assert str(raised.value) == (
            "kernel.run takes a list of calls; got one ToolCall ('c1', 'edit'): "
            "kernel.run([call]) or kernel.submit(call)"
        )
        assert isinstance(raised.value, TypeError) and isinstance(raised.value, tk.UsageError)
        with pytest.raises(tk.errors.InvalidBatchError, match=r"kernel.submit_batch\(\[call\]\)"):
            kernel.submit_batch(call)  # type: ignore[arg-type]
        with pytest.raises(tk.errors.InvalidBatchError, match=r"kernel.stream\(\[call\]\)$"):
            async with kernel.stream(call):  # type: ignore[arg-type]
                pass
        with pytest.raises(
            tk.errors.InvalidBatchError, match=r"a list of calls \(ToolCall\); got 3"
        ):
            await kernel.run(3)  # type: ignore[arg-type]
        assert kernel.statistics().finished == 0  # nothing was admitted
        assert_leases_returned(kernel)


async def test_a_claims_function_returning_one_claim_says_to_wrap_it() -> None:
    @tk.tool(claims=lambda args: tk.writes("a.txt"))  # type: ignore[arg-type,return-value]
    async def lone(ctx: tk.ToolContext) -> str:
        return "ran"

    @tk.tool(claims=lambda args: 7)  # type: ignore[arg-type,return-value]
    async def odd(ctx: tk.ToolContext) -> str:
        return "ran"

    async with tk.open_kernel(tools=[lone, odd]) as kernel:
        one, other = await kernel.run([tk.ToolCall("c1", "lone", {}), tk.ToolCall("c2", "odd", {})])
    assert one.status is tk.Status.ERROR and one.error_type == "InvalidClaimError"
    assert one.error == (
        "InvalidClaimError: can't compute the claims of lone: claims must return a list of "
        "claims (such as [writes('a.txt')], or [] for none); got one claim, writes('a.txt'); "
        "wrap it in a list: [writes('a.txt')]"
    )
    assert "not iterable" not in (other.error or "")
    assert (other.error or "").endswith(
        "claims must return a list of claims (such as [writes('a.txt')], or [] for none); got 7"
    )


def test_two_tools_with_one_name_are_refused() -> None:
    rec = Recorder()

    async def main() -> None:
        async with tk.open_kernel(tools=[*make_tools(rec), *make_tools(rec)]):
            pass

    # The kernel is built before open_kernel's nursery opens, so the error comes plainly: a
    # ToolDeclarationError, which is the ValueError it always was.
    with pytest.raises(tk.ToolDeclarationError, match="two tools are named 'read'") as info:
        trio.run(main)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("tools", "match"),
    [([object()], "expected a tool"), (["Read"], "expected a tool")],
)
def test_a_kernel_given_something_else_than_tools_refuses_it_as_a_declaration(
    tools: list[object], match: str
) -> None:
    async def main() -> None:
        async with tk.open_kernel(tools=tools):  # type: ignore[arg-type]
            pass

    with pytest.raises(tk.ToolDeclarationError, match=match) as info:
        trio.run(main)
    assert isinstance(info.value, TypeError)


def test_tool_declarations_name_real_parameters() -> None:
    with pytest.raises(TypeError, match="declares path argument 'file'"):

        @tk.tool(writes=["file"])
        async def bad(ctx: tk.ToolContext, path: str) -> None: ...


async def test_tool_exposes_a_json_schema_of_its_arguments(autojump_clock, rec) -> None:
    edit_tool = {t.name: t for t in make_tools(rec)}["edit"]
    schema = edit_tool.parameters_schema()
    assert schema["required"] == ["path"]
    assert schema["properties"]["path"] == {"type": "string"}
    assert schema["properties"]["duration"]["type"] == "number"
    assert schema["additionalProperties"] is False
    assert by_id([]) == {}


async def test_json_cut_off_inside_a_string_reads_plainly(autojump_clock, rec) -> None:
    async with tk.open_kernel(tools=make_tools(rec)) as kernel:
        (result,) = await kernel.run([tk.ToolCall("x", "edit", '{"path": "a')])
    assert result.error == (
        "InvalidArgumentsError: the arguments of edit are not valid JSON (Unterminated string "
        "starting at character 9); send a JSON object"
    )

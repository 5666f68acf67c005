"""Agents SDK tools holding leases (``toolkernel.integrations.openai_agents.leased``), driven
through the SDK's own ``Runner.run`` with the SDK's own scripted model (``agents.testing``)."""

from __future__ import annotations

import asyncio
import copy
import json
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

import pydantic
import pytest
from agents import (
    Agent,
    FunctionTool,
    RunConfig,
    RunContextWrapper,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    ToolOutputGuardrailData,
    function_tool,
    tool_input_guardrail,
    tool_output_guardrail,
)
from agents.items import ToolCallOutputItem
from agents.testing import ScriptedModel, assistant_message, function_call

import toolkernel as tk
from toolkernel.integrations.openai_agents import leased
from toolkernel.testing import VirtualClockEventLoop

from .cancelled_threads import SlowAppend, check_cancelled_while_threaded

NO_TRACING = RunConfig(tracing_disabled=True)


@pytest.fixture
def anyio_backend(request: pytest.FixtureRequest) -> object:
    """The SDK runs on asyncio only; on virtual time where a test asks for it."""
    virtual = "autojump_clock" in request.fixturenames
    return ("asyncio", {"loop_factory": VirtualClockEventLoop} if virtual else {})


class Files:
    """Files of a workspace, edited by tools that read, await, and write back (so two such
    edits of one file running together lose one), with a log of what ran when."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self.log: list[tuple[str, str, float]] = []
        self.running = 0
        self.most_at_once = 0

    def read(self, path: str) -> str:
        file = self.root / path
        return file.read_text() if file.exists() else ""

    async def append(self, name: str, path: str, text: str, seconds: float) -> str:
        self.log.append(("start", name, asyncio.get_running_loop().time()))
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            old = self.read(path)
            await asyncio.sleep(seconds)
            (self.root / path).write_text(old + text)
        finally:
            self.running -= 1
            self.log.append(("end", name, asyncio.get_running_loop().time()))
        return f"appended {text!r} to {path}"

    def span(self, name: str) -> tuple[float, float]:
        start = next(t for kind, n, t in self.log if kind == "start" and n == name)
        end = next(t for kind, n, t in self.log if kind == "end" and n == name)
        return start, end


def append_tools(files: Files) -> list[FunctionTool]:
    @function_tool
    async def append(path: str, text: str, seconds: float = 1.0) -> str:
        """Append text to a file."""
        return await files.append(text, path, text, seconds)

    @function_tool(timeout=60)
    async def append_timed(path: str, text: str, seconds: float = 1.0) -> str:
        """Append text to a file, within a minute."""
        return await files.append(text, path, text, seconds)

    return [append, append_timed]


def calls(*specs: tuple[str, dict[str, Any]]) -> list[Any]:
    return [function_call(name, args, call_id=f"c{i}") for i, (name, args) in enumerate(specs)]


async def run(tools: Sequence[Any], *responses: list[Any], **options: Any) -> Any:
    model = ScriptedModel([*responses, [assistant_message("done")]])
    agent = Agent(name="coder", model=model, tools=list(tools), **options)
    return await Runner.run(agent, "go", run_config=NO_TRACING)


def outputs(result: Any) -> dict[str, Any]:
    return {
        item.raw_item["call_id"]: item.output
        for item in result.new_items
        if isinstance(item, ToolCallOutputItem)
    }


def assert_leases_returned(kernel: tk.Kernel) -> None:
    held = kernel.lease_statistics()
    assert (held.held, held.waiting) == (0, 0)


# -- order and overlap -------------------------------------------------------------------------


async def test_edits_of_one_file_in_one_response_run_in_emission_order(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    # Tools with and without timeout_seconds (without leases, the SDK invokes the timed ones a
    # step later, out of emission order); the later ones take less time.
    files = Files(tmp_path)
    response = calls(
        *[
            (
                "append_timed" if i % 2 else "append",
                {"path": "f.txt", "text": str(i), "seconds": 5 - i},
            )
            for i in range(5)
        ]
    )
    async with tk.open_kernel(root=tmp_path) as kernel:
        tools = leased(
            append_tools(files), kernel, writes={"append": ["path"], "append_timed": ["path"]}
        )
        result = await run(tools, response)
        assert_leases_returned(kernel)
    assert files.read("f.txt") == "01234"  # no lost edit, in the order emitted
    assert files.most_at_once == 1
    assert result.final_output == "done"
    assert outputs(result)["c3"] == "appended '3' to f.txt"


async def test_without_leases_the_runner_loses_edits(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    # What the test above guards against: the SDK starts every call at once.
    files = Files(tmp_path)
    response = calls(*[("append", {"path": "f.txt", "text": str(i)}) for i in range(5)])
    await run(append_tools(files), response)
    assert files.most_at_once == 5 and len(files.read("f.txt")) == 1


async def test_a_streamed_run_keeps_the_order_too(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path)
    response = calls(
        *[("append", {"path": "f.txt", "text": str(i), "seconds": 3 - i}) for i in range(3)]
    )
    async with tk.open_kernel(root=tmp_path) as kernel:
        tools = leased(append_tools(files), kernel, writes={"append": ["path"]})
        model = ScriptedModel([response, [assistant_message("done")]])
        agent = Agent(name="coder", model=model, tools=tools)
        streamed = Runner.run_streamed(agent, "go", run_config=NO_TRACING)
        async for _ in streamed.stream_events():
            pass
        assert streamed.final_output == "done"
        assert_leases_returned(kernel)
    assert files.read("f.txt") == "012" and files.most_at_once == 1


async def test_calls_on_different_files_run_together(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path)
    response = calls(*[("append", {"path": f"f{i}.txt", "text": "x"}) for i in range(4)])
    async with tk.open_kernel(root=tmp_path) as kernel:
        tools = leased(append_tools(files), kernel, writes={"append": ["path"]})
        start = asyncio.get_running_loop().time()
        await run(tools, response)
        assert asyncio.get_running_loop().time() - start == 1  # four 1-second calls at once
    assert files.most_at_once == 4
    assert all(files.read(f"f{i}.txt") == "x" for i in range(4))


async def test_a_tool_with_no_claims_is_a_barrier(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path)

    @function_tool
    async def shell(command: str) -> str:
        """Run a command (fake): may touch anything."""
        return await files.append("shell", "log.txt", command, 1)

    response = calls(
        ("append", {"path": "a.txt", "text": "a", "seconds": 2}),
        ("shell", {"command": "make"}),
        ("append", {"path": "b.txt", "text": "b"}),
    )
    async with tk.open_kernel(root=tmp_path) as kernel:
        tools = leased([*append_tools(files), shell], kernel, writes={"append": ["path"]})
        await run(tools, response)
    # the shell call waits for the edit of a.txt; the edit of b.txt, emitted after, waits for it
    assert files.span("a") == (0, 2)
    assert files.span("shell") == (2, 3)
    assert files.span("b") == (3, 4)


async def test_a_path_outside_the_workspace_makes_the_call_a_barrier(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path / "ws")
    files.root.mkdir()
    outside = tmp_path / "outside.txt"
    response = calls(
        ("append", {"path": "a.txt", "text": "a"}),
        ("append", {"path": str(outside), "text": "o"}),
        ("append", {"path": "b.txt", "text": "b"}),
    )
    async with tk.open_kernel(root=files.root) as kernel:
        tools = leased(append_tools(files), kernel, writes={"append": ["path"]})
        await run(tools, response)
    assert outside.read_text() == "o"  # served, not refused
    assert [files.span(n) for n in "aob"] == [(0, 1), (1, 2), (2, 3)]


async def test_a_path_argument_left_out_claims_the_default_the_schema_states(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path)

    @function_tool(strict_mode=False)
    async def log(text: str, path: str = "log.txt") -> str:
        """Append to a log."""
        return await files.append(text, path, text, 1)

    @function_tool(strict_mode=False)
    async def note(text: str, path: str | None = None) -> str:
        """Append to a note (where the tool decides, when not told)."""
        return await files.append(text, path or "log.txt", text, 1)

    schema = note.params_json_schema["properties"]["path"]
    schema.pop("default", None)  # as a tool built by hand may say nothing of it
    response = calls(
        ("log", {"text": "a"}),
        ("log", {"text": "b", "path": "log.txt"}),
        ("note", {"text": "c"}),
        ("log", {"text": "d", "path": "other.txt"}),
    )
    async with tk.open_kernel(root=tmp_path) as kernel:
        tools = leased([log, note], kernel, writes={"log": ["path"], "note": ["path"]})
        await run(tools, response)
    assert files.read("log.txt") == "abc"
    # a left out with its default, b on that file; c can't be told: a barrier, so d waits
    assert [files.span(n) for n in "abcd"] == [(0, 1), (1, 2), (2, 3), (3, 4)]


async def test_claims_functions_per_tool_and_for_every_tool(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path)
    seen: list[tuple[str, dict[str, Any]]] = []

    def every(tool: FunctionTool, arguments: Any) -> list[tk.Claim] | None:
        seen.append((tool.name, dict(arguments)))
        return [tk.exclusive(tk.device("phone"))] if tool.name == "append_timed" else None

    response = calls(
        ("append_timed", {"path": "a.txt", "text": "1"}),
        ("append_timed", {"path": "b.txt", "text": "2"}),
        ("append", {"path": "c.txt", "text": "3"}),
    )
    async with tk.open_kernel(root=tmp_path) as kernel:
        tools = leased(append_tools(files), kernel, claims=every, writes={"append": ["path"]})
        await run(tools, response)
    # the phone orders the two timed calls; the third, by its path, runs beside them
    assert [files.span(n) for n in "123"] == [(0, 1), (1, 2), (0, 1)]
    assert ("append_timed", {"path": "a.txt", "text": "1"}) in seen

    files = Files(tmp_path)
    async with tk.open_kernel(root=tmp_path) as kernel:
        tools = leased(append_tools(files), kernel, claims={"append": lambda args: []})
        await run(tools, calls(*[("append", {"path": "a.txt", "text": "x"})] * 3))
    assert files.most_at_once == 3  # claims=[] declares that a call needs nothing


async def test_a_kernel_opened_with_other_tools_orders_them_with_leased_ones(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path)

    @tk.tool(writes=["path"])
    async def kernel_append(ctx: tk.ToolContext, path: str, text: str) -> str:
        """The kernel's own tool, editing the same file."""
        return await files.append("kernel", path, text, 3)

    async with tk.open_kernel(tools=[kernel_append], root=tmp_path) as kernel:
        own = kernel.submit(tk.ToolCall("k1", "kernel_append", {"path": "f.txt", "text": "k"}))
        tools = leased(append_tools(files), kernel, writes={"append": ["path"]})
        await run(tools, calls(("append", {"path": "f.txt", "text": "a"})))
        assert (await own.wait_finished()).ok
        assert "append" not in kernel.tools
    assert files.read("f.txt") == "ka"
    assert files.span("kernel") == (0, 3) and files.span("a") == (3, 4)


# -- what the SDK does around a tool keeps working ---------------------------------------------


async def test_approvals_interrupt_the_run_and_approved_calls_hold_leases(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path)

    @function_tool(needs_approval=True)
    async def delete(path: str) -> str:
        """Delete a file (asks first)."""
        return await files.append("delete", path, "-", 1)

    response = calls(
        ("append", {"path": "f.txt", "text": "a"}),
        ("delete", {"path": "f.txt"}),
        ("append", {"path": "f.txt", "text": "b"}),
    )
    async with tk.open_kernel(root=tmp_path) as kernel:
        tools = leased(
            [*append_tools(files), delete], kernel, writes={"append": ["path"], "delete": ["path"]}
        )
        model = ScriptedModel([response, [assistant_message("done")]])
        agent = Agent(name="coder", model=model, tools=tools)
        first = await Runner.run(agent, "go", run_config=NO_TRACING)
        (asked,) = first.interruptions
        assert asked.tool_name == "delete"
        assert files.read("f.txt") == "ab"  # the others ran; the one waiting to be asked not
        assert_leases_returned(kernel)
        state = first.to_state()
        state.approve(asked)
        second = await Runner.run(agent, state, run_config=NO_TRACING)
        assert second.final_output == "done"
        assert_leases_returned(kernel)
    assert files.read("f.txt") == "ab-"


async def test_a_rejected_call_never_reaches_the_kernel(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path)

    @function_tool(needs_approval=True)
    async def delete(path: str) -> str:
        """Delete a file (asks first)."""
        return await files.append("delete", path, "-", 1)

    async with tk.open_kernel(root=tmp_path) as kernel:
        (tool,) = leased([delete], kernel, writes={"delete": ["path"]})
        model = ScriptedModel([calls(("delete", {"path": "f.txt"})), [assistant_message("ok")]])
        agent = Agent(name="coder", model=model, tools=[tool])
        first = await Runner.run(agent, "go", run_config=NO_TRACING)
        state = first.to_state()
        state.reject(first.interruptions[0], rejection_message="not today")
        second = await Runner.run(agent, state, run_config=NO_TRACING)
        assert outputs(second)["c0"] == "not today"
        assert kernel.statistics().tools == ()
    assert files.log == []


async def test_an_approval_policy_sees_the_arguments_as_without_leases(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    asked: list[dict[str, Any]] = []

    async def only_small(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
        asked.append(params)
        return params["n"] > 10

    @function_tool(needs_approval=only_small)
    async def count(n: int) -> str:
        """Count."""
        return f"counted {n}"

    async with tk.open_kernel(root=tmp_path) as kernel:
        (tool,) = leased([count], kernel)
        result = await run([tool], calls(("count", {"n": 3}), ("count", {"n": 30})))
    assert asked == [{"n": 3}, {"n": 30}]
    assert outputs(result) == {"c0": "counted 3"}
    assert [item.tool_name for item in result.interruptions] == ["count"]


async def test_tool_guardrails_keep_working(tmp_path: pathlib.Path, autojump_clock: Any) -> None:
    files = Files(tmp_path)

    @tool_input_guardrail
    def no_secrets(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        if "secret" in data.context.tool_arguments:
            return ToolGuardrailFunctionOutput.reject_content("no secrets in files")
        return ToolGuardrailFunctionOutput.allow()

    @tool_output_guardrail
    def shout(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        return ToolGuardrailFunctionOutput.reject_content(str(data.output).upper())

    @function_tool(tool_input_guardrails=[no_secrets], tool_output_guardrails=[shout])
    async def append(path: str, text: str) -> str:
        """Append text to a file."""
        return await files.append(text, path, text, 1)

    response = calls(
        ("append", {"path": "f.txt", "text": "secret"}),
        ("append", {"path": "f.txt", "text": "a"}),
    )
    async with tk.open_kernel(root=tmp_path) as kernel:
        (tool,) = leased([append], kernel, writes={"append": ["path"]})
        assert tool.tool_input_guardrails == [no_secrets]
        result = await run([tool], response)
        assert_leases_returned(kernel)
    assert outputs(result) == {"c0": "no secrets in files", "c1": "APPENDED 'A' TO F.TXT"}
    assert files.read("f.txt") == "a"
    assert len(result.tool_input_guardrail_results) == 2  # nothing of ours among them


async def test_a_timeout_answers_as_the_sdk_does_and_returns_the_leases(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path)

    @function_tool(timeout=2)
    async def slow(path: str, text: str, seconds: float) -> str:
        """Append slowly."""
        return await files.append(text, path, text, seconds)

    response = calls(
        ("slow", {"path": "f.txt", "text": "1", "seconds": 10}),
        ("slow", {"path": "f.txt", "text": "2", "seconds": 1}),
    )
    async with tk.open_kernel(root=tmp_path) as kernel:
        (tool,) = leased([slow], kernel, writes={"slow": ["path"]})
        result = await run([tool], response)
        assert_leases_returned(kernel)
        (stats,) = kernel.statistics().tools
    assert outputs(result) == {
        "c0": "Tool 'slow' timed out after 2 seconds.",
        "c1": "appended '2' to f.txt",
    }
    # the second waited for the first's leases: its own 2 seconds run from its start
    assert files.read("f.txt") == "2" and files.span("2") == (2, 3)
    # the kernel's record: the timed-out call cancelled, the other one OK
    assert (stats.name, stats.count, stats.errors) == ("slow", 2, 1)


class Appended(pydantic.BaseModel):
    text: str


async def test_a_timeout_of_a_tool_with_an_output_type_answers_as_the_sdk_does(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    # The SDK gives its own timeout message to the model without checking it against the
    # tool's output schema; so does the leased copy, which applies the timeout itself.
    files = Files(tmp_path)

    @function_tool(timeout=2, output_type=Appended)
    async def slow(path: str, text: str, seconds: float) -> Appended:
        """Append slowly."""
        await files.append(text, path, text, seconds)
        return Appended(text=text)

    response = calls(
        ("slow", {"path": "f.txt", "text": "1", "seconds": 10}),
        ("slow", {"path": "f.txt", "text": "2", "seconds": 1}),
    )
    async with tk.open_kernel(root=tmp_path) as kernel:
        (tool,) = leased([slow], kernel, writes={"slow": ["path"]})
        result = await run([tool], response)
        assert_leases_returned(kernel)
    answers = outputs(result)
    assert answers["c0"] == "Tool 'slow' timed out after 2 seconds."
    assert "'2'" in str(answers["c1"]) and files.read("f.txt") == "2"


async def test_a_tool_leased_again_keeps_its_timeout(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path)

    @function_tool(timeout=2)
    async def slow(path: str, text: str) -> str:
        """Append slowly."""
        return await files.append(text, path, text, 10)

    async with tk.open_kernel(root=tmp_path) as kernel:
        (once,) = leased([slow], kernel, writes={"slow": ["path"]})
        (twice,) = leased([once], kernel, writes={"slow": ["path"]})
        result = await run([twice], calls(("slow", {"path": "f.txt", "text": "1"})))
        assert_leases_returned(kernel)
    assert outputs(result) == {"c0": "Tool 'slow' timed out after 2 seconds."}


async def test_a_cancelled_run_cancels_its_calls_and_returns_their_leases(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path)
    response = calls(
        ("append", {"path": "f.txt", "text": "1", "seconds": 10}),
        ("append", {"path": "f.txt", "text": "2"}),
    )
    finished: list[tk.ToolResult] = []
    async with tk.open_kernel(root=tmp_path) as kernel:
        kernel.add_listener(
            lambda event: (
                finished.append(event.result) if isinstance(event, tk.kernel.CallFinished) else None
            )
        )
        tools = leased(append_tools(files), kernel, writes={"append": ["path"]})
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(run(tools, response), 3)
        assert_leases_returned(kernel)
        assert kernel.snapshot().running == ()
    assert sorted(r.status.name for r in finished) == ["CANCELLED", "CANCELLED"]
    assert files.read("f.txt") == ""


async def test_a_call_the_kernel_cancels_cancels_its_tool_which_answers_as_the_sdk_does(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path)
    response = calls(
        ("append", {"path": "f.txt", "text": "1", "seconds": 10}),
        ("append", {"path": "f.txt", "text": "2"}),
    )
    async with tk.open_kernel(root=tmp_path) as kernel:
        tools = leased(append_tools(files), kernel, writes={"append": ["path"]})
        loop = asyncio.get_running_loop()
        loop.call_later(4, kernel.cancel, "c0")
        result = await run(tools, response)
        assert_leases_returned(kernel)
    assert outputs(result) == {
        "c0": "An error occurred while running the tool. Please try again.",
        "c1": "appended '2' to f.txt",
    }
    # the first was cancelled at 4 s, and the second, on its file, ran only once it had ended
    assert files.span("1") == (0, 4) and files.span("2") == (4, 5)
    assert files.read("f.txt") == "2"


async def test_kernel_failures_reach_the_model_through_the_failure_error_function(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    seen: list[Exception] = []

    def explain(ctx: RunContextWrapper[Any], error: Exception) -> str:
        seen.append(error)
        return f"failed: {error}"

    @function_tool
    async def default_handling(path: str) -> str:
        """Uses the SDK's default failure message."""
        return "ran"

    @function_tool(failure_error_function=explain)
    async def own_handling(path: str) -> str:
        """Formats its failures itself."""
        return "ran"

    @function_tool(failure_error_function=explain)
    async def raising(path: str) -> str:
        """Fails by itself."""
        raise ValueError("disk full")

    def deny(call: tk.ToolCall) -> tk.Permission:
        return tk.Permission.DENY if call.name != "raising" else tk.Permission.ALLOW

    async with tk.open_kernel(root=tmp_path, policy=deny) as kernel:
        tools = leased([default_handling, own_handling, raising], kernel)
        result = await run(
            tools,
            calls(
                ("default_handling", {"path": "a"}),
                ("own_handling", {"path": "a"}),
                ("raising", {"path": "a"}),
            ),
        )
        assert_leases_returned(kernel)
    out = outputs(result)
    assert out["c0"] == "An error occurred while running the tool. Please try again."
    assert out["c1"].startswith("failed: ") and "denied" in out["c1"]
    assert out["c2"] == "failed: disk full"
    assert isinstance(seen[0], tk.PermissionDeniedError) and isinstance(seen[1], ValueError)


async def test_the_kernels_before_hooks_may_answer_or_block_a_call(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path)

    async def cached(call: tk.ToolCall) -> tk.kernel.SupplyResult | tk.kernel.Block | None:
        if call.arguments.get("text") == "cached":
            return tk.kernel.SupplyResult("from the cache")
        if call.arguments.get("text") == "blocked":
            return tk.kernel.Block("not this one")
        return None

    async with tk.open_kernel(root=tmp_path, before_hooks=[cached]) as kernel:
        tools = leased(append_tools(files), kernel, writes={"append": ["path"]})
        result = await run(
            tools,
            calls(
                ("append", {"path": "f.txt", "text": "cached"}),
                ("append", {"path": "f.txt", "text": "blocked"}),
                ("append", {"path": "f.txt", "text": "a"}),
            ),
        )
        assert_leases_returned(kernel)
    assert outputs(result) == {
        "c0": "from the cache",
        "c1": "An error occurred while running the tool. Please try again.",
        "c2": "appended 'a' to f.txt",
    }
    assert files.read("f.txt") == "a"


async def test_a_closed_kernel_fails_the_call_as_the_tool_would(tmp_path: pathlib.Path) -> None:
    files = Files(tmp_path)
    async with tk.open_kernel(root=tmp_path) as kernel:
        tools = leased(append_tools(files), kernel, writes={"append": ["path"]})
    result = await run(tools, calls(("append", {"path": "f.txt", "text": "a", "seconds": 0})))
    assert outputs(result) == {"c0": "An error occurred while running the tool. Please try again."}
    assert files.log == []


async def test_an_agent_as_a_tool_lends_its_leases_and_its_place_to_its_agents_tools(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path)
    seen: list[Exception] = []

    def explain(ctx: RunContextWrapper[Any], error: Exception) -> str:
        seen.append(error)
        return f"failed: {error}"

    @function_tool(failure_error_function=explain)
    async def append(path: str, text: str) -> str:
        """Append text to a file."""
        return await files.append(text, path, text, 1)

    def helper(kernel: tk.Kernel, **claims: Any) -> tuple[Agent[Any], ScriptedModel]:
        model = ScriptedModel(
            [calls(("append", {"path": "f.txt", "text": "h"})), [assistant_message("helped")]]
        )
        inner = Agent(
            name="helper",
            model=model,
            tools=leased([append], kernel, writes={"append": ["path"]}),
        )
        (as_tool,) = leased([inner.as_tool("helper", "Ask the helper.")], kernel, **claims)
        outer_model = ScriptedModel([calls(("helper", {"input": "go"})), [assistant_message("ok")]])
        return Agent(name="lead", model=outer_model, tools=[as_tool]), model

    async with tk.open_kernel(root=tmp_path) as kernel:
        # undeclared, the agent tool holds the workspace: its agent's edit runs inside it
        lead, _ = helper(kernel)
        result = await Runner.run(lead, "go", run_config=NO_TRACING)
        assert result.final_output == "ok" and files.read("f.txt") == "h"
        assert_leases_returned(kernel)
        # declared as touching nothing itself, its agent's tools hold their own leases
        lead, _ = helper(kernel, claims={"helper": lambda args: []})
        result = await Runner.run(lead, "go", run_config=NO_TRACING)
        assert result.final_output == "ok" and files.read("f.txt") == "hh"
        assert_leases_returned(kernel)
        # declared as reading the file its agent edits: the edit would wait for it for ever
        lead, _ = helper(kernel, claims={"helper": lambda args: [tk.reads("f.txt")]})
        result = await Runner.run(lead, "go", run_config=NO_TRACING)
        assert result.final_output == "ok" and files.read("f.txt") == "hh"
        assert isinstance(seen[0], tk.errors.DeadlockError)
        assert "claims={'helper': lambda args: []}" in str(seen[0])
        assert_leases_returned(kernel)
    async with tk.open_kernel(root=tmp_path, max_concurrency=1) as kernel:
        # the agent tool fills the one place there is: its agent's edit runs in it
        lead, _ = helper(kernel, claims={"helper": lambda args: []})
        result = await Runner.run(lead, "go", run_config=NO_TRACING)
        assert result.final_output == "ok" and files.read("f.txt") == "hhh"
        assert_leases_returned(kernel)
    assert len(seen) == 1


# -- the tools themselves ----------------------------------------------------------------------


async def test_the_leased_tools_are_the_same_tools(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path)
    originals = append_tools(files)
    async with tk.open_kernel(root=tmp_path) as kernel:
        tools = leased(originals, kernel, writes={"append": ["path"]})
        for original, tool in zip(originals, tools, strict=True):
            assert tool is not original and type(tool) is type(original)
            for field in ("name", "description", "params_json_schema", "strict_json_schema"):
                assert getattr(tool, field) == getattr(original, field)
            # the timeout is applied from the grant, not by the runner around the wait
            assert tool.timeout_seconds is None
            assert tool.__wrapped__ is original.__wrapped__
        # the SDK's own copies of a leased tool hold leases too
        twin = copy.copy(tools[0])
        response = calls(
            ("append", {"path": "f.txt", "text": "a"}), ("append", {"path": "f.txt", "text": "b"})
        )
        await run([twin], response)
    assert files.read("f.txt") == "ab" and files.most_at_once == 1


async def test_a_hand_built_function_tool_holds_leases(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path)
    contexts: list[type] = []

    async def on_invoke(ctx: RunContextWrapper[Any], arguments: str) -> str:
        contexts.append(type(ctx))
        args = json.loads(arguments)
        return await files.append(args["text"], args["path"], args["text"], 1)

    tool = FunctionTool(
        name="append",
        description="Append text to a file.",
        params_json_schema={
            "type": "object",
            "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
            "required": ["path", "text"],
            "additionalProperties": False,
        },
        on_invoke_tool=on_invoke,
    )
    response = calls(
        ("append", {"path": "f.txt", "text": "a"}), ("append", {"path": "f.txt", "text": "b"})
    )
    async with tk.open_kernel(root=tmp_path) as kernel:
        await run(leased([tool], kernel, writes={"append": ["path"]}), response)
    assert files.read("f.txt") == "ab"
    assert contexts == [RunContextWrapper, RunContextWrapper]  # as the SDK passes it unleased


async def test_arguments_that_are_not_an_object_make_a_barrier_and_the_sdk_reports_them(
    tmp_path: pathlib.Path, autojump_clock: Any
) -> None:
    files = Files(tmp_path)
    response = [
        function_call("append", '{"path": "f.txt", "te', call_id="c0"),
        function_call("append", {"path": "g.txt", "text": "b"}, call_id="c1"),
    ]
    async with tk.open_kernel(root=tmp_path) as kernel:
        tools = leased(append_tools(files), kernel, writes={"append": ["path"]})
        result = await run(tools, response)
        assert_leases_returned(kernel)
    assert outputs(result)["c0"] == "An error occurred while running the tool. Please try again."
    assert files.read("g.txt") == "b"


def test_bad_declarations_are_refused_when_wrapping(tmp_path: pathlib.Path) -> None:
    files = Files(tmp_path)
    tools = append_tools(files)

    async def check(kernel: tk.Kernel) -> None:
        cases: list[tuple[Callable[[], Any], type[Exception], str]] = [
            (
                lambda: leased(tools, kernel, reads={"nope": ["path"]}),
                tk.ToolDeclarationError,
                "names tool 'nope'",
            ),
            (
                lambda: leased(tools, kernel, writes={"append": ["file"]}),
                tk.ToolDeclarationError,
                "argument 'file' of tool 'append'",
            ),
            (
                lambda: leased(tools, kernel, writes={"append": "path"}),
                tk.ToolDeclarationError,
                "list of argument names",
            ),
            (
                lambda: leased([*tools, tools[0]], kernel),
                tk.ToolDeclarationError,
                "two tools given to leased",
            ),
            (
                lambda: leased(tools, kernel, reads=["path"]),
                tk.ToolDeclarationError,
                "must map tool names",
            ),
            (lambda: leased([print], kernel), TypeError, "function tools"),
            (lambda: leased(tools, None), TypeError, "the kernel"),
            (
                lambda: leased(tools, kernel, claims={"append": 3}),
                tk.ToolDeclarationError,
                "must be a function",
            ),
        ]
        for make, error, message in cases:
            with pytest.raises(error, match=message):
                make()

    async def main() -> None:
        async with tk.open_kernel(root=tmp_path) as kernel:
            await check(kernel)

    asyncio.run(main())


async def test_a_cancelled_sync_tool_keeps_its_leases_until_its_thread_returns(
    tmp_path: pathlib.Path,
) -> None:
    slow = SlowAppend(tmp_path)

    @function_tool
    def slow_add(path: str, line: str) -> str:
        """Read, block, write back (the SDK runs it in a worker thread)."""
        return slow(path, line)

    async def run_agent(kernel: tk.Kernel) -> Any:
        tools = leased([slow_add], kernel, writes={"slow_add": ["path"]})
        model = ScriptedModel(
            [
                [function_call("slow_add", {"path": "n.txt", "line": "slow"}, call_id="c0")],
                [assistant_message("done")],
            ]
        )
        return await Runner.run(
            Agent(name="a", model=model, tools=tools), "go", run_config=NO_TRACING
        )

    await check_cancelled_while_threaded(tmp_path, slow, run_agent)

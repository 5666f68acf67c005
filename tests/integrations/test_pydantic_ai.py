"""LeasedToolset: pydantic-ai's own ``Agent.run``, driven by its ``FunctionModel``, with tools
whose calls hold their leases in a kernel.

Every test runs on asyncio (pydantic-ai's loop) on the virtual clock, so times are exact: a tool
that "takes" a second ends one virtual second after it starts.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, RunContext
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry, UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset, PrefixedToolset

import toolkernel as tk
from toolkernel._extras import install_command
from toolkernel.integrations.pydantic_ai import LeasedToolset
from toolkernel.testing import VirtualClockEventLoop

from .cancelled_threads import SlowAppend, check_cancelled_while_threaded


@pytest.fixture
def anyio_backend() -> object:
    return ("asyncio", {"loop_factory": VirtualClockEventLoop})


class Files:
    """Files in memory, and when each edit ran (by the text it appended)."""

    def __init__(self) -> None:
        self.text: dict[str, str] = {}
        self.ran: dict[str, tuple[float, float]] = {}

    def toolset(self, **options: Any) -> FunctionToolset[Any]:
        toolset: FunctionToolset[Any] = FunctionToolset(**options)
        files = self

        @toolset.tool_plain
        async def append(path: str, text: str, seconds: float = 1.0) -> str:
            """Append text to a file: read it, think, write it back."""
            start = anyio.current_time()
            old = files.text.get(path, "")
            await anyio.sleep(seconds)
            files.text[path] = old + text
            files.ran[text] = (start, anyio.current_time())
            return "ok"

        @toolset.tool_plain
        async def shell(command: str) -> str:
            """Run a command (it may touch anything)."""
            start = anyio.current_time()
            await anyio.sleep(1)
            files.ran[command] = (start, anyio.current_time())
            return "ran"

        return toolset


def scripted(*turns: Sequence[tuple[str, Any]]) -> FunctionModel:
    """A model that answers with each turn's tool calls, then with "done"."""

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step >= len(turns):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[
                ToolCallPart(name, arguments, tool_call_id=f"t{step}c{i}")
                for i, (name, arguments) in enumerate(turns[step])
            ]
        )

    return FunctionModel(answer)


async def run(agent: Agent[Any, Any], *args: Any, **options: Any) -> Any:
    """``agent.run``, failing (on the virtual clock, at once) rather than hanging."""
    with anyio.fail_after(100):
        return await agent.run(*args, **options)


def appends(path: str, *texts: str) -> list[tuple[str, dict[str, Any]]]:
    return [("append", {"path": path, "text": text}) for text in texts]


def returns(messages: list[ModelMessage]) -> dict[str, ToolReturnPart]:
    """Every tool return the model was sent, by call id."""
    return {
        part.tool_call_id: part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    }


def assert_leases_returned(kernel: tk.Kernel) -> None:
    stats = kernel.lease_statistics()
    assert (stats.held, stats.waiting) == (0, 0), stats


WRITES = {"append": ["path"]}

MODES = [
    pytest.param("parallel", "graceful", id="parallel"),
    pytest.param("parallel_ordered_events", "graceful", id="parallel_ordered_events"),
    pytest.param("parallel", "exhaustive", id="parallel-exhaustive"),
    pytest.param("sequential", "graceful", id="sequential"),
]


# -- order and overlap ---------------------------------------------------------------------------


async def test_without_leases_pydantic_ai_loses_edits_of_one_file(autojump_clock: Any) -> None:
    """What the wrapper prevents: pydantic-ai runs a response's calls at once."""
    files = Files()
    agent = Agent(scripted(appends("f", "1", "2", "3")), toolsets=[files.toolset()])
    await run(agent, "edit")
    assert files.text["f"] in ("1", "2", "3")  # two of the three edits are lost


@pytest.mark.parametrize(("mode", "end_strategy"), MODES)
async def test_edits_of_one_file_run_in_emission_order_and_none_is_lost(
    autojump_clock: Any, tmp_path: Any, mode: Any, end_strategy: Any
) -> None:
    files = Files()
    turn = [*appends("f", "1", "2", "3"), *appends("g", "a"), *appends("f", "4")]
    async with tk.open_kernel(root=tmp_path) as kernel:
        toolset = LeasedToolset(files.toolset(), kernel, writes=WRITES)
        agent = Agent(scripted(turn), toolsets=[toolset], end_strategy=end_strategy)
        with agent.parallel_tool_call_execution_mode(mode):
            result = await run(agent, "edit")
        assert result.output == "done"
        assert_leases_returned(kernel)
    assert files.text == {"f": "1234", "g": "a"}
    if mode == "sequential":  # pydantic-ai runs each call alone; the leases change nothing
        assert [files.ran[t] for t in "123a4"] == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    else:  # one file: one after the other, in emission order; another file alongside
        assert [files.ran[t] for t in "1234"] == [(0, 1), (1, 2), (2, 3), (3, 4)]
        assert files.ran["a"] == (0, 1)


async def test_emission_order_holds_with_pydantic_ais_instrumentation_hooks(
    autojump_clock: Any, tmp_path: Any
) -> None:
    """The instrumentation capability wraps every call's execution: still no wait on the way."""
    files = Files()
    texts = "abcdefghij"
    async with tk.open_kernel(root=tmp_path) as kernel:
        toolset = LeasedToolset(files.toolset(), kernel, writes=WRITES)
        Agent.instrument_all(True)
        try:
            await run(Agent(scripted(appends("f", *texts)), toolsets=[toolset]), "edit")
        finally:
            Agent.instrument_all(False)
    assert files.text == {"f": texts}


async def test_calls_on_different_files_run_together(autojump_clock: Any, tmp_path: Any) -> None:
    files = Files()
    turn = [("append", {"path": f"dir/{n}.txt", "text": str(n)}) for n in range(20)]
    async with tk.open_kernel(root=tmp_path) as kernel:
        agent = Agent(
            scripted(turn), toolsets=[LeasedToolset(files.toolset(), kernel, writes=WRITES)]
        )
        await run(agent, "edit")
        assert kernel.statistics().peak_running == 20
    assert set(files.ran.values()) == {(0, 1)}


async def test_a_sequential_tool_stays_a_barrier_of_pydantic_ais(
    autojump_clock: Any, tmp_path: Any
) -> None:
    files = Files()
    toolset = files.toolset()

    @toolset.tool_plain(sequential=True)
    async def pause() -> str:
        await anyio.sleep(1)
        return "paused"

    turn = [*appends("f", "1"), ("pause", {}), *appends("g", "2")]
    async with tk.open_kernel(root=tmp_path) as kernel:
        leased = LeasedToolset(toolset, kernel, writes=WRITES, claims={"pause": lambda args: []})
        await run(Agent(scripted(turn), toolsets=[leased]), "edit")
    assert files.ran == {"1": (0, 1), "2": (2, 3)}


async def test_a_tool_given_no_claims_is_a_barrier(autojump_clock: Any, tmp_path: Any) -> None:
    files = Files()
    turn = [*appends("f", "1"), ("shell", {"command": "make"}), *appends("g", "2", "3")]
    async with tk.open_kernel(root=tmp_path) as kernel:
        toolset = LeasedToolset(files.toolset(), kernel, writes=WRITES)
        await run(Agent(scripted(turn), toolsets=[toolset]), "edit")
        assert_leases_returned(kernel)
    # the shell call waits for the edit before it, and every call after it waits for it
    assert files.ran == {"1": (0, 1), "make": (1, 2), "2": (2, 3), "3": (3, 4)}


async def test_claims_by_function_for_every_tool(autojump_clock: Any, tmp_path: Any) -> None:
    files = Files()

    def claims(name: str, arguments: Any) -> list[tk.Claim] | None:
        if name == "append":
            return [tk.writes(arguments["path"])]
        return None  # a barrier

    turn = [*appends("f", "1"), *appends("g", "2"), ("shell", {"command": "ls"})]
    async with tk.open_kernel(root=tmp_path) as kernel:
        toolset = LeasedToolset(files.toolset(), kernel, claims=claims)
        await run(Agent(scripted(turn), toolsets=[toolset]), "edit")
    assert files.ran == {"1": (0, 1), "2": (0, 1), "ls": (1, 2)}


async def test_a_kernel_opened_with_other_tools_orders_them_with_the_agents(
    autojump_clock: Any, tmp_path: Any
) -> None:
    files = Files()

    @tk.tool(writes=["path"])
    async def rewrite(ctx: tk.ToolContext, path: str) -> str:
        """The kernel's own tool, outside any agent."""
        await anyio.sleep(2)
        files.text[path] = "kernel "
        return "rewritten"

    async with tk.open_kernel(tools=[rewrite], root=tmp_path) as kernel:
        own = kernel.submit(tk.ToolCall("k1", "rewrite", {"path": "f"}))
        toolset = LeasedToolset(files.toolset(), kernel, writes=WRITES)
        agent = Agent(scripted([*appends("f", "1"), *appends("g", "2")]), toolsets=[toolset])
        await run(agent, "edit")
        assert (await own.wait_finished()).finished_at == 2
        assert "append" not in kernel.tools  # the agent's tools are brought with each call
    assert files.ran == {"1": (2, 3), "2": (0, 1)}  # after the kernel's own call on f
    assert files.text == {"f": "kernel 1", "g": "2"}


async def test_one_kernel_serves_two_agents_at_once(autojump_clock: Any, tmp_path: Any) -> None:
    files = Files()
    async with tk.open_kernel(root=tmp_path) as kernel:
        toolset = LeasedToolset(files.toolset(), kernel, writes=WRITES)
        first = Agent(scripted(appends("f", "1", "2")), toolsets=[toolset])
        second = Agent(scripted(appends("f", "a", "b")), toolsets=[toolset])
        async with anyio.create_task_group() as group:
            group.start_soon(run, first, "edit")
            group.start_soon(run, second, "edit")
        assert_leases_returned(kernel)
    assert sorted(files.text["f"]) == ["1", "2", "a", "b"]  # no edit lost
    assert files.text["f"].index("1") < files.text["f"].index("2")
    assert files.text["f"].index("a") < files.text["f"].index("b")


# -- what pydantic-ai does keeps working ---------------------------------------------------------


async def test_a_model_retry_reaches_the_model_and_the_retry_runs(
    autojump_clock: Any, tmp_path: Any
) -> None:
    files = Files()
    toolset = files.toolset()
    attempts: list[int] = []

    @toolset.tool
    async def flaky(ctx: RunContext[None], path: str) -> str:
        attempts.append(ctx.retry)
        if ctx.retry == 0:
            raise ModelRetry("try again")
        files.text[path] = "fixed"
        return "ok"

    turn = [("flaky", {"path": "f"}), *appends("f", "1")]
    async with tk.open_kernel(root=tmp_path) as kernel:
        leased = LeasedToolset(toolset, kernel, writes={**WRITES, "flaky": ["path"]})
        result = await run(
            Agent(scripted(turn, [("flaky", {"path": "f"})]), toolsets=[leased]), "go"
        )
        assert_leases_returned(kernel)
    assert attempts == [0, 1]
    assert returns(result.all_messages())["t0c0"].outcome == "retried"
    assert files.text["f"] == "fixed"


async def test_pydantic_ais_timeout_bounds_the_run_not_the_wait_for_leases(
    autojump_clock: Any, tmp_path: Any
) -> None:
    files = Files()
    turn = [
        ("append", {"path": "f", "text": "1", "seconds": 5}),
        ("append", {"path": "f", "text": "2", "seconds": 1}),
        ("append", {"path": "g", "text": "3", "seconds": 5}),
    ]
    async with tk.open_kernel(root=tmp_path) as kernel:
        toolset = LeasedToolset(files.toolset(timeout=3), kernel, writes=WRITES)
        result = await run(Agent(scripted(turn), toolsets=[toolset]), "go")
        assert_leases_returned(kernel)
    answers = returns(result.all_messages())
    assert answers["t0c0"].outcome == "retried" and "Timed out after 3" in str(answers["t0c0"])
    assert answers["t0c2"].outcome == "retried"
    # the second edit of f waited 3 s for the first (timed out) and then ran its 1 s
    assert answers["t0c1"].content == "ok" and files.ran["2"] == (3, 4)


async def test_a_wait_for_leases_that_times_out_is_a_retry_for_the_model(
    autojump_clock: Any, tmp_path: Any
) -> None:
    files = Files()
    turn = [
        ("append", {"path": "f", "text": "1", "seconds": 5}),
        ("append", {"path": "f", "text": "2"}),
    ]
    async with tk.open_kernel(root=tmp_path, wait_timeout=2) as kernel:
        toolset = LeasedToolset(files.toolset(), kernel, writes=WRITES)
        result = await run(Agent(scripted(turn), toolsets=[toolset]), "go")
        assert_leases_returned(kernel)
    answer = returns(result.all_messages())["t0c1"]
    assert answer.outcome == "retried" and "waiting 2 s for its leases" in str(answer.content)
    assert "2" not in files.ran and files.text["f"] == "1"


async def test_the_kernels_run_limit_stops_the_tool_before_its_leases_return(
    autojump_clock: Any, tmp_path: Any
) -> None:
    files = Files()
    turn = [
        ("append", {"path": "f", "text": "1", "seconds": 5}),
        ("append", {"path": "f", "text": "2"}),
    ]
    async with tk.open_kernel(root=tmp_path, run_timeout=2) as kernel:
        toolset = LeasedToolset(files.toolset(), kernel, writes=WRITES)
        result = await run(Agent(scripted(turn), toolsets=[toolset]), "go")
        assert_leases_returned(kernel)
    answers = returns(result.all_messages())
    assert answers["t0c0"].outcome == "retried" and "1" not in files.ran  # stopped at 2 s
    assert files.ran["2"] == (2, 3)  # the next edit of f began only then


async def test_a_call_the_kernels_policy_denies_fails_for_the_model(
    autojump_clock: Any, tmp_path: Any
) -> None:
    files = Files()

    def policy(call: tk.ToolCall) -> tk.Decision:
        if call.name == "shell":
            return tk.Decision.deny("no shell here")
        return tk.Decision.allow()

    turn = [("shell", {"command": "rm -rf /"}), *appends("f", "1")]
    async with tk.open_kernel(root=tmp_path, policy=policy) as kernel:
        toolset = LeasedToolset(files.toolset(), kernel, writes=WRITES)
        result = await run(Agent(scripted(turn), toolsets=[toolset]), "go")
    answer = returns(result.all_messages())["t0c0"]
    assert answer.outcome == "failed" and "no shell here" in str(answer.content)
    assert files.ran == {"1": (0, 1)}


async def test_a_path_outside_the_workspace_makes_the_call_a_barrier(
    autojump_clock: Any, tmp_path: Any
) -> None:
    files = Files()
    turn = [*appends("a", "1"), *appends("../x", "2"), *appends("b", "3")]
    async with tk.open_kernel(root=tmp_path) as kernel:
        toolset = LeasedToolset(files.toolset(), kernel, writes=WRITES)
        result = await run(Agent(scripted(turn), toolsets=[toolset]), "go")
    answer = returns(result.all_messages())["t0c1"]
    assert answer.outcome == "success"  # served, not refused
    assert files.ran == {"1": (0, 1), "2": (1, 2), "3": (2, 3)}
    assert_leases_returned(kernel)


async def test_approval_required_tools_hold_no_lease_while_a_human_decides(
    autojump_clock: Any, tmp_path: Any
) -> None:
    files = Files()
    toolset = files.toolset()

    @toolset.tool(requires_approval=True)
    async def delete(ctx: RunContext[None], path: str) -> str:
        files.text.pop(path, None)
        files.ran["delete"] = (anyio.current_time(), anyio.current_time())
        return "deleted"

    @toolset.tool
    async def publish(ctx: RunContext[None], path: str) -> str:
        if not ctx.tool_call_approved:
            raise ApprovalRequired({"why": "public"})
        return "published"

    model = scripted([("delete", {"path": "f"}), ("publish", {"path": "f"}), *appends("f", "1")])
    async with tk.open_kernel(root=tmp_path) as kernel:
        writes = {**WRITES, "delete": ["path"], "publish": ["path"]}
        leased = LeasedToolset(toolset, kernel, writes=writes)
        agent = Agent(model, toolsets=[leased], output_type=[str, DeferredToolRequests])
        first = await run(agent, "go")
        assert isinstance(first.output, DeferredToolRequests)
        assert sorted(c.tool_call_id for c in first.output.approvals) == ["t0c0", "t0c1"]
        assert first.output.metadata == {"t0c1": {"why": "public"}}
        assert_leases_returned(kernel)  # nothing held while the calls await approval
        assert files.text == {"f": "1"}
        approvals = DeferredToolResults(approvals={"t0c0": True, "t0c1": True})
        second = await run(
            agent, message_history=first.all_messages(), deferred_tool_results=approvals
        )
        assert second.output == "done"
        assert_leases_returned(kernel)
    answers = returns(second.all_messages())
    assert (answers["t0c0"].content, answers["t0c1"].content) == ("deleted", "published")
    assert "f" not in files.text


async def test_a_deferred_call_returns_its_leases(autojump_clock: Any, tmp_path: Any) -> None:
    files = Files()
    toolset = files.toolset()

    @toolset.tool_plain
    async def build(path: str) -> str:
        raise CallDeferred({"queue": "ci"})

    turn = [("build", {"path": "f"}), *appends("f", "1")]
    async with tk.open_kernel(root=tmp_path) as kernel:
        leased = LeasedToolset(toolset, kernel, writes={**WRITES, "build": ["path"]})
        agent = Agent(scripted(turn), toolsets=[leased], output_type=[str, DeferredToolRequests])
        result = await run(agent, "go")
        assert_leases_returned(kernel)
    assert isinstance(result.output, DeferredToolRequests)
    assert [c.tool_call_id for c in result.output.calls] == ["t0c0"]
    assert files.text == {"f": "1"}


async def test_a_cancelled_run_returns_its_leases(autojump_clock: Any, tmp_path: Any) -> None:
    files = Files()

    @tk.tool(writes=["path"])
    async def hold(ctx: tk.ToolContext, path: str) -> str:
        await anyio.sleep(10)
        return "held"

    turn = [
        ("append", {"path": "g", "text": "1", "seconds": 5}),  # running when cancelled
        ("append", {"path": "f", "text": "2"}),  # waiting behind the kernel's own call
    ]
    async with tk.open_kernel(tools=[hold], root=tmp_path) as kernel:
        own = kernel.submit(tk.ToolCall("k1", "hold", {"path": "f"}))
        toolset = LeasedToolset(files.toolset(), kernel, writes=WRITES)
        with anyio.move_on_after(2):
            await run(Agent(scripted(turn), toolsets=[toolset]), "go")
        # at once: the running call was stopped, the waiting one left the queue
        snapshot = kernel.snapshot()
        assert [c.call_id for c in snapshot.running] == ["k1"] and snapshot.queued == ()
        assert kernel.lease_statistics().held == 1
        await run(Agent(scripted(appends("g", "3")), toolsets=[toolset]), "go")
        assert (await own.wait_finished()).finished_at == 10
        assert_leases_returned(kernel)
    assert files.ran == {"3": (2, 3)} and files.text == {"g": "3"}


@pytest.mark.parametrize("declared", ["nothing", "a read of the file"])
async def test_an_agent_used_as_a_tool_runs_its_calls_inside_its_leases_or_fails_them_clearly(
    autojump_clock: Any, tmp_path: Any, declared: str
) -> None:
    files = Files()
    toolset = files.toolset()
    inner: list[Any] = []

    @toolset.tool_plain
    async def delegate(path: str) -> str:
        """Hand the edit to another agent with the same leased tools."""
        result = await run(Agent(scripted(appends(path, "x")), toolsets=[leased]), "edit")
        inner.append(result)
        return "delegated"

    async with tk.open_kernel(root=tmp_path) as kernel:
        # Declaring nothing, delegate holds the workspace, which covers its agent's edit; reading
        # the file, it holds a shared lease the edit would wait behind for ever.
        reads = {} if declared == "nothing" else {"delegate": ["path"]}
        leased = LeasedToolset(toolset, kernel, writes=WRITES, reads=reads)
        result = await run(Agent(scripted([("delegate", {"path": "f"})]), toolsets=[leased]), "go")
        assert_leases_returned(kernel)
    assert returns(result.all_messages())["t0c0"].content == "delegated"
    answer = returns(inner[0].all_messages())["t0c0"]
    if declared == "nothing":
        assert answer.outcome == "success" and list(files.ran) == ["x"]
    else:
        assert answer.outcome == "failed" and "would wait for ever" in str(answer.content)
        assert files.ran == {}


async def test_a_tool_calling_another_through_the_tool_manager_runs_it_inside_its_leases(
    autojump_clock: Any, tmp_path: Any
) -> None:
    # Undeclared, edit_twice holds the workspace; the appends it makes through pydantic-ai's own
    # tool manager run inside that, one after the other (they write one file).
    files = Files()
    toolset = files.toolset()

    @toolset.tool
    async def edit_twice(ctx: RunContext[Any], path: str) -> str:
        """Append twice to a file, through the agent's own tools."""
        assert ctx.tool_manager is not None
        for text in ("a", "b"):
            part = ToolCallPart("append", {"path": path, "text": text}, tool_call_id=f"in-{text}")
            await ctx.tool_manager.handle_call(part)
        return "edited"

    async with tk.open_kernel(root=tmp_path) as kernel:
        leased = LeasedToolset(toolset, kernel, writes=WRITES)
        result = await run(
            Agent(scripted([("edit_twice", {"path": "f"})]), toolsets=[leased]), "go"
        )
        assert_leases_returned(kernel)
    assert returns(result.all_messages())["t0c0"].content == "edited"
    assert files.text == {"f": "ab"} and files.ran == {"a": (0, 1), "b": (1, 2)}


# -- mistakes ------------------------------------------------------------------------------------


async def test_reads_naming_an_argument_the_tool_lacks_is_refused(
    autojump_clock: Any, tmp_path: Any
) -> None:
    files = Files()
    async with tk.open_kernel(root=tmp_path) as kernel:
        toolset = LeasedToolset(files.toolset(), kernel, reads={"append": ["file"]})
        with pytest.raises(tk.ToolDeclarationError, match="'file' of tool 'append'"):
            await run(Agent(scripted(appends("f", "1")), toolsets=[toolset]), "go")
    assert files.ran == {}


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"reads": ["append"]}, "must map tool names"),
        ({"writes": {"append": "path"}}, "must be a list of argument names"),
        ({"writes": {"append": [1]}}, "must be a list of argument names"),
        ({"claims": {"append": "path"}}, "must be a function of the arguments"),
        ({"claims": "path"}, "claims= must map tool names"),
    ],
)
async def test_options_of_the_wrong_shape_are_refused(
    autojump_clock: Any, options: dict[str, Any], match: str
) -> None:
    async with tk.open_kernel() as kernel:
        with pytest.raises(tk.ToolDeclarationError, match=match):
            LeasedToolset(Files().toolset(), kernel, **options)
        with pytest.raises(TypeError, match="needs a kernel"):
            LeasedToolset(Files().toolset(), None)  # type: ignore[arg-type]


async def test_a_tool_name_conflict_gives_the_wrapped_toolsets_hint(autojump_clock: Any) -> None:
    """pydantic-ai's error for a name two toolsets share ends with the conflicting toolset's
    hint: a leased ``PrefixedToolset``'s still says to change its prefix."""

    def tool(x: int) -> int:
        raise AssertionError("not called")

    def foo_tool(x: str) -> str:
        raise AssertionError("not called")

    async with tk.open_kernel() as kernel:
        prefixed = PrefixedToolset(FunctionToolset([tool], id="tool"), "foo")
        agent = Agent(scripted(), tools=[foo_tool], toolsets=[LeasedToolset(prefixed, kernel)])
        with pytest.raises(UserError, match=r"Change the `prefix` attribute"):
            await agent.run("go")


def test_without_its_extra_the_module_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['pydantic_ai'] = None; import toolkernel.integrations.pydantic_ai"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    last = ran.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: toolkernel.integrations.pydantic_ai needs the")
    assert install_command("pydantic-ai") in last


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # real threads, on the real clock
async def test_a_cancelled_def_tool_keeps_its_leases_until_its_thread_returns(
    tmp_path: Any,
) -> None:
    slow = SlowAppend(tmp_path)

    def slow_add(path: str, line: str) -> str:
        """Read, block, write back (pydantic-ai runs it in a worker thread)."""
        return slow(path, line)

    async def run_agent(kernel: tk.Kernel) -> Any:
        toolset = LeasedToolset(FunctionToolset([slow_add]), kernel, writes={"slow_add": ["path"]})
        model = scripted([("slow_add", {"path": "n.txt", "line": "slow"})])
        return await Agent(model, toolsets=[toolset]).run("go")

    await check_cancelled_while_threaded(tmp_path, slow, run_agent)

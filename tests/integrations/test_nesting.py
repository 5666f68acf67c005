"""Calls made from inside a leased tool, across the adapters that share one kernel: a call the
leases of the tool it was made from inside cover runs inside them, in its place in
``max_concurrency``; one that would wait for ever for them fails with a
:class:`~toolkernel.errors.DeadlockError`'s message instead, whichever adapters the outer and
the inner tools come from.

Every run is bounded by a short ``anyio.fail_after``: a regression fails, it doesn't hang."""

from __future__ import annotations

import functools
import gc
import weakref
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from agents import Agent as SdkAgent
from agents import RunConfig, RunContextWrapper, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from pydantic_ai import Agent
from pydantic_ai.toolsets import FunctionToolset

import toolkernel as tk
from toolkernel.integrations.langgraph import ToolNode
from toolkernel.integrations.openai_agents import leased
from toolkernel.integrations.pydantic_ai import LeasedToolset

from .test_langgraph import ALONE, agent_graph
from .test_pydantic_ai import returns, scripted

NO_TRACING = RunConfig(tracing_disabled=True)
LIMIT = 5  # seconds: every case here ends in well under one


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the three frameworks run on asyncio only


class Files:
    """Files in memory, appended to by tools of each framework."""

    def __init__(self) -> None:
        self.text: dict[str, str] = {}

    async def append(self, path: str, text: str) -> str:
        old = self.text.get(path, "")
        await anyio.lowlevel.checkpoint()
        self.text[path] = old + text
        return f"appended {text}"

    def pydantic_ai_toolset(self) -> FunctionToolset[Any]:
        toolset: FunctionToolset[Any] = FunctionToolset()

        @toolset.tool_plain
        async def append(path: str, text: str) -> str:
            """Append text to a file."""
            return await self.append(path, text)

        return toolset


def sdk_helper(kernel: tk.Kernel, files: Files) -> tuple[SdkAgent[Any], list[Exception]]:
    """An Agents SDK agent that appends to ``f`` with a leased tool, then answers "helped";
    and the errors its tool's failures were (the model reads them)."""
    seen: list[Exception] = []

    def explain(ctx: RunContextWrapper[Any], failure: Exception) -> str:
        seen.append(failure)
        return str(failure)

    @function_tool(failure_error_function=explain)
    async def append(path: str, text: str) -> str:
        """Append text to a file."""
        return await files.append(path, text)

    model = ScriptedModel(
        [
            [function_call("append", {"path": "f", "text": "x"}, call_id="c0")],
            [assistant_message("helped")],
        ]
    )
    tools = leased([append], kernel, writes={"append": ["path"]})
    return SdkAgent(name="helper", model=model, tools=tools), seen


def sdk_lead(tool: Any) -> SdkAgent[Any]:
    """An Agents SDK agent that calls ``tool`` once, then answers "ok"."""
    model = ScriptedModel(
        [[function_call(tool.name, {"task": "go"}, call_id="c0")], [assistant_message("ok")]]
    )
    return SdkAgent(name="lead", model=model, tools=[tool])


def assert_leases_returned(kernel: tk.Kernel) -> None:
    stats = kernel.lease_statistics()
    assert (stats.held, stats.waiting) == (0, 0), stats


# -- pydantic-ai within pydantic-ai ---------------------------------------------------------------


async def test_a_pydantic_ai_agent_as_a_tool_lends_its_place_to_its_agents_call() -> None:
    """Declared as touching nothing, the agent tool fills the kernel's one place: its agent's
    call runs in it (it would otherwise wait for ever for a place in ``max_concurrency``)."""
    files = Files()
    toolset = files.pydantic_ai_toolset()
    inner: list[Any] = []

    @toolset.tool_plain
    async def delegate(path: str) -> str:
        """Hand the edit to another agent with the same leased tools."""
        agent = Agent(scripted([("append", {"path": path, "text": "x"})]), toolsets=[toolset_])
        inner.append(await agent.run("edit"))
        return "delegated"

    async with tk.open_kernel(max_concurrency=1) as kernel:
        toolset_ = LeasedToolset(
            toolset, kernel, writes={"append": ["path"]}, claims={"delegate": lambda a: []}
        )
        agent = Agent(scripted([("delegate", {"path": "f"})]), toolsets=[toolset_])
        with anyio.fail_after(LIMIT):
            result = await agent.run("go")
        assert_leases_returned(kernel)
    assert returns(result.all_messages())["t0c0"].content == "delegated"
    answer = returns(inner[0].all_messages())["t0c0"]
    assert answer.outcome == "success" and files.text == {"f": "x"}


# -- across adapters ------------------------------------------------------------------------------


async def test_a_pydantic_ai_agent_run_by_an_undeclared_agents_sdk_tool_runs_inside_it() -> None:
    """The SDK's tool, declared nothing, holds the workspace: the pydantic-ai agent it runs
    edits inside its leases, as a nested call does."""
    files = Files()
    inner: list[Any] = []
    async with tk.open_kernel() as kernel:
        toolset = LeasedToolset(files.pydantic_ai_toolset(), kernel, writes={"append": ["path"]})

        @function_tool
        async def delegate(task: str) -> str:
            """Hand a task to a pydantic-ai agent."""
            agent = Agent(scripted([("append", {"path": "f", "text": "x"})]), toolsets=[toolset])
            inner.append(await agent.run(task))
            return "delegated"

        (outer,) = leased([delegate], kernel)  # a barrier
        with anyio.fail_after(LIMIT):
            result = await Runner.run(sdk_lead(outer), "go", run_config=NO_TRACING)
        assert_leases_returned(kernel)
    assert result.final_output == "ok"
    answer = returns(inner[0].all_messages())["t0c0"]
    assert answer.outcome == "success" and files.text == {"f": "x"}


async def test_an_agents_sdk_agent_run_by_an_undeclared_pydantic_ai_tool_runs_inside_it() -> None:
    files = Files()
    toolset: FunctionToolset[Any] = FunctionToolset()
    async with tk.open_kernel() as kernel:
        helper, seen = sdk_helper(kernel, files)

        @toolset.tool_plain
        async def delegate(task: str) -> str:
            """Hand a task to an Agents SDK agent."""
            result = await Runner.run(helper, task, run_config=NO_TRACING)
            return str(result.final_output)

        leased_toolset = LeasedToolset(toolset, kernel)  # delegate: a barrier
        agent = Agent(scripted([("delegate", {"task": "go"})]), toolsets=[leased_toolset])
        with anyio.fail_after(LIMIT):
            result = await agent.run("go")
        assert_leases_returned(kernel)
    assert returns(result.all_messages())["t0c0"].content == "helped"
    assert seen == [] and files.text == {"f": "x"}


async def test_an_agents_sdk_agent_run_by_an_undeclared_langgraph_tool_runs_inside_it() -> None:
    files = Files()
    async with tk.open_kernel() as kernel:
        helper, seen = sdk_helper(kernel, files)

        @tool
        async def delegate(task: str) -> str:
            """Hand a task to an Agents SDK agent."""
            result = await Runner.run(helper, task, run_config=NO_TRACING)
            return str(result.final_output)

        node = ToolNode([delegate], kernel=kernel)  # declares nothing: holds everything
        message = AIMessage(
            "",
            tool_calls=[
                {"name": "delegate", "args": {"task": "go"}, "id": "call_0", "type": "tool_call"}
            ],
        )
        with anyio.fail_after(LIMIT):
            out = await node.ainvoke({"messages": [message]}, ALONE)
        assert_leases_returned(kernel)
    assert [m.content for m in out["messages"]] == ["helped"]
    assert seen == [] and files.text == {"f": "x"}


async def test_an_agents_sdk_agent_run_by_a_langgraph_tool_reading_its_file_fails_clearly() -> None:
    """Declared as reading the file its agent edits, the node's tool holds a shared lease the
    edit would wait behind for ever: the edit fails saying so."""
    files = Files()
    async with tk.open_kernel() as kernel:
        helper, seen = sdk_helper(kernel, files)

        @tool
        async def delegate(task: str) -> str:
            """Hand a task to an Agents SDK agent."""
            result = await Runner.run(helper, task, run_config=NO_TRACING)
            return str(result.final_output)

        node = ToolNode([delegate], kernel=kernel, claims={"delegate": lambda a: [tk.reads("f")]})
        message = AIMessage(
            "",
            tool_calls=[
                {"name": "delegate", "args": {"task": "go"}, "id": "call_0", "type": "tool_call"}
            ],
        )
        with anyio.fail_after(LIMIT):
            out = await node.ainvoke({"messages": [message]}, ALONE)
        assert_leases_returned(kernel)
    assert [m.content for m in out["messages"]] == ["helped"]
    assert isinstance(seen[0], tk.errors.DeadlockError) and files.text == {}
    assert "would wait for ever" in str(seen[0])


async def test_a_langgraph_node_run_by_an_undeclared_agents_sdk_tool_does_not_wait_for_ever() -> (
    None
):
    """Run from inside a call that holds leases of the node's kernel, the node's calls run in a
    kernel of their own (as for a graph run by one of the node's own tools)."""
    files = Files()

    @tool
    async def append(path: str, text: str) -> str:
        """Append text to a file."""
        return await files.append(path, text)

    async with tk.open_kernel() as kernel:
        message = AIMessage(
            "",
            tool_calls=[
                {"name": "append", "args": {"path": "f", "text": t}, "id": f"call_{i}"}
                for i, t in enumerate("abc")
            ],
        )
        graph = agent_graph(
            ToolNode([append], writes={"append": ["path"]}, kernel=kernel), [message]
        )

        @function_tool
        async def delegate(task: str) -> str:
            """Hand a task to a LangGraph agent."""
            state = await graph.ainvoke({"messages": [("user", task)]})
            return f"{sum(isinstance(m, ToolMessage) for m in state['messages'])} calls"

        (outer,) = leased([delegate], kernel)  # a barrier
        run = functools.partial(Runner.run, sdk_lead(outer), "go", run_config=NO_TRACING)
        with anyio.fail_after(LIMIT):
            result = await run()
        assert_leases_returned(kernel)
    assert result.final_output == "ok" and files.text == {"f": "abc"}


def test_the_registry_of_a_kernels_held_calls_does_not_keep_the_kernel() -> None:
    async def use_a_kernel() -> weakref.ref[tk.Kernel]:
        async with tk.open_kernel() as kernel:
            LeasedToolset(FunctionToolset(), kernel)
            leased([sdk_helper(kernel, Files())[0].tools[0]], kernel)
        return weakref.ref(kernel)

    gone = anyio.run(use_a_kernel)
    gc.collect()
    assert gone() is None

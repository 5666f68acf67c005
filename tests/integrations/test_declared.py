"""The three adapters take ``claims=``/``reads=``/``writes=`` alike (``_declared``): the same
declaration gives the same claims in each, a path that can't be keyed makes the call a barrier
in each (and the tool serves it), and the same mistake is refused with the same message.

Each adapter is driven by its own framework's run, on asyncio's virtual clock: every call of
the tool takes one second, so when each ran tells what ran beside what.
"""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import pytest
from agents import Agent as AgentsAgent
from agents import RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from langchain_core.messages import AIMessage
from langchain_core.tools import tool as langchain_tool
from langgraph.runtime import Runtime
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

import toolkernel as tk
from toolkernel.integrations.langgraph import ToolNode
from toolkernel.integrations.openai_agents import leased
from toolkernel.integrations.pydantic_ai import LeasedToolset
from toolkernel.testing import VirtualClockEventLoop

Turn = Sequence[tuple[str, dict[str, Any]]]


@pytest.fixture
def anyio_backend() -> object:
    return ("asyncio", {"loop_factory": VirtualClockEventLoop})  # the frameworks' loop


class Files:
    """Files in memory, and when each append ran (by the text it appended)."""

    def __init__(self) -> None:
        self.text: dict[str, str] = {}
        self.ran: dict[str, tuple[float, float]] = {}

    async def append(self, path: str, text: str) -> str:
        loop = asyncio.get_running_loop()
        start = loop.time()
        old = self.text.get(path, "")
        await asyncio.sleep(1)
        self.text[path] = old + text
        self.ran[text] = (start, loop.time())
        return "ok"


async def run_langgraph(files: Files, kernel: tk.Kernel, turn: Turn, **options: Any) -> None:
    @langchain_tool
    async def append(path: str, text: str) -> str:
        """Append text to a file."""
        return await files.append(path, text)

    @langchain_tool
    async def log(text: str, path: str = "log.txt") -> str:
        """Append text to a log."""
        return await files.append(path, text)

    message = AIMessage(
        "",
        tool_calls=[
            {"name": name, "args": args, "id": f"c{i}", "type": "tool_call"}
            for i, (name, args) in enumerate(turn)
        ],
    )
    node = ToolNode([append, log], kernel=kernel, **options)
    config: Any = {"configurable": {"__pregel_runtime": Runtime()}}
    await node.ainvoke({"messages": [message]}, config)


async def run_openai_agents(files: Files, kernel: tk.Kernel, turn: Turn, **options: Any) -> None:
    @function_tool
    async def append(path: str, text: str) -> str:
        """Append text to a file."""
        return await files.append(path, text)

    @function_tool(strict_mode=False)
    async def log(text: str, path: str = "log.txt") -> str:
        """Append text to a log."""
        return await files.append(path, text)

    response = [function_call(name, args, call_id=f"c{i}") for i, (name, args) in enumerate(turn)]
    model = ScriptedModel([response, [assistant_message("done")]])
    agent = AgentsAgent(name="coder", model=model, tools=leased([append, log], kernel, **options))
    await Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True))


async def run_pydantic_ai(files: Files, kernel: tk.Kernel, turn: Turn, **options: Any) -> None:
    toolset: FunctionToolset[Any] = FunctionToolset()

    @toolset.tool_plain
    async def append(path: str, text: str) -> str:
        """Append text to a file."""
        return await files.append(path, text)

    @toolset.tool_plain
    async def log(text: str, path: str = "log.txt") -> str:
        """Append text to a log."""
        return await files.append(path, text)

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[
                ToolCallPart(name, args, tool_call_id=f"c{i}")
                for i, (name, args) in enumerate(turn)
            ]
        )

    agent = PydanticAgent(
        FunctionModel(answer), toolsets=[LeasedToolset(toolset, kernel, **options)]
    )
    await agent.run("go")


Adapter = Callable[..., Awaitable[None]]
ADAPTERS = [
    pytest.param(run_langgraph, id="langgraph"),
    pytest.param(run_openai_agents, id="openai_agents"),
    pytest.param(run_pydantic_ai, id="pydantic_ai"),
]


async def queued_claims(
    adapter: Adapter, root: pathlib.Path, turn: Turn, **options: Any
) -> tuple[Files, list[frozenset[tk.Claim]]]:
    """Run ``turn`` through ``adapter``; the claims of each call as the kernel queued it."""
    files = Files()
    found: list[frozenset[tk.Claim]] = []

    def heard(event: Any) -> None:
        if isinstance(event, tk.kernel.CallQueued):
            found.append(frozenset(event.claims))

    async with tk.open_kernel(root=root) as kernel:
        kernel.add_listener(heard)
        with anyio.fail_after(100):  # virtual seconds: at once, rather than hang
            await adapter(files, kernel, turn, **options)
        stats = kernel.lease_statistics()
        assert (stats.held, stats.waiting) == (0, 0)
    return files, found


PHONE = tk.exclusive(tk.device("phone"))

DECLARATIONS = [
    pytest.param({"writes": {"append": ["path"]}}, ["x"], id="writes"),
    pytest.param({"reads": {"append": ["path"]}}, ["r"], id="reads"),
    pytest.param(
        {"claims": {"append": lambda args: [tk.writes(args["path"]), PHONE]}},
        ["x", PHONE],
        id="claims-function",
    ),
    pytest.param({"claims": {"append": [tk.reads("d/./e/")]}}, ["r:d/e"], id="claims-list"),
    pytest.param(
        {"claims": lambda tool, args: [PHONE]}, [PHONE], id="claims-function-for-every-tool"
    ),
    pytest.param(
        {"reads": {"append": ["path"]}, "claims": {"append": lambda args: None}},
        ["r"],
        id="claims-none-leaves-reads",
    ),
    pytest.param({}, None, id="nothing-a-barrier"),
]


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize(("options", "expected"), DECLARATIONS)
async def test_the_same_declaration_gives_the_same_claims_in_every_adapter(
    autojump_clock: Any,
    tmp_path: pathlib.Path,
    adapter: Adapter,
    options: dict[str, Any],
    expected: list[Any] | None,
) -> None:
    turn = [("append", {"path": "d/../f.txt", "text": "1"})]
    files, found = await queued_claims(adapter, tmp_path, turn, **options)
    key = tk.Workspace(tmp_path).key
    wanted: set[tk.Claim] = set()
    for item in expected if expected is not None else ():
        if item == "x":
            wanted.add(tk.exclusive(key("f.txt")))
        elif item == "r":
            wanted.add(tk.shared(key("f.txt")))
        elif isinstance(item, str):
            wanted.add(tk.shared(key(item.removeprefix("r:"))))
        else:
            wanted.add(item)
    barrier = {tk.exclusive(tk.EVERYTHING)}
    assert found == [frozenset(barrier if expected is None else wanted)]
    assert files.text == {"d/../f.txt": "1"}


def outside_paths(root: pathlib.Path) -> list[str]:
    return ["../outside.txt", str(root.parent / "outside.txt"), "~/notes.txt", ""]


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("which", range(4), ids=["relative", "absolute", "home", "empty"])
async def test_a_path_that_cant_be_keyed_is_a_barrier_and_the_call_runs(
    autojump_clock: Any, tmp_path: pathlib.Path, adapter: Adapter, which: int
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    outside = outside_paths(root)[which]
    turn = [
        ("append", {"path": "a.txt", "text": "1"}),
        ("append", {"path": outside, "text": "2"}),
        ("append", {"path": "b.txt", "text": "3"}),
    ]
    files, found = await queued_claims(adapter, root, turn, writes={"append": ["path"]})
    assert found[1] == {tk.exclusive(tk.EVERYTHING)}
    assert files.text[outside] == "2"  # served, not refused
    # alone, between the calls emitted before and after it (which would run together)
    assert files.ran == {"1": (0, 1), "2": (1, 2), "3": (2, 3)}


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_a_path_argument_left_out_claims_the_default_the_schema_states(
    autojump_clock: Any, tmp_path: pathlib.Path, adapter: Adapter
) -> None:
    turn = [
        ("log", {"text": "a"}),
        ("log", {"text": "b", "path": "log.txt"}),
        ("log", {"text": "c", "path": "other.txt"}),
    ]
    files, found = await queued_claims(adapter, tmp_path, turn, writes={"log": ["path"]})
    key = tk.Workspace(tmp_path).key
    log, other = tk.exclusive(key("log.txt")), tk.exclusive(key("other.txt"))
    assert found == [{log}, {log}, {other}]
    assert files.text == {"log.txt": "ab", "other.txt": "c"}
    assert files.ran == {"a": (0, 1), "b": (1, 2), "c": (0, 1)}


MISTAKES = [
    pytest.param({"reads": ["path"]}, id="reads-not-a-mapping"),
    pytest.param({"writes": {"append": "path"}}, id="writes-a-string"),
    pytest.param({"writes": {"append": [1]}}, id="writes-not-names"),
    pytest.param({"claims": {"append": "path"}}, id="claims-not-a-function"),
    pytest.param({"claims": "path"}, id="claims-not-a-mapping"),
    pytest.param({"reads": {3: ["path"]}}, id="not-a-tool-name"),
]


@pytest.mark.parametrize("options", MISTAKES)
async def test_the_same_mistake_is_refused_with_the_same_message(
    autojump_clock: Any, tmp_path: pathlib.Path, options: dict[str, Any]
) -> None:
    messages = []
    for adapter in (run_langgraph, run_openai_agents, run_pydantic_ai):
        with pytest.raises(tk.ToolDeclarationError) as caught:
            await queued_claims(adapter, tmp_path, [], **options)
        messages.append(str(caught.value))
    assert messages[0] == messages[1] == messages[2]

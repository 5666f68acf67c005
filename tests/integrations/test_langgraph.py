"""``toolkernel.integrations.langgraph.ToolNode``: LangGraph's ToolNode, each message's calls
one kernel batch in emission order; driven through compiled graphs and alone, on the real
LangGraph. LangGraph's own ToolNode tests run against it in ``langgraph_upstream/``."""

from __future__ import annotations

import asyncio
import functools
import importlib
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import anyio.to_thread
import pytest
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode as LangGraphToolNode
from langgraph.prebuilt import tools_condition
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

import toolkernel as tk
from toolkernel._extras import install_command
from toolkernel.integrations.langgraph import ToolNode

from ..kernel.fakes import assert_leases_returned
from .cancelled_threads import SlowAppend, check_cancelled_while_threaded

WRITES = {"append": ["path"], "sync_append": ["path"]}
# Outside a graph, LangGraph's ToolNode takes its runtime from the config, as a graph gives it.
ALONE: Any = {"configurable": {"__pregel_runtime": Runtime()}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # LangGraph runs on asyncio only


class Files:
    """An in-memory file system whose tools read, wait, then write: lost edits show."""

    def __init__(self) -> None:
        self.text: dict[str, str] = {}
        self.log: list[tuple[str, str]] = []
        self.running = 0
        self.peak = 0

    def tools(self, pause: float = 0.005) -> list[BaseTool]:
        @tool
        async def append(path: str, text: str) -> str:
            """Append text to a file."""
            self.log.append(("start", text))
            self.running += 1
            self.peak = max(self.peak, self.running)
            old = self.text.get(path, "")
            await asyncio.sleep(pause)
            self.text[path] = old + text
            self.running -= 1
            self.log.append(("end", text))
            return f"appended {text}"

        @tool
        def sync_append(path: str, text: str) -> str:
            """Append text to a file (blocking)."""
            old = self.text.get(path, "")
            time.sleep(pause)
            self.text[path] = old + text
            return f"appended {text}"

        @tool
        async def undeclared(text: str) -> str:
            """Does something nobody declared."""
            self.log.append(("start", text))
            self.running += 1
            self.peak = max(self.peak, self.running)
            await asyncio.sleep(pause)
            self.running -= 1
            self.log.append(("end", text))
            return "done"

        return [append, sync_append, undeclared]


def calls(*specs: tuple[str, dict[str, Any]]) -> AIMessage:
    return AIMessage(
        "",
        tool_calls=[
            {"name": name, "args": args, "id": f"call_{n}", "type": "tool_call"}
            for n, (name, args) in enumerate(specs)
        ],
    )


def appends(path: str, texts: str, name: str = "append") -> AIMessage:
    return calls(*((name, {"path": path, "text": text}) for text in texts))


def agent_graph(node: LangGraphToolNode, turns: Sequence[AIMessage], **compile: Any) -> Any:
    """model -> tools -> model ... with a model that answers with ``turns``, then stops."""
    script = list(turns)

    def model(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [script.pop(0) if script else AIMessage("done")]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", node)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "model")
    return graph.compile(**compile)


def tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


class Finished:
    """Counts the calls a kernel finished, so a test can wait for them."""

    def __init__(self, kernel: tk.Kernel) -> None:
        self.total = 0
        self.changed = asyncio.Event()
        kernel.add_listener(self.heard)

    def heard(self, event: tk.CallEvent) -> None:
        if isinstance(event, tk.kernel.CallFinished):
            self.total += 1
            self.changed.set()

    async def count(self, n: int) -> None:
        with anyio.fail_after(5):
            while self.total < n:
                self.changed.clear()
                await self.changed.wait()


def starts_after_end(log: list[tuple[str, str]], later: str, earlier: str) -> bool:
    return log.index(("start", later)) > log.index(("end", earlier))


# -- one file, several calls of one message -------------------------------------------------------


async def test_edits_of_one_file_in_one_message_run_in_emission_order_in_a_graph() -> None:
    files = Files()
    graph = agent_graph(ToolNode(files.tools(), writes=WRITES), [appends("f", "abcde")])
    state = await graph.ainvoke({"messages": [("user", "edit f")]})
    assert files.text == {"f": "abcde"}  # no edit lost, in the order the model emitted them
    assert files.peak == 1
    assert [m.content for m in tool_messages(state)] == [f"appended {c}" for c in "abcde"]
    assert [m.tool_call_id for m in tool_messages(state)] == [f"call_{n}" for n in range(5)]


async def test_langgraphs_own_tool_node_loses_those_edits() -> None:
    # What the test above guards against: LangGraph's ToolNode runs the five at once.
    files = Files()
    graph = agent_graph(LangGraphToolNode(files.tools()), [appends("f", "abcde")])
    await graph.ainvoke({"messages": [("user", "edit f")]})
    assert len(files.text["f"]) < 5 and files.peak == 5


async def test_calls_on_different_files_run_together() -> None:
    # Each call waits until all five have started: run one at a time, they never would.
    barrier = asyncio.Barrier(5)

    @tool
    async def touch(path: str) -> str:
        """Touch a file."""
        await barrier.wait()
        return path

    node = ToolNode([touch], writes={"touch": ["path"]})
    message = calls(*(("touch", {"path": f"dir/{n}.txt"}) for n in range(5)))
    with anyio.fail_after(5):
        state = await agent_graph(node, [message]).ainvoke({"messages": [("user", "go")]})
    assert [m.content for m in tool_messages(state)] == [f"dir/{n}.txt" for n in range(5)]


async def test_reads_of_one_file_run_together_and_a_write_waits_for_them() -> None:
    files, barrier = Files(), asyncio.Barrier(2)

    @tool
    async def read(path: str) -> str:
        """Read a file."""
        await barrier.wait()  # both reads at once, or never
        await asyncio.sleep(0.005)
        files.log.append(("end", "read"))
        return files.text.get(path, "")

    (append, *_) = files.tools()
    node = ToolNode([read, append], reads={"read": ["path"]}, writes={"append": ["path"]})
    message = calls(
        ("read", {"path": "f"}), ("read", {"path": "./f"}), ("append", {"path": "f", "text": "x"})
    )
    with anyio.fail_after(5):
        out = await node.ainvoke({"messages": [message]}, ALONE)
    assert [m.content for m in out["messages"]] == ["", "", "appended x"]
    assert files.log.index(("start", "x")) > files.log.index(("end", "read"))


async def test_a_tool_declared_nothing_is_a_barrier() -> None:
    files = Files()
    message = calls(
        ("append", {"path": "a", "text": "1"}),
        ("undeclared", {"text": "2"}),
        ("append", {"path": "b", "text": "3"}),
    )
    await ToolNode(files.tools(), writes=WRITES).ainvoke({"messages": [message]}, ALONE)
    log = files.log
    assert starts_after_end(log, "2", "1") and starts_after_end(log, "3", "2")
    # Declared, the same calls overlap: the order above is the barrier's doing.
    files = Files()
    node = ToolNode(files.tools(), writes=WRITES, claims={"undeclared": []})
    await node.ainvoke({"messages": [message]}, ALONE)
    assert files.peak == 3


async def test_claims_functions_and_lists_are_keyed_as_paths() -> None:
    files = Files()
    (append, _, undeclared) = files.tools()
    node = ToolNode(
        [append, undeclared],
        claims={
            "append": lambda args: [tk.writes(f"dir/{args['path']}")],
            "undeclared": [tk.writes("dir/./b/")],  # the same key as dir/b
        },
    )
    message = calls(("append", {"path": "b", "text": "1"}), ("undeclared", {"text": "2"}))
    await node.ainvoke({"messages": [message]}, ALONE)
    assert starts_after_end(files.log, "2", "1")


def spellings_of(directory: Any) -> list[str]:
    """One file, absolute, absolute with detours, and relative to the working directory."""
    return [str(directory / "f"), f"{directory}/./d/../f", os.path.relpath(directory / "f")]


async def test_without_a_kernel_every_spelling_of_a_path_is_one_key(tmp_path: Any) -> None:
    files = Files()
    spellings = spellings_of(tmp_path)
    message = calls(*(("append", {"path": p, "text": str(n)}) for n, p in enumerate(spellings)))
    out = await ToolNode(files.tools(), writes=WRITES).ainvoke({"messages": [message]}, ALONE)
    assert [m.status for m in out["messages"]] == ["success"] * 3  # absolute paths too
    assert files.peak == 1
    assert starts_after_end(files.log, "1", "0") and starts_after_end(files.log, "2", "1")


async def test_a_path_argument_that_is_not_a_path_is_a_barrier_and_langgraph_answers_it() -> None:
    files = Files()
    message = calls(
        ("append", {"path": "a", "text": "1"}),
        ("append", {"path": ["b", 3], "text": "2"}),
        ("append", {"path": "c", "text": "3"}),
    )
    node = ToolNode(files.tools(), writes=WRITES, handle_tool_errors=True)
    out = await node.ainvoke({"messages": [message]}, ALONE)
    bad = out["messages"][1]
    assert bad.status == "error" and "path" in bad.content
    assert starts_after_end(files.log, "3", "1")  # the bad call held everything in between


# -- LangGraph's options ------------------------------------------------------------------------


async def test_handled_errors_are_tool_messages_and_later_calls_still_run() -> None:
    files = Files()

    @tool
    async def append(path: str, text: str) -> str:
        """Append, failing on 'bad'."""
        if text == "bad":
            raise ValueError("no such line")
        files.text[path] = files.text.get(path, "") + text
        return "ok"

    node = ToolNode([append], writes={"append": ["path"]}, handle_tool_errors=True)
    out = await node.ainvoke({"messages": [appends("f", ["a", "bad", "c"])]}, ALONE)
    messages = out["messages"]
    assert [m.status for m in messages] == ["success", "error", "success"]
    assert "no such line" in messages[1].content and files.text == {"f": "ac"}


@pytest.mark.parametrize("shared_kernel", [False, True])
async def test_unhandled_errors_come_out_as_langgraph_raises_them(shared_kernel: bool) -> None:
    @tool
    async def boom(path: str) -> str:
        """Fail."""
        raise KeyError(path)

    async with tk.open_kernel() as kernel:
        node = ToolNode(
            [boom],
            writes={"boom": ["path"]},
            handle_tool_errors=False,
            kernel=kernel if shared_kernel else None,
        )
        message = calls(("boom", {"path": "f"}), ("boom", {"path": "g"}))
        with pytest.raises(KeyError):  # not wrapped in an ExceptionGroup
            await node.ainvoke({"messages": [message]}, ALONE)
        assert_leases_returned(kernel)


def test_unhandled_errors_come_out_of_a_sync_run_as_langgraph_raises_them() -> None:
    @tool
    def boom(path: str) -> str:
        """Fail."""
        raise KeyError(path)

    node = ToolNode([boom], writes={"boom": ["path"]}, handle_tool_errors=False)
    message = calls(("boom", {"path": "f"}), ("boom", {"path": "f"}))
    with pytest.raises(KeyError, match="f"):
        node.invoke({"messages": [message]}, ALONE)


@pytest.mark.parametrize("size", [1, 2])
async def test_a_claims_function_that_raises_fails_its_call_only(size: int) -> None:
    files = Files()

    def broken(arguments: Any) -> list[tk.Claim]:
        raise ValueError("no claims today")

    node = ToolNode(files.tools(), writes=WRITES, claims={"undeclared": broken})
    message = calls(
        ("undeclared", {"text": "1"}), *[("append", {"path": "f", "text": "2"})][: size - 1]
    )
    out = await node.ainvoke({"messages": [message]}, ALONE)
    refused = out["messages"][0]
    assert refused.status == "error" and "no claims today" in refused.content
    assert ("start", "1") not in files.log
    assert [m.content for m in out["messages"][1:]] == ["appended 2"][: size - 1]


async def test_wrap_tool_call_runs_inside_the_calls_leases() -> None:
    files = Files()
    seen: list[str] = []

    async def retry_once(request: ToolCallRequest, execute: Callable[..., Any]) -> Any:
        text = request.tool_call["args"]["text"]
        seen.append(f"wrap {text}")
        first = await execute(request)
        return await execute(request) if text == "b" else first  # b appends twice

    node = ToolNode(files.tools(), writes=WRITES, awrap_tool_call=retry_once)
    out = await node.ainvoke({"messages": [appends("f", "abc")]}, ALONE)
    assert files.text == {"f": "abbc"} and files.peak == 1
    assert seen == ["wrap a", "wrap b", "wrap c"]
    assert [m.content for m in out["messages"]] == ["appended a", "appended b", "appended c"]


def test_a_sync_graph_keeps_emission_order_and_runs_other_files_together() -> None:
    files = Files()
    graph = agent_graph(
        ToolNode(files.tools(), writes=WRITES), [appends("f", "abcd", name="sync_append")]
    )
    state = graph.invoke({"messages": [("user", "edit f")]})
    assert files.text == {"f": "abcd"}
    assert len(tool_messages(state)) == 4
    # different files: each call waits until all three have started
    barrier = threading.Barrier(3, timeout=5)

    @tool
    def touch(path: str) -> str:
        """Touch a file."""
        barrier.wait()
        return path

    node = ToolNode([touch], writes={"touch": ["path"]})
    message = calls(*(("touch", {"path": p}) for p in "xyz"))
    out = agent_graph(node, [message]).invoke({"messages": [("user", "go")]})
    assert [m.content for m in tool_messages(out)] == ["x", "y", "z"]


def test_sync_wrap_tool_call_and_errors() -> None:
    files = Files()
    seen: list[str] = []

    def wrap(request: ToolCallRequest, execute: Callable[..., Any]) -> Any:
        seen.append(request.tool_call["id"])
        return execute(request)

    @tool
    def fail(path: str) -> str:
        """Fail."""
        raise ValueError("broken")

    node = ToolNode(
        [*files.tools(), fail],
        writes={**WRITES, "fail": ["path"]},
        wrap_tool_call=wrap,
        handle_tool_errors=True,
    )
    message = calls(
        ("sync_append", {"path": "f", "text": "a"}),
        ("fail", {"path": "f"}),
        ("sync_append", {"path": "f", "text": "b"}),
    )
    out = node.invoke({"messages": [message]}, ALONE)
    assert [m.status for m in out["messages"]] == ["success", "error", "success"]
    assert files.text == {"f": "ab"} and seen == ["call_0", "call_1", "call_2"]


@pytest.mark.parametrize("shared_kernel", [False, True])
async def test_interrupt_for_approval_pauses_and_resumes_the_graph(shared_kernel: bool) -> None:
    files = Files()
    (append, *_) = files.tools()

    @tool
    async def delete(path: str) -> str:
        """Delete a file, once a person approves."""
        if not interrupt(f"delete {path}?"):
            return "not approved"
        files.text.pop(path, None)
        return "deleted"

    files.text["f"] = "old"
    async with tk.open_kernel() as kernel:
        node = ToolNode(
            [append, delete],
            writes={"append": ["path"], "delete": ["path"]},
            kernel=kernel if shared_kernel else None,
        )
        message = calls(("delete", {"path": "f"}), ("append", {"path": "g", "text": "x"}))
        graph = agent_graph(node, [message], checkpointer=InMemorySaver())
        thread: Any = {"configurable": {"thread_id": "1"}}
        finished = Finished(kernel)
        paused = await graph.ainvoke({"messages": [("user", "tidy up")]}, thread)
        assert paused["__interrupt__"][0].value == "delete f?" and files.text["f"] == "old"
        # LangGraph lets the other call finish on its own; nothing is held after it
        await finished.count(2 if shared_kernel else 0)
        assert_leases_returned(kernel)
        done = await graph.ainvoke(Command(resume=True), thread)
        assert "f" not in files.text and files.text["g"].startswith("x")
        assert [m.content for m in tool_messages(done)] == ["deleted", "appended x"]
        await finished.count(4 if shared_kernel else 0)
        assert_leases_returned(kernel)


# -- a kernel of one's own ----------------------------------------------------------------------


async def test_a_shared_kernel_orders_the_nodes_calls_against_its_own() -> None:
    files, log = Files(), []

    @tk.tool(writes=["path"])
    async def kernel_write(ctx: tk.ToolContext, path: str) -> str:
        log.append("kernel start")
        await anyio.sleep(0.02)
        log.append("kernel end")
        return "ok"

    async with tk.open_kernel([kernel_write]) as kernel:
        node = ToolNode(files.tools(), writes=WRITES, kernel=kernel)
        handle = kernel.submit(tk.ToolCall("k1", "kernel_write", {"path": "f"}))
        out = await node.ainvoke({"messages": [appends("f", "a")]}, ALONE)
        log.extend(files.log)
        assert log == ["kernel start", "kernel end", ("start", "a"), ("end", "a")]
        assert (await handle.wait_finished()).status is tk.Status.OK
        assert out["messages"][0].content == "appended a"
        assert "append" not in kernel.tools  # given with each batch, not kept
        assert_leases_returned(kernel)


@pytest.mark.parametrize("sync", [False, True])
async def test_a_graph_run_by_a_tool_whose_node_shares_the_kernel_does_not_wait_for_ever(
    sync: bool,
) -> None:
    files = Files()
    name = "sync_append" if sync else "append"
    async with tk.open_kernel() as kernel:
        inner = agent_graph(
            ToolNode(files.tools(), writes=WRITES, kernel=kernel), [appends("f", "abc", name)]
        )

        @tool
        async def subagent(task: str) -> str:
            """Hand a task to another agent."""
            run = functools.partial(inner.invoke, {"messages": [("user", task)]})
            state = await (anyio.to_thread.run_sync(run) if sync else inner.ainvoke(run.args[0]))
            return f"{len(tool_messages(state))} calls"

        outer = ToolNode([subagent], kernel=kernel)  # declares nothing: holds everything
        message = calls(("subagent", {"task": "edit f"}), ("subagent", {"task": "again"}))
        with anyio.fail_after(10):
            out = await outer.ainvoke({"messages": [message]}, ALONE)
        assert [m.content for m in out["messages"]] == ["3 calls", "0 calls"]
        assert files.text == {"f": "abc"}  # the inner message's order kept
        assert_leases_returned(kernel)


async def test_a_call_the_kernel_refuses_never_runs_and_answers_why() -> None:
    files = Files()

    def no_undeclared(call: tk.ToolCall) -> tk.Decision:
        if call.name == "undeclared":
            return tk.Decision.deny("undeclared tools are off today")
        return tk.Decision.allow()

    async with tk.open_kernel(policy=no_undeclared) as kernel:
        node = ToolNode(files.tools(), writes=WRITES, kernel=kernel)
        message = calls(("undeclared", {"text": "1"}), ("append", {"path": "f", "text": "2"}))
        out = await node.ainvoke({"messages": [message]}, ALONE)
        refused, done = out["messages"]
        assert refused.status == "error" and "undeclared tools are off today" in refused.content
        assert refused.tool_call_id == "call_0" and done.content == "appended 2"
        assert ("start", "1") not in files.log
        assert_leases_returned(kernel)


async def test_a_cancelled_run_returns_its_leases() -> None:
    started = asyncio.Event()

    @tool
    async def hang(path: str) -> str:
        """Never ends."""
        started.set()
        await asyncio.sleep(60)
        return "never"

    finished: list[tk.Status] = []
    both_finished = asyncio.Event()

    def listen(event: tk.CallEvent) -> None:
        if isinstance(event, tk.kernel.CallFinished):
            finished.append(event.result.status)
            if len(finished) == 2:
                both_finished.set()

    async with tk.open_kernel() as kernel:
        kernel.add_listener(listen)
        node = ToolNode([hang], writes={"hang": ["path"]}, kernel=kernel)
        message = calls(("hang", {"path": "f"}), ("hang", {"path": "f"}))
        task = asyncio.ensure_future(node.ainvoke({"messages": [message]}, ALONE))
        await started.wait()
        task.cancel()  # as a LangGraph step timeout does
        with pytest.raises(asyncio.CancelledError):
            await task
        with anyio.fail_after(5):
            await both_finished.wait()
        # the running one's work ended, so its stand-in did; the waiting one was withdrawn
        assert sorted(s.value for s in finished) == ["cancelled", "ok"]
        assert_leases_returned(kernel)


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])  # invoke needs no asyncio
async def test_sync_invoke_with_a_shared_kernel_from_a_worker_thread() -> None:
    files = Files()
    async with tk.open_kernel() as kernel:
        node = ToolNode(files.tools(), writes=WRITES, kernel=kernel)
        message = appends("f", "abc", name="sync_append")
        out = await anyio.to_thread.run_sync(node.invoke, {"messages": [message]}, ALONE)
        assert files.text == {"f": "abc"} and len(out["messages"]) == 3
        with pytest.raises(RuntimeError, match="would block the event loop"):
            node.invoke({"messages": [message]}, ALONE)
        assert_leases_returned(kernel)


def test_bad_declarations_are_refused_when_the_node_is_built() -> None:
    tools = Files().tools()
    with pytest.raises(tk.ToolDeclarationError, match="no tool by that name; its tools are"):
        ToolNode(tools, writes={"apend": ["path"]})
    with pytest.raises(tk.ToolDeclarationError, match="must be a list of argument names"):
        ToolNode(tools, reads={"append": "path"})
    with pytest.raises(tk.ToolDeclarationError, match="a function of the arguments"):
        ToolNode(tools, claims={"append": "path"})
    with pytest.raises(TypeError, match="takes a toolkernel Kernel"):
        ToolNode(tools, kernel="kernel")  # type: ignore[arg-type]


def test_without_langgraph_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.split(".")[0] == "langgraph"]:
        monkeypatch.setitem(sys.modules, name, None)  # as Python has it for a missing package
    monkeypatch.delitem(sys.modules, "toolkernel.integrations.langgraph")
    with pytest.raises(ImportError) as raised:
        importlib.import_module("toolkernel.integrations.langgraph")
    assert str(raised.value) == (
        "toolkernel.integrations.langgraph needs the 'langgraph' extra (langgraph is not "
        f"installed): {install_command('langgraph')}"
    )


async def test_a_cancelled_sync_tool_keeps_its_leases_until_its_thread_returns(
    tmp_path: Any,
) -> None:
    slow = SlowAppend(tmp_path)

    @tool
    def slow_add(path: str, line: str) -> str:
        """Read, block, write back (LangChain runs it in its executor's thread)."""
        return slow(path, line)

    @tool
    def other(x: str) -> str:
        """Another call, so that the message is a batch."""
        return x

    async def run_graph(kernel: tk.Kernel) -> Any:
        node = ToolNode(
            [slow_add, other],
            writes={"slow_add": ["path"]},
            claims={"other": lambda args: []},
            kernel=kernel,
        )
        message = calls(("slow_add", {"path": "n.txt", "line": "slow"}), ("other", {"x": "y"}))
        return await node.ainvoke({"messages": [message]}, ALONE)

    await check_cancelled_while_threaded(tmp_path, slow, run_graph)

"""LangGraph's ``ToolNode``, with the calls of each AI message run through a kernel.

``langgraph.prebuilt.ToolNode`` runs every call of a message at once (``asyncio.gather``, or a
thread each under ``invoke``): two edits of one file read, both await, both write, and one edit
is lost. :class:`ToolNode` here is a drop-in: the same options, inputs and outputs, and the
calls of one message are one kernel batch in the order the model emitted them, so conflicting
calls run one after the other in that order and the others run together.

How it fits LangGraph. It subclasses LangGraph's ``ToolNode`` rather than copying it: state,
store and ``ToolRuntime`` injection, ``handle_tool_errors``, ``wrap_tool_call``, ``Command`` and
``Send`` outputs and ``interrupt()`` all stay LangGraph's own code, whatever LangGraph later
changes in them. Its public surface has no place to order calls, so two layers of its internals
are overridden, and checked to exist when this module is imported: ``_afunc``/``_func`` (the
node's whole run: the batch is submitted there, in emission order, before any call starts) and
``_arun_one``/``_run_one`` (one call, wrapper and error handling included: it waits there for
its leases). ``_parse_input`` finds the calls as LangGraph does.

A call's work runs where LangGraph runs it (its task or its executor's thread), not in a kernel
task: that keeps LangGraph's context variables (config, stream writer, ``interrupt()``), its
exceptions and its cancellation (step timeouts) exactly as without the kernel. The kernel runs
a stand-in for each call that holds the call's leases from their grant until the call's work
ends; the stand-in can't be cancelled while the work runs, so leases never return early. A
call of a sync tool (a plain ``def``, which LangChain runs in its executor's thread, and nothing
can stop) under ``ainvoke`` with ``kernel=`` runs in a task of its own that no cancellation
stops: a cancelled run (a step timeout, the caller's cancellation) goes on at once and the
kernel's call ends CANCELLED, but it holds its leases until the function has returned, as the
kernel's own ``thread=True`` tools do (with the run's own kernel, which nothing else shares and
closes with the run, they go at once). A call
the kernel ends before its grant (denied, timed out waiting, cancelled, its claims refused)
runs nothing and answers with an error ``ToolMessage`` saying why.

What a call claims is said by tool name (``_declared``, as the other adapters take it), as for
``toolkernel.mcp.stdio_tools``: ``reads=`` and ``writes=`` name the arguments holding paths;
``claims=`` gives a function of the arguments returning claims (or a list of claims for every
call), or is one function ``(tool, arguments) -> claims`` for every tool. A tool given none of
them is a barrier: it holds the whole workspace exclusively, so wrapping is never less safe than
running calls one at a time. A call whose path can't be keyed (not a string, a ``~`` path, left
out with no default stated in the tool's schema, outside the kernel's workspace) is a barrier
too, never refused: the tool serves it, or LangGraph answers its bad arguments, as usual.

Without ``kernel=``, each run of the node opens a kernel of its own with no workspace root: a
path is keyed as this process would open it (absolute, normalized lexically, symlinks not
followed). Under ``invoke`` that kernel runs on an event loop kept in a thread for the purpose
(``_loop_thread``). A message of one call skips the kernel: alone in it, the call would be
granted at once.

With ``kernel=`` (one opened with any tools: the node's are given with each batch), its calls
are ordered against everything else that kernel runs, and their paths are keyed by its
workspace (a path outside it makes the call a barrier). ``invoke`` then needs
a way into the kernel's loop: build the node inside that loop, or call ``invoke`` from one of
its worker threads (``anyio.to_thread.run_sync``). A graph run from inside a call that holds
leases in that kernel (by one of the node's tools, or by a leased tool of the Agents SDK or
pydantic-ai adapters), whose node shares the kernel, would wait for ever on leases its caller
holds: its calls run in a kernel of their own instead (in order among themselves; what orders
them against the rest is the leases of the call that runs them, so declare that call's claims
to cover theirs). The other way round, a node's call is among the callers the other adapters
see (``_held_calls``): an agent of theirs run by one of the node's tools, whose tools are
leased in the same kernel, runs its calls inside that tool's leases where they cover them, and
fails one that would wait for ever for it with a :class:`~toolkernel.errors.DeadlockError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Literal, TypeAlias

import anyio
import anyio.from_thread
import anyio.lowlevel
import sniffio
from pydantic import BaseModel

from .._extras import install_command, missing_extra

try:
    from langchain_core.messages import AnyMessage, ToolCall, ToolMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool, StructuredTool, Tool
    from langgraph.prebuilt import ToolNode as _LangGraphToolNode
    from langgraph.prebuilt import ToolRuntime
    from langgraph.runtime import Runtime
    from langgraph.types import Command
except ImportError as exc:  # say which extra brings them
    _missing = missing_extra(
        "langgraph", "toolkernel.integrations.langgraph", "langgraph", "langchain_core"
    )
    if _missing is None:
        raise
    raise ImportError(_missing, name=exc.name) from None

from .._open import open_kernel
from ..kernel import (
    CallEvent,
    CallFinished,
    CallHandle,
    Kernel,
    KeyFunction,
    ToolContext,
    ToolResult,
)
from ..kernel import ToolCall as KernelCall
from ..locks import Claim
from . import _loop_thread
from ._declared import ClaimsFunction as ClaimsFunction
from ._declared import Declaration, declarations, process_key
from ._declared import ToolClaimsFunction as ToolClaimsFunction
from ._held_calls import HeldCall, callers, holding, outlasting

__all__ = ["ToolNode", "ClaimsFunction", "ToolClaimsFunction"]


_InputType: TypeAlias = Literal["list", "dict", "tool_calls"]
_Output: TypeAlias = ToolMessage | Command[Any] | list[Command[Any] | ToolMessage]

# The internals overridden (see the module docstring): a LangGraph that renamed one would
# otherwise leave this node running its calls unordered, silently.
for _name in ("_afunc", "_func", "_arun_one", "_run_one", "_parse_input"):
    if not callable(getattr(_LangGraphToolNode, _name, None)):
        raise ImportError(
            f"toolkernel.integrations.langgraph needs langgraph.prebuilt.ToolNode.{_name}, "
            f"which this version of langgraph-prebuilt does not have; install "
            f"langgraph-prebuilt 1.1 ({install_command('langgraph')})"
        )


class _Gate:
    """The kernel's stand-in for one LangGraph tool in one batch: claims what the tool was
    declared to touch, and holds the leases until the call's work in LangGraph has ended."""

    wait_timeout: float | None = None
    run_timeout: float | None = None

    def __init__(
        self, name: str, declared: Declaration | None, tool: BaseTool | None, batch: _Batch
    ) -> None:
        self.name = name
        self._declared = declared
        self._tool = tool
        self._batch = batch

    def parse_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return dict(arguments)  # LangGraph validates them, with its own messages

    def claims(self, arguments: Mapping[str, Any], key: KeyFunction) -> Sequence[Claim] | None:
        if self._declared is None:
            return None
        key = process_key if self._batch.own else key
        return self._declared.claims(arguments, key, self._tool)

    async def invoke(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> None:
        slot = self._batch.slots[ctx.call_id]
        self._batch.decide(slot, None)
        # Leases must last as long as the work, which runs outside this task: no cancellation
        # (a kernel's run timeout, its closing) may end them first.
        with anyio.CancelScope(shield=True):
            await slot.released.wait()
        if slot.cancelled:
            await anyio.lowlevel.checkpoint_if_cancelled()  # ends CANCELLED, as it was


class _Slot:
    """One call of a batch: the kernel's verdict (granted, or the result it ended with) and
    the release of its leases."""

    def __init__(self, call: ToolCall, kernel_id: str, threaded: bool) -> None:
        self.call = call
        self.kernel_id = kernel_id
        self.handle: CallHandle | None = None
        self.claimed = False  # a worker took it
        self.cancelled = False  # cancelled while a sync tool's thread ran
        self.decided = False
        self.refusal: ToolResult | None = None  # the kernel ended it before any grant
        # Under ainvoke all is on LangGraph's asyncio loop, and asyncio's events cost a seventh
        # of anyio's; under invoke the worker waits in LangGraph's executor thread, and the
        # stand-in on the kernel's loop, which may be trio's.
        self.released: asyncio.Event | anyio.Event
        self.verdict: asyncio.Event | threading.Event
        if threaded:
            self.released, self.verdict = anyio.Event(), threading.Event()
        else:
            self.released, self.verdict = asyncio.Event(), asyncio.Event()

    def decide(self, refusal: ToolResult | None) -> None:
        """Granted (None), or ended by the kernel unrun (``_Batch.decide`` calls it once)."""
        self.decided = True
        self.refusal = refusal
        self.verdict.set()

    def release(self) -> None:
        """The work has ended, or will never run: the leases may go."""
        self.released.set()
        if not self.decided and self.handle is not None:
            self.handle.cancel()  # still waiting for its leases: withdraw

    def message(self) -> ToolMessage:
        """What the model reads for a call the kernel ended before it ran."""
        refusal = self.refusal
        assert refusal is not None
        text = refusal.error or f"the call ended {refusal.status.value} before it ran"
        return ToolMessage(
            content=text,
            name=self.call["name"],
            tool_call_id=self.call["id"],
            status="error",
        )


class _Batch:
    """The calls of one AI message, submitted to a kernel at once in emission order."""

    def __init__(
        self,
        kernel: Kernel,
        calls: Sequence[ToolCall],
        declarations: Mapping[str, Declaration | None],
        tools: Mapping[str, BaseTool],
        *,
        threaded: bool,
        own: bool,
    ) -> None:
        self.slots: dict[str, _Slot] = {}
        self.kernel = kernel
        self.own = own  # the run's own kernel, with no workspace: paths keyed as this process
        # Calls a function on the kernel's loop, from LangGraph's executor threads.
        self.post: Callable[..., Any] | None = None
        self._claiming = threading.Lock()  # LangGraph's executor threads claim at once
        self._by_call: dict[int, list[_Slot]] = {}
        self._undecided = len(calls)
        for index, call in enumerate(calls):
            raw = call.get("id")
            kernel_id = raw if isinstance(raw, str) and raw else f"call#{index}"
            while kernel_id in self.slots:  # ids must be unique in a batch
                kernel_id = f"{kernel_id}#{index}"
            slot = _Slot(call, kernel_id, threaded)
            self.slots[kernel_id] = slot
            self._by_call.setdefault(id(call), []).append(slot)
        gates: dict[str, _Gate] = {}
        kernel_calls = []
        for slot in self.slots.values():
            name = slot.call["name"]
            if name not in gates:
                # A name the node has no tool for is a barrier too: a wrap_tool_call may
                # answer it with anything.
                gates[name] = _Gate(name, declarations.get(name), tools.get(name), self)
            arguments = slot.call.get("args")
            kernel_calls.append(
                # A model's call: a file it never read may not be overwritten.
                KernelCall(
                    slot.kernel_id,
                    name,
                    arguments if isinstance(arguments, dict) else {},
                    read_first=True,
                )
            )
        self._remove_listener = kernel.add_listener(self._heard)
        self._submitting = True  # what finishes now is ours, refused at admission
        try:
            handles = kernel.submit_batch(kernel_calls, tools=gates.values())
        finally:
            self._submitting = False
        for slot, handle in zip(self.slots.values(), handles, strict=True):
            slot.handle = handle

    def _heard(self, event: CallEvent) -> None:
        if type(event) is CallFinished:
            slot = self.slots.get(event.call_id)
            if slot is None:
                return
            # Another batch may use the same id: only our own call's end counts.
            handle = slot.handle
            if self._submitting or (handle is not None and handle.finished):
                self.decide(slot, event.result)

    def decide(self, slot: _Slot, refusal: ToolResult | None) -> None:
        """Granted (None), or ended unrun; the listener goes once every call is decided."""
        if not slot.decided:
            slot.decide(refusal)
            self._undecided -= 1
            if self._undecided == 0:
                self._remove_listener()

    def claim(self, call: ToolCall) -> _Slot:
        """The slot of ``call``, as LangGraph's worker hands it over (the same dict)."""
        with self._claiming:
            return self._claim(call)

    def _claim(self, call: ToolCall) -> _Slot:
        for slot in self._by_call.get(id(call), ()):
            if not slot.claimed:
                slot.claimed = True
                return slot
        for slot in self.slots.values():  # a copy of the call: the first equal one
            if not slot.claimed and slot.call == call:
                slot.claimed = True
                return slot
        raise RuntimeError(
            f"toolkernel: tool call {call.get('id')!r} was not submitted with its message; "
            f"this version of langgraph-prebuilt runs calls in a way this adapter does not know"
        )

    def close(self) -> None:
        """Let go of the calls no worker took (LangGraph stopped before starting them)."""
        with self._claiming:
            unclaimed = [slot for slot in self.slots.values() if not slot.claimed]
            for slot in unclaimed:
                slot.claimed = True
        for slot in unclaimed:
            slot.release()


class _Alone:
    """In place of a batch: the run's lone call, which its own kernel would grant at once."""


_ALONE = _Alone()

# The batch of the node's run, seen by its workers (gather's tasks and the executor's threads
# copy the context they were started in).
_BATCH: contextvars.ContextVar[_Batch | _Alone | None] = contextvars.ContextVar(
    "toolkernel_langgraph_batch", default=None
)


class ToolNode(_LangGraphToolNode):
    """``langgraph.prebuilt.ToolNode``, each message's calls run through a kernel in order.

    ::

        from toolkernel.integrations.langgraph import ToolNode

        node = ToolNode(
            [read_file, edit_file, search],
            reads={"read_file": ["path"]},
            writes={"edit_file": ["path"]},
            claims={"search": lambda args: [tk.reads(args.get("dir", "."))]},
        )
        graph.add_node("tools", node)

    Takes LangGraph's options (``name``, ``tags``, ``handle_tool_errors``, ``messages_key``,
    ``wrap_tool_call``, ``awrap_tool_call``) and gives its outputs. Conflicting calls of one
    message run one after the other in the order the model emitted them (a wrapper runs
    inside the call's leases); the others run together. ``reads``/``writes`` map a tool's name
    to the names of its arguments that hold paths; ``claims`` maps it to a function of the
    arguments returning claims, or to a list of claims, or is one function ``(tool,
    arguments) -> claims`` for every tool. A tool with none is a barrier, and so is a call
    whose path can't be keyed. ``kernel``: a kernel to run in (opened with any tools); None
    opens one for each run.

    Raises :class:`toolkernel.ToolDeclarationError` for options naming a tool the node does
    not have or an argument its tool does not have, or that are not of the shapes above.
    """

    def __init__(
        self,
        tools: Sequence[BaseTool | Callable[..., Any]],
        *,
        claims: Mapping[str, ClaimsFunction | Sequence[Claim]]
        | ToolClaimsFunction[BaseTool]
        | None = None,
        reads: Mapping[str, Sequence[str]] | None = None,
        writes: Mapping[str, Sequence[str]] | None = None,
        kernel: Kernel | None = None,
        **toolnode_options: Any,
    ) -> None:
        super().__init__(tools, **toolnode_options)
        if kernel is not None and not isinstance(kernel, Kernel):
            raise TypeError(f"kernel= takes a toolkernel Kernel (open_kernel), not {kernel!r}")
        self.kernel = kernel
        self._declarations = declarations(
            {name: _properties(tool) for name, tool in self.tools_by_name.items()},
            claims,
            reads,
            writes,
        )
        self._token: anyio.lowlevel.EventLoopToken | None = None
        if kernel is not None:
            with contextlib.suppress(RuntimeError):  # not in a loop: found at invoke()
                self._token = anyio.lowlevel.current_token()  # the kernel's loop

    # -- async: ``ainvoke`` -------------------------------------------------------------------

    async def _afunc(
        self,
        input: list[AnyMessage] | dict[str, Any] | BaseModel,
        config: RunnableConfig,
        runtime: Runtime,
    ) -> Any:
        tool_calls, _ = self._parse_input(input)
        if not tool_calls:
            return await super()._afunc(input, config, runtime)
        if self.kernel is not None and not callers(self.kernel):
            return await self._arun_batch(self.kernel, tool_calls, input, config, runtime)
        if self._alone(tool_calls):
            token = _BATCH.set(_ALONE)
            try:
                return await super()._afunc(input, config, runtime)
            finally:
                _BATCH.reset(token)
        failure: Exception | None = None
        async with open_kernel() as kernel:
            try:
                return await self._arun_batch(kernel, tool_calls, input, config, runtime)
            except Exception as exc:  # out whole, as LangGraph raised it (GraphInterrupt...)
                failure = exc
        try:
            raise failure
        finally:
            failure = None

    async def _arun_batch(
        self,
        kernel: Kernel,
        tool_calls: list[ToolCall],
        input: Any,
        config: RunnableConfig,
        runtime: Runtime,
    ) -> Any:
        own = kernel is not self.kernel
        batch = _Batch(
            kernel, tool_calls, self._declarations, self.tools_by_name, threaded=False, own=own
        )
        token = _BATCH.set(batch)
        try:
            return await super()._afunc(input, config, runtime)
        finally:
            _BATCH.reset(token)
            batch.close()

    async def _arun_one(
        self,
        call: ToolCall,
        input_type: _InputType,
        tool_runtime: ToolRuntime,
    ) -> _Output:
        batch = _current_batch()
        if batch is _ALONE:
            return await super()._arun_one(call, input_type, tool_runtime)
        assert isinstance(batch, _Batch)
        slot = batch.claim(call)
        worker: asyncio.Task[_Output] | None = None
        try:
            verdict = slot.verdict
            assert isinstance(verdict, asyncio.Event)
            if not verdict.is_set():
                await verdict.wait()
            if slot.refusal is not None:
                return slot.message()
            run = functools.partial(super()._arun_one, call, input_type, tool_runtime)
            # A graph or an agent the call runs sees its leases (``_held_calls``).
            with holding(HeldCall(batch.kernel, slot.kernel_id, slot.handle)):
                if batch.own or not _blocking(self.tools_by_name.get(call["name"])):
                    return await run()
                worker = outlasting(run)  # its thread goes on, whatever this task does
                return await asyncio.shield(worker)
        finally:
            if worker is None or worker.done():
                slot.release()
            else:  # cancelled: its leases go when the thread has returned
                slot.cancelled = True
                if slot.handle is not None:
                    slot.handle.cancel()
                worker.add_done_callback(lambda _: slot.release())

    # -- sync: ``invoke`` ---------------------------------------------------------------------

    def _func(
        self,
        input: list[AnyMessage] | dict[str, Any] | BaseModel,
        config: RunnableConfig,
        runtime: Runtime,
    ) -> Any:
        tool_calls, _ = self._parse_input(input)
        if not tool_calls:
            return super()._func(input, config, runtime)
        if self.kernel is not None and not callers(self.kernel):
            hop = self._hop_to_kernel()
            make = functools.partial(
                _Batch,
                self.kernel,
                tool_calls,
                self._declarations,
                self.tools_by_name,
                threaded=True,
                own=False,
            )
            batch: _Batch = hop(make)
            batch.post = hop
            try:
                return self._run_batch(batch, input, config, runtime)
            finally:
                hop(batch.close)
        if self._alone(tool_calls):
            token = _BATCH.set(_ALONE)
            try:
                return super()._func(input, config, runtime)
            finally:
                _BATCH.reset(token)
        # A kernel of the run's own, on the adapters' loop thread, open while the run lasts.
        ready: Future[tuple[_Batch, asyncio.Event]] = Future()
        kernel_done = _loop_thread.run_coroutine(self._serve(tool_calls, ready))
        batch, closing = ready.result()
        try:
            return self._run_batch(batch, input, config, runtime)
        finally:
            _loop_thread.post(batch.close)
            _loop_thread.post(closing.set)
            kernel_done.result()

    async def _serve(
        self, tool_calls: list[ToolCall], ready: Future[tuple[_Batch, asyncio.Event]]
    ) -> None:
        """Open a kernel, submit the batch, and keep the kernel open until told to close."""
        try:
            async with open_kernel() as kernel:
                closing = asyncio.Event()
                batch = _Batch(
                    kernel,
                    tool_calls,
                    self._declarations,
                    self.tools_by_name,
                    threaded=True,
                    own=True,
                )
                batch.post = _loop_thread.post
                ready.set_result((batch, closing))
                await closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    def _alone(self, tool_calls: list[ToolCall]) -> bool:
        """Whether this run's calls need no kernel of their own: a lone call, which nothing
        else would wait behind, and whose claims are sound (else the kernel says why)."""
        if len(tool_calls) != 1:
            return False
        call = tool_calls[0]
        declared = self._declarations.get(call["name"])
        if declared is None:
            return True
        arguments = call.get("args")
        try:
            declared.claims(
                arguments if isinstance(arguments, dict) else {},
                process_key,
                self.tools_by_name.get(call["name"]),
            )
        except Exception:
            return False
        return True

    def _hop_to_kernel(self) -> Callable[..., Any]:
        """Runs a function in the given kernel's loop, from this thread, and waits for it."""
        token = self._token
        if token is None:
            try:
                token = anyio.from_thread.run_sync(anyio.lowlevel.current_token)
            except RuntimeError:
                raise RuntimeError(
                    "ToolNode(kernel=...).invoke() can't reach the kernel's event loop from "
                    "this thread: build the node inside that loop, or call invoke() from one of "
                    "its worker threads (anyio.to_thread.run_sync), or use ainvoke()"
                ) from None
        try:
            sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            return functools.partial(_run_sync_on, token)
        raise RuntimeError(
            "ToolNode(kernel=...).invoke() would block the event loop its kernel runs on: "
            "use await node.ainvoke(...) there"
        )

    def _run_batch(
        self, batch: _Batch, input: Any, config: RunnableConfig, runtime: Runtime
    ) -> Any:
        token = _BATCH.set(batch)
        try:
            return super()._func(input, config, runtime)
        finally:
            _BATCH.reset(token)

    def _run_one(
        self,
        call: ToolCall,
        input_type: _InputType,
        tool_runtime: ToolRuntime,
    ) -> _Output:
        batch = _current_batch()
        if batch is _ALONE:
            return super()._run_one(call, input_type, tool_runtime)
        assert isinstance(batch, _Batch) and batch.post is not None
        slot = batch.claim(call)
        try:
            verdict = slot.verdict
            assert isinstance(verdict, threading.Event)
            verdict.wait()
            if slot.refusal is not None:
                return slot.message()
            with holding(HeldCall(batch.kernel, slot.kernel_id, slot.handle)):
                return super()._run_one(call, input_type, tool_runtime)
        finally:
            batch.post(slot.release)


def _properties(tool: BaseTool) -> Mapping[str, Any]:
    """The properties of the tool's arguments' schema: their names, and defaults."""
    try:
        properties = tool.args
    except Exception:  # a schema LangGraph itself could not write
        return {}
    return properties if isinstance(properties, Mapping) else {}


def _blocking(tool: BaseTool | None) -> bool:
    """Whether LangChain runs the tool in its executor's thread (under ``ainvoke``): a tool of
    a plain ``def`` (no ``coroutine``), or whose class leaves ``_arun`` to ``BaseTool``."""
    if tool is None or getattr(tool, "coroutine", None) is not None:
        return False
    return type(tool)._arun in (BaseTool._arun, StructuredTool._arun, Tool._arun)


def _run_sync_on(
    token: anyio.lowlevel.EventLoopToken, function: Callable[..., Any], *args: Any
) -> Any:
    return anyio.from_thread.run_sync(function, *args, token=token)


def _current_batch() -> _Batch | _Alone:
    batch = _BATCH.get()
    if batch is None:
        raise RuntimeError(
            "toolkernel: a tool call ran outside its node's run; this version of "
            "langgraph-prebuilt runs calls in a way this adapter does not know"
        )
    return batch

"""The built-in tools served to MCP clients: ``python -m toolkernel mcp`` (the server side of
the official ``mcp`` SDK).

One :class:`ToolServer` holds one kernel for the workspace root, and every call of every MCP
session goes through it: reads and writes of different files run together, conflicting calls
run in the order they arrived. Server processes on the same root (a client starts a stdio
server per session or subagent) share the root's lease service, so their calls are ordered
against each other's too (see :mod:`toolkernel.leases._start`).

What a client sees:

- The built-in tools, named and shaped as models know them, each with annotations that say
  what it does (:data:`ANNOTATIONS`): clients that run only read-only tools together (Claude
  Code) run the reads together, and none is told a write is harmless.
- ``Batch``: a list of calls run through the kernel at once, results in order. It is how a
  turn's independent edits and commands run together for a client that sends one write at a
  time.
- Each MCP session is one agent for the stale-view guard (:mod:`toolkernel.tools._views`): an
  edit of a file changed since this session last read it is refused, telling the model to read
  it again; a file it never read must be read before it is edited, as in Claude Code. A call
  whose ``_meta`` names the agent making it (:data:`AGENT_KEYS`) gets that agent's own view
  within the session, so subagents sharing one session do not vouch for each other's reads.
- ``notifications/cancelled`` cancels the call in the kernel: its leases return and the files
  stay whole (writes are atomic; a cancelled command commits nothing). A call that asks for
  progress hears when it starts (after waiting for its leases), what its tool reports, and, for
  a long one, every few seconds that it still runs.
- Every failure is an ``isError`` result saying what to do, never an error reply and never
  the end of the server: an unknown tool, bad arguments, a refused edit, a bug met in one call.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

import anyio
import anyio.abc
import attrs
from anyio.streams.memory import MemoryObjectSendStream

from ..formats._attachments import Attachment
from ..formats._calls import answers, exported_tools, unicode_text
from ..kernel import (
    CallFinished,
    CallHandle,
    CallProgress,
    CallStarted,
    Kernel,
    ToolCall,
    ToolResult,
)

__all__ = ["ANNOTATIONS", "AGENT_KEYS", "BATCH", "ToolServer", "MAX_BATCH"]

_log = logging.getLogger("toolkernel.mcp.server")

BATCH: Final = "Batch"
MAX_BATCH: Final = 64
"""The most calls one ``Batch`` takes."""

MAX_SESSIONS: Final = 10_000
"""The most sessions whose agents one server tells apart at once (the SDK's own limit on
HTTP sessions)."""

PROGRESS_EVERY: Final = 5.0
"""Seconds between "still running" progress notifications of a long call."""

_CANCEL_GRACE: Final = 30.0  # how long a cancelled call may take to give its leases back


def _hints(
    *, read_only: bool, destructive: bool, idempotent: bool, open_world: bool
) -> dict[str, bool]:
    return {
        "readOnlyHint": read_only,
        "destructiveHint": destructive,
        "idempotentHint": idempotent,
        "openWorldHint": open_world,
    }


_READS = _hints(read_only=True, destructive=False, idempotent=True, open_world=False)
ANNOTATIONS: Final[Mapping[str, Mapping[str, bool]]] = {
    "Read": _READS,
    "Glob": _READS,
    "Grep": _READS,
    "ListDir": _READS,
    # Replaces the file whole; the same content twice leaves what once did.
    "Write": _hints(read_only=False, destructive=True, idempotent=True, open_world=False),
    # Replaces text: a second run finds the old text gone (or edits again with replace_all).
    "Edit": _hints(read_only=False, destructive=True, idempotent=False, open_world=False),
    "MultiEdit": _hints(read_only=False, destructive=True, idempotent=False, open_world=False),
    "Move": _hints(read_only=False, destructive=True, idempotent=False, open_world=False),
    "Delete": _hints(read_only=False, destructive=True, idempotent=True, open_world=False),
    # The session's own list, replaced whole; nothing in the tree changes.
    "TodoWrite": _hints(read_only=False, destructive=False, idempotent=True, open_world=False),
    # Anything a command may do: the network, other programs, the tree.
    "Bash": _hints(read_only=False, destructive=True, idempotent=False, open_world=True),
}
"""What each built-in tool is, in the MCP annotations' terms."""

AGENT_KEYS: Final = (
    "toolkernel/agent",
    "agentId",
    "agent_id",
    "subagentId",
    "subagent_id",
    "threadId",  # Codex: the agent thread making the call, a subagent's its own
)
"""``_meta`` keys a client may name the agent making a call with (a subagent sharing its
parent's session); the first one present, if a string, picks that agent's view."""

_BATCH_DESCRIPTION = (
    "Run several tool calls at once, as one step, and get every result back in order. Use it "
    "whenever a turn has two or more calls that do not need each other's results: edits of "
    "different files, reads, searches, commands. Calls that touch different files run "
    "together; calls that touch the same file or directory run one after the other in the "
    "order you list them, so listing a Read before an Edit of the same file, or two Edits of "
    'one file, is safe. Each item is {"tool": NAME, "arguments": {...}} with the arguments '
    "that tool takes; a failed call does not stop the others. Batch cannot contain Batch."
)


@attrs.define(eq=False)
class ToolServer:
    """The MCP side of one kernel: its tools listed, their calls run, their results shaped.

    ``kernel`` is opened by the caller (``cli/_mcp.py``) with the root, the tools and the
    leases; this object never closes it.
    """

    kernel: Kernel
    _agents: collections.OrderedDict[object, str] = attrs.field(
        init=False, factory=collections.OrderedDict
    )
    _sessions: itertools.count[int] = attrs.field(init=False, factory=lambda: itertools.count(1))
    _calls: itertools.count[int] = attrs.field(init=False, factory=lambda: itertools.count(1))
    # Where each reporting request's calls send their news, by call id.
    _watches: dict[str, MemoryObjectSendStream[str]] = attrs.field(init=False, factory=dict)
    _listening: bool = attrs.field(init=False, default=False)

    # -- tools/list -----------------------------------------------------------------------------

    def tool_list(self) -> list[dict[str, Any]]:
        """Every tool as MCP describes one (``name``, ``description``, ``inputSchema``,
        ``annotations``), and ``Batch`` last."""
        listed = []
        for name, _wire, description, schema in exported_tools(self.kernel.tools, False):
            spec: dict[str, Any] = {"name": name, "inputSchema": schema}
            if description:
                spec["description"] = description
            hints = ANNOTATIONS.get(name)
            if hints is not None:
                spec["annotations"] = dict(hints)
            listed.append(spec)
        names = [spec["name"] for spec in listed]
        listed.append(
            {
                "name": BATCH,
                "description": _BATCH_DESCRIPTION,
                "inputSchema": _batch_schema(names),
                "annotations": _batch_hints([ANNOTATIONS.get(n) for n in names]),
            }
        )
        return listed

    # -- tools/call -----------------------------------------------------------------------------

    def agent_for(self, session: object, meta: Mapping[str, Any] | None) -> str:
        """The agent a call is made by: its session's, or a named agent within it.

        ``session`` is anything hashable standing for one MCP session. The sessions used
        last are remembered (:data:`MAX_SESSIONS`); one forgotten starts a new view, whose
        files must be read again before they are edited."""
        agent = self._agents.get(session)
        if agent is None:
            agent = self._agents[session] = f"session-{next(self._sessions)}"
            while len(self._agents) > MAX_SESSIONS:
                self._agents.popitem(last=False)
        else:
            self._agents.move_to_end(session)
        for key in AGENT_KEYS:
            named = (meta or {}).get(key)
            if isinstance(named, str) and named:
                return f"{agent}/{named}"
        return agent

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        agent: str,
        report: Reporter | None = None,
    ) -> dict[str, Any]:
        """Run one ``tools/call`` and return its ``CallToolResult`` (as a dict). Never raises
        but for cancellation, whatever the call or the tool does."""
        try:
            if name == BATCH:
                return _unicode(await self._batch(arguments, agent, report))
            (result,) = await self._run([(name, arguments)], agent, report)
            if result.error_type == "UnknownToolError" and result.error:
                # The kernel lists its own tools; this server has one more.
                result = attrs.evolve(result, error=f"{result.error}, and {BATCH}")
            return _unicode(_call_result(result))
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # a bug met by this call: its caller hears of it, no one else
            _log.exception("tools/call %s failed", name)
            return _unicode(
                _error_result(
                    f"internal error in the toolkernel MCP server running {name}: "
                    f"{type(exc).__name__}: {exc}. The server goes on; try the call again, or "
                    "report the error if it repeats."
                )
            )

    async def _batch(
        self, arguments: Mapping[str, Any] | None, agent: str, report: Reporter | None
    ) -> dict[str, Any]:
        problem, calls = _batch_calls(arguments)
        if problem is not None:
            return _error_result(problem)
        results = await self._run(calls, agent, report)
        parts = []
        for index, (answer, (name, _)) in enumerate(zip(answers(results), calls, strict=True), 1):
            outcome = "ok" if answer.ok else results[index - 1].status.value.lower()
            parts.append(f"[{index}] {name}: {outcome}\n{answer.text}")
        text = "\n\n".join(parts)
        # Marked an error only when nothing succeeded: a model told a batch failed would do
        # again what went through; each call's own outcome is in its part of the text.
        return {
            "content": [{"type": "text", "text": text}],
            "isError": not any(result.ok for result in results),
        }

    async def _run(
        self,
        calls: Sequence[tuple[str, Mapping[str, Any] | str | None]],
        agent: str,
        report: Reporter | None,
    ) -> list[ToolResult]:
        """Submit ``calls`` as one batch of ``agent``'s and wait for their results; cancelled,
        cancel them and wait (shielded, bounded) until their leases are back."""
        # A model made these calls: an edit of a file this agent never read is refused.
        batch = [
            ToolCall(
                f"{agent}:{next(self._calls)}",
                name,
                arguments if isinstance(arguments, str) else dict(arguments or {}),
                agent=agent,
                read_first=True,
            )
            for name, arguments in calls
        ]
        handles = self.kernel.submit_batch(batch)
        try:
            if report is None:
                return [await handle.wait_finished() for handle in handles]
            return await self._reporting(batch, handles, report)
        finally:
            if not all(handle.finished for handle in handles):  # cancelled: the client, or us
                for handle in handles:
                    handle.cancel()
                with anyio.move_on_after(_CANCEL_GRACE, shield=True):
                    for handle in handles:
                        await handle.wait_finished()

    async def _reporting(
        self, batch: Sequence[ToolCall], handles: Sequence[CallHandle], report: Reporter
    ) -> list[ToolResult]:
        """Wait for the calls' results, relaying their events to ``report`` meanwhile."""
        send, receive = anyio.create_memory_object_stream[str](math.inf)
        self._listen()
        for call in batch:
            self._watches[call.id] = send
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_relay, receive, report, len(batch))
                results = [await handle.wait_finished() for handle in handles]
                send.close()  # the relay sends what is queued, then ends: news before result
            return results
        finally:
            for call in batch:
                self._watches.pop(call.id, None)
            send.close()

    def _listen(self) -> None:
        if not self._listening:
            self.kernel.add_listener(self._event)
            self._listening = True

    def _event(self, event: object) -> None:
        if not isinstance(event, CallStarted | CallProgress | CallFinished):
            return
        send = self._watches.get(event.call_id)
        if send is None:
            return
        if isinstance(event, CallStarted):
            news = f"{event.name} started"
        elif isinstance(event, CallProgress):
            news = f"{event.name}: {event.message}"
        else:
            news = f"{event.name} finished"
        # Never raises: a listener that raises is removed, and every later call's news with it.
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            send.send_nowait(news)


class Reporter:
    """Sends one request's progress notifications (its ``progressToken``'s)."""

    def __init__(self, send: Any) -> None:
        self._send = send
        self._progress = 0

    async def __call__(self, message: str, total: int | None = None) -> None:
        self._progress += 1
        try:
            await self._send(
                float(self._progress),
                None if total is None else float(total),
                unicode_text(message),
            )
        except anyio.get_cancelled_exc_class():
            raise
        except Exception:  # a client gone or a full stream: progress is only news
            _log.debug("a progress notification could not be sent", exc_info=True)


async def _relay(receive: anyio.abc.ObjectReceiveStream[str], report: Reporter, count: int) -> None:
    """Forward a request's events as progress, and say every few seconds that it still runs."""
    started = anyio.current_time()
    finished = 0
    async with receive:
        while True:
            with anyio.move_on_after(PROGRESS_EVERY):
                try:
                    message = await receive.receive()
                except anyio.EndOfStream:
                    return
                if message.endswith(" finished"):
                    finished += 1
                    if count == 1:
                        continue  # the result itself says so
                    message = f"{finished} of {count} calls done"
                await report(message)
                continue
            elapsed = anyio.current_time() - started
            await report(f"still running after {elapsed:.0f} s")


def _batch_schema(names: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "calls": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_BATCH,
                "description": "The calls, in the order they are to keep where they conflict.",
                "items": {
                    "type": "object",
                    "properties": {
                        "tool": {"type": "string", "enum": list(names)},
                        "arguments": {"type": "object"},
                    },
                    "required": ["tool", "arguments"],
                },
            }
        },
        "required": ["calls"],
    }


def _batch_hints(hints: Sequence[Mapping[str, bool] | None]) -> dict[str, bool]:
    """What a batch may do: whatever its most capable tool may (a tool without hints may do
    anything)."""
    known = [h for h in hints if h is not None]
    anything = len(known) < len(hints)
    return _hints(
        read_only=not anything and all(h["readOnlyHint"] for h in known),
        destructive=anything or any(h["destructiveHint"] for h in known),
        idempotent=not anything and all(h["idempotentHint"] for h in known),
        open_world=anything or any(h["openWorldHint"] for h in known),
    )


def _batch_calls(
    arguments: Mapping[str, Any] | None,
) -> tuple[str | None, list[tuple[str, Mapping[str, Any] | str | None]]]:
    """The calls of a ``Batch``, or what is wrong with them."""
    form = 'Batch takes {"calls": [{"tool": NAME, "arguments": {...}}, ...]}'
    calls = (arguments or {}).get("calls")
    if isinstance(calls, str):  # a model that wrote the list as JSON text: read it
        try:
            calls = json.loads(calls)
        except (ValueError, RecursionError):  # RecursionError: nested past json's own limit
            return f"{form}: calls is a string that is not a JSON list; send the list itself", []
    if not isinstance(calls, list) or not calls:
        return f"{form}, with at least one call", []
    if len(calls) > MAX_BATCH:
        return f"Batch takes at most {MAX_BATCH} calls, not {len(calls)}: split it in two", []
    found: list[tuple[str, Mapping[str, Any] | str | None]] = []
    for index, item in enumerate(calls, 1):
        if not isinstance(item, Mapping) or not isinstance(item.get("tool"), str):
            return f"{form}: call {index} has no tool name", []
        name, given = item["tool"], item.get("arguments", {})
        if name == BATCH:
            return f"call {index} is a Batch: list its calls in this one instead", []
        # Arguments as JSON text go to the kernel as they are (it reads them, or says why not
        # in that call's result, as for a model's call on any wire).
        if given is not None and not isinstance(given, Mapping | str):
            return f"{form}: the arguments of call {index} ({name}) are not an object", []
        found.append((name, given))
    return None, found


def _call_result(result: ToolResult) -> dict[str, Any]:
    (answer,) = answers([result])
    segments = answer.segments()
    if segments is None:
        content = [{"type": "text", "text": answer.text}]
    else:
        content = [
            _block(segment) for segment in segments if not isinstance(segment, str) or segment
        ]
    return {"content": content, "isError": not answer.ok}


def _block(segment: str | Attachment) -> dict[str, Any]:
    if isinstance(segment, str):
        return {"type": "text", "text": segment}
    if segment.kind == "image":
        return {"type": "image", "data": segment.data, "mimeType": segment.media_type}
    uri = f"file:///{segment.name or 'document'}"
    return {
        "type": "resource",
        "resource": {"uri": uri, "mimeType": segment.media_type, "blob": segment.data},
    }


def _error_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _unicode(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with every string in it :func:`unicode_text`: the SDK's writer refuses a
    message holding a lone surrogate (a file name that is not UTF-8, in a listing or an
    error), and over stdio that refusal ends the session's whole server."""
    cleaned: dict[str, Any] = _unicode_value(result)
    return cleaned


def _unicode_value(found: Any) -> Any:
    if isinstance(found, str):
        return unicode_text(found)
    if isinstance(found, dict):
        return {key: _unicode_value(value) for key, value in found.items()}
    if isinstance(found, list):
        return [_unicode_value(value) for value in found]
    return found

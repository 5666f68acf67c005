"""What the console shows, as ``rich`` renderables: calls as they go, their results, the kernel's
state (``/status``), the tools (``/tools``, ``/tool NAME``) and the help. No I/O here: the console
prints what these return.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.json import JSON
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from ..kernel import (
    CallBlocked,
    CallEvent,
    CallFinished,
    CallProgress,
    CallStarted,
    KernelSnapshot,
    Status,
    ToolCall,
    ToolResult,
)
from ..tools import Tool
from ._console_syntax import format_arguments, parameters, required

__all__ = [
    "call_line",
    "event_line",
    "status_view",
    "tools_view",
    "tool_view",
    "help_view",
    "claims_summary",
    "Indented",
]

OUTPUT_LINES = 12  # of a result's output shown under it
_MARKS = {
    Status.OK: ("✓", "green"),
    Status.ERROR: ("✗", "red"),
    Status.DENIED: ("✗", "red"),
    Status.TIMEOUT: ("⏱", "yellow"),
    Status.CANCELLED: ("⊘", "yellow"),
    Status.SKIPPED: ("⊘", "yellow"),
}


def call_line(call: ToolCall, prefix: str = "→") -> Text:
    """``→ c1 Read file_path=a.txt``: a call as it is submitted."""
    arguments = call.arguments
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than json reads
            arguments = {"(arguments)": arguments}
    text = Text(f"{prefix} ")
    text.append(call.id, "bold")
    text.append(f" {call.name}", "cyan")
    if isinstance(arguments, Mapping) and arguments:
        text.append(" " + format_arguments(arguments), "dim")
    if call.after:
        text.append(f" (after {', '.join(call.after)})", "dim")
    return text


def event_line(event: CallEvent) -> RenderableType | None:
    """How an event of a call shows while it runs (None: not shown)."""
    if isinstance(event, CallBlocked):
        on = f" on {', '.join(event.resources)}" if event.resources else ""
        text = Text("  ")
        text.append(event.call_id, "bold")
        text.append(f" {event.name} waits for {', '.join(event.waits_for) or 'its turn'}{on}")
        return text
    if isinstance(event, CallStarted):
        text = Text("  ")
        text.append(event.call_id, "bold")
        text.append(f" {event.name} started", "dim")
        return text
    if isinstance(event, CallProgress):
        text = Text("  ")
        text.append(event.call_id, "bold")
        text.append(f" {event.name} … {event.message}", "dim")
        return text
    if isinstance(event, CallFinished):
        return result_view(event.result)
    return None


def result_view(result: ToolResult) -> RenderableType:
    """``✓ c1 Read ok in 0.01 s`` and the first lines of its output (or its error)."""
    mark, style = _MARKS[result.status]
    head = Text(f"{mark} ", style)
    head.append(result.call_id, "bold")
    head.append(f" {result.name} ")
    head.append(result.status.value, style)
    if result.started_at is not None:
        head.append(f" in {result.run_time:.2f} s", "dim")
    if result.wait_time >= 0.01:
        head.append(f" after waiting {result.wait_time:.2f} s", "dim")
    body = result.text() if result.ok else (result.error or "")
    if not body or body == result.status.value:  # "cancelled" says nothing more
        return head
    lines = body.splitlines() or [""]
    text = Text("\n".join(lines[:OUTPUT_LINES]), "" if result.ok else style)
    if len(lines) > OUTPUT_LINES:
        text.append(f"\n… {len(lines) - OUTPUT_LINES} more lines", "dim")
    return Group(head, Indented(text, 4))


class Indented:
    """``text`` shifted right by ``indent`` columns, each line and each line it wraps to: on a
    terminal (the console's ``soft_wrap`` off) lines wrap at word boundaries in the width left,
    a word longer than that folded; soft-wrapped (piped output), lines are written whole.

    rich's ``Padding`` is not used: it pads every line out to the width, and crops lines
    where soft wrapping should leave them whole."""

    def __init__(self, text: Text, indent: int) -> None:
        self.text = text
        self.indent = indent

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = self.text.wrap(
            console,
            max(options.max_width - self.indent, 1),
            overflow=options.overflow or "fold",
            no_wrap=options.no_wrap,
        )
        margin = Segment(" " * self.indent)
        for line in lines:
            if not options.no_wrap:
                line.rstrip()  # the space a line was wrapped at
            yield margin
            yield from line.render(console, end="")
            yield Segment.line()

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        inner = Measurement.get(console, options, self.text)
        return Measurement(inner.minimum + self.indent, inner.maximum + self.indent)


def status_view(
    snapshot: KernelSnapshot,
    blocked_on: Mapping[str, Sequence[str]],
    now: float,
    leases: Any,
) -> RenderableType:
    """``/status``: what runs (and the leases it holds), what waits and on what."""
    if not (snapshot.running or snapshot.queued or snapshot.pending):
        return Text("nothing is running or waiting", "dim")
    table = Table(box=None, show_header=True, pad_edge=False)
    for column in ("call", "tool", "state", "for", "holds / waits on"):
        table.add_column(column, style="bold" if column == "call" else None)
    for info in snapshot.running:
        held = ", ".join(str(claim) for claim in info.claims) or "nothing"
        table.add_row(info.call_id, info.name, "running", f"{now - info.since:.1f} s", held)
    for info in snapshot.queued:
        on = ", ".join(blocked_on.get(info.call_id, ())) or "its turn"
        behind = ", ".join(info.waits_for) or "nobody"
        table.add_row(
            info.call_id,
            info.name,
            "waiting",
            f"{now - info.since:.1f} s",
            f"behind {behind} on {on}",
        )
    for info in snapshot.pending:
        why = f"after {', '.join(info.waits_for)}" if info.waits_for else "approval or hooks"
        table.add_row(info.call_id, info.name, "pending", f"{now - info.since:.1f} s", why)
    footer = Text(f"leases: {leases.held} held, {leases.waiting} waiting", "dim")
    return Group(table, footer)


def claims_summary(tool: object) -> str:
    """What a call of the tool claims, in a few words."""
    parts = []
    mcp = sys.modules.get("toolkernel.mcp")  # not imported: no tool is an MCP server's
    MCPTool = getattr(mcp, "MCPTool", ())
    if isinstance(tool, MCPTool):
        parts.append(str(tool.server_claim))
    if isinstance(tool, Tool):
        if tool.reads_workspace:
            parts.append("reads the workspace")
        if tool.reads:
            parts.append("reads " + ", ".join(tool.reads))
        if tool.writes:
            parts.append("writes " + ", ".join(tool.writes))
        custom = type(tool).declare is not Tool.declare or type(tool).claims is not Tool.claims
        function = getattr(tool, "_claims_function", None)  # @tool(claims=...)
        if not isinstance(tool, MCPTool) and (custom or function is not None):
            parts.append("claims from its arguments")
    return "; ".join(parts) or "everything (runs alone)"


def tools_view(tools: Iterable[object]) -> RenderableType:
    """``/tools``: every tool, what it claims, what it does."""
    table = Table(box=None, show_header=True, pad_edge=False)
    table.add_column("tool", style="cyan", no_wrap=True)
    table.add_column("claims")
    table.add_column("description", overflow="fold")
    for tool in tools:
        description = (getattr(tool, "description", "") or "").strip().splitlines()
        table.add_row(
            str(getattr(tool, "name", "?")),
            claims_summary(tool),
            description[0] if description else "",
        )
    return table


def tool_view(tool: object) -> RenderableType:
    """``/tool NAME``: its description, parameters and JSON Schema."""
    name = str(getattr(tool, "name", "?"))
    parts: list[RenderableType] = [Text(name, "bold cyan")]
    description = (getattr(tool, "description", "") or "").strip()
    if description:
        parts.append(Text(description))
    parts.append(Text(f"claims: {claims_summary(tool)}", "dim"))
    needed = set(required(tool))
    table = Table(box=None, show_header=True, pad_edge=False)
    for column in ("parameter", "type", "required", "default", "description"):
        table.add_column(column, overflow="fold")
    for key, schema in parameters(tool).items():
        schema = schema if isinstance(schema, Mapping) else {}
        table.add_row(
            key,
            _type_name(schema),
            "yes" if key in needed else "",
            json.dumps(schema["default"]) if "default" in schema else "",
            str(schema.get("description", "")),
        )
    parts.append(table if table.row_count else Text("no parameters", "dim"))
    schema_of = getattr(tool, "parameters_schema", None)
    if callable(schema_of):
        parts.append(Text("schema:", "dim"))
        parts.append(JSON(json.dumps(schema_of(), default=str)))
    return Group(*parts)


def _type_name(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if isinstance(kind, str):
        return kind
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    members = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(members, list):
        return " | ".join(_type_name(m) for m in members if isinstance(m, Mapping))
    return "any"


HELP = """\
Type calls, one batch a line; they run at once, each as soon as what it claims is free:
  Read file_path=a.txt; Edit file_path=a.txt old_string='x = 1' new_string='x = 2'
Values with spaces are quoted as in a shell; values of non-string parameters are JSON
(limit=20, replace_all=true, edits='[{"old_string": "a", "new_string": "b"}]').
A required argument left out is asked for (/cancel at that question abandons the batch).
Tab completes tool names and parameters; up and down arrows walk the history.

  /status        what runs (and the leases it holds), what waits and on what
  /cancel [ID]   cancel one call, or everything running (Ctrl-C too)
  /tools         the tools and what their calls claim
  /tool NAME     a tool's parameters and JSON Schema
  /call CALLS    run calls typed by hand (the same as a plain line without a model)
  /help          this text
  /quit          leave, cancelling what still runs (Ctrl-D, or Ctrl-C twice, too)"""

MODEL_HELP = """\
A plain line is a message to the model, which calls the tools; /call runs calls by hand:
  /call Read file_path=a.txt; Grep pattern=TODO
/cancel with no ID stops the model's turn and its calls."""


def help_view(chatting: bool) -> RenderableType:
    """``/help``."""
    if chatting:
        return Group(Text(MODEL_HELP), Text(), Text(HELP))
    return Text(HELP)

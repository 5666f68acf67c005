"""OpenTelemetry spans for tool calls (needs ``toolkernel[otel]``: ``opentelemetry-api``).

::

    from toolkernel.trace.otel import ToolCallSpans

    kernel.add_listener(ToolCallSpans())       # spans go to the global tracer provider

Each call becomes a span named ``execute_tool {tool}`` (kind INTERNAL), following the GenAI
semantic conventions: ``gen_ai.operation.name`` = ``execute_tool``, ``gen_ai.tool.name``,
``gen_ai.tool.call.id``, ``gen_ai.tool.type`` = ``function``, and, when the call did not end
OK, ``error.type`` (the exception class behind the result, such as ``RunTimeoutError``) and an
ERROR status with the message. toolkernel adds ``toolkernel.call.status``,
``toolkernel.call.claims``, ``toolkernel.call.wait_seconds`` and, if it waited,
``toolkernel.call.waited_behind``.

Parenting across tasks: a call runs in a task of the kernel's, started by whichever call
released the leases it waited for, so the context it would inherit is not its submitter's.
So the span's parent is the context current where the call was *submitted* (``CallQueued`` is
given in the submitting task), and the span is made current in the task that *runs* the tool
(``CallStarted`` is given there, just before the tool runs): spans the tool makes (an HTTP
client's, a database driver's) are its children, and a nested call's span is a child of its
parent call's. A call that never ran (refused, cancelled or timed out while waiting) still
gets a span, from its admission to its end.
"""

from __future__ import annotations

import time
from typing import Any

from .. import __version__
from .._extras import require_extra
from ..kernel import CallEvent, CallFinished, CallQueued, CallStarted, ToolResult

require_extra("otel", "toolkernel.trace.otel", "opentelemetry")  # before it fails bare

from opentelemetry import context as otel_context  # noqa: E402
from opentelemetry import trace  # noqa: E402

__all__ = ["ToolCallSpans"]


class _Pending:
    __slots__ = ("blocked_behind", "claims", "parent", "queued_ns", "span", "token")

    def __init__(self, parent: otel_context.Context, queued_ns: int, claims: list[str]) -> None:
        self.parent = parent
        self.queued_ns = queued_ns
        self.claims = claims
        self.blocked_behind: list[str] = []
        self.span: trace.Span | None = None
        self.token: object = None


class ToolCallSpans:
    """A kernel listener that turns each call into an ``execute_tool {tool}`` span.

    ``tracer_provider``: where spans go (default: the global one, as set with
    ``opentelemetry.trace.set_tracer_provider``).
    """

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer("toolkernel", __version__, tracer_provider)
        self._calls: dict[str, list[_Pending]] = {}

    def __call__(self, event: CallEvent) -> None:
        if isinstance(event, CallQueued):
            pending = _Pending(
                otel_context.get_current(), time.time_ns(), [str(c) for c in event.claims]
            )
            self._calls.setdefault(event.call_id, []).append(pending)
            return
        stack = self._calls.get(event.call_id)
        if not stack:
            return
        pending = stack[-1]
        if isinstance(event, CallStarted):
            span = self._tracer.start_span(
                f"execute_tool {event.name}",
                context=pending.parent,
                kind=trace.SpanKind.INTERNAL,
                attributes=self._attributes(event.call_id, event.name, pending),
            )
            pending.span = span
            # In the task about to run the tool: its spans, and nested calls', are children.
            pending.token = otel_context.attach(trace.set_span_in_context(span))
        elif isinstance(event, CallFinished):
            stack.pop()
            if not stack:
                del self._calls[event.call_id]
            self._finish(pending, event)
        else:
            waits_for = getattr(event, "waits_for", None)
            if waits_for:
                pending.blocked_behind.extend(
                    w for w in waits_for if w not in pending.blocked_behind
                )

    def _attributes(self, call_id: str, name: str, pending: _Pending) -> dict[str, Any]:
        return {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
            "toolkernel.call.claims": pending.claims,
        }

    def _finish(self, pending: _Pending, event: CallFinished) -> None:
        result = event.result
        span = pending.span
        if span is None:  # it never ran: a span from its admission to now
            span = self._tracer.start_span(
                f"execute_tool {event.name}",
                context=pending.parent,
                kind=trace.SpanKind.INTERNAL,
                attributes=self._attributes(event.call_id, event.name, pending),
                start_time=pending.queued_ns,
            )
        elif trace.get_current_span() is span and pending.token is not None:
            # Still in the task it was made current in: put that task's context back.
            otel_context.detach(pending.token)  # type: ignore[arg-type]
        _describe(span, result, pending)
        span.end()


def _describe(span: trace.Span, result: ToolResult, pending: _Pending) -> None:
    span.set_attribute("toolkernel.call.status", result.status.value)
    span.set_attribute("toolkernel.call.wait_seconds", result.wait_time)
    if pending.blocked_behind:
        span.set_attribute("toolkernel.call.waited_behind", pending.blocked_behind)
    if not result.ok:
        span.set_attribute("error.type", result.error_type or result.status.value)
        span.set_status(trace.Status(trace.StatusCode.ERROR, result.error or result.status.value))

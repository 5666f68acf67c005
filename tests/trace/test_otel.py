"""OpenTelemetry spans: ``execute_tool {tool}`` with the GenAI attributes, parented to the span
current where the call was submitted, and parent of the spans its tool makes, whichever task
granted it; read back from the SDK's in-memory exporter."""

from __future__ import annotations

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import toolkernel as tk
from toolkernel.trace.otel import ToolCallSpans


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def make_tools(provider: TracerProvider) -> list[tk.Tool]:
    tracer = provider.get_tracer("the tools")

    @tk.tool(writes=["path"])
    async def edit(ctx: tk.ToolContext, path: str, seconds: float = 1.0, fail: bool = False) -> str:
        """Pretend to edit, inside a span of the tool's own."""
        with tracer.start_as_current_span(f"inner {ctx.call_id}"):
            await anyio.sleep(seconds)
        if fail:
            raise ValueError("no such text")
        return "edited"

    @tk.tool(writes=["path"])
    async def outer(ctx: tk.ToolContext, path: str) -> str:
        """Edits by way of another tool."""
        result = await ctx.call("edit", path=path, seconds=0.5)
        return result.status.value

    return [edit, outer]


def by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {
        span.name + " " + str(span.attributes.get("gen_ai.tool.call.id", "")): span
        for span in exporter.get_finished_spans()
    }  # type: ignore[union-attr]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_spans_carry_the_genai_attributes_and_nest_in_the_submitters_span(
    autojump_clock: object, exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    tracer = provider.get_tracer("the agent")
    async with tk.open_kernel(make_tools(provider)) as kernel:
        kernel.add_listener(ToolCallSpans(provider))
        with tracer.start_as_current_span("turn"):
            await kernel.run(
                [
                    tk.ToolCall("c1", "edit", {"path": "a"}),
                    tk.ToolCall("c2", "edit", {"path": "a", "fail": True}),
                    tk.ToolCall("c3", "nope", {}),
                ]
            )
    spans = by_name(exporter)
    turn, c1, c2, c3 = (
        spans["turn "],
        spans["execute_tool edit c1"],
        spans["execute_tool edit c2"],
        spans["execute_tool nope c3"],
    )
    assert c1.kind is SpanKind.INTERNAL
    assert dict(c1.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "edit",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "toolkernel.call.claims": ("exclusive a",),
        "toolkernel.call.status": "ok",
        "toolkernel.call.wait_seconds": 0.0,
    }
    assert c2.attributes is not None and c2.attributes["error.type"] == "ValueError"
    assert c2.attributes["toolkernel.call.waited_behind"] == ("c1",)
    assert c2.status.status_code is StatusCode.ERROR
    assert c3.attributes is not None and c3.attributes["error.type"] == "UnknownToolError"
    for call in (c1, c2, c3):
        assert parent_of(call) == turn.context.span_id
    assert parent_of(spans["inner c1 "]) == c1.context.span_id
    assert parent_of(spans["inner c2 "]) == c2.context.span_id


async def test_a_call_granted_by_another_tasks_call_keeps_its_own_parent(
    autojump_clock: object, exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    # b2 waits for a1's lease; a1's task releases it and so starts b2's task, in a1's
    # context. b2's span must still be a child of task B's span, and b2's tool's spans of b2's.
    tracer = provider.get_tracer("the agent")
    async with tk.open_kernel(make_tools(provider)) as kernel:
        kernel.add_listener(ToolCallSpans(provider))

        async def agent(name: str, call_id: str, delay: float) -> None:
            await anyio.sleep(delay)
            with tracer.start_as_current_span(name):
                await kernel.run(
                    [
                        tk.ToolCall(call_id, "edit", {"path": "shared.txt"}),
                        tk.ToolCall(f"{call_id}x", "edit", {"path": f"{name}.txt"}),
                    ]
                )

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(agent, "A", "a1", 0)
            tasks.start_soon(agent, "B", "b2", 0.5)
    spans = by_name(exporter)
    b2 = spans["execute_tool edit b2"]
    assert b2.start_time is not None
    assert parent_of(b2) == spans["B "].context.span_id
    assert parent_of(spans["execute_tool edit a1"]) == spans["A "].context.span_id
    assert parent_of(spans["inner b2 "]) == b2.context.span_id
    assert b2.attributes is not None and b2.attributes["toolkernel.call.waited_behind"] == ("a1",)


async def test_a_nested_calls_span_is_a_child_of_its_parent_calls(
    autojump_clock: object, exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    async with tk.open_kernel(make_tools(provider)) as kernel:
        kernel.add_listener(ToolCallSpans(provider))
        await kernel.run([tk.ToolCall("c1", "outer", {"path": "a"})])
    spans = by_name(exporter)
    outer, inner_call = spans["execute_tool outer c1"], spans["execute_tool edit c1.1"]
    assert outer.parent is None
    assert parent_of(inner_call) == outer.context.span_id
    assert parent_of(spans["inner c1.1 "]) == inner_call.context.span_id

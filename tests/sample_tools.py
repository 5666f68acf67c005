"""Small tools for the wire-format and agent tests, written on anyio only."""

from __future__ import annotations

import anyio

import toolkernel as tk

NOTES = tk.device("notes")


@tk.tool(claims=lambda args: [])
async def echo(ctx: tk.ToolContext, text: str, times: int = 1) -> str:
    """Say the text back.

    Args:
        text: What to say.
        times: How many times.
    """
    return text * times


@tk.tool(claims=lambda args: [])
async def fail(ctx: tk.ToolContext, why: str = "it broke") -> str:
    """Fail with a message for the model."""
    raise tk.ToolError(why)


@tk.tool(claims=lambda args: [tk.exclusive(NOTES)])
async def note(ctx: tk.ToolContext, text: str) -> str:
    """Write a note (one writer at a time)."""
    await anyio.lowlevel.checkpoint()
    return f"noted {text!r}"


@tk.tool(claims=lambda args: [])
async def forever(ctx: tk.ToolContext) -> str:
    """Run until cancelled."""
    await anyio.sleep_forever()
    return "never"


SAMPLE_TOOLS = [echo, fail, note, forever]

# What to watch: the few lines of glue between a provider's API and the kernel, for OpenAI Chat
# Completions, OpenAI Responses and Anthropic Messages, using toolkernel.formats.
#
# For each format: the tools as the request would send them (the tool named "notes.add", which
# no provider accepts, goes out as "notes_add" and comes back as "notes.add"), the model's answer
# as the API returns it, the calls the kernel runs, and the results as the next request sends
# them. The model's answers include what models get wrong: arguments that are not JSON, a tool
# that does not exist. Both come back as error results the model can read; nothing raises.
#
# Then the same tool in OpenAI's strict mode: every property required, optional ones nullable.
#
# The answers are plain dicts shaped exactly as the APIs return them; the official SDKs' objects
# work the same (pass `completion.choices[0].message`, `response.output` or the `Message`).
#
# Run: .venv/bin/python examples/provider_glue.py

from __future__ import annotations

import json
from typing import Any

import anyio

import toolkernel as tk
from toolkernel.formats import anthropic, openai


@tk.tool(name="notes.add", claims=lambda args: [tk.exclusive(tk.device("notes"))])
async def add_note(ctx: tk.ToolContext, text: str, pinned: bool = False) -> str:
    """Add a note.

    Args:
        text: The note.
        pinned: Keep it at the top.
    """
    return f"added {text!r}" + (" (pinned)" if pinned else "")


def show(title: str, value: Any) -> None:
    print(f"{title}:\n{json.dumps(value, indent=2)}\n")


CHAT_ANSWER = {  # completion.choices[0].message
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "notes_add", "arguments": '{"text": "milk"}'},
        },
        {
            "id": "call_2",
            "type": "function",
            "function": {"name": "notes_add", "arguments": '{"text": '},
        },
    ],
}
RESPONSES_OUTPUT = [  # response.output
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {
        "type": "function_call",
        "call_id": "call_3",
        "name": "notes_add",
        "arguments": '{"text": "eggs", "pinned": true}',
    },
]
ANTHROPIC_ANSWER = {  # the Message
    "role": "assistant",
    "content": [
        {"type": "text", "text": "Adding both."},
        {"type": "tool_use", "id": "toolu_1", "name": "notes_add", "input": {"text": "tea"}},
        {"type": "tool_use", "id": "toolu_2", "name": "notes_remove", "input": {"text": "tea"}},
    ],
}


async def main() -> None:
    async with tk.open_kernel(tools=[add_note]) as kernel:
        print("== OpenAI Chat Completions\n")
        show("tools=", openai.chat_tools(kernel.tools.values()))
        calls = openai.calls_from_chat(CHAT_ANSWER, tools=kernel.tools)
        print("calls:", calls, "\n")
        show("messages += [message, *...]", openai.chat_tool_messages(await kernel.run(calls)))

        print("== OpenAI Responses\n")
        calls = openai.calls_from_responses(RESPONSES_OUTPUT, tools=kernel.tools)
        print("calls:", calls, "\n")
        show("input += response.output + ...", openai.responses_outputs(await kernel.run(calls)))

        print("== Anthropic Messages\n")
        show("tools=", anthropic.tools(kernel.tools.values()))
        calls = anthropic.calls_from_message(ANTHROPIC_ANSWER, tools=kernel.tools)
        print("calls:", calls, "\n")
        show('{"role": "user", "content": ...}', anthropic.tool_results(await kernel.run(calls)))

        print("== OpenAI strict mode\n")
        show("tools=", openai.chat_tools(kernel.tools.values(), strict=True))


if __name__ == "__main__":
    anyio.run(main)  # asyncio; anyio.run(main, backend="trio") or trio.run(main) work the same

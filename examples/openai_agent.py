# What to watch: the agent loop driving a model over HTTP (Chat Completions) with the built-in
# coding tools, in a small temporary project.
#
# - Each step prints what the model said and the batch of calls it emitted, then each call as it
#   starts and ends. In the model's first batch, a Glob finds the helper module and a Read of
#   "$1" with "depends_on": [1] reads whatever the Glob found (the kernel runs it after the Glob
#   and puts the Glob's output in its place), while app.py is read at once. The second batch
#   edits both files at once and re-reads one after its edit; its TodoWrite call shows up as a
#   todo-list update. The system prompt's paragraph (toolkernel.agent.CALLS_PROMPT) tells a real
#   model how to write such batches.
# - The first request is answered "503 overloaded": the loop waits (backoff) and asks again.
# - At the end: the stop reason, the number of steps, and the edited files.
#
# Without arguments it talks to a stand-in server on 127.0.0.1 that this script starts (no
# network, nothing to install): it answers with a scripted conversation, exactly as a Chat
# Completions server would. Point it at a real one to watch a real model do the job, e.g. a local
# Ollama:
#
#   .venv/bin/python examples/openai_agent.py --base-url http://localhost:11434/v1 --model qwen3
#   OPENAI_API_KEY=... .venv/bin/python examples/openai_agent.py --model gpt-4.1 --base-url \
#       https://api.openai.com/v1
#
# It runs under asyncio; with --trio, under trio (the kernel and the agent loop run on both).
#
# Run: .venv/bin/python examples/openai_agent.py

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

import toolkernel as tk
from toolkernel.agent import (
    AgentEvent,
    ModelReplied,
    ModelRetrying,
    OpenAICompatibleModel,
    Retry,
    TodosUpdated,
    run_agent,
)
from toolkernel.tools import builtin_tools

TASK = "Rename the function greet() to welcome() everywhere in this project."

PROJECT = {
    "app.py": "from util import greet\n\nprint(greet('world'))\n",
    "util.py": "def greet(name):\n    return f'hello {name}'\n",
}


def show(event: AgentEvent) -> None:
    if isinstance(event, ModelReplied):
        print(f"\nstep {event.step}: {event.text or '(no text)'}")
        for call in event.calls:
            after = f"  after {', '.join(call.after)}" if call.after else ""
            print(f"  emits {call.id} {call.name} {json.dumps(call.arguments)[:60]}{after}")
    elif isinstance(event, ModelRetrying):
        print(f"  model error ({event.error}); retry {event.attempt} in {event.delay:.2f} s")
    elif isinstance(event, TodosUpdated):
        print(f"  todos: {[(t['content'], t['status']) for t in event.todos]}")
    elif isinstance(event, tk.kernel.CallStarted):
        print(f"  {event.call_id} started")
    elif isinstance(event, tk.kernel.CallFinished):
        print(f"  {event.call_id} {event.result.status.value}: {event.result.text()[:50]!r}")


async def main(base_url: str | None, model_name: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        for name, text in PROJECT.items():
            (root / name).write_text(text)
        async with (
            stand_in_server(base_url) as url,
            tk.open_kernel(tools=builtin_tools(), root=root) as kernel,
        ):
            model = OpenAICompatibleModel(base_url=url, model=model_name)
            async with model:
                outcome = await run_agent(
                    model, kernel, TASK, max_steps=10, retry=Retry(initial=0.2), on_event=show
                )
        print(f"\nstopped: {outcome.stop_reason} after {len(outcome.steps)} steps")
        if outcome.error is not None:  # model_error: why (a refused key, a server gone, ...)
            print(f"the model failed: {outcome.error}")
        for name in PROJECT:
            print(f"--- {name}\n{(root / name).read_text()}", end="")


# -- the stand-in server: a scripted model behind a real Chat Completions endpoint ---------------


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"id": call_id, "type": "function", "function": function}


SCRIPT: list[tuple[int, dict[str, Any]]] = [
    (503, {"error": {"message": "overloaded"}}),
    (
        200,
        {
            "role": "assistant",
            "content": "Let me find the helper module and read both files.",
            "tool_calls": [
                call("call_1", "Glob", pattern="util*.py"),
                call("call_2", "Read", file_path="$1", depends_on=[1]),
                call("call_3", "Read", file_path="app.py"),
            ],
        },
    ),
    (
        200,
        {
            "role": "assistant",
            "content": "Renaming in both files at once, then checking util.py.",
            "tool_calls": [
                call(
                    "call_4", "Edit", file_path="util.py", old_string="greet", new_string="welcome"
                ),
                call(
                    "call_5",
                    "Edit",
                    file_path="app.py",
                    old_string="greet",
                    new_string="welcome",
                    replace_all=True,
                ),
                call("call_6", "Read", file_path="util.py", depends_on=[1]),
                call("call_7", "TodoWrite", todos=[{"content": "rename", "status": "completed"}]),
            ],
        },
    ),
    (200, {"role": "assistant", "content": "Done: greet() is now welcome()."}),
]


@asynccontextmanager
async def stand_in_server(base_url: str | None) -> AsyncIterator[str]:
    """Yield ``base_url`` if given; else start the stand-in server and yield its URL."""
    if base_url is not None:
        yield base_url
        return
    script = list(SCRIPT)

    async def answer(stream: anyio.abc.ByteStream) -> None:
        async with stream:
            request = b""
            while b"\r\n\r\n" not in request:
                request += await stream.receive()
            head, _, body = request.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            while len(body) < length:
                body += await stream.receive()
            status, message = script.pop(0)
            reply = message if status != 200 else {"choices": [{"index": 0, "message": message}]}
            data = json.dumps(reply).encode()
            await stream.send(
                b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\n" % status
                + b"content-length: %d\r\nconnection: close\r\n\r\n" % len(data)
                + data
            )

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, answer)
        yield f"http://127.0.0.1:{port}/v1"
        group.cancel_scope.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base-url", help="a Chat Completions server (default: the stand-in)")
    parser.add_argument("--model", default="stand-in", help="the model's name on that server")
    parser.add_argument("--trio", action="store_true", help="run under trio, not asyncio")
    arguments = parser.parse_args()
    if arguments.trio:
        anyio.run(main, arguments.base_url, arguments.model, backend="trio")
    else:
        asyncio.run(main(arguments.base_url, arguments.model))

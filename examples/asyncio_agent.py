# What to watch: an asyncio application (the way most agents are written) running the tool calls
# of one model turn through the kernel, with the built-in file tools and its own asyncio tools.
#
# 1. The turn: two Reads and a Grep run together; the Edit of a.py waits for the Read of a.py that
#    came before it; the two `lookup` calls are the application's own asyncio tools (they await
#    asyncio.sleep and an asyncio.Queue) and share the two units of its "api" pool with a third,
#    which waits for a unit. Each line of the log says what started, waited or finished, and when.
# 2. asyncio's own cancellation reaches the kernel's calls: `asyncio.timeout(1.5)` around a second
#    turn cancels the call still running; its result is CANCELLED and its lease is back at once,
#    so the next call on the same file runs without waiting.
#
# It runs on asyncio's ordinary event loop, in real time (about 3 seconds); the kernel needs no
# trio here. The same code runs under trio if its tools await trio (or anyio) instead.
#
# Run: .venv/bin/python examples/asyncio_agent.py

from __future__ import annotations

import asyncio
import pathlib
import tempfile

import toolkernel as tk
from toolkernel.tools import builtin_tools

API = tk.pool("api")


@tk.tool(claims=lambda args: [tk.units(API, 1)])
async def lookup(ctx: tk.ToolContext, symbol: str, seconds: float = 1.0) -> str:
    """Look a symbol up in the project's documentation service (holds one unit of the api pool)."""
    replies: asyncio.Queue[str] = asyncio.Queue()
    asyncio.get_running_loop().call_later(seconds, replies.put_nowait, f"{symbol}: documented")
    return await replies.get()


async def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = pathlib.Path(scratch)
        (root / "a.py").write_text("def area(r):\n    return 3.14 * r * r\n")
        (root / "b.py").write_text("from a import area\nprint(area(2))\n")
        loop = asyncio.get_running_loop()
        began = loop.time()

        def show(event: tk.CallEvent) -> None:
            at = f"{loop.time() - began:4.1f}s"
            if isinstance(event, tk.kernel.CallStarted):
                print(f"{at}  start   {event.call_id} ({event.name})")
            elif isinstance(event, tk.kernel.CallBlocked):
                behind = ", ".join(event.waits_for) or ", ".join(event.resources)
                print(f"{at}  waits   {event.call_id} behind {behind}")
            elif isinstance(event, tk.kernel.CallFinished):
                text = event.result.text().splitlines()[0] if event.result.text() else ""
                print(f"{at}  {event.result.status.value:<7} {event.call_id}: {text[:60]}")

        tools = [*builtin_tools(), lookup]
        async with tk.open_kernel(tools, root=root, pools={"api": 2}) as kernel:
            kernel.add_listener(show)
            print("-- a model turn")
            results = await kernel.run(
                [
                    tk.ToolCall("r1", "Read", {"file_path": "a.py"}),
                    tk.ToolCall("r2", "Read", {"file_path": "b.py"}),
                    tk.ToolCall("g1", "Grep", {"pattern": "area", "output_mode": "content"}),
                    tk.ToolCall(
                        "e1",
                        "Edit",
                        {"file_path": "a.py", "old_string": "3.14", "new_string": "math.pi"},
                    ),
                    tk.ToolCall("l1", "lookup", {"symbol": "area"}),
                    tk.ToolCall("l2", "lookup", {"symbol": "math.pi"}),
                    tk.ToolCall("l3", "lookup", {"symbol": "print", "seconds": 0.5}),
                ]
            )
            assert all(result.ok for result in results), results

            print("-- a turn cut short by asyncio.timeout(1.5)")
            try:
                async with asyncio.timeout(1.5):
                    await kernel.run([tk.ToolCall("slow", "lookup", {"symbol": "x", "seconds": 9})])
            except TimeoutError:
                print(f"{loop.time() - began:4.1f}s  the turn timed out; its call was cancelled")
            (after,) = await kernel.run(
                [tk.ToolCall("again", "lookup", {"symbol": "y", "seconds": 0.2})]
            )
            assert after.ok and kernel.lease_statistics().held == 0
        print((root / "a.py").read_text().splitlines()[1].strip())


if __name__ == "__main__":
    asyncio.run(main())

# What to watch: a trio application using the kernel as a library, and how every call ends.
#
# 1. kernel.run(batch) returns one result per call, in call order: two downloads share the two
#    units of the "network" pool, the third waits for a unit; the save runs beside them.
# 2. kernel.submit(call) returns a handle at once, and the calls run while the application goes
#    on. Then, each ending in its own status (and none of them disturbing the others):
#    - "c" is queued for a network unit and is cancelled with handle.cancel()  -> CANCELLED
#    - "slow" runs longer than its run_timeout of 2 s                           -> TIMEOUT
#    - "w2" waits behind "w1" (both write log.txt) longer than its wait_timeout -> TIMEOUT
#    - "w1" is cancelled by id with kernel.cancel("w1") while it runs           -> CANCELLED
#    - "a" and "b" finish                                                       -> OK
#    The table gives each call's status, seconds waited for leases, seconds run, and its output
#    or the error message written for the model.
# 3. Leaving `async with open_kernel(...)` cancels what still runs ("late"), and the call still
#    gets its result.
#
# Durations are on trio's MockClock, so the seconds are virtual and the run takes a moment;
# drop `clock=` at the bottom to watch it in real time (about 9 seconds).
#
# Run: .venv/bin/python examples/trio_app.py

from __future__ import annotations

import trio
import trio.testing

import toolkernel as tk

NETWORK = tk.pool("network")


@tk.tool(claims=lambda args: [tk.units(NETWORK, 1)])
async def fetch(ctx: tk.ToolContext, url: str, seconds: float) -> str:
    """Download a page (holds one unit of the network pool)."""
    await trio.sleep(seconds)
    return f"{len(url) * 100} bytes from {url}"


@tk.tool(writes=["file_path"])
async def save(ctx: tk.ToolContext, file_path: str, text: str, seconds: float) -> str:
    """Write text to a file (an exclusive lease on it)."""
    await trio.sleep(seconds)
    return f"wrote {len(text)} characters to {file_path}"


def show(results: list[tk.ToolResult]) -> None:
    print(f"  {'call':<6}{'status':<11}{'waited':>7}{'ran':>6}  output or error")
    for r in results:
        text = r.output if r.ok else r.error
        print(f"  {r.call_id:<6}{r.status.name:<11}{r.wait_time:>6g}s{r.run_time:>5g}s  {text}")


async def main() -> None:
    clock_start = trio.current_time()
    async with tk.open_kernel(tools=[fetch, save], pools={"network": 2}) as kernel:
        print("1. kernel.run(batch): one result per call, in call order")
        results = await kernel.run(
            [
                tk.ToolCall("d1", "fetch", {"url": "https://a.example", "seconds": 2}),
                tk.ToolCall("d2", "fetch", {"url": "https://b.example", "seconds": 3}),
                tk.ToolCall("d3", "fetch", {"url": "https://c.example", "seconds": 1}),
                tk.ToolCall("s1", "save", {"file_path": "notes.md", "text": "hi", "seconds": 1}),
            ]
        )
        show(results)

        print()
        print("2. kernel.submit(call): handles, cancellation and timeouts")
        a = kernel.submit(tk.ToolCall("a", "fetch", {"url": "https://a.example", "seconds": 5}))
        b = kernel.submit(tk.ToolCall("b", "fetch", {"url": "https://b.example", "seconds": 5}))
        c = kernel.submit(tk.ToolCall("c", "fetch", {"url": "https://c.example", "seconds": 1}))
        slow = kernel.submit(
            tk.ToolCall(
                "slow",
                "save",
                {"file_path": "big.txt", "text": "x" * 1000, "seconds": 30},
                run_timeout=2,
            )
        )
        w1 = kernel.submit(
            tk.ToolCall("w1", "save", {"file_path": "log.txt", "text": "one", "seconds": 10})
        )
        w2 = kernel.submit(
            tk.ToolCall(
                "w2",
                "save",
                {"file_path": "log.txt", "text": "two", "seconds": 1},
                wait_timeout=3,
            )
        )
        await trio.sleep(1)
        snapshot = kernel.snapshot()
        running = ", ".join(info.call_id for info in snapshot.running)
        queued = ", ".join(f"{i.call_id} behind {'/'.join(i.waits_for)}" for i in snapshot.queued)
        print(f"  after 1 s: running {running}; queued {queued}")
        c.cancel()  # synchronous: "c" leaves the queue at once
        await trio.sleep(3)
        kernel.cancel("w1")  # by id; its lease on log.txt returns
        handles = [a, b, c, slow, w1, w2]
        show([await handle.wait_finished() for handle in handles])

        late = kernel.submit(
            tk.ToolCall("late", "save", {"file_path": "late.txt", "text": "z", "seconds": 60})
        )
        await trio.sleep(1)
        print()
        print("3. leaving the kernel's block while 'late' still runs")
    show([late.result])
    print()
    stats = kernel.statistics()
    print(
        f"{stats.finished} calls finished in {trio.current_time() - clock_start:g} s "
        f"(virtual); none left pending ({stats.pending}), queued ({stats.queued}) "
        f"or running ({stats.running})"
    )
    assert [h.result.status for h in handles] == [
        tk.Status.OK,
        tk.Status.OK,
        tk.Status.CANCELLED,
        tk.Status.TIMEOUT,
        tk.Status.CANCELLED,
        tk.Status.TIMEOUT,
    ]
    assert late.result.status is tk.Status.CANCELLED


if __name__ == "__main__":
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

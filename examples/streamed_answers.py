# What to watch: the agent loop starting each tool call the moment its block is complete in the
# model's streamed answer, against waiting for the whole answer.
#
# The scripted model writes three edits over 4 seconds: c1 (a.py, 5 s of work) is complete 1 s
# into the answer, c2 (b.py) at 3 s, c3 (a.py again) at 4 s, when the answer ends. Waiting for
# the whole answer, every call starts at 4 s and the turn takes 10 s. Streamed, c1 starts at 1 s
# and c2 at 3 s; c3 still waits for c1, the earlier edit of its file, as the model emitted them:
# the turn takes 7 s. Each line of the log is a call starting or finishing, at its time.
#
# It runs on trio's mock clock, so the seconds pass at once and every time is exact. With a real
# model: run_agent(OpenAICompatibleModel(...), kernel, prompt, stream=True).
#
# Run: .venv/bin/python examples/streamed_answers.py

import trio
import trio.testing

import toolkernel as tk
from toolkernel.agent import ScriptedModel, Turn, run_agent


@tk.tool(claims=lambda args: [tk.writes(args["path"])])
async def slow_edit(ctx: tk.ToolContext, path: str, seconds: float) -> str:
    """Edit a file, taking its time."""
    await trio.sleep(seconds)
    return f"edited {path}"


ANSWER = Turn(
    "Editing a.py and b.py.",
    [
        tk.ToolCall("c1", "slow_edit", {"path": "a.py", "seconds": 5}),
        tk.ToolCall("c2", "slow_edit", {"path": "b.py", "seconds": 1}),
        tk.ToolCall("c3", "slow_edit", {"path": "a.py", "seconds": 1}),
    ],
    emitted=(1, 3, 4),  # when each call's block is complete, in seconds into the answer
)


async def main() -> None:
    async with tk.open_kernel(tools=[slow_edit]) as kernel:
        for stream in (False, True):
            print("streamed:" if stream else "waiting for the whole answer:")
            start = trio.current_time()

            def log(event: object, start: float = start) -> None:
                if isinstance(event, tk.kernel.CallStarted | tk.kernel.CallFinished):
                    what = "starts" if isinstance(event, tk.kernel.CallStarted) else "finishes"
                    print(f"  {trio.current_time() - start:4g} s  {event.call_id} {what}")

            await run_agent(
                ScriptedModel([ANSWER]), kernel, "go", stream=stream, max_steps=1, on_event=log
            )
            print(f"  the turn took {trio.current_time() - start:g} s")


trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

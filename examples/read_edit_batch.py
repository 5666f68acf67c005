# What to watch: one batch of reads and edits, as a model would emit it, and when each call ran.
#
# Reads of different files run together. The edit of src/app.py waits for the earlier read of
# that file (emission order is kept between conflicting calls), and the later read of
# ./src/app.py - another spelling of the same key - waits for the edit, so it sees the new text.
# The Grep over src/ holds a shared lease on the whole subtree: it waits for the edit inside it,
# runs together with the other readers, and the last edit (of src/util.py, inside src/) waits for
# it. The edit of docs/guide.md touches nothing else and starts at once.
#
# The timeline shows one row per call and one column per second: '.' while the call waited for
# its leases, '#' while it ran. Below it: the makespan against running the calls one by one and
# against the coarse read/write split (consecutive reads together, every edit alone).
#
# The tools are fakes over an in-memory file dict that sleep on trio's MockClock, so the seconds
# are virtual and the whole run takes a fraction of a second.
#
# Run: .venv/bin/python examples/read_edit_batch.py

from __future__ import annotations

import trio
import trio.testing

import toolkernel as tk

FILES = {
    "src/app.py": "print('hello')\n",
    "src/util.py": "def helper():\n    return 1\n",
    "docs/guide.md": "# Guide\n",
}
SECONDS: dict[str, float] = {}  # call id -> how long the fake tool takes


def key(file_path: str) -> str:
    return str(tk.path(file_path))  # "./src//app.py" -> "src/app.py"


@tk.tool(reads=["file_path"])
async def Read(ctx: tk.ToolContext, file_path: str) -> str:
    """Read a file."""
    await trio.sleep(SECONDS[ctx.call_id])
    return FILES[key(file_path)]


@tk.tool(writes=["file_path"])
async def Edit(ctx: tk.ToolContext, file_path: str, old_string: str, new_string: str) -> str:
    """Replace the one occurrence of old_string in a file."""
    await trio.sleep(SECONDS[ctx.call_id])
    text = FILES[key(file_path)]
    if text.count(old_string) != 1:
        raise tk.ToolError(f"{old_string!r} does not occur exactly once in {file_path}")
    FILES[key(file_path)] = text.replace(old_string, new_string)
    return f"edited {file_path}"


@tk.tool(reads=["path"])
async def Grep(ctx: tk.ToolContext, pattern: str, path: str = ".") -> list[str]:
    """Files under path whose text contains pattern."""
    await trio.sleep(SECONDS[ctx.call_id])
    under = tk.path(path)
    return sorted(
        name
        for name, text in FILES.items()
        if tk.path(name).is_relative_to(under) and pattern in text
    )


# (call id, tool, arguments, seconds), in the order the model emitted them.
BATCH = [
    ("c1", "Read", {"file_path": "src/app.py"}, 3),
    ("c2", "Read", {"file_path": "src/util.py"}, 2),
    ("c3", "Edit", {"file_path": "src/app.py", "old_string": "hello", "new_string": "hi"}, 2),
    ("c4", "Read", {"file_path": "./src/app.py"}, 1),
    ("c5", "Edit", {"file_path": "docs/guide.md", "old_string": "Guide", "new_string": "Tour"}, 4),
    ("c6", "Grep", {"pattern": "hi", "path": "src"}, 2),
    ("c7", "Edit", {"file_path": "src/util.py", "old_string": "1", "new_string": "2"}, 1),
]
READ_ONLY = {"Read", "Grep"}


def coarse_makespan() -> float:
    """Consecutive read-only calls together, every other call alone, in order."""
    total, group = 0.0, 0.0
    for _, tool, _, seconds in BATCH:
        if tool in READ_ONLY:
            group = max(group, seconds)
        else:
            total, group = total + group + seconds, 0.0
    return total + group


async def main() -> None:
    SECONDS.update((call_id, seconds) for call_id, _, _, seconds in BATCH)
    blocked: dict[str, tk.kernel.CallBlocked] = {}

    async with tk.open_kernel(tools=[Read, Edit, Grep]) as kernel:

        def note_blocked(event: tk.CallEvent) -> None:
            if isinstance(event, tk.kernel.CallBlocked):
                blocked.setdefault(event.call_id, event)

        kernel.add_listener(note_blocked)
        begin = trio.current_time()
        calls = [tk.ToolCall(call_id, tool, args) for call_id, tool, args, _ in BATCH]
        results = await kernel.run(calls)

    makespan = max(r.finished_at for r in results) - begin
    width = round(makespan)
    print(f"{'':<31}" + "".join(str(t % 10) for t in range(width)) + "  (seconds)")
    for (call_id, tool, args, _), result in zip(BATCH, results, strict=True):
        assert result.ok and result.started_at is not None, result
        start = round(result.started_at - begin)
        end = round(result.finished_at - begin)
        bar = "." * start + "#" * (end - start)
        target = args.get("file_path") or args.get("path")
        waited = blocked.get(call_id)
        why = ""
        if waited is not None:
            why = f"  waited behind {', '.join(waited.waits_for)} on {', '.join(waited.resources)}"
        print(f"{call_id} {tool:<5} {target:<20}  {bar:<{width}}{why}")
    print()
    serial = sum(seconds for *_, seconds in BATCH)
    print(
        f"makespan {makespan:g} s; one by one {serial:g} s; "
        f"coarse read/write {coarse_makespan():g} s"
    )
    print(f"c4 read the edited file: {results[3].output!r}")
    print(f"c6 found 'hi' in: {results[5].output}")
    assert results[3].output == "print('hi')\n"  # the read after the edit saw the edit


if __name__ == "__main__":
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

# What to watch: a property test catching a tool that declares a shared lease but writes.
#
# `append_line` adds a line to a file. It declares `reads=["path"]` (a shared lease: "I only
# read it") and then writes the file itself, with plain pathlib, behind ctx.fs (which would have
# refused the write). The kernel trusts the declaration and runs two appends to one file side by
# side: each reads the old text, and the second write loses the first one's line.
#
# Hypothesis draws batches of calls (`toolkernel.testing.strategies.batches`) over the tool and
# a FakeTool reader, with paths spelled many ways (`./notes.txt`, `x/../notes.txt`, ...).
# `assert_serializable` runs each batch through the kernel and one call at a time, on fresh
# copies of a workspace, and raises with a diff when the files or the results differ. Hypothesis
# shrinks the failing batch to two calls, and the diff says what went wrong. Declared with
# `writes=["path"]` and written through ctx.fs, the same tool passes.
#
# Everything runs on virtual time: the 0.2 s each call "takes" costs nothing.
#
# Run: .venv/bin/python examples/property_test_your_tools.py
# In your own tests, put the property in a test function (pytest runs it) and drop the
# try/except around it.

from __future__ import annotations

import pathlib
import tempfile

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolkernel as tk
from toolkernel.testing import CallBatch, FakeTool, assert_serializable
from toolkernel.testing.strategies import batches, fake_tool_arguments, workspace_paths

FILES = ["notes.txt", "log/today.txt"]


@tk.tool(reads=["path"])  # the bug: it writes, but declares a read
async def append_line(ctx: tk.ToolContext, path: str, line: str) -> str:
    """Append a line to a text file."""
    file = ctx.fs.workspace.root / path  # behind ctx.fs
    text = file.read_text()
    await anyio.sleep(0.2)  # formatting, say: any await lets another call in
    file.write_text(text + line + "\n")
    return f"{path} has {len((text + line).splitlines())} lines"


@tk.tool(writes=["path"])  # the fix: declare the write, and write through ctx.fs
async def append_line_fixed(ctx: tk.ToolContext, path: str, line: str) -> str:
    """Append a line to a text file."""
    text = await ctx.fs.read_text(path)
    await anyio.sleep(0.2)
    await ctx.fs.write_text(path, text + line + "\n")
    return f"{path} has {len((text + line).splitlines())} lines"


def make_root() -> tempfile.TemporaryDirectory[str]:
    """A fresh workspace with the files in it; cleaned up after each run."""
    directory = tempfile.TemporaryDirectory(prefix="property-test-")
    for name in FILES:
        file = pathlib.Path(directory.name) / name
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text("first\n")
    return directory


reader = FakeTool("read", reads=True)


def batches_over(tool_name: str) -> st.SearchStrategy[CallBatch]:
    return batches(
        {
            tool_name: st.fixed_dictionaries(
                {"path": workspace_paths(FILES), "line": st.sampled_from(["a", "b"])}
            ),
            "read": fake_tool_arguments(reader, paths=workspace_paths(FILES)),
        },
        max_calls=6,
    )


def check(tool: tk.Tool) -> list[tk.ToolCall] | None:
    """Run the property; return the shrunk failing batch, or None if it held."""
    tried: list[list[tk.ToolCall]] = []

    @settings(max_examples=100, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(batches_over(tool.name))
    def test_race_free(batch: CallBatch) -> None:
        tried.append(list(batch.calls))
        assert_serializable([tool, reader], batch.calls, make_root)

    try:
        test_race_free()
    except AssertionError as failure:
        print(failure)
        return tried[-1]  # hypothesis runs the shrunk example last
    return None


def main() -> None:
    print(f"== {append_line.name}: declares a read of `path`, writes it behind ctx.fs")
    smallest = check(append_line)
    assert smallest is not None, "the property should have failed"
    print(f"\nhypothesis shrank the failure to {len(smallest)} calls:")
    for call in smallest:
        print(f"  {call.id} {call.name} {dict(call.arguments)}")  # type: ignore[arg-type]
    assert len(smallest) == 2
    print(f"\n== {append_line_fixed.name}: declares the write, writes through ctx.fs")
    assert check(append_line_fixed) is None
    print("the property holds: through the kernel, every batch ends as it does one by one")


if __name__ == "__main__":
    main()

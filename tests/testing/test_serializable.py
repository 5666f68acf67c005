"""``assert_serializable`` catches a tool that declares a shared lease but writes, and hypothesis
shrinks the failure to the smallest batch that shows it: two calls."""

from __future__ import annotations

import pathlib
import tempfile

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolkernel as tk
from toolkernel.testing import (
    FakeTool,
    assert_serializable,
    check_serializable,
    hold_virtual_time_for_threads,
)
from toolkernel.testing.strategies import batches, fake_tool_arguments, workspace_paths

FILES = ["counter.txt", "notes/total.txt"]


@tk.tool(reads=["path"])
async def bump(ctx: tk.ToolContext, path: str) -> str:
    """Add one to the number in a file (declared as a read: the bug)."""
    file = ctx.fs.workspace.root / path  # behind ctx.fs, which would refuse the write
    number = int(file.read_text())
    await anyio.sleep(0.5)  # say, formatting the new value
    file.write_text(str(number + 1))
    return f"{path} is now {number + 1}"


@tk.tool(writes=["path"])
async def bump_declared(ctx: tk.ToolContext, path: str) -> str:
    """The same, declared as a write, through ctx.fs."""
    number = int(await ctx.fs.read_text(path))
    await anyio.sleep(0.5)
    await ctx.fs.write_text(path, str(number + 1))
    return f"{path} is now {number + 1}"


def seeded_root() -> tempfile.TemporaryDirectory[str]:
    directory = tempfile.TemporaryDirectory(prefix="toolkernel-test-")
    root = pathlib.Path(directory.name)
    for name in FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("0")
    return directory


read = FakeTool("read", reads=True)


def files_of(call: tk.ToolCall) -> set[str]:
    """The files a bump or read call names, however spelled (``./a``, ``x/../a``)."""
    arguments = dict(call.arguments)  # type: ignore[arg-type]
    spelled = [arguments["path"]] if "path" in arguments else arguments["paths"]
    return {str(tk.path(p)) for p in spelled}


bump_arguments = st.fixed_dictionaries({"path": workspace_paths(FILES)})


def test_the_kit_catches_a_tool_that_declares_a_read_but_writes_and_shrinks_to_two_calls() -> None:
    tools = [bump, read]
    tried: list[list[tk.ToolCall]] = []

    @settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], database=None)
    @given(
        batches(
            {
                "read": fake_tool_arguments(read, paths=workspace_paths(FILES)),
                "bump": bump_arguments,
            },
            max_calls=6,
        )
    )
    def property_(batch: object) -> None:
        calls = list(batch.calls)  # type: ignore[attr-defined]
        tried.append(calls)
        assert_serializable(tools, calls, seeded_root)

    with pytest.raises(AssertionError) as caught:
        property_()
    smallest = tried[-1]  # hypothesis runs the shrunk example last
    # Two calls, one of them a bump: two bumps lose an update, and a read beside a bump
    # sees the number before it (the kernel let them overlap: both hold shared leases).
    assert len(smallest) == 2
    assert smallest[0].name == "bump"
    assert len({file for call in smallest for file in files_of(call)}) == 1
    message = str(caught.value)
    assert message.startswith("run through the kernel, the calls did not end as they do")
    assert "calls that ended differently:" in message


def test_the_same_tool_declared_as_a_write_passes() -> None:
    calls = [tk.ToolCall(f"c{i}", "bump_declared", {"path": "counter.txt"}) for i in range(3)]
    calls.append(tk.ToolCall("c4", "read", {"paths": ["counter.txt"]}))
    assert_serializable([bump_declared, read], calls, seeded_root)


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_the_report_names_each_difference_readably(backend: str) -> None:
    calls = [
        tk.ToolCall("c1", "bump", {"path": "counter.txt"}),
        tk.ToolCall("c2", "bump", {"path": "./counter.txt"}),
    ]
    with pytest.raises(AssertionError) as caught:
        assert_serializable([bump], calls, seeded_root, backend=backend)  # type: ignore[arg-type]
    assert str(caught.value).splitlines() == [
        "run through the kernel, the calls did not end as they do one at a time:",
        "  batch 1: c1 bump {'path': 'counter.txt'}; c2 bump {'path': './counter.txt'}",
        "calls that ended differently:",
        "  c2 (bump {'path': './counter.txt'}):",
        "    through the kernel: OK './counter.txt is now 1'",
        "    one by one:         OK './counter.txt is now 2'",
        "the final trees differ:",
        "  counter.txt:",
        "    --- one by one",
        "    +++ through the kernel",
        "    @@ -1 +1 @@",
        "    -2",
        "    +1",
    ]


@given(
    batches(
        [FakeTool("read", reads=True), FakeTool("edit", writes=True), FakeTool("sync")],
        paths=workspace_paths(FILES),
        max_calls=6,
    )
)
@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=25)
def test_fake_tools_through_the_kernel_end_as_one_by_one(batch: object) -> None:
    tools = [FakeTool("read", reads=True), FakeTool("edit", writes=True), FakeTool("sync")]
    assert_serializable(tools, batch.calls, seeded_root)  # type: ignore[attr-defined]


def test_batches_run_one_after_the_other_and_tools_can_be_made_fresh(
    tmp_path: pathlib.Path,
) -> None:
    made: list[pathlib.Path] = []

    def make_root() -> pathlib.Path:
        root = tmp_path / f"root{len(made)}"
        root.mkdir()
        (root / "counter.txt").write_text("0")
        made.append(root)
        return root

    def tools() -> list[tk.Tool]:
        return [bump_declared, tk.tools.builtin_tools()[-1]]  # a fresh TodoWrite each run

    first = [tk.ToolCall("c1", "bump_declared", {"path": "counter.txt"})]
    second = [
        tk.ToolCall("c2", "bump_declared", {"path": "counter.txt"}),
        tk.ToolCall("c3", "TodoWrite", {"todos": [{"content": "x", "status": "pending"}]}),
    ]
    assert_serializable(tools, [first, second], make_root)
    assert [(root / "counter.txt").read_text() for root in made] == ["2", "2"]


async def test_check_serializable_runs_on_the_test_loop_and_returns_the_differences(
    autojump_clock: object,
) -> None:
    await hold_virtual_time_for_threads()
    calls = [
        tk.ToolCall("c1", "bump", {"path": "counter.txt"}),
        tk.ToolCall("c2", "bump", {"path": "counter.txt"}),
    ]
    started = anyio.current_time()
    lines = await check_serializable([bump], calls, seeded_root)
    assert "calls that ended differently:" in lines
    assert anyio.current_time() - started == 1.5  # 0.5 s together, then 2 x 0.5 s one by one
    assert await check_serializable([bump_declared], calls[:1], seeded_root) == []


async def test_assert_serializable_in_an_async_test_says_to_await_check_serializable() -> None:
    calls = [tk.ToolCall("c1", "bump_declared", {"path": "counter.txt"})]
    with pytest.raises(RuntimeError, match=r"await check_serializable\(\.\.\.\)"):
        assert_serializable([bump_declared], calls, seeded_root)


def test_results_naming_their_workspace_directory_read_alike_in_both_runs() -> None:
    # Each run has its own temporary root, and a tool's error names the file it missed there.
    @tk.tool(reads=["path"])
    async def peek(ctx: tk.ToolContext, path: str) -> str:
        """Read a file behind ctx.fs, as some tools do."""
        return (ctx.fs.workspace.root / path).read_text()

    assert_serializable(
        [peek], [tk.ToolCall("c1", "peek", {"path": "missing/../nowhere.txt"})], seeded_root
    )

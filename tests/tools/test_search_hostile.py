"""Search tools given hostile patterns and globs: compiling stays off the event loop, and a glob
spelled with ``./`` matches what it says.

A Grep pattern compiled on the event loop froze the whole kernel while it compiled: a
30,000-word alternation took 6-9 s (each alternative compiled once more on its own), during
which an unrelated 0.1 s call took as long and the Grep overran its own 0.2 s run timeout. Globs
too can take a second to compile (a 999-way brace). These tests use the real clock with short
durations: the compiling happens in worker threads.
"""

from __future__ import annotations

import itertools
import pathlib
import time
from collections.abc import Callable
from typing import Any

import anyio
import hypothesis
import pytest
import regex
from hypothesis import strategies as st

import toolkernel as tk
from toolkernel.tools import _search, builtin_tools
from toolkernel.tools._line_match import LinePattern

_runs = itertools.count()


def unique() -> str:
    """A token no earlier pattern held, so no compiled-pattern cache answers for this one."""
    return f"q{time.monotonic_ns()}n{next(_runs)}"


@tk.tool(claims=lambda arguments: [])
async def nap(ctx: tk.ToolContext) -> str:
    """Sleep 0.1 s (an unrelated call in flight)."""
    await anyio.sleep(0.1)
    return "slept"


async def cpu_seconds_over(seconds: float) -> float:
    """The process's CPU time spent while this (idle) test sleeps ``seconds``."""
    before = time.process_time()
    await anyio.sleep(seconds)
    return time.process_time() - before


async def run_beside_a_nap(
    root: pathlib.Path, tool: str, arguments: dict[str, Any]
) -> tuple[tk.ToolResult, float, float]:
    """Run a 0.1 s call, then the search with a 0.2 s run timeout beside it: the search's
    result, how long the nap ran and how long the search ran."""
    async with tk.open_kernel([*builtin_tools(), nap], root=root) as kernel:
        napping = kernel.submit(tk.ToolCall("n", "nap", {}))
        await anyio.sleep(0.01)
        searching = kernel.submit(tk.ToolCall("s", tool, arguments, run_timeout=0.2))
        napped, searched = await napping.wait_finished(), await searching.wait_finished()
    assert napped.status is tk.Status.OK, napped.error
    assert napped.started_at is not None and searched.started_at is not None
    return (
        searched,
        napped.finished_at - napped.started_at,
        searched.finished_at - searched.started_at,
    )


async def quiet_within(seconds: float) -> bool:
    """Whether the process goes idle (a 0.3 s window with under 0.15 s of CPU) within
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await cpu_seconds_over(0.3) < 0.15:
            return True
    return False


@pytest.fixture
def root(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "a.txt").write_text("hello\n")
    return tmp_path


# -- compiling off the event loop --------------------------------------------------------------


async def test_a_huge_alternation_neither_stalls_other_calls_nor_overruns_its_timeout(
    root: pathlib.Path,
) -> None:
    # 6-9 s to compile on the loop before; now in the search's thread, an alternative at a time.
    pattern = "|".join(f"w{i}x{unique()}" for i in range(30_000))
    grep, napped, searched = await run_beside_a_nap(root, "Grep", {"pattern": pattern})
    assert grep.status is tk.Status.TIMEOUT, grep.error or grep.output
    assert napped < 1.0, f"the unrelated 0.1 s call took {napped:.2f} s"
    assert searched < 1.0, f"the Grep overran its 0.2 s timeout: {searched:.2f} s"
    # The thread stops compiling soon after its call ended: it parses the pattern before it
    # checks between alternatives, and a loaded machine schedules it late. Compiling every
    # alternative would burn a core for 6-9 s.
    assert await quiet_within(3.0)


SLOW = 2.0
"""Seconds a compile marked slow takes: one call into the engine or wcmatch cannot be
interrupted, so the tests below make it slow by sleeping, not by burning a core for seconds
after each test (a 999-way brace, ``(?:a{1000}){1000}`` or a grouped 15,000-word alternation
each take about a second of CPU)."""


def slowed(function: Callable[..., Any], token: str) -> Callable[..., Any]:
    """``function``, taking :data:`SLOW` seconds more for a first argument holding ``token``."""

    def slow(pattern: str, *args: Any, **kwargs: Any) -> Any:
        if token in pattern:
            time.sleep(SLOW)
        return function(pattern, *args, **kwargs)

    return slow


SLOW_COMPILES = {
    "Grep pattern": ("Grep", "regex", lambda token: {"pattern": f"(?:{token}|b)"}),
    "Grep glob": ("Grep", "glob", lambda token: {"pattern": "hello", "glob": f"**/{token}*"}),
    "Glob pattern": ("Glob", "glob", lambda token: {"pattern": f"src/{{{token},b}}/*.py"}),
}


@pytest.mark.parametrize("case", SLOW_COMPILES)
async def test_a_slow_compile_neither_stalls_other_calls_nor_overruns_its_timeout(
    root: pathlib.Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    tool, compiler, arguments = SLOW_COMPILES[case]
    token = unique()
    if compiler == "regex":
        monkeypatch.setattr(regex, "compile", slowed(regex.compile, token))
    else:
        monkeypatch.setattr(_search, "_translate", slowed(_search._translate, token))
    result, napped, searched = await run_beside_a_nap(root, tool, arguments(token))
    assert result.status is tk.Status.TIMEOUT, result.error or result.output
    assert napped < 1.0, f"the unrelated 0.1 s call took {napped:.2f} s"
    assert searched < 1.0, f"the {tool} overran its 0.2 s timeout: {searched:.2f} s"


def test_an_alternation_is_compiled_once_an_alternative_and_nothing_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compiled: list[str] = []
    compile = regex.compile

    def counted(pattern: str, *args: Any, **kwargs: Any) -> Any:
        compiled.append(pattern)
        return compile(pattern, *args, **kwargs)

    monkeypatch.setattr(regex, "compile", counted)
    pattern = LinePattern.compile("ab|cd|ef", ignore_case=False, multiline=False)
    assert compiled == ["ab", "cd", "ef"]  # the whole only if a text needs it line by line
    assert pattern.lines("x\r\ncd\r\n", lambda: 1.0) == [1]
    assert compiled == ["ab", "cd", "ef", "ab|cd|ef"]
    compiled.clear()
    LinePattern.compile("abc", ignore_case=False, multiline=False)
    assert compiled == ["abc"]  # without "^" or "$", MULTILINE changes nothing
    compiled.clear()
    LinePattern.compile("^abc", ignore_case=False, multiline=False)
    assert len(compiled) == 2


def test_compiling_an_alternation_stops_between_two_alternatives() -> None:
    calls = itertools.count()

    def check() -> None:
        if next(calls) == 3:
            raise tk.errors.CallEndedError("the call ended")  # what Subtree.check raises

    with pytest.raises(tk.errors.CallEndedError):
        LinePattern.compile("a|b|c|d|e", ignore_case=False, multiline=False, check=check)
    assert next(calls) == 4


# -- "./" in globs -------------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> pathlib.Path:
    for path in ("src/sub/a.py", "src/b.py", "c.py", "src/sub/d.txt"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("needle\n")
    return tmp_path


async def outputs(tree: pathlib.Path, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    async with tk.open_kernel(builtin_tools(), root=tree) as kernel:
        results = await kernel.run(
            [tk.ToolCall(str(n), tool, arguments) for n, (tool, arguments) in enumerate(calls)]
        )
    for result in results:
        assert result.status is tk.Status.OK, result.error
    return [str(result.output) for result in results]


@pytest.mark.parametrize(
    ("spelled", "meant"),
    [
        ("./src/**/*.py", "src/**/*.py"),
        ("src/./sub/*.py", "src/sub/*.py"),
        (".//src/**/*.py", "src/**/*.py"),
        ("././src/sub/a.py", "src/sub/a.py"),
        ("./*.py", "*.py"),
        ("src/sub/./*", "src/sub/*"),
    ],
)
async def test_a_glob_spelled_with_dot_slash_finds_what_it_means(
    tree: pathlib.Path, spelled: str, meant: str
) -> None:
    found, expected = await outputs(
        tree, [("Glob", {"pattern": spelled}), ("Glob", {"pattern": meant})]
    )
    assert "no files match" not in expected
    assert found == expected


async def test_grep_filtered_by_a_glob_spelled_with_dot_slash_finds_what_it_means(
    tree: pathlib.Path,
) -> None:
    below, meant, here, anywhere = await outputs(
        tree,
        [
            ("Grep", {"pattern": "needle", "glob": "./src/**/*.py"}),
            ("Grep", {"pattern": "needle", "glob": "src/**/*.py"}),
            ("Grep", {"pattern": "needle", "glob": "./*.py"}),
            ("Grep", {"pattern": "needle", "glob": "*.py"}),
        ],
    )
    assert below == meant == "src/b.py\nsrc/sub/a.py"
    # "./" is the directory searched: "./*.py" is the Python files there, where "*.py" (a
    # name) is those at any depth.
    assert here == "c.py"
    assert anywhere == "c.py\nsrc/b.py\nsrc/sub/a.py"


async def test_a_glob_of_the_directory_itself_matches_no_file(tree: pathlib.Path) -> None:
    for output in await outputs(tree, [("Glob", {"pattern": "."}), ("Glob", {"pattern": "./"})]):
        assert output.startswith("no files match")


GLOBS = ["**/*.py", "*.py", "src/**/*.py", "src/*.{py,txt}", "**/a/*.py", "*", "a/**", "[!a]*"]


@hypothesis.given(
    inside=st.lists(st.sampled_from(["a", "src", ".h"]), max_size=3).map(
        lambda parts: "".join(f"{part}/" for part in parts)
    ),
    names=st.lists(st.sampled_from(["a", "a.py", ".h.py", "src", "b.txt"])),
    pattern=st.sampled_from(GLOBS),
    dots=st.lists(st.booleans(), min_size=4, max_size=4),
)
@hypothesis.settings(max_examples=200, deadline=None)
def test_dot_components_of_a_glob_change_nothing_it_selects(
    inside: str, names: list[str], pattern: str, dots: list[bool]
) -> None:
    components = pattern.split("/")
    dotted = [
        part
        for index, component in enumerate(components)
        for part in ([".", component] if dots[index] else [component])
    ]
    matcher = _search.compile_glob(pattern)
    with_dots = _search.compile_glob("/".join(dotted))
    assert with_dots.select(inside, names) == matcher.select(inside, names)

"""Grep and Glob search a tree in one worker thread, list it as ripgrep does (``.gitignore``
honoured, ``.git`` left out), read only beneath what the call holds, and match lines exactly as
searching each line on its own would."""

from __future__ import annotations

import os
import pathlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.to_thread
import hypothesis
import hypothesis.strategies as st
import pytest
import regex
from wcmatch import glob as wcglob

import toolkernel as tk
from toolkernel._errors import CallEndedError
from toolkernel.locks import reads
from toolkernel.tools import (
    FileAccess,
    FileAccessed,
    Workspace,
    _search,
    _tree_search,
    builtin_tools,
)
from toolkernel.tools._fs import Subtree
from toolkernel.tools._ignore import IgnoreRules
from toolkernel.tools._line_match import (
    LinePattern,
    required_literal,
    required_literals,
    text_lines,
)


@pytest.fixture
async def kernel(tmp_path: pathlib.Path) -> AsyncIterator[tk.Kernel]:
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as k:
        yield k


async def ok(k: tk.Kernel, name: str, **arguments: Any) -> str:
    (result,) = await k.run([tk.ToolCall("c1", name, arguments)])
    assert result.status is tk.Status.OK, result.error
    assert isinstance(result.output, str)
    return result.output


async def error(k: tk.Kernel, name: str, **arguments: Any) -> str:
    (result,) = await k.run([tk.ToolCall("c1", name, arguments)])
    assert result.status is tk.Status.ERROR, result.output
    assert result.error
    return result.error


def files(root: pathlib.Path, contents: dict[str, str]) -> None:
    for relative, text in contents.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


# -- .gitignore --------------------------------------------------------------------------------


@pytest.fixture
def ignoring(tmp_path: pathlib.Path) -> pathlib.Path:
    files(
        tmp_path,
        {
            ".gitignore": "# build output\nbuild/\n*.log\n!keep.log\n/top.txt\n",
            "src/a.py": "needle\n",
            "src/b.log": "needle\n",
            "src/keep.log": "needle\n",
            "src/top.txt": "needle\n",  # /top.txt is anchored: only the root's is ignored
            "top.txt": "needle\n",
            "build/out.py": "needle\n",
            "src/build/deep.py": "needle\n",  # build/ matches a directory at any depth
            "src/.gitignore": "secret*\n!*.log\n",
            "src/secret.py": "needle\n",
            "other/secret.py": "needle\n",  # src's .gitignore says nothing about other/
            "other/x.log": "needle\n",
            ".git/config": "needle\n",
            ".hidden.py": "needle\n",  # hidden files are searched: only .git is left out
        },
    )
    return tmp_path


async def test_grep_and_glob_leave_out_what_gitignore_ignores_and_the_git_directory(
    kernel: tk.Kernel, ignoring: pathlib.Path
) -> None:
    expected = [
        ".gitignore",
        ".hidden.py",
        "other/secret.py",
        "src/.gitignore",
        "src/a.py",
        "src/b.log",  # re-included by src/.gitignore's !*.log, deeper than the root's *.log
        "src/keep.log",
        "src/top.txt",
    ]
    assert (await ok(kernel, "Glob", pattern="**/*")).splitlines() == expected
    assert (await ok(kernel, "Grep", pattern="needle")).splitlines() == [
        name for name in expected if not name.endswith(".gitignore")
    ]


async def test_rules_on_names_alone_are_told_apart_in_one_call_and_decide_the_same(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    # No rule with a "/": the walk asks one expression per name first (names_only).
    files(
        tmp_path,
        {
            ".gitignore": "*.log\n!keep.log\nbuild/\n",
            "a.log": "",
            "keep.log": "",
            "a.py": "",
            "build/x.py": "",
            "src/build": "",  # a file named build: build/ is for directories
            "src/.gitignore": "*.py\n",
            "src/b.py": "",
            "src/c.log": "",
            "src/d.txt": "",
        },
    )
    assert (await ok(kernel, "Glob", pattern="**/*")).splitlines() == [
        ".gitignore",
        "a.py",
        "keep.log",
        "src/.gitignore",
        "src/build",
        "src/d.txt",
    ]


async def test_rules_read_below_the_searched_directory_apply_to_it(
    kernel: tk.Kernel, ignoring: pathlib.Path
) -> None:
    assert (await ok(kernel, "Glob", pattern="*", path="src")).splitlines() == [
        "src/.gitignore",
        "src/a.py",
        "src/b.log",
        "src/keep.log",
        "src/top.txt",
    ]


async def test_rules_read_above_the_searched_directory_apply_to_it_as_in_ripgrep(
    kernel: tk.Kernel, ignoring: pathlib.Path
) -> None:
    files(ignoring, {"src/pkg/c.log": "needle\n", "src/pkg/d.py": "needle\n"})
    # The root's build/ and src's secret* hold below src; src's !*.log beats the root's *.log.
    assert (await ok(kernel, "Grep", pattern="needle", path="src")).splitlines() == [
        "src/a.py",
        "src/b.log",
        "src/keep.log",
        "src/pkg/c.log",
        "src/pkg/d.py",
        "src/top.txt",
    ]
    assert (await ok(kernel, "Glob", pattern="**/*", path="src/pkg")).splitlines() == [
        "src/pkg/c.log",
        "src/pkg/d.py",
    ]
    # The root's *.log holds in other/, where no .gitignore re-includes it.
    assert await ok(kernel, "Grep", pattern="needle", path="other") == "other/secret.py"


async def test_a_repositorys_info_exclude_is_honoured_below_every_gitignore(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    files(
        tmp_path,
        {
            ".git/info/exclude": "# local\n*.tmp\nscratch/\n",
            ".gitignore": "!keep.tmp\n",
            "a.py": "needle\n",
            "b.tmp": "needle\n",
            "keep.tmp": "needle\n",  # a .gitignore re-includes what the exclude file ignores
            "scratch/c.py": "needle\n",
            "src/d.tmp": "needle\n",
            "src/e.py": "needle\n",
            "vendor/lib/.git/info/exclude": "*.gen\n",  # a repository inside: its own rules
            "vendor/lib/f.gen": "needle\n",
            "vendor/g.gen": "needle\n",
        },
    )
    everywhere = ["a.py", "keep.tmp", "src/e.py", "vendor/g.gen"]
    assert (await ok(kernel, "Grep", pattern="needle")).splitlines() == everywhere
    assert await ok(kernel, "Grep", pattern="needle", path="src") == "src/e.py"
    assert await ok(kernel, "Glob", pattern="*", path="vendor/lib") == (
        "no files match '*' under vendor/lib"
    )


def test_a_search_claims_the_ignore_files_above_its_directory() -> None:
    tools = {t.name: t for t in builtin_tools()}
    for name in ("Grep", "Glob"):
        arguments = tools[name].parse_arguments({"pattern": "x", "path": "src/pkg"})
        claims = tools[name].claims(arguments, tk.path)
        assert claims is not None
        assert sorted(str(claim.resource) for claim in claims) == [
            ".git/info/exclude",
            ".gitignore",
            "src/.git/info/exclude",
            "src/.gitignore",
            "src/pkg",
        ]
        assert all(claim.mode is tk.Mode.SHARED for claim in claims)
        # At the root there is nothing above.
        arguments = tools[name].parse_arguments({"pattern": "x"})
        assert [str(c.resource) for c in tools[name].claims(arguments, tk.path) or ()] == ["."]


async def test_a_search_whose_claims_do_not_cover_the_files_above_goes_on_without_them(
    ignoring: pathlib.Path,
) -> None:
    seen: list[FileAccessed] = []
    with Workspace(ignoring) as workspace:
        access = FileAccess(workspace, [reads("src")], observer=seen.append)
        found = await access.search("src", lambda tree: _tree_search.list_tree(tree, None))
    # The root's build/ is not known here, and nothing outside the claim was touched.
    assert "src/build/deep.py" in found and "src/secret.py" not in found
    assert all(str(access.path).startswith("src") and access.allowed for access in seen)


async def test_a_file_given_as_the_path_is_searched_even_if_ignored(
    kernel: tk.Kernel, ignoring: pathlib.Path
) -> None:
    assert await ok(kernel, "Grep", pattern="needle", path="build/out.py") == "build/out.py"


@pytest.mark.parametrize(
    ("rules", "path", "is_dir", "decision"),
    [
        ("*.pyc", "a/b/c.pyc", False, True),
        ("*.pyc", "c.py", False, None),
        ("build/", "build", True, True),
        ("build/", "build", False, None),  # a file named build is not a directory
        ("/top", "top", False, True),
        ("/top", "a/top", False, None),
        ("doc/*.md", "doc/a.md", False, True),
        ("doc/*.md", "doc/sub/a.md", False, None),  # * stays within a name
        ("doc/**/*.md", "doc/sub/x/a.md", False, True),
        ("doc/**/*.md", "doc/a.md", False, True),  # **/ is zero or more directories
        ("**/cache", "a/b/cache", True, True),
        ("out/**", "out/a/b", False, True),
        ("out/**", "out", True, None),  # everything inside, not the directory itself
        ("*.log\n!keep.log", "keep.log", False, False),
        ("!keep.log\n*.log", "keep.log", False, True),  # the last matching rule decides
        ("a?c", "abc", False, True),
        ("a?c", "a/c", False, None),
        ("[!a]x", "bx", False, True),
        ("[!a]x", "ax", False, None),
        ("\\#lit", "#lit", False, True),
        ("\\!bang", "!bang", False, True),
        ("trailing\\ ", "trailing ", False, True),
        ("spaces   ", "spaces", False, True),
        ("[a&&b]", "&", False, True),  # no set operation, however re would read it
        ("bad\\", "bad\\", False, None),  # a lone backslash at the end: the line is void
    ],
)
def test_gitignore_rules_as_git_reads_them(
    rules: str, path: str, is_dir: bool, decision: bool | None
) -> None:
    assert IgnoreRules.parse(rules).decide(path, is_dir=is_dir) is decision


GLOBS = ["**/*.py", "**/*.{py,txt}", "**/a*", "**/.*", "*.py", "src/**/*.py", "**/a/*.py", "**"]


@hypothesis.given(
    path=st.lists(st.sampled_from(["a", "a.py", ".h.py", "src", "b.txt", "x"]), min_size=1).map(
        "/".join
    ),
    pattern=st.sampled_from(GLOBS),
)
@hypothesis.settings(max_examples=300, deadline=None)
def test_a_compiled_glob_matches_as_wcmatch_does(path: str, pattern: str) -> None:
    expected = wcglob.compile(pattern, flags=_search._GLOB_FLAGS).match(path)
    matcher = _search.compile_glob(pattern)
    assert matcher.match(path) is expected
    assert matcher.match_name(path, path.rpartition("/")[2]) is expected


NAME_GLOBS = [
    *GLOBS, "*", "*.txt", "**/*", "a?", "[!a]*", "*.{py,txt}", "**/a.py", "s*c", "src/**/*.txt",
    "*/a.py", "src/*.{py,txt}", "**/src/*", "a/**/src/*.py", ".h/*", "src/**", "**/**", "*/**/*",
    "{a,src}/*.py", "{a,src/a}/*", "a[/]b/*", "src/**/*.p?", "**/a/**/*.py", "a/*/*",
]  # fmt: skip


@hypothesis.given(
    inside=st.lists(st.sampled_from(["a", "src", ".h"]), max_size=3).map(
        lambda parts: "".join(f"{part}/" for part in parts)
    ),
    names=st.lists(st.sampled_from(["a", "a.py", ".h.py", "src", "b.txt", "x.pyc", ".py"])),
    pattern=st.sampled_from(NAME_GLOBS),
)
@hypothesis.settings(max_examples=300, deadline=None)
def test_a_glob_selects_the_names_of_a_directory_as_it_matches_each_path(
    inside: str, names: list[str], pattern: str
) -> None:
    # Glob keeps a file whose path matches, Grep one whose path or name does (a list of
    # names at a time, by their ends for "*.py").
    glob = wcglob.compile(pattern, flags=_search._GLOB_FLAGS)
    matcher = _search.compile_glob(pattern)
    assert matcher.select(inside, names) == [name for name in names if glob.match(inside + name)]
    assert matcher.select_by_path_or_name(inside, names) == [
        name for name in names if glob.match(inside + name) or glob.match(name)
    ]


@hypothesis.given(
    inside=st.lists(st.sampled_from(["a", "src", ".h", "b"]), max_size=3).map(
        lambda parts: "".join(f"{part}/" for part in parts)
    ),
    name=st.sampled_from(["a", "src", ".h", "b", "x.py"]),
    below=st.lists(st.sampled_from(["a", "src", "b.txt", "x.py"]), min_size=1, max_size=3).map(
        "/".join
    ),
    pattern=st.sampled_from([*NAME_GLOBS, "src/a/*.py", "a/src/**", "src//a/*", "./src/*"]),
)
@hypothesis.settings(max_examples=400, deadline=None)
def test_glob_enters_every_directory_below_which_a_path_matches(
    inside: str, name: str, below: str, pattern: str
) -> None:
    glob = wcglob.compile(pattern, flags=_search._GLOB_FLAGS)
    if glob.match(f"{inside}{name}/{below}"):
        assert _search.compile_glob(pattern).enter(inside, ["q", name]) in ([name], ["q", name])


async def test_glob_of_a_directory_enters_only_it(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    files(tmp_path, {"src/a/b.py": "", "src/c.py": "", "other/src/d.py": "", "e.py": ""})
    (tmp_path / "other").chmod(0)  # never listed (were it, its files would be left out anyway)
    try:
        assert (await ok(kernel, "Glob", pattern="src/**/*.py")).splitlines() == [
            "src/a/b.py",
            "src/c.py",
        ]
    finally:
        (tmp_path / "other").chmod(0o755)


# -- type, ignore_case, context, multiline ---------------------------------------------------


@pytest.fixture
def sources(tmp_path: pathlib.Path) -> pathlib.Path:
    files(
        tmp_path,
        {
            "a.py": "one\ntwo\nNeedle three\nfour\nfive\nsix\nseven\nneedle eight\nnine\n",
            "b.pyi": "needle\n",
            "c.js": "needle\n",
            "Makefile": "needle:\n",
        },
    )
    return tmp_path


async def test_type_keeps_the_files_ripgrep_counts_as_that_type(
    kernel: tk.Kernel, sources: pathlib.Path
) -> None:
    assert (await ok(kernel, "Grep", pattern="needle", type="py")).splitlines() == [
        "a.py",
        "b.pyi",
    ]
    assert await ok(kernel, "Grep", pattern="needle", type="make") == "Makefile"
    assert await ok(kernel, "Grep", pattern="needle", type="py", glob="*.pyi") == "b.pyi"
    message = await error(kernel, "Grep", pattern="needle", type="python")
    assert "type 'python' is not a known file type" in message and "py, " in message


async def test_a_glob_starting_with_a_bang_leaves_those_files_out(
    kernel: tk.Kernel, sources: pathlib.Path
) -> None:
    """As ripgrep's ``--glob '!*.py'``: it matched nothing, and said there were no matches."""
    everything = set((await ok(kernel, "Grep", pattern="needle")).splitlines())
    python = set((await ok(kernel, "Grep", pattern="needle", glob="*.py")).splitlines())
    left = set((await ok(kernel, "Grep", pattern="needle", glob="!*.py")).splitlines())
    assert python and left and left == everything - python
    assert await ok(kernel, "Grep", pattern="needle", type="py", glob="!*.pyi") == "a.py"


async def test_ignore_case(kernel: tk.Kernel, sources: pathlib.Path) -> None:
    output = await ok(kernel, "Grep", pattern="needle", path="a.py", output_mode="content")
    assert output == "a.py:8:needle eight"
    output = await ok(
        kernel, "Grep", pattern="needle", path="a.py", output_mode="content", ignore_case=True
    )
    assert output.splitlines() == ["a.py:3:Needle three", "a.py:8:needle eight"]


async def test_context_lines_are_marked_and_groups_separated_as_grep_does(
    kernel: tk.Kernel, sources: pathlib.Path
) -> None:
    arguments: dict[str, Any] = {"pattern": "(?i)needle", "output_mode": "content"}
    output = await ok(kernel, "Grep", path="a.py", context=1, **arguments)
    assert output.splitlines() == [
        "a.py-2-two",
        "a.py:3:Needle three",
        "a.py-4-four",
        "--",
        "a.py-7-seven",
        "a.py:8:needle eight",
        "a.py-9-nine",
    ]
    # Groups that touch are one; before_context and after_context apart; context is their floor.
    output = await ok(kernel, "Grep", path="a.py", before_context=4, after_context=0, **arguments)
    assert output.splitlines() == [
        "a.py-1-one",
        "a.py-2-two",
        "a.py:3:Needle three",
        "a.py-4-four",
        "a.py-5-five",
        "a.py-6-six",
        "a.py-7-seven",
        "a.py:8:needle eight",
    ]
    output = await ok(kernel, "Grep", glob="*.py*", context=1, **arguments)
    assert output.splitlines()[-3:] == ["a.py-9-nine", "--", "b.pyi:1:needle"]
    message = await error(kernel, "Grep", context=-1, **arguments)
    assert "context must be a number of lines from 0, not -1" in message


async def test_claude_codes_spellings_of_the_options_are_taken(
    kernel: tk.Kernel, sources: pathlib.Path
) -> None:
    arguments: dict[str, Any] = {"pattern": "needle", "path": "a.py", "output_mode": "content"}
    assert await ok(kernel, "Grep", **{"-i": True, "-n": True}, **arguments) == (
        "a.py:3:Needle three\na.py:8:needle eight"
    )
    assert await ok(kernel, "Grep", **{"-A": 1, "-B": 1}, **arguments) == (
        "a.py-7-seven\na.py:8:needle eight\na.py-9-nine"
    )
    assert await ok(kernel, "Grep", **{"-C": 1}, **arguments) == await ok(
        kernel, "Grep", context=1, **arguments
    )
    message = await error(kernel, "Grep", **{"-i": True, "ignore_case": False}, **arguments)
    assert "both set 'ignore_case', with different values" in message


async def test_without_line_numbers_content_lines_show_the_path_alone(
    kernel: tk.Kernel, sources: pathlib.Path
) -> None:
    arguments: dict[str, Any] = {"pattern": "(?i)needle", "output_mode": "content", "-n": False}
    assert await ok(kernel, "Grep", path="a.py", **arguments) == (
        "a.py:Needle three\na.py:needle eight"
    )
    assert (await ok(kernel, "Grep", path="a.py", context=1, **arguments)).splitlines()[:4] == [
        "a.py-two",
        "a.py:Needle three",
        "a.py-four",
        "--",
    ]
    # Paths and counts are what they were.
    assert await ok(kernel, "Grep", pattern="needle", type="js", line_numbers=False) == "c.js"


async def test_head_limit_and_offset_page_through_the_results(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    files(tmp_path, {f"f{n}.txt": "needle\n" for n in range(5)})
    assert await ok(kernel, "Grep", pattern="needle", head_limit=2) == (
        "f0.txt\nf1.txt\n... (more results cut; use offset=2 to see on)"
    )
    assert await ok(kernel, "Grep", pattern="needle", head_limit=2, offset=2) == (
        "f2.txt\nf3.txt\n... (more results cut; use offset=4 to see on)"
    )
    assert await ok(kernel, "Grep", pattern="needle", head_limit=2, offset=4) == "f4.txt"
    # 0 is the default limit, as "unlimited" is in Claude Code's Grep (ours stops at 1,000).
    assert (await ok(kernel, "Grep", pattern="needle", head_limit=0)).count("\n") == 4
    content = await ok(kernel, "Grep", pattern="needle", output_mode="content", offset=3)
    assert content == "f3.txt:1:needle\nf4.txt:1:needle"
    assert "offset 9 skips all 5 lines found" in await ok(
        kernel, "Grep", pattern="needle", offset=9
    )
    assert "head_limit must be a number of lines from 0, not -1" in await error(
        kernel, "Grep", pattern="needle", head_limit=-1
    )
    assert "offset must be a number of lines from 0, not -1" in await error(
        kernel, "Grep", pattern="needle", offset=-1
    )


async def test_multiline_matches_across_lines_and_shows_every_line_it_spans(
    kernel: tk.Kernel, sources: pathlib.Path
) -> None:
    arguments: dict[str, Any] = {"pattern": r"two\nNeedle", "path": "a.py"}
    assert "no matches" in await ok(kernel, "Grep", **arguments)
    output = await ok(kernel, "Grep", multiline=True, output_mode="content", **arguments)
    assert output.splitlines() == ["a.py:2:two", "a.py:3:Needle three"]
    # . matches a line end too, so one match spans from three to eight.
    output = await ok(
        kernel, "Grep", pattern="three.*eight", path="a.py", multiline=True, output_mode="count"
    )
    assert output == "a.py:6"


# -- one engine: the whole text searched once, lines confirmed -------------------------------


def each_line(pattern: str, text: str, ignore_case: bool = False) -> list[int]:
    """The reference: every line searched on its own."""
    compiled = regex.compile(pattern, regex.IGNORECASE if ignore_case else 0)
    return [n for n, line in enumerate(text_lines(text)) if compiled.search(line) is not None]


PATTERNS = [
    "a",
    "^a",
    "a$",
    "^$",
    "a\\s+b",  # \s could run on into the next line in the whole text
    "[^x]+b",
    "a.*b",
    "(?s)a.*b",
    "\\ba\\b",
    "a(?=b)",
    "(?<=a)b",
    "(?!a)b",
    "b\\Z",
    "\\Aa",
    "x*",
    "(a|b)+$",
    "a\\n?b",
    "x a|b$",  # alternatives searched one after another
    "^b|a\\s+x|$",
    "ab|b|x*",
    "[|]a|b b",
]


@hypothesis.given(
    text=st.text(alphabet="ab x\n\r", max_size=40),
    pattern=st.sampled_from(PATTERNS),
)
@hypothesis.settings(max_examples=400, deadline=None)
def test_the_whole_text_search_finds_the_lines_a_line_by_line_search_finds(
    text: str, pattern: str
) -> None:
    compiled = LinePattern.compile(pattern, ignore_case=False, multiline=False)
    assert compiled.lines(text, lambda: 1.0) == each_line(pattern, text)
    first = compiled.lines(text, lambda: 1.0, first=True)
    assert first == each_line(pattern, text)[:1]


@hypothesis.given(
    text=st.text(alphabet="ab x\n", max_size=40),
    pattern=st.sampled_from(["a\\nb", "a.*b", "^b", "x*", "a\\s*", "\\n"]),
)
@hypothesis.settings(max_examples=300, deadline=None)
def test_multiline_lines_are_the_lines_each_match_spans(text: str, pattern: str) -> None:
    compiled = regex.compile(pattern, regex.MULTILINE | regex.DOTALL)
    expected: set[int] = set()
    count = len(text_lines(text))
    for match in compiled.finditer(text):
        begin, end = match.span()
        first = text.count("\n", 0, begin)
        last = text.count("\n", 0, max(end - 1, begin))
        expected.update(line for line in range(first, last + 1) if line < count)
    found = LinePattern.compile(pattern, ignore_case=False, multiline=True).lines(text, lambda: 1.0)
    assert set(found) == expected and found == sorted(found)


async def test_grep_content_is_the_line_by_line_answer_on_a_real_tree(
    tmp_path: pathlib.Path,
) -> None:
    # trio's own sources, every pattern above: the tool's output against the reference.
    import trio

    source = pathlib.Path(trio.__file__).parent
    texts = {
        path.relative_to(source).as_posix(): path.read_text()
        for path in sorted(source.glob("_core/*.py"))
    }
    files(tmp_path, texts)
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        for pattern in ["^\\s+def ", "await$", "\\bself\\.(?!_)", "raise \\w+Error\\Z", "[^a]+;"]:
            expected = [
                f"{name}:{number + 1}:{text_lines(text)[number]}"
                for name, text in sorted(texts.items())
                for number in each_line(pattern, text)
            ][:1000]
            output = await ok(kernel, "Grep", pattern=pattern, output_mode="content")
            lines = output.splitlines() if not output.startswith("no matches") else []
            assert [line for line in lines if not line.startswith("...")] == expected, pattern


@hypothesis.given(
    texts=st.lists(st.text(alphabet="ab\n", max_size=8), min_size=1, max_size=6),
    pattern=st.sampled_from(
        ["a\nb", "b$", "^a", "a.*b", "b\n", "\n\n", "(?<=a)b", "a\\Z", "b$|^a", "ab|b\n|a$"]
    ),
    multiline=st.booleans(),
    mode=st.sampled_from(["files_with_matches", "content", "count"]),
)
@hypothesis.settings(max_examples=150, deadline=None)
def test_texts_searched_joined_give_what_each_searched_alone_gives(
    tmp_path_factory: pytest.TempPathFactory,
    texts: list[str],
    pattern: str,
    multiline: bool,
    mode: _tree_search.OutputMode,
) -> None:
    # Small files are searched joined (a match may run from one into the next, files may lack
    # a last line end): the output is the one each file searched alone gives.
    compiled = LinePattern.compile(pattern, ignore_case=False, multiline=multiline)
    options = _tree_search.GrepOptions(compiled, mode, 0, 0, 1000, 2000, 1 << 20)

    def compare(tree: Subtree) -> tuple[list[str], list[str]]:
        joined, alone = _tree_search.Searched(), _tree_search.Searched()
        search = _tree_search._Search(tree, options, lambda: 1.0, joined)
        reference = _tree_search._Search(tree, options, lambda: 1.0, alone)
        for number, text in enumerate(texts):
            search.add(f"f{number}", text)
            reference._alone(f"f{number}", text)
        search.flush()
        return joined.lines, alone.lines

    async def main() -> tuple[list[str], list[str]]:
        with Workspace(tmp_path_factory.getbasetemp()) as workspace:
            return await FileAccess(workspace, [reads(".")]).search(".", compare)

    joined, alone = anyio.run(main)
    assert joined == alone


PIECES = ["ab", "c", "d+", "e?", "[ab]", "[^a]", "\\.", "x{2}", "abc", "\\bq", ".", "f*", "-_ "]


@hypothesis.given(
    pattern=st.lists(st.sampled_from(PIECES), min_size=1, max_size=6).map("".join),
    text=st.text(alphabet="abcdefqx.-_ ", max_size=40),
)
@hypothesis.settings(max_examples=400, deadline=None)
def test_every_match_holds_the_required_literal(pattern: str, text: str) -> None:
    # Files without it are passed by unsearched: that must never lose a match.
    literal = required_literal(pattern)
    hypothesis.assume(literal is not None)
    assert literal is not None
    for match in regex.finditer(pattern, text):
        assert literal in match.group(), (pattern, text, literal)


@pytest.mark.parametrize(
    ("pattern", "literal"),
    [
        ("needle_[0-9]+", "needle_"),
        ("def [a-z_]+_nowait", "_nowait"),
        ("ab{123}", None),  # a count is no literal
        ("x\\x41bcd", None),  # nor an escape's argument
        ("[a\\]bcd]xy", None),  # nor a class's members
        ("(abc)?def", None),  # in a group, anything may be optional
        ("abc|defg", None),
        ("(?i)abcd", None),
        ("abcd?", "abc"),
    ],
)
def test_the_required_literal_is_taken_only_where_it_is_plain(
    pattern: str, literal: str | None
) -> None:
    assert required_literal(pattern) == literal


@hypothesis.given(
    pattern=st.lists(st.sampled_from([*PIECES, "|"]), min_size=1, max_size=8).map("".join),
    text=st.text(alphabet="abcdefqx.-_ ", max_size=40),
)
@hypothesis.settings(max_examples=400, deadline=None)
def test_every_match_holds_one_of_the_required_literals(pattern: str, text: str) -> None:
    literals = required_literals(pattern)
    hypothesis.assume(literals is not None)
    assert literals is not None
    for match in regex.finditer(pattern, text):
        assert any(literal in match.group() for literal in literals), (pattern, text, literals)


@pytest.mark.parametrize(
    ("pattern", "literals"),
    [
        ("abc|defg", ("abc", "defg")),
        ("needle_[0-9]+", ("needle_",)),
        ("abc|d", None),  # an alternative without one
        ("abc|", None),  # an empty alternative matches anywhere
        ("(abc|defg)", None),
        ("abc|abc", ("abc",)),
    ],
)
def test_an_alternation_requires_one_literal_of_each_alternative(
    pattern: str, literals: tuple[str, ...] | None
) -> None:
    assert required_literals(pattern) == literals


async def test_files_without_the_literals_are_passed_by_and_the_others_searched(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    files(
        tmp_path,
        {
            "a.txt": "say NEEDLE_1 here\n",
            "b.txt": "zzq_2 is here\n",
            "c.txt": "nothing here\n",
            "d.txt": "\u212aelvin_3 in a text that is not ASCII\n",  # the Kelvin sign
            "e.txt": "needle_ without a digit\n",
        },
    )
    either = await ok(kernel, "Grep", pattern="needle_[0-9]|zzq_[0-9]", output_mode="content")
    assert either == "b.txt:1:zzq_2 is here"
    folded = await ok(kernel, "Grep", pattern="needle_[0-9]|kelvin_[0-9]", ignore_case=True)
    assert folded.splitlines() == ["a.txt", "d.txt"]


EDGES = {
    "crlf.txt": b"one self\r\ntwo\r\nself self\r\n",
    "no_end.txt": b"first\nlast self",
    "bad_utf8.txt": b"\xffself\n\xe2\x82self\xc3\n\xe2\x82\n",
    "edges.txt": b"self at the start\n\n\nand at the end: self",
    "long.txt": b"x" * 100_000 + b"self" + b"y" * 100_000 + b"\nself\n" + b"z" * (1 << 16),
    "boundary.txt": b"a" * ((1 << 16) - 2) + b"self\n" + b"self" * 3,
    "binary.bin": b"self\x00self\n",
    "empty.txt": b"",
    "none.txt": b"sel f\nSELF\n",
    "kelvin.txt": "\u212a SeLf\n".encode(),
}


@pytest.mark.parametrize("mode", ["files_with_matches", "count"])
@pytest.mark.parametrize("multiline", [False, True])
@pytest.mark.parametrize("ignore_case", [False, True])
async def test_a_plain_text_pattern_answered_from_the_bytes_is_what_the_engine_answers(
    kernel: tk.Kernel, tmp_path: pathlib.Path, mode: str, multiline: bool, ignore_case: bool
) -> None:
    # "self" is answered from each file's bytes; "sel[f]" (the same matches) by the engine:
    # CRLF, no last line end, invalid UTF-8, a match at a file's ends, on lines longer than a
    # read, across the first read's end, several on a line; a binary file is passed by.
    for name, data in EDGES.items():
        (tmp_path / name).write_bytes(data)
    for pattern, literal in (("self", True), ("sel[f]", False)):
        compiled = LinePattern.compile(pattern, ignore_case=ignore_case, multiline=multiline)
        assert _tree_search._is_literal(compiled) is literal
    arguments = {"output_mode": mode, "multiline": multiline, "ignore_case": ignore_case}
    plain = await ok(kernel, "Grep", pattern="self", **arguments)
    engine = await ok(kernel, "Grep", pattern="sel[f]", **arguments)
    assert plain == engine
    if ignore_case:
        # Upper case in an ASCII file, and in one that is not (the engine searches it).
        assert "none.txt" in plain and "kelvin.txt" in plain
    elif mode == "count":
        assert plain.splitlines() == [
            "bad_utf8.txt:2",
            "boundary.txt:2",
            "crlf.txt:2",
            "edges.txt:2",
            "long.txt:2",
            "no_end.txt:1",
        ]


@hypothesis.given(
    data=st.lists(st.sampled_from([b"ab", b"a", b"b", b"\n", b"\r\n", b"\xff", b"\xe2\x82"])),
    literal=st.sampled_from([b"ab", b"aba", b"bab"]),
)
@hypothesis.settings(max_examples=300, deadline=None)
def test_the_lines_holding_a_literal_are_counted_as_the_decoded_lines_holding_it(
    data: list[bytes], literal: bytes
) -> None:
    joined = b"".join(data)
    text = joined.decode("utf-8", errors="replace")
    expected = len(each_line(regex.escape(literal.decode()), text))
    assert _tree_search._matching_lines(joined, literal) == expected


# -- one worker thread, reads only beneath the lease -----------------------------------------


async def test_a_search_of_many_files_is_one_worker_thread_hop(
    kernel: tk.Kernel, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files(tmp_path, {f"d{n // 10}/f{n}.txt": f"line {n}\n" for n in range(60)})
    hops: list[str] = []
    run_sync = anyio.to_thread.run_sync

    async def counting(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(function, "__name__", repr(function)))
        return await run_sync(function, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    output = await ok(kernel, "Grep", pattern="line 5", output_mode="count")
    assert output.splitlines()[0] == "d0/f5.txt:1"
    assert len(output.splitlines()) == 11
    assert hops == ["_search_in_thread"], hops  # the first version made 61 hops here
    hops.clear()
    assert len((await ok(kernel, "Glob", pattern="**/*.txt")).splitlines()) == 60
    assert hops == ["_search_in_thread"], hops


async def test_files_come_in_the_order_of_their_paths_across_directories(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    # The walk sorts one directory at a time, a directory's name with its "/": "a.py" (".")
    # before "a/x.py" ("/") before "a0.py" ("0"), as a sort of the whole paths puts them.
    paths = [
        "A.py", "a b/q.py", "a-/y.py", "a.py", "a/b.py", "a/b/c.py", "a/b0/d.py", "a/x.py",
        "a0.py", "ab/z.py", "b/a/a.py", "b/a.py", "é.py", "é/e.py",
    ]  # fmt: skip
    files(tmp_path, {path: "needle\n" for path in paths})
    assert (await ok(kernel, "Glob", pattern="**/*.py")).splitlines() == sorted(paths)
    assert (await ok(kernel, "Grep", pattern="needle")).splitlines() == sorted(paths)
    counted = await ok(kernel, "Grep", pattern="needle", output_mode="count", head_limit=5)
    assert counted.splitlines()[:5] == [f"{path}:1" for path in sorted(paths)[:5]]


class SwapDirectoryForOutsideLink:
    """A listener that, when ``trigger`` is read, swaps directory ``victim`` (not yet read: the
    search reads in sorted order) for a link to ``outside``, as a hostile process could."""

    def __init__(self, trigger: str, victim: pathlib.Path, outside: pathlib.Path) -> None:
        self.trigger, self.victim, self.outside = trigger, victim, outside

    def __call__(self, event: object) -> None:
        pass

    def file_accessed(self, access: FileAccessed) -> None:
        if str(access.path) == self.trigger and not self.victim.is_symlink():
            self.victim.rename(self.victim.with_name("moved-away"))
            self.victim.symlink_to(self.outside, target_is_directory=True)


async def test_a_directory_swapped_for_a_link_out_of_the_workspace_mid_search_is_not_read(
    tmp_path: pathlib.Path,
) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    files(outside, {"z.txt": "needle: secret\n"})
    files(root, {"a.txt": "needle\n", "sub/z.txt": "needle\n"})
    async with tk.open_kernel(builtin_tools(), root=root) as kernel:
        kernel.add_listener(SwapDirectoryForOutsideLink("a.txt", root / "sub", outside))
        output = await ok(kernel, "Grep", pattern="needle", output_mode="content")
    assert (root / "sub").is_symlink()  # the swap happened between the walk and the read
    assert output == "a.txt:1:needle"


async def test_links_are_listed_only_where_the_call_may_read_their_target(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    files(tmp_path, {"src/a.txt": "needle\n", "other/b.txt": "needle\n"})
    (tmp_path / "src" / "to-b.txt").symlink_to("../other/b.txt")  # outside what src holds
    (tmp_path / "src" / "to-a.txt").symlink_to("a.txt")
    (tmp_path / "src" / "to-etc").symlink_to("/etc/hostname")
    (tmp_path / "src" / "to-other").symlink_to("../other", target_is_directory=True)
    output = await ok(kernel, "Grep", pattern="needle", path="src", output_mode="content")
    assert output.splitlines() == ["src/a.txt:1:needle", "src/to-a.txt:1:needle"]


async def test_a_search_stops_once_its_call_has_ended(tmp_path: pathlib.Path) -> None:
    files(tmp_path, {"a.txt": "x\n"})
    with Workspace(tmp_path) as workspace:
        access = FileAccess(workspace, [reads(".")])

        def work(tree: Any) -> None:
            tree.check()  # still open: fine
            access.close()
            tree.check()

        with pytest.raises(CallEndedError, match="has ended"):
            await access.search(".", work)


async def test_binary_files_are_skipped_after_their_first_bytes(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "blob.bin").write_bytes(b"needle\x00" + b"needle\n" * 100_000)
    (tmp_path / "text.txt").write_text("needle\n" * 10_000)  # longer than one first read
    assert await ok(kernel, "Grep", pattern="needle") == "text.txt"
    assert await ok(kernel, "Grep", pattern="needle", output_mode="count") == "text.txt:10000"


async def test_crlf_lines_match_without_their_carriage_return(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "dos.txt").write_bytes(b"one\r\nneedle\r\nthree\r\n")
    output = await ok(kernel, "Grep", pattern="needle$", output_mode="content")
    assert output == "dos.txt:2:needle"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads anything")
async def test_an_unreadable_directory_is_passed_by(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    files(tmp_path, {"shut/a.txt": "needle\n", "open/b.txt": "needle\n"})
    (tmp_path / "shut").chmod(0)
    try:
        assert await ok(kernel, "Grep", pattern="needle") == "open/b.txt"
    finally:
        (tmp_path / "shut").chmod(0o755)


async def test_a_timeout_of_the_call_stops_a_search_of_a_big_tree(
    tmp_path: pathlib.Path,
) -> None:
    files(tmp_path, {f"d{n}/f.txt": "x\n" for n in range(200)})
    async with tk.open_kernel(builtin_tools(), root=tmp_path, run_timeout=0.0) as kernel:
        (result,) = await kernel.run([tk.ToolCall("g", "Grep", {"pattern": "x"})])
    assert result.status is tk.Status.TIMEOUT

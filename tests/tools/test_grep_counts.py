"""Grep's ``count`` mode gives, for each file with a match, the number of its lines that match
(``grep -c``: lines, not matches), whichever way a file is answered: from its bytes (a plain-text
pattern, in either case) or by the engine. Checked against a count made here, line by line with
``re`` over each file decoded, on generated files (CRLF, no last line end, invalid UTF-8, the
characters that match ASCII letters ignoring case, very long lines, matches across the first
read's end, binary files) and on real ones."""

from __future__ import annotations

import pathlib
import re
from typing import Any

import anyio
import hypothesis
import hypothesis.strategies as st
import pytest

import toolkernel as tk
from toolkernel.tools import _tree_search, builtin_tools

FIRST_READ = _tree_search.FIRST_READ
BINARY_PROBE = _tree_search.BINARY_PROBE


def reference_counts(
    tree: dict[str, bytes], pattern: str, ignore_case: bool, keep: str = ""
) -> list[str]:
    """``path:n`` for each file with a match, in path order: a file with a NUL in its first
    8 KiB is binary and left out, the others decoded (invalid bytes as U+FFFD), split at
    ``\\n`` with a ``\\r`` before it dropped, and each line searched on its own."""
    compiled = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    found = []
    for path in sorted(tree):
        data = tree[path]
        if b"\x00" in data[:BINARY_PROBE] or not path.endswith(keep):
            continue
        lines = data.decode("utf-8", errors="replace").split("\n")
        if lines[-1] == "":
            lines.pop()
        count = sum(
            compiled.search(line[:-1] if line.endswith("\r") else line) is not None
            for line in lines
        )
        if count:
            found.append(f"{path}:{count}")
    return found


async def counts(root: pathlib.Path, pattern: str, **arguments: Any) -> list[str]:
    async with tk.open_kernel(builtin_tools(), root=root) as kernel:
        call = {"pattern": pattern, "output_mode": "count", **arguments}
        (result,) = await kernel.run([tk.ToolCall("c", "Grep", call)])
    assert result.status is tk.Status.OK, result.error
    assert isinstance(result.output, str)
    return [] if result.output.startswith("no matches") else result.output.splitlines()


def write(root: pathlib.Path, tree: dict[str, bytes]) -> None:
    for path, data in tree.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


PLAIN = ["self", "Self", "aaa", "abab", "a=b", "-->", "kiss", "needle_"]
"""Plain-text patterns (answered from the bytes): repeated and overlapping letters, letters
that fold to non-ASCII characters (``k``, ``s``, ``i``), punctuation."""
EXPRESSIONS = [r"s[e]lf", r"ab+a", r"\bkiss\b", r"needle_\d+", r"^a", r"b$", r"\w+=\w"]
"""The same kind of lines, found by the engine."""

PIECES = [
    b"self",
    b"SELF",
    b"Self",
    b"a",
    b"b",
    b"ab",
    b"aaa",
    b"abab",
    b"a=b",
    b"-->",
    b"kiss",
    b"needle_12",
    b" ",
    b"\n",
    b"\r\n",
    b"\r",
    b"\xff",
    b"\xe2\x82",  # a truncated character
    "\u212a".encode(),  # the Kelvin sign: ``k`` ignoring case
    "\u017f".encode(),  # the long s: ``s`` ignoring case
    "\u0130\u0131".encode(),  # dotted and dotless I
    "\u212aiss".encode(),  # "kiss" ignoring case
    "\u017felf".encode(),  # "self" ignoring case
    "é—".encode(),
    b"x" * 5000,
]


def file_data() -> st.SearchStrategy[bytes]:
    pieces = st.lists(st.sampled_from(PIECES), max_size=30).map(b"".join)
    # A match across the first read's end, and a NUL past the binary probe (still text). The
    # fillers are no words: on a 64 KiB run of letters `\w+=\w` takes `re` quadratic time,
    # and the tool rightly gives up on it as backtracking.
    padded = st.tuples(
        st.sampled_from([b"", b"." * (FIRST_READ - 2), b"\x00", b"," * BINARY_PROBE + b"\x00"]),
        pieces,
    ).map(b"".join)
    return st.one_of(pieces, padded)


@hypothesis.given(
    tree=st.dictionaries(
        st.sampled_from(["a.txt", "b.py", "d/c.py", "d/e/f.txt", "g.md"]), file_data(), max_size=5
    ),
    pattern=st.sampled_from(PLAIN + EXPRESSIONS),
    ignore_case=st.booleans(),
    glob=st.sampled_from([None, "*.py"]),
    multiline=st.booleans(),
)
@hypothesis.settings(suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
def test_count_is_the_number_of_matching_lines_of_each_file(
    tmp_path_factory: pytest.TempPathFactory,
    tree: dict[str, bytes],
    pattern: str,
    ignore_case: bool,
    glob: str | None,
    multiline: bool,
) -> None:
    root = tmp_path_factory.mktemp("tree")
    write(root, tree)
    # A plain text spans no line, so multiline changes nothing (for the expressions it would:
    # "b$" is not before the "\r" of a CRLF line end then).
    arguments: dict[str, Any] = {
        "ignore_case": ignore_case,
        "multiline": multiline and pattern in PLAIN,
    }
    if glob is not None:
        arguments["glob"] = glob
    found = anyio.run(lambda: counts(root, pattern, **arguments))
    assert found == reference_counts(tree, pattern, ignore_case, ".py" if glob else "")


SMALL_PIECES = st.lists(st.sampled_from(PIECES[:-1]), max_size=20).map(b"".join)


@hypothesis.given(
    before=SMALL_PIECES,
    after=SMALL_PIECES,
    literal=st.sampled_from([piece.encode() for piece in PLAIN] + [b"aab", b"x=x", b"_12"]),
    start=st.integers(0, 2),
)
def test_the_lines_holding_a_literal_are_counted_from_where_it_is_first(
    before: bytes, after: bytes, literal: bytes, start: int
) -> None:
    # Counted from its first occurrence (or any line's start before it), as the search does.
    data = before + literal + after
    first = data.find(literal)
    begin = [0, data.rfind(b"\n", 0, first) + 1, first][start]
    expected = sum(literal in line for line in data.split(b"\n"))
    assert _tree_search._matching_lines(data, literal, begin) == expected
    assert _tree_search._matching_lines(data, literal) == expected


def test_the_search_for_a_literal_starts_at_its_rarest_byte_but_its_last() -> None:
    def expression(literal: bytes) -> bytes:
        counter = _tree_search._line_counter(literal)
        pattern = counter.__self__.pattern  # type: ignore[attr-defined]
        assert isinstance(pattern, bytes)
        return pattern

    assert expression(b"self") == rb"lf(?<=self)[^\n]*()"
    assert expression(b"Error") == rb"Error[^\n]*()"  # "E" is rarer than any other
    assert expression(b"a=b") == rb"=b(?<=a=b)[^\n]*()"


@pytest.mark.parametrize(
    "data",
    ["\u212a", "\u017f", "\u0130", "\u0131", "x\u212ay"],
)
def test_a_character_that_matches_an_ascii_letter_ignoring_case_is_not_foldable(
    data: str,
) -> None:
    assert not _tree_search.foldable(data.encode())
    assert _tree_search.foldable("é—\u0100\u0141\u20aa\u017e".encode())  # the same first bytes


@pytest.mark.parametrize("ignore_case", [False, True])
async def test_count_on_real_files_is_the_line_by_line_count(
    tmp_path: pathlib.Path, ignore_case: bool
) -> None:
    # trio's and hypothesis's own sources: common words (thousands of lines), a regex, a word
    # met in both cases; with a type filter too.
    import hypothesis as hypothesis_package
    import trio

    tree: dict[str, bytes] = {}
    for package in (trio, hypothesis_package):
        source = pathlib.Path(package.__file__).parent
        for path in sorted(source.glob("**/*.py"))[:150]:
            relative = f"{source.name}/{path.relative_to(source).as_posix()}"
            tree[relative] = path.read_bytes()
    write(tmp_path, tree)
    for pattern in ["self", "return", "None", r"class \w+Error", "strategy", r"\bdef \w+\("]:
        expected = reference_counts(tree, pattern, ignore_case)
        assert expected and len(expected) < 1000
        found = await counts(tmp_path, pattern, ignore_case=ignore_case)
        assert found == expected, pattern
        typed = await counts(tmp_path, pattern, ignore_case=ignore_case, type="py")
        assert typed == expected, pattern

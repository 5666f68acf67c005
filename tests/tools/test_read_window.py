"""Read shows a window of a file's lines without splitting the rest: the same lines, numbers and
count of lines left as splitting the whole file gives."""

from __future__ import annotations

import pathlib

import hypothesis
import hypothesis.strategies as st

import toolkernel as tk
from toolkernel.tools import builtin_tools
from toolkernel.tools._file_tools import _line_window
from toolkernel.tools._line_match import text_lines


@hypothesis.given(
    text=st.text(alphabet="ab\n\r", max_size=30),
    start=st.integers(0, 12),
    count=st.integers(1, 12),
)
@hypothesis.settings(max_examples=500, deadline=None)
def test_the_window_is_the_slice_of_every_line(text: str, start: int, count: int) -> None:
    lines = text_lines(text)
    assert _line_window(text, start, count) == (lines[start : start + count], len(lines))
    window, total = _line_window(text.encode(), start, count)  # an ASCII file, as Read cuts it
    assert ([line.decode() for line in window], total) == (lines[start : start + count], len(lines))


async def test_read_of_a_big_file_shows_its_first_lines_and_counts_the_rest(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "big.log").write_text("".join(f"line {n}\r\n" for n in range(100_000)))
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        (first,) = await kernel.run([tk.ToolCall("r", "Read", {"file_path": "big.log"})])
        (later,) = await kernel.run(
            [tk.ToolCall("r", "Read", {"file_path": "big.log", "offset": 99_999, "limit": 5})]
        )
    assert first.ok and isinstance(first.output, str)
    shown = first.output.splitlines()
    assert shown[0] == "     1\tline 0" and shown[1999] == "  2000\tline 1999"
    assert shown[2000] == "... (98000 more lines; use offset to read on)"
    assert later.output == " 99999\tline 99998\n100000\tline 99999"


async def test_read_of_a_file_that_is_not_ascii_cuts_the_same_window(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "u.txt").write_text("".join(f"ligne {n} é\n" for n in range(10)))
    (tmp_path / "bad.txt").write_bytes(b"fine\n" * 10 + b"\xff\n")
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        shown, bad = await kernel.run(
            [
                tk.ToolCall("r", "Read", {"file_path": "u.txt", "offset": 9, "limit": 1}),
                tk.ToolCall("b", "Read", {"file_path": "bad.txt", "limit": 1}),
            ]
        )
    assert shown.output == "     9\tligne 8 é\n... (1 more lines; use offset to read on)"
    assert bad.error is not None and "not UTF-8 text (bad byte at offset 50)" in bad.error

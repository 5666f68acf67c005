"""Read shows a window of a file's lines without splitting the rest: the same lines, numbers and
count of lines left as splitting the whole file gives."""

from __future__ import annotations

import pathlib
from typing import Any, Final

import hypothesis
import hypothesis.strategies as st
import pytest

import toolkernel as tk
from toolkernel.tools import _file_tools, _fileops, builtin_tools
from toolkernel.tools._file_tools import TEXT_SIZE_LIMIT, WHOLE_READ, _head, _line_window
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


@hypothesis.given(
    data=st.binary(max_size=40).map(lambda b: b.replace(b"a", b"\n").replace(b"\x00", b"")),
    lines=st.integers(1, 8),
    whole_read=st.sampled_from([0, 1 << 20]),
)
@hypothesis.settings(max_examples=300, deadline=None)
def test_the_head_of_a_file_ends_with_its_last_wanted_line(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, lines: int, whole_read: int
) -> None:
    file = tmp_path_factory.mktemp("head") / "f"
    file.write_bytes(data)
    with open(file, "rb", buffering=0) as opened:
        head, whole, before, _, _ = _head(opened, lines, whole_read)
    assert not before
    if whole:
        assert head == data
        assert whole_read or data.count(b"\n") <= lines
    else:
        # Exactly the wanted lines, whole, and the file has more.
        assert head.count(b"\n") == lines and head.endswith(b"\n")
        assert data.startswith(head) and len(data) > len(head)


async def test_read_of_a_file_over_the_whole_read_size_reads_only_the_lines_it_shows(
    tmp_path: pathlib.Path,
) -> None:
    lines = [f"line {n} of a file larger than Read reads whole" for n in range(80_000)]
    text = "\n".join(lines) + "\n"
    assert len(text) > WHOLE_READ
    # A byte that is not UTF-8 after the lines shown is never read, so never refused.
    (tmp_path / "big.txt").write_bytes(text.encode() + b"\xff\n")
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        first, window, last, past, bad = await kernel.run(
            [
                tk.ToolCall("a", "Read", {"file_path": "big.txt"}),
                tk.ToolCall("b", "Read", {"file_path": "big.txt", "offset": 40_000, "limit": 2}),
                tk.ToolCall("c", "Read", {"file_path": "big.txt", "offset": 79_999, "limit": 5}),
                tk.ToolCall("d", "Read", {"file_path": "big.txt", "offset": 90_000}),
                tk.ToolCall("e", "Read", {"file_path": "big.txt", "offset": 80_001}),
            ]
        )
    assert first.ok and isinstance(first.output, str)
    shown = first.output.split("\n")
    assert len(shown) == 2001 and shown[1999] == f"  2000\t{lines[1999]}"
    assert shown[2000] == "... (more lines follow; use offset=2001 to read on)"
    assert window.output == (
        f" 40000\t{lines[39_999]}\n 40001\t{lines[40_000]}\n"
        "... (more lines follow; use offset=40002 to read on)"
    )
    # Read to the end: the whole file was read, so it is checked and counted as before.
    assert last.error is not None and "not UTF-8 text" in last.error
    assert past.error is not None and "not UTF-8 text" in past.error
    assert bad.error is not None and "not UTF-8 text" in bad.error


async def test_read_of_a_big_file_to_its_end_counts_its_lines(tmp_path: pathlib.Path) -> None:
    text = "".join(f"line {n} of a file larger than Read reads whole\n" for n in range(80_000))
    (tmp_path / "big.txt").write_text(text)
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        last, past = await kernel.run(
            [
                tk.ToolCall("c", "Read", {"file_path": "big.txt", "offset": 79_999}),
                tk.ToolCall("d", "Read", {"file_path": "big.txt", "offset": 90_000}),
            ]
        )
    assert last.output == (
        " 79999\tline 79998 of a file larger than Read reads whole\n"
        " 80000\tline 79999 of a file larger than Read reads whole"
    )
    assert past.error is not None and "past the end of 'big.txt' (80000 lines)" in past.error


async def test_read_numbers_its_lines_and_cuts_the_long_ones(tmp_path: pathlib.Path) -> None:
    long = "x" * 2500
    (tmp_path / "wide.txt").write_text(f"a\n{long}\n\tb\n" + "c\n" * 1_100_000)  # over WHOLE_READ
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        first, later = await kernel.run(
            [
                tk.ToolCall("a", "Read", {"file_path": "wide.txt", "limit": 3}),
                tk.ToolCall(
                    "b", "Read", {"file_path": "wide.txt", "offset": 1_100_001, "limit": 5}
                ),
            ]
        )
    assert first.output == (
        f"     1\ta\n     2\t{'x' * 2000} [line cut]\n     3\t\tb\n"
        "... (more lines follow; use offset=4 to read on)"
    )
    assert later.output == "1100001\tc\n1100002\tc\n1100003\tc"


@hypothesis.given(
    text=st.text(alphabet="ab\n\r", max_size=30),
    start=st.integers(0, 12),
    count=st.integers(1, 12),
    chunk=st.integers(1, 5),
)
@hypothesis.settings(max_examples=300, deadline=None)
def test_the_window_is_the_same_whatever_chunks_the_lines_are_counted_in(
    text: str, start: int, count: int, chunk: int
) -> None:
    lines = text_lines(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_file_tools, "_SKIP_CHUNK", chunk)
        assert _line_window(text, start, count) == (lines[start : start + count], len(lines))


def _files(most: int) -> st.SearchStrategy[bytes]:
    """Files of up to ``most`` bytes, many of them line ends, no NUL (not binary)."""
    return st.binary(max_size=most).map(lambda b: b.replace(b"a", b"\n").replace(b"\x00", b""))


WINDOWS: Final = {"skip": st.integers(0, 8), "lines": st.integers(1, 8)}
"""A window's first line (after ``skip``) and its size; with ``first``, the first chunk's."""


@hypothesis.given(data=_files(40), first=st.integers(1, 4), **WINDOWS)
@hypothesis.settings(max_examples=300, deadline=None)
def test_the_lines_before_the_window_are_counted_and_left_out(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, skip: int, lines: int, first: int
) -> None:
    # Read in chunks of first, 2 * first...: whatever chunk a line end falls in.
    file = tmp_path_factory.mktemp("head") / "f"
    file.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch, open(file, "rb", buffering=0) as opened:
        patch.setattr(_file_tools, "_FIRST_CHUNK", first)
        head = _head(opened, skip + lines, 0, skip=skip)
    assert head.lines_before <= skip
    assert data[: head.bytes_before].count(b"\n") == head.lines_before
    assert data[: head.bytes_before].endswith(b"\n") or not head.bytes_before
    rest = data[head.bytes_before :]
    if head.whole:
        assert head.data == rest
    else:
        assert head.data.count(b"\n") == skip + lines - head.lines_before
        assert rest.startswith(head.data) and head.data.endswith(b"\n")
        assert len(rest) > len(head.data)
    bad = None
    try:
        data[: head.bytes_before].decode()
    except UnicodeDecodeError as exc:
        bad = exc.start
    assert head.bad == bad


async def test_read_in_the_middle_of_a_big_file_checks_the_lines_before_it(
    tmp_path: pathlib.Path,
) -> None:
    lines = [f"line {n} of a file larger than Read reads whole" for n in range(80_000)]
    text = "\n".join(lines) + "\n"
    (tmp_path / "big.txt").write_text(text)
    (tmp_path / "bad.txt").write_bytes(b"\xff\n" + text.encode())
    (tmp_path / "u.txt").write_text("é\n" + text)
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        window, bad, accented = await kernel.run(
            [
                tk.ToolCall("a", "Read", {"file_path": "big.txt", "offset": 50_000, "limit": 2}),
                tk.ToolCall("b", "Read", {"file_path": "bad.txt", "offset": 50_000, "limit": 2}),
                tk.ToolCall("c", "Read", {"file_path": "u.txt", "offset": 50_001, "limit": 1}),
            ]
        )
    assert window.output == (
        f" 50000\t{lines[49_999]}\n 50001\t{lines[50_000]}\n"
        "... (more lines follow; use offset=50002 to read on)"
    )
    assert bad.error is not None and "not UTF-8 text (bad byte at offset 0)" in bad.error
    assert accented.output == (
        f" 50001\t{lines[49_999]}\n... (more lines follow; use offset=50002 to read on)"
    )


async def test_read_takes_an_offset_or_limit_past_any_file_s_lines(tmp_path: pathlib.Path) -> None:
    # Past C's ssize_t they raised OverflowError from str.split.
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        everything, rest, far, past = await kernel.run(
            [
                tk.ToolCall("a", "Read", {"file_path": "a.txt", "limit": 2**63}),
                tk.ToolCall("b", "Read", {"file_path": "a.txt", "offset": 2, "limit": 10**30}),
                tk.ToolCall("c", "Read", {"file_path": "a.txt", "limit": 2**63 - 1}),
                tk.ToolCall("d", "Read", {"file_path": "a.txt", "offset": 2**63, "limit": 2**63}),
            ]
        )
    assert everything.output == far.output == "     1\tone\n     2\ttwo"
    assert rest.output == "     2\ttwo"
    assert past.error == f"offset {2**63} is past the end of 'a.txt' (2 lines)"


async def test_read_of_a_file_over_the_text_limit_shows_any_window_of_it(
    tmp_path: pathlib.Path,
) -> None:
    # Refused whatever the window ("use Grep"), and Grep skips such files: a dead end.
    lines = [f"line {n} of a log larger than Edit takes" for n in range(450_000)]
    (tmp_path / "huge.log").write_text("\n".join(lines) + "\n")
    assert (tmp_path / "huge.log").stat().st_size > TEXT_SIZE_LIMIT
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        first, middle, last, default, past = await kernel.run(
            [
                tk.ToolCall("a", "Read", {"file_path": "huge.log", "limit": 2}),
                tk.ToolCall("b", "Read", {"file_path": "huge.log", "offset": 300_000, "limit": 1}),
                tk.ToolCall("c", "Read", {"file_path": "huge.log", "offset": 449_999}),
                tk.ToolCall("d", "Read", {"file_path": "huge.log"}),
                tk.ToolCall("e", "Read", {"file_path": "huge.log", "offset": 450_001}),
            ]
        )
    assert first.output == (
        f"     1\t{lines[0]}\n     2\t{lines[1]}\n... (more lines follow; use offset=3 to read on)"
    )
    assert middle.output == (
        f"300000\t{lines[299_999]}\n... (more lines follow; use offset=300001 to read on)"
    )
    assert last.output == f"449999\t{lines[449_998]}\n450000\t{lines[449_999]}"
    assert isinstance(default.output, str)
    assert default.output.endswith("... (more lines follow; use offset=2001 to read on)")
    assert past.error is not None and "past the end of 'huge.log' (450000 lines)" in past.error


async def test_read_refuses_a_window_over_the_text_limit_and_says_to_ask_for_less(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "wide.log").write_text("first\n" + "x" * (TEXT_SIZE_LIMIT + 1) + "\nlast\n")
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        first, default, wide, after = await kernel.run(
            [
                tk.ToolCall("a", "Read", {"file_path": "wide.log", "limit": 1}),
                tk.ToolCall("b", "Read", {"file_path": "wide.log"}),
                tk.ToolCall("c", "Read", {"file_path": "wide.log", "offset": 2, "limit": 1}),
                tk.ToolCall("d", "Read", {"file_path": "wide.log", "offset": 3}),
            ]
        )
    assert first.output == "     1\tfirst\n... (more lines follow; use offset=2 to read on)"
    assert default.status is tk.Status.ERROR and default.error is not None
    assert default.error.startswith(
        "can't show lines 1 to 2000 of 'wide.log': they (or a line just before them) hold more "
        "than 16 MiB"
    )
    assert "pass offset and a smaller limit" in default.error
    # A line over the limit alone: no smaller window shows it, and the lines after it show.
    assert wide.status is tk.Status.ERROR and wide.error is not None
    assert wide.error.startswith("can't show line 2 of 'wide.log': it alone holds more than 16")
    assert "Grep or Bash" in wide.error
    assert after.output == "     3\tlast"  # it was kept, a chunk at a time, to be left out
    (tmp_path / "wide.log").write_text("first\n" + "x" * (TEXT_SIZE_LIMIT + 1))  # no end
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        (past,) = await kernel.run(
            [tk.ToolCall("e", "Read", {"file_path": "wide.log", "offset": 3})]
        )
    assert past.error is not None and "past the end of 'wide.log' (2 lines)" in past.error


def test_the_head_of_a_file_stops_at_a_checkpoint_before_each_chunk(
    tmp_path: pathlib.Path,
) -> None:
    # So a Read of a huge file keeps its call's deadline.
    (tmp_path / "f").write_bytes(b"line\n" * 1_000_000)
    calls = 0

    class Stop(Exception):
        pass

    def checkpoint() -> None:
        nonlocal calls
        calls += 1
        if calls == 5:
            raise Stop

    with open(tmp_path / "f", "rb", buffering=0) as opened, pytest.raises(Stop):
        _head(opened, 1_000_000, 0, skip=999_990, checkpoint=checkpoint)
    assert calls == 5


def _utf8(head: Any) -> bool:
    """Whether all ``head`` read is UTF-8: what it left out (``bad``), and what it holds."""
    try:
        head.data.decode()
    except UnicodeDecodeError:
        return False
    return head.bad is None


def _window(head: Any, skip: int, lines: int) -> list[bytes]:
    """The lines ``skip + 1`` to ``skip + lines`` that ``head`` holds."""
    held = _lines(head.data)
    start = skip - head.lines_before
    return held[start : start + lines] if 0 <= start < len(held) else []


def _lines(data: bytes) -> list[bytes]:
    pieces = data.split(b"\n")
    return pieces[:-1] if pieces[-1] == b"" else pieces


@hypothesis.given(data=_files(60), first=st.integers(1, 4), **WINDOWS)
@hypothesis.settings(max_examples=300, deadline=None)
def test_a_long_line_left_out_is_let_go_as_it_is_read_and_the_window_stays(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, skip: int, lines: int, first: int
) -> None:
    """A line before the window longer than a chunk is not kept while it is read (one over
    the text limit hid every line after it); the window, and the count of the lines, are
    those of keeping it."""
    file = tmp_path_factory.mktemp("long") / "f"
    file.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch, open(file, "rb", buffering=0) as opened:
        patch.setattr(_file_tools, "_FIRST_CHUNK", first)
        kept = _head(opened, skip + lines, 0, skip=skip)
        opened.seek(0)
        patch.setattr(_fileops, "CHUNK", 2)  # every line longer than 2 let go
        let_go = _head(opened, skip + lines, 0, skip=skip)
    assert _window(let_go, skip, lines) == _window(kept, skip, lines)
    assert let_go.whole == kept.whole and _utf8(let_go) == _utf8(kept)
    total = let_go.lines_before + len(_lines(let_go.data))
    assert not let_go.whole or total == kept.lines_before + len(_lines(kept.data))

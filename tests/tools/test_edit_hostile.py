"""Edit and MultiEdit against what makes them go wrong quietly: a big file edited many times
(the kernel keeps running, the deadline holds), an old_string found at two overlapping places,
and a CRLF file given new lines with bare ``\\n``."""

from __future__ import annotations

import pathlib
from typing import Any

import anyio
import hypothesis
import hypothesis.strategies as st
import pytest

import toolkernel as tk
from toolkernel.tools import builtin_tools
from toolkernel.tools._file_tools import _PLACES_COUNTED, _edited, _places


async def run1(tmp_path: pathlib.Path, name: str, **arguments: Any) -> tk.ToolResult:
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        (result,) = await kernel.run([tk.ToolCall("c1", name, arguments)])
    return result


def names(directory: pathlib.Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


# -- the edits run off the event loop ----------------------------------------------------------


@tk.tool(claims=lambda args: [])
async def nap(ctx: tk.ToolContext) -> str:
    """Sleep 0.1 s: a call with nothing to do with the edit."""
    await anyio.sleep(0.1)
    return "slept"


async def test_edits_to_a_big_file_leave_other_calls_running_and_keep_the_deadline(
    tmp_path: pathlib.Path,
) -> None:
    # 600 edits to 8 MiB held the event loop for seconds: another call's 0.1 s sleep took as
    # long, and the edits ran on past their deadline. Margins are wide (a loaded 2-core VM).
    text = "".join(f"k{n}=1\n" for n in range(600)) + ("x" * 99 + "\n") * 80_000
    (tmp_path / "big.txt").write_text(text)
    before = (tmp_path / "big.txt").stat()
    edits = [{"old_string": f"k{n}=", "new_string": f"K{n}="} for n in range(600)]
    async with tk.open_kernel([*builtin_tools(), nap], root=tmp_path) as kernel:
        napping = kernel.submit(tk.ToolCall("s", "nap", {}))
        await anyio.sleep(0.01)
        editing = kernel.submit(
            tk.ToolCall("e", "MultiEdit", {"file_path": "big.txt", "edits": edits}, run_timeout=0.3)
        )
        slept, edited = await napping.wait_finished(), await editing.wait_finished()
    assert slept.ok and slept.finished_at is not None and slept.started_at is not None
    assert slept.finished_at - slept.started_at < 1.0
    assert edited.status is tk.Status.TIMEOUT, edited.output
    assert edited.finished_at is not None and edited.started_at is not None
    assert edited.finished_at - edited.started_at < 1.5
    # The file is whole and untouched, and no temporary file is left.
    after = (tmp_path / "big.txt").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert (tmp_path / "big.txt").read_text() == text
    assert names(tmp_path) == ["big.txt"]


def test_the_edits_stop_at_a_checkpoint_between_two_edits() -> None:
    calls = 0

    class Stop(Exception):
        pass

    def checkpoint() -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise Stop

    edits: list[Any] = [
        {"old_string": "a", "new_string": "b"},
        {"old_string": "c", "new_string": "d"},
    ]
    with pytest.raises(Stop):
        _edited(b"a c\n", "f", edits, "MultiEdit", checkpoint)
    assert calls == 2
    assert _edited(b"a c\n", "f", edits, "MultiEdit") == (b"b d\n", 1)


# -- uniqueness counts overlapping places ------------------------------------------------------


@pytest.mark.parametrize("tool", ["Edit", "MultiEdit"])
async def test_an_old_string_at_two_overlapping_places_is_not_unique(
    tmp_path: pathlib.Path, tool: str
) -> None:
    source = "def f():\n    if x:\n        y()\n    }\n}\n}\n"  # "}\n}\n" starts at two places
    (tmp_path / "a.c").write_text(source)
    edit = {"old_string": "}\n}\n", "new_string": "}\n"}
    if tool == "Edit":
        result = await run1(tmp_path, "Edit", file_path="a.c", **edit)
    else:
        result = await run1(tmp_path, "MultiEdit", file_path="a.c", edits=[edit])
    assert result.status is tk.Status.ERROR
    assert result.error is not None and "old_string occurs 2 times in a.c" in result.error
    assert (tmp_path / "a.c").read_text() == source


async def test_replace_all_replaces_what_does_not_overlap(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.txt").write_text("aaaa\n")
    result = await run1(
        tmp_path, "Edit", file_path="a.txt", old_string="aaa", new_string="b", replace_all=True
    )
    assert result.output == "edited a.txt: replaced 1 occurrence"
    assert (tmp_path / "a.txt").read_text() == "ba\n"


@hypothesis.given(
    text=st.text(alphabet="ab", max_size=30), old=st.text(alphabet="ab", min_size=1, max_size=4)
)
def test_the_places_counted_are_every_place_old_starts_at(text: str, old: str) -> None:
    every = sum(text.startswith(old, at) for at in range(len(text)))
    assert _places(text, old, text.find(old)) == every


def test_the_places_are_counted_up_to_a_bound() -> None:
    assert _places("a" * 10_000, "aa", 0) == _PLACES_COUNTED + 1


# -- new lines take the line ends of a CRLF file -----------------------------------------------


async def test_new_lines_in_a_crlf_file_end_with_crlf(tmp_path: pathlib.Path) -> None:
    (tmp_path / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    (tmp_path / "v.txt").write_bytes(b"a\r\nb\r\n")
    (tmp_path / "u.txt").write_bytes(b"one\r\n\r\ntwo\r\n")
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        results = await kernel.run(
            [
                tk.ToolCall(
                    "1", "Edit", {"file_path": "w.txt", "old_string": "two", "new_string": "2\n2b"}
                ),
                tk.ToolCall(
                    "2",
                    "MultiEdit",
                    {
                        "file_path": "v.txt",
                        "edits": [
                            {"old_string": "b", "new_string": "b\nb2"},
                            {"old_string": "\nb2", "new_string": "\nb3\n"},
                        ],
                    },
                ),
                # A line end at the start of old_string matches the \r\n it ends.
                tk.ToolCall(
                    "3", "Edit", {"file_path": "u.txt", "old_string": "\n\n", "new_string": "\n"}
                ),
            ]
        )
    assert all(result.ok for result in results), [result.error for result in results]
    assert (tmp_path / "w.txt").read_bytes() == b"one\r\n2\r\n2b\r\nthree\r\n"
    assert (tmp_path / "v.txt").read_bytes() == b"a\r\nb\r\nb3\r\n\r\n"
    assert (tmp_path / "u.txt").read_bytes() == b"one\r\ntwo\r\n"


async def test_new_lines_in_a_file_of_mixed_line_ends_are_kept_as_given(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "m.txt").write_bytes(b"one\r\ntwo\nthree\r\n")
    result = await run1(tmp_path, "Edit", file_path="m.txt", old_string="two", new_string="2\n2b")
    assert result.ok, result.error
    assert (tmp_path / "m.txt").read_bytes() == b"one\r\n2\n2b\nthree\r\n"

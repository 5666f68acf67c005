"""The workspace's root descriptor: the fast key path agrees with the walk, and it is closed."""

from __future__ import annotations

import gc
import os
import pathlib
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from toolkernel import _beneath
from toolkernel._errors import InvalidClaimError
from toolkernel.locks import EVERYTHING, exclusive
from toolkernel.tools import FileAccess, Workspace

from ..strategies import maze_spellings as spellings

needs_proc_fd = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


# -- the fast path gives the walk's keys ----------------------------------------------------------


@pytest.fixture(scope="module")
def maze(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pathlib.Path]:
    """A small tree with every kind of link the walk knows about."""
    base = tmp_path_factory.mktemp("maze")
    root = base / "root"
    (root / "d" / "e").mkdir(parents=True)
    (root / "d" / "f").write_text("f")
    (root / "g").write_text("g")
    (base / "outside").mkdir()
    links = {
        "to-d": "d",
        "d/to-f": "f",
        "d/up": "..",
        "d/e/abs-d": str(root / "d"),
        "dangling": "nowhere/deeper",
        "out": str(base / "outside"),
        "loop": "loop",
        "to-g": "g",
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    yield root


def outcome(ws: Workspace, spelling: str, walk: bool) -> Any:
    try:
        return ws._resolve_key(spelling)[0] if walk else ws.key(spelling)
    except InvalidClaimError as exc:
        return type(exc)


@pytest.mark.parametrize("fast_path", ["openat2", "lstat"])
@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spelling=spellings)
def test_the_fast_key_is_the_walks_key(
    maze: pathlib.Path, fast_path: str, spelling: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if fast_path == "lstat":
        monkeypatch.setattr(_beneath, "openat2", None)
    elif _beneath.openat2 is None:
        pytest.skip("this kernel has no openat2")
    with Workspace(maze, fold_case=False, unicode_form="none") as ws:
        assert outcome(ws, spelling, walk=False) == outcome(ws, spelling, walk=True)
        if not isinstance(outcome(ws, spelling, walk=True), type):
            key, parts = ws._locate_parts(spelling)
            assert key == ws.key(spelling)
            assert ws.root.joinpath(*parts) == ws.locate(spelling)[1]


def test_long_components_are_still_refused(maze: pathlib.Path) -> None:
    with Workspace(maze, fold_case=False, unicode_form="none") as ws:
        with pytest.raises(InvalidClaimError, match="a component of 300 bytes"):
            ws.key("new/" + "x" * 300)
        with pytest.raises(InvalidClaimError, match="NUL"):
            ws.key("d/\x00")


# -- closing --------------------------------------------------------------------------------------


@needs_proc_fd
def test_close_releases_the_descriptor_and_keys_keep_working(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a").mkdir()
    before = open_descriptors()
    ws = Workspace(tmp_path, fold_case=False, unicode_form="none")
    assert open_descriptors() == before + 1
    assert not ws.closed
    ws.close()
    ws.close()  # idempotent
    assert ws.closed
    assert open_descriptors() == before
    assert ws.key("a/b") == ws.key("./a//b/")


async def test_file_access_through_a_closed_workspace_says_so(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    with Workspace(tmp_path) as ws:
        fs = FileAccess(ws, [exclusive(EVERYTHING)])
        assert await fs.read_text("a.txt") == "a"
    with pytest.raises(ValueError, match=re.escape(f"the workspace {str(ws.root)!r} is closed")):
        await fs.read_text("a.txt")


@needs_proc_fd
async def test_closing_during_an_operation_waits_for_it_to_end(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.txt").write_text("a")
    before = open_descriptors()
    ws = Workspace(tmp_path, fold_case=False, unicode_form="none")
    original = Workspace._locate_parts
    during: list[int] = []

    def close_meanwhile(self: Workspace, p: Any) -> Any:
        self.close()  # from the worker thread, after the operation took the descriptor
        during.append(open_descriptors())
        return original(self, p)

    monkeypatch.setattr(Workspace, "_locate_parts", close_meanwhile)
    assert await FileAccess(ws, [exclusive(EVERYTHING)]).read_text("a.txt") == "a"
    assert during == [before + 1]  # still open while the read used it
    assert open_descriptors() == before  # and closed by the read, the last to use it


@needs_proc_fd
def test_an_unclosed_workspace_is_closed_when_dropped(tmp_path: pathlib.Path) -> None:
    gc.collect()
    before = open_descriptors()
    for _ in range(10):
        Workspace(tmp_path, fold_case=False, unicode_form="none").key("x")
    gc.collect()
    assert open_descriptors() == before

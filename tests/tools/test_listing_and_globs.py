"""ListDir shows links without following them; globs are wcmatch's."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

import toolkernel as tk
from toolkernel.tools import builtin_tools


@pytest.fixture
async def kernel(tmp_path: pathlib.Path) -> AsyncIterator[tk.Kernel]:
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as k:
        yield k


async def ok(k: tk.Kernel, name: str, **arguments: Any) -> str:
    (result,) = await k.run([tk.ToolCall("c1", name, arguments)])
    assert result.status is tk.Status.OK, result.error
    assert isinstance(result.output, str)
    return result.output


# -- ListDir --------------------------------------------------------------------------------------


async def test_listdir_shows_a_link_to_a_sibling_directory_without_following_it(
    kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "file.txt").write_text("f")
    (tmp_path / "b" / "sub").mkdir()
    (tmp_path / "b" / "to-a").symlink_to("../a")
    (tmp_path / "b" / "to-file").symlink_to("file.txt")
    (tmp_path / "b" / "dangling").symlink_to("nowhere")
    (tmp_path / "b" / "outside").symlink_to("/etc")
    # The call holds only b; following to-a would need a, which it does not hold.
    assert (await ok(kernel, "ListDir", path="b")).splitlines() == [
        "dangling -> nowhere",
        "file.txt",
        "outside -> /etc",
        "sub/",
        "to-a -> ../a",
        "to-file -> file.txt",
    ]


# -- globs ----------------------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> pathlib.Path:
    for relative in ("top.py", "src/a.py", "src/c.txt", "src/pkg/b.py", ".hidden.py"):
        target = tmp_path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("def f(): pass\n")
    return tmp_path


async def test_a_character_class_never_matches_the_separator(
    kernel: tk.Kernel, tree: pathlib.Path
) -> None:
    # `[!x]` is any one character but x *within a name*; it must not match the "/" of src/pkg.
    assert "no files match" in await ok(kernel, "Glob", pattern="src[!x]pkg/*.py")
    assert "no matches" in await ok(kernel, "Grep", pattern="def", glob="src[!x]pkg/*")


async def test_braces_nest(kernel: tk.Kernel, tree: pathlib.Path) -> None:
    assert (await ok(kernel, "Glob", pattern="{top,src/{a,c}}.*")).splitlines() == [
        "src/a.py",
        "src/c.txt",
        "top.py",
    ]


async def test_stars_match_dot_files_as_before(kernel: tk.Kernel, tree: pathlib.Path) -> None:
    assert (await ok(kernel, "Glob", pattern="*.py")).splitlines() == [".hidden.py", "top.py"]
    assert (await ok(kernel, "Grep", pattern="def", glob="*.py")).splitlines() == [
        ".hidden.py",
        "src/a.py",
        "src/pkg/b.py",
        "top.py",
    ]

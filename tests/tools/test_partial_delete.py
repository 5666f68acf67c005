"""A tree is whole or gone, never half: a Delete that can't remove all of a tree removes none
of it, and if the removal still fails part-way, its error says what was deleted."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest

import toolkernel as tk
from toolkernel import _beneath
from toolkernel.locks import exclusive
from toolkernel.tools import FileAccess, Workspace

from .privileges import as_a_user

DELETE_AS_A_USER = """
import os, pathlib, sys, trio
import toolkernel as tk
from toolkernel.tools import builtin_tools

async def main(root):
    async with tk.open_kernel(builtin_tools(), root=root) as kernel:
        (result,) = await kernel.run([tk.ToolCall("c1", "Delete", {"path": "tree"})])
    print(result.status.name, result.error)

root = pathlib.Path(sys.argv[1])
(root / "tree" / "sub").mkdir(parents=True)
(root / "tree" / "sub" / "keep.txt").write_text("important")
(root / "tree" / "top.txt").write_text("top")
(root / "tree" / "a-first.txt").write_text("first")
os.chmod(root / sys.argv[2], 0o555)
trio.run(main, root)
"""


@pytest.mark.parametrize("read_only", ["tree", "tree/sub"])
def test_a_tree_with_a_directory_that_may_not_be_emptied_is_not_touched(
    shared_directory: pathlib.Path, read_only: str
) -> None:
    # It deleted tree/sub/keep.txt, failed on tree (read-only), and said only "Permission
    # denied: 'tree'", leaving half a tree.
    completed = subprocess.run(
        [*as_a_user(), sys.executable, "-c", DELETE_AS_A_USER, str(shared_directory), read_only],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = completed.stdout + completed.stderr
    assert completed.stdout.startswith("ERROR "), output
    assert f"{read_only!r} can't be emptied" in output and "nothing was deleted" in output
    tree = shared_directory / "tree"
    assert sorted(os.listdir(tree)) == ["a-first.txt", "sub", "top.txt"]
    assert (tree / "sub" / "keep.txt").read_text() == "important"


async def test_a_removal_failing_part_way_says_what_it_deleted(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Something the up-front check can't see (an immutable file, a permission changed since):
    # the file "stuck.txt" can't be unlinked.
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "stuck.txt").write_text("stuck")
    (tree / "gone.txt").write_text("gone")
    unlink = os.unlink

    def refuse(name: Any, *args: Any, **kwargs: Any) -> None:
        if name == "stuck.txt":
            raise PermissionError(1, "Operation not permitted", name)
        unlink(name, *args, **kwargs)

    monkeypatch.setattr(_beneath.os, "unlink", refuse)
    with Workspace(tmp_path, fold_case=False, unicode_form="none") as ws:
        fs = FileAccess(ws, [exclusive(tk.EVERYTHING)])
        with pytest.raises(PermissionError) as caught:
            await fs.delete("tree")
    message = str(caught.value)
    assert "Operation not permitted" in message
    assert "the rest is back under 'tree'" in message
    assert sorted(os.listdir(tmp_path)) == ["tree"]
    assert (tree / "sub" / "stuck.txt").read_text() == "stuck"
    # The directory's order decides whether gone.txt went first; the message says which.
    if (tree / "gone.txt").exists():
        assert "deleted none of it" in message
    else:
        assert "deleted 1 of its 3 entries ('tree/gone.txt')" in message

"""What a user's type checker sees of the public API: a small program checked by mypy --strict.

CI type-checks ``src`` alone; a user's mistakes in using the API show only in a program that
uses it, so this test writes one and runs mypy's API on it (a few seconds, its cache kept in the
test's temporary directory).
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import toolkernel

PROGRAM = '''
import toolkernel as tk
from toolkernel.kernel._files import FileSystem
from toolkernel.tools import FileAccess, Workspace


@tk.tool(reads=["path"])
async def read(ctx: tk.ToolContext, path: str) -> str:
    """ctx.fs has the file access's methods, with their types."""
    text: str = await ctx.fs.read_text(path)
    data: bytes = await ctx.fs.read_bytes(path, max_bytes=10)
    names: list[str] = await ctx.fs.listdir(".")
    await ctx.fs.write_text("b.txt", text, parents=True)
    return text + data.decode() + "".join(names)


@tk.tool(reads=["path"])
async def typo(ctx: tk.ToolContext, path: str) -> str:
    await ctx.fs.read_txt(path)  # line 18
    return path


def conforms(workspace: Workspace) -> FileSystem:
    return FileAccess(workspace, [])
'''


def test_a_typo_on_ctx_fs_fails_type_checking_and_its_methods_are_typed(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    source = Path(toolkernel.__file__).resolve().parent.parent
    (tmp_path / "program.py").write_text(textwrap.dedent(PROGRAM).lstrip())
    (tmp_path / "mypy.ini").write_text(f"[mypy]\nmypy_path = {source}\n")
    # mypy raises the interpreter's recursion limit for good (sys.setrecursionlimit): put it
    # back, or the tests that follow in this process find no RecursionError where one is due.
    limit = sys.getrecursionlimit()
    try:
        out, err, status = api.run(
            [
                "--strict",
                "--config-file",
                str(tmp_path / "mypy.ini"),
                "--cache-dir",
                str(tmp_path / "cache"),
                "--no-error-summary",
                "--hide-error-context",
                str(tmp_path / "program.py"),
            ]
        )
    finally:
        sys.setrecursionlimit(limit)
    errors = [line.split(": ", 1)[1] for line in out.splitlines() if ": error: " in line]
    assert errors == [
        'error: "FileSystem" has no attribute "read_txt"; maybe "read_text"?  [attr-defined]'
    ], out + err
    assert out.startswith(f"{tmp_path / 'program.py'}:18:")
    assert status == 1

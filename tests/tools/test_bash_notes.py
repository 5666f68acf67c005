"""What the Bash tool says about how it ran a command (no sandbox here, a write the prediction
missed, no shell parser) comes after the command's output, never before it: a program parsing
the output (JSON, a commit hash, the first line) reads the command's own bytes first, and the
model still reads the note."""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import AsyncIterator, Iterator

import pytest

import toolkernel as tk
from toolkernel import sandbox
from toolkernel.shell import _confine
from toolkernel.tools import ShellRules, builtin_tools
from toolkernel.tools._shell_commit import with_notes

PRINTS = """printf '{"files": 2}\\n'"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def without_the_sandbox(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TOOLKERNEL_SANDBOX", "off")
    monkeypatch.setattr(_confine, "_noted", False)  # not said yet in this process
    sandbox.unavailable.cache_clear()
    yield
    sandbox.unavailable.cache_clear()


@pytest.fixture
async def kernel(tmp_path: pathlib.Path) -> AsyncIterator[tk.Kernel]:
    async with tk.open_kernel(builtin_tools(bash=True), root=tmp_path) as opened:
        yield opened


async def bash(kernel: tk.Kernel, command: str) -> tk.ToolResult:
    (result,) = await kernel.run([tk.ToolCall("b", "Bash", {"command": command})])
    return result


def test_notes_follow_the_text_after_a_blank_line() -> None:
    assert with_notes("out\n", ["note: a", "note: b"]) == "out\n\nnote: a\nnote: b"
    assert with_notes("out", ["note: a"]) == "out\n\nnote: a"
    assert with_notes("", ["note: a"]) == "note: a"
    assert with_notes("out\n", []) == "out\n"


@pytest.mark.usefixtures("without_the_sandbox")
async def test_without_the_sandbox_the_output_comes_first_and_the_note_after(
    kernel: tk.Kernel,
) -> None:
    first = await bash(kernel, PRINTS)
    assert first.status is tk.Status.OK, first.error
    output = first.text()
    assert output.startswith('{"files": 2}\n\n')
    assert json.loads(output.splitlines()[0]) == {"files": 2}
    assert output.split("\n\n", 1)[1].startswith("note: no sandbox (the sandbox is turned off")
    second = await bash(kernel, PRINTS)
    assert second.text() == '{"files": 2}\n'  # said once


@pytest.mark.usefixtures("without_the_sandbox")
async def test_without_the_sandbox_a_failure_says_its_exit_code_and_output_before_the_note(
    kernel: tk.Kernel,
) -> None:
    failed = await bash(kernel, "echo broken; exit 3")
    assert failed.status is tk.Status.ERROR
    assert failed.error is not None
    assert failed.error.startswith("exit code 3\nbroken\n\nnote: no sandbox (")


@pytest.mark.skipif(sandbox.unavailable() is not None, reason="the sandbox is not here")
async def test_in_the_sandbox_a_missed_write_is_noted_after_the_output(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    programs = tmp_path / "programs"
    programs.mkdir()
    (programs / "writer").write_text('#!/bin/sh\necho "{\\"wrote\\": 1}"\necho x > other.txt\n')
    (programs / "writer").chmod(0o755)
    monkeypatch.setenv("PATH", f"{programs}{os.pathsep}{os.environ['PATH']}")
    root = tmp_path / "root"
    root.mkdir()
    rules = ShellRules.default().extended('[writer]\noperands = "read"\n')  # wrong on purpose
    async with tk.open_kernel(builtin_tools(bash=True, shell_rules=rules), root=root) as kernel:
        result = await bash(kernel, "writer")
    assert result.status is tk.Status.OK, result.error
    output = result.text()
    assert output.startswith('{"wrote": 1}\n\nnote: the command also changed other.txt')
    assert (root / "other.txt").read_text() == "x\n"

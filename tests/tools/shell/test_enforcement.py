"""Without the sandbox, Bash holds a command to its claims: Landlock lets it write only where
its call holds exclusive claims (and a private temporary directory), a wrong rule gets an error
naming the denied path and the rule, and the workspace outside the claims is untouched. (In the
sandbox a wrong rule costs no failure: tests/tools/test_sandboxed_bash.py.)

The commands are a small script, ``writer``, found on PATH (in a directory outside the
workspace: a program named by a path into the workspace is the repository's own, under no rule)
and run under project rules that describe it: telling it wrong is how a rule that is wrong is
made on purpose.
"""

from __future__ import annotations

import os
import pathlib
import sys
from collections.abc import AsyncIterator, Iterator

import pytest

import toolkernel as tk
from toolkernel import sandbox
from toolkernel.tools import ShellRules, builtin_tools, shell_claims
from toolkernel.tools.shell import _analysis, _confine, _syntax, analyse

from .helpers import changed, needs_landlock, run_bash, snapshot

WRITER = '#!/bin/sh\necho mine > "$1"\necho other > other.txt\n'


@pytest.fixture(autouse=True)
def without_the_sandbox(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """These tests are of the mode a system without the sandbox runs in."""
    monkeypatch.setenv("TOOLKERNEL_SANDBOX", "off")
    monkeypatch.setattr(_confine, "_noted", True)  # said already: outputs are the commands'
    sandbox.unavailable.cache_clear()
    yield
    sandbox.unavailable.cache_clear()


def workspace(root: pathlib.Path) -> pathlib.Path:
    (root / "a.txt").write_text("A\n")
    return root


@pytest.fixture(autouse=True)
def writer_on_path(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    programs = tmp_path_factory.mktemp("programs")
    writer = programs / "writer"
    writer.write_text(WRITER)
    writer.chmod(0o755)
    monkeypatch.setenv("PATH", f"{programs}{os.pathsep}{os.environ['PATH']}")


def exists(place: pathlib.Path) -> bool:
    return place.exists()


def rules(role: str) -> ShellRules:
    return ShellRules.default().extended(f'[writer]\noperands = "{role}"\n')


@pytest.fixture
async def reading_kernel(tmp_path: pathlib.Path) -> AsyncIterator[tk.Kernel]:
    """Bash with a wrong rule: `writer` said to only read its operand."""
    async with tk.open_kernel(
        builtin_tools(bash=True, shell_rules=rules("read")), root=workspace(tmp_path)
    ) as kernel:
        yield kernel


@pytest.fixture
async def writing_kernel(tmp_path: pathlib.Path) -> AsyncIterator[tk.Kernel]:
    """Bash with a half-wrong rule: `writer` writes its operand (and, unsaid, other.txt)."""
    async with tk.open_kernel(
        builtin_tools(bash=True, shell_rules=rules("write")), root=workspace(tmp_path)
    ) as kernel:
        yield kernel


@needs_landlock
async def test_a_command_declared_read_only_cannot_write(
    reading_kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    assert shell_claims("writer a.txt", rules("read")) == [tk.shared(tk.path("a.txt"))]
    before = snapshot(tmp_path)
    result = await run_bash(reading_kernel, "writer a.txt")
    assert result.status is tk.Status.ERROR
    assert changed(before, snapshot(tmp_path)) == set()
    assert result.error is not None
    assert "the command was refused writing a.txt, other.txt" in result.error
    assert "as the shell rules for writer say" in result.error


@needs_landlock
async def test_a_command_cannot_write_outside_its_claims(
    writing_kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    before = snapshot(tmp_path)
    result = await run_bash(writing_kernel, "writer mine.txt")
    # Its claim let it write mine.txt; other.txt, outside its claims, was refused.
    assert changed(before, snapshot(tmp_path)) == {"mine.txt"}
    assert (tmp_path / "mine.txt").read_text() == "mine\n"
    assert result.status is tk.Status.ERROR
    assert result.error is not None
    assert result.error.startswith("exit code 2\n")
    assert "refused writing other.txt: it may write only where its claims allow (mine.txt;" in (
        result.error
    )


@needs_landlock
async def test_a_command_writes_its_private_temporary_directory_which_goes_with_the_call(
    reading_kernel: tk.Kernel,
) -> None:
    result = await run_bash(reading_kernel, 'echo x > "$TMPDIR/scratch" && echo $TMPDIR')
    assert result.status is tk.Status.OK, result.error
    assert isinstance(result.output, str)
    temporary = pathlib.Path(result.output.strip())
    assert temporary.name.startswith("toolkernel-bash-")
    assert not exists(temporary)


@needs_landlock
async def test_a_file_made_for_a_redirection_that_never_ran_is_removed(
    reading_kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    result = await run_bash(reading_kernel, "false && echo x > never.txt; : > empty.txt")
    assert result.status is tk.Status.OK, result.error
    assert not (tmp_path / "never.txt").exists()
    assert (tmp_path / "empty.txt").read_text() == ""


async def test_a_command_that_is_not_understood_runs_unconfined(
    writing_kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\necho made > made.txt\n")
    script.chmod(0o755)
    assert analyse("./run.sh").barrier is not None
    result = await run_bash(writing_kernel, "./run.sh")
    assert result.status is tk.Status.OK, result.error
    assert (tmp_path / "made.txt").read_text() == "made\n"


async def test_without_landlock_the_claims_go_unenforced_and_the_tool_says_so_once(
    writing_kernel: tk.Kernel, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_confine, "landlock_abi", lambda: 0)
    monkeypatch.setattr(_confine, "_noted", False)
    first = await run_bash(writing_kernel, "writer mine.txt")
    second = await run_bash(writing_kernel, "cat a.txt")
    assert first.status is tk.Status.OK, first.error
    assert first.output == (
        "note: no sandbox (the sandbox is turned off (TOOLKERNEL_SANDBOX=off)): this system has "
        "no Landlock either, so commands run with their claims unenforced (a command whose "
        "rule is wrong can write outside them), and a command whose effects the shell rules "
        "can't fully know holds the whole workspace\n"
    )
    assert second.output == "A\n"
    assert (tmp_path / "other.txt").exists()


def test_without_the_parser_every_command_is_a_barrier(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tree_sitter", None)  # `import tree_sitter` now fails
    monkeypatch.setattr(_syntax, "_local", type(_syntax._local)())
    _analysis._analyse.cache_clear()
    try:
        assert shell_claims("ls") == [tk.exclusive(tk.path())]
        assert analyse("ls").barrier == (
            "the shell parser is not installed (pip install 'toolkernel[shell]' for tree-sitter "
            "and tree-sitter-bash)"
        )
    finally:
        _analysis._analyse.cache_clear()


@needs_landlock
async def test_without_the_sandbox_pytest_which_runs_the_projects_code_holds_the_workspace(
    reading_kernel: tk.Kernel, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pytest runs the repository's conftest.py, which may write anything: with nothing to see
    # what it really changes, it holds the whole workspace and runs as in a plain shell.
    monkeypatch.setenv(
        "PATH", f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    )
    (tmp_path / "conftest.py").write_text("open('made.txt', 'w').write('x')\n")
    (tmp_path / "test_a.py").write_text("def test_a():\n    pass\n")
    command = "pytest -q -p no:randomly -p no:cacheprovider test_a.py"
    assert not analyse(command).effects_known
    result = await run_bash(reading_kernel, command)
    assert result.status is tk.Status.OK, result.error
    assert (tmp_path / "made.txt").read_text() == "x"

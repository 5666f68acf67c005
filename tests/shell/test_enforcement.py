"""Without the sandbox, Bash runs a command on the workspace itself with the claims its rules
give: a command whose effects the rules can't fully know holds the whole workspace, and a rule
that is wrong costs no failure (the command does what it does in a plain shell). Outside the
workspace Landlock lets it write only its private temporary directory and the toolchains'
caches; a refused write is named in the error. (In the sandbox a wrong rule's writes are
committed under leases: tests/tools/test_sandboxed_bash.py.)

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
from toolkernel._extras import install_command
from toolkernel.shell import _analysis, _confine, _syntax, analyse
from toolkernel.tools import ShellRules, builtin_tools, shell_claims

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


async def test_a_command_whose_rule_missed_a_write_works_as_in_a_plain_shell(
    reading_kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    # The rule says `writer` only reads its operand; it writes it, and other.txt too.
    assert shell_claims("writer a.txt", rules("read")) == [tk.shared(tk.path("a.txt"))]
    assert analyse("writer a.txt", rules("read")).effects_known
    before = snapshot(tmp_path)
    result = await run_bash(reading_kernel, "writer a.txt")
    assert result.status is tk.Status.OK, result.error
    assert changed(before, snapshot(tmp_path)) == {"a.txt", "other.txt"}
    assert (tmp_path / "a.txt").read_text() == "mine\n"


@needs_landlock
async def test_outside_the_workspace_a_command_writes_only_its_temporary_directory_and_caches(
    writing_kernel: tk.Kernel, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    result = await run_bash(writing_kernel, f"echo x > {elsewhere}/f.txt")
    assert result.status is tk.Status.ERROR
    assert result.error is not None
    assert f"Landlock refused writing {elsewhere}/f.txt: outside the workspace" in (result.error)
    assert not (elsewhere / "f.txt").exists()


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


async def test_nothing_a_command_may_create_is_made_before_it_runs(
    writing_kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    # A file made empty beforehand would change what `test -e`, `cp -n` and noclobber do.
    command = (
        "false && echo x > never.txt; test -e new.txt || echo absent; cp -n a.txt copy.txt; "
        "set -o noclobber; echo y > fresh.txt && echo wrote"
    )
    result = await run_bash(writing_kernel, command)
    assert result.status is tk.Status.OK, result.error
    assert result.output == "absent\nwrote\n"
    assert not (tmp_path / "never.txt").exists()
    assert (tmp_path / "copy.txt").read_text() == "A\n"
    assert (tmp_path / "fresh.txt").read_text() == "y\n"


async def test_a_command_that_is_not_understood_holds_the_workspace_and_writes_in_it(
    writing_kernel: tk.Kernel, tmp_path: pathlib.Path
) -> None:
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\necho made > made.txt\n")
    script.chmod(0o755)
    assert analyse("./run.sh").barrier is not None
    assert shell_claims("./run.sh") == [tk.exclusive(tk.path())]
    result = await run_bash(writing_kernel, "./run.sh")
    assert result.status is tk.Status.OK, result.error
    assert (tmp_path / "made.txt").read_text() == "made\n"


async def test_without_landlock_nothing_outside_is_refused_and_the_tool_says_so_once(
    writing_kernel: tk.Kernel, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_confine, "landlock_abi", lambda: 0)
    monkeypatch.setattr(_confine, "_noted", False)
    first = await run_bash(writing_kernel, "writer mine.txt")
    second = await run_bash(writing_kernel, "cat a.txt")
    assert first.status is tk.Status.OK, first.error
    assert first.output == (
        "note: no sandbox (the sandbox is turned off (TOOLKERNEL_SANDBOX=off)): commands run on "
        "the workspace itself with the claims the shell rules give them, and a command whose "
        "effects the rules can't fully know holds the whole workspace; this system has no "
        "Landlock either, so nothing limits where they write outside the workspace"
    )  # the command printed nothing: the note alone
    assert second.output == "A\n"
    assert (tmp_path / "other.txt").exists()


def test_without_the_parser_every_command_is_a_barrier(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tree_sitter", None)  # `import tree_sitter` now fails
    monkeypatch.setattr(_syntax, "_local", type(_syntax._local)())
    _analysis._analyse.cache_clear()
    try:
        assert shell_claims("ls") == [tk.exclusive(tk.path())]
        assert analyse("ls").barrier == (
            f"the shell parser is not installed ({install_command('shell')} for tree-sitter "
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

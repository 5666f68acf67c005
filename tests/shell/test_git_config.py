"""A repository that configures programs git runs when it only reads (a diff driver's
textconv, a clean filter, ``diff.external``) makes its git commands barriers: they may run
anything, so they hold the workspace alone, never beside other calls under a shared lease."""

from __future__ import annotations

import pathlib
import subprocess

import pytest

import toolkernel as tk
from toolkernel.locks import EVERYTHING
from toolkernel.shell import analyse
from toolkernel.tools import Workspace, builtin_tools

from .helpers import run_bash


def git(root: pathlib.Path, *arguments: str) -> None:
    subprocess.run(["git", *arguments], cwd=root, check=True, capture_output=True)


@pytest.fixture
def repository(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "a.txt").write_text("hello\n")
    (tmp_path / ".gitattributes").write_text("a.txt diff=shout\n")
    git(tmp_path, "init", "-q", "-b", "main", ".")
    git(tmp_path, "config", "user.email", "dev@example.org")
    git(tmp_path, "config", "user.name", "Dev")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "start")
    (tmp_path / "a.txt").write_text("hello\nworld\n")
    return tmp_path


def claims_of(root: pathlib.Path, command: str) -> list[tk.Claim]:
    bash = next(tool for tool in builtin_tools(bash=True) if tool.name == "Bash")
    with Workspace(root) as workspace:
        return list(bash.claims({"command": command}, workspace.key) or ())


CONFIGS = {
    "a diff driver's textconv": ('diff "shout"', "textconv", "sh -c 'touch ran; cat \"$0\"'"),
    "a diff driver's command": ("diff.shout", "command", "touch ran"),
    "a clean filter": ('filter "shout"', "clean", "touch ran; cat"),
    "an external diff": ("diff", "external", "touch ran"),
    "signatures shown in logs": ("log", "showSignature", "true"),
    "another file's settings": ("include", "path", "../elsewhere"),
}


@pytest.mark.parametrize(("section", "key", "value"), CONFIGS.values(), ids=CONFIGS)
def test_git_in_a_repository_naming_programs_is_a_barrier(
    repository: pathlib.Path, section: str, key: str, value: str
) -> None:
    assert claims_of(repository, "git diff") != [tk.exclusive(EVERYTHING)]  # shared, before
    with open(repository / ".git" / "config", "a") as config:
        config.write(f"[{section}]\n\t{key} = {value}\n")
    assert analyse("git diff", root=repository).barrier is not None
    for command in ("git diff", "git status", "git log -p -1 | head", "cd sub && git show"):
        assert claims_of(repository, command) == [tk.exclusive(tk.path())], command


def test_plain_repository_settings_keep_git_read_only(repository: pathlib.Path) -> None:
    with open(repository / ".git" / "config", "a") as config:
        config.write(
            '[remote "origin"]\n\turl = https://example.org/r.git\n[diff]\n\talgorithm = patience\n'
        )
    assert analyse("git diff", root=repository).barrier is None
    assert tk.exclusive(tk.path()) not in claims_of(repository, "git diff")


def test_a_subdirectory_of_the_repository_as_root_still_sees_its_config(
    repository: pathlib.Path,
) -> None:
    (repository / "sub").mkdir()
    git(repository, "config", "diff.shout.textconv", "touch ran; cat")
    assert claims_of(repository / "sub", "git diff") == [tk.exclusive(tk.path())]


async def test_a_textconv_runs_only_as_a_barrier(repository: pathlib.Path) -> None:
    git(repository, "config", "diff.shout.textconv", "sh -c 'touch ran; cat \"$0\"'")
    async with tk.open_kernel(builtin_tools(bash=True), root=repository) as kernel:
        events: list[tk.CallEvent] = []
        kernel.add_listener(events.append)
        result = await run_bash(kernel, "git diff")
    assert result.status is tk.Status.OK, result.error
    queued = next(e for e in events if isinstance(e, tk.kernel.CallQueued))
    assert queued.claims == (tk.exclusive(tk.path()),)

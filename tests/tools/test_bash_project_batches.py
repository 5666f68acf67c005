"""The Bash tool reads the project's own configuration in every batch, not only a lone call's:
its rules file, package.json scripts and the repository's git settings decide the claims a
command's call holds, in the sandbox and without it.

A batch of several calls is keyed once for all (the kernel wraps the workspace's key); the
tool finds the workspace through that wrapper. The claims are read off the ``CallQueued``
events, and a Write of another file runs beside a command that does not touch it.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
from collections.abc import Iterator

import pytest

import toolkernel as tk
from toolkernel import sandbox
from toolkernel.kernel import CallQueued
from toolkernel.shell import _confine
from toolkernel.tools import builtin_tools


@pytest.fixture(params=["sandbox", "no sandbox"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "no sandbox":
        monkeypatch.setenv("TOOLKERNEL_SANDBOX", "off")
        monkeypatch.setattr(_confine, "_noted", True)
    elif sandbox.unavailable() is not None:
        pytest.skip(f"no sandbox here: {sandbox.unavailable()}")
    sandbox.unavailable.cache_clear()
    yield request.param
    sandbox.unavailable.cache_clear()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the claims are the loop's business nowhere


def git(root: pathlib.Path, *arguments: str) -> None:
    subprocess.run(["git", *arguments], cwd=root, check=True, capture_output=True)


async def queued_claims(root: pathlib.Path, command: str) -> tuple[set[str], list[tk.ToolResult]]:
    """The claims the Bash call of a two-call batch [Bash command, Write other.txt] is queued
    with, and the batch's results."""
    events: list[object] = []
    async with tk.open_kernel(builtin_tools(bash=True), root=root) as kernel:
        kernel.add_listener(events.append)
        results = await kernel.run(
            [
                tk.ToolCall("b", "Bash", {"command": command}),
                tk.ToolCall("w", "Write", {"file_path": "other.txt", "content": "x\n"}),
            ]
        )
    (queued,) = [e for e in events if isinstance(e, CallQueued) and e.call_id == "b"]
    return {str(claim) for claim in queued.claims}, results


async def test_the_projects_rules_file_is_read_in_a_batch(
    tmp_path: pathlib.Path, mode: str
) -> None:
    (tmp_path / ".toolkernel").mkdir()
    (tmp_path / ".toolkernel" / "shell.toml").write_text('[slowdoc]\nreads = ["docs/"]\n')
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("a\n")
    # slowdoc is no program here: the command fails, but its claims are what the rule says.
    claims, (command, write) = await queued_claims(tmp_path, "slowdoc 2>/dev/null; sleep 0.3")
    assert claims == {"shared docs"}
    assert write.status is tk.Status.OK
    assert write.finished_at < command.finished_at  # beside it, not after it


async def test_package_json_scripts_are_read_in_a_batch(tmp_path: pathlib.Path, mode: str) -> None:
    scripts = {"lint": "cat docs/a.md"}
    (tmp_path / "package.json").write_text(json.dumps({"name": "p", "scripts": scripts}))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("a\n")
    claims, _ = await queued_claims(tmp_path, "npm run lint")
    assert "shared docs/a.md" in claims
    assert "exclusive ." not in claims


async def test_the_repositorys_git_settings_are_read_in_a_batch(
    tmp_path: pathlib.Path, mode: str
) -> None:
    git(tmp_path, "init", "-q")
    plain, _ = await queued_claims(tmp_path, "git status")
    assert plain == {"shared ."}
    # A diff driver is a program git runs even to read: the command then holds the workspace.
    git(tmp_path, "config", "diff.tool-of-its-own.command", "./diff.sh")
    driven, _ = await queued_claims(tmp_path, "git status")
    assert driven == {"exclusive ."}

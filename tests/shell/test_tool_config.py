"""A project whose configuration makes ruff, mypy or pytest write where their rules don't claim
(a moved cache, reports, logs, options added to every run) makes those commands barriers; so
does a configuration changed while a call waited for its claims."""

from __future__ import annotations

import os
import pathlib
import sys

import pytest

import toolkernel as tk
from toolkernel.tools import Workspace, builtin_tools

BARRIER = [tk.exclusive(tk.path())]


def claims_of(root: pathlib.Path, command: str) -> list[tk.Claim]:
    bash = next(tool for tool in builtin_tools(bash=True) if tool.name == "Bash")
    with Workspace(root) as workspace:
        return list(bash.claims({"command": command}, workspace.key) or ())


CONFIGURED = {
    "ruff's cache in pyproject.toml": (
        "pyproject.toml",
        '[tool.ruff]\ncache-dir = "elsewhere"\n',
        "ruff check a.py",
    ),
    "ruff's cache in ruff.toml": ("ruff.toml", 'cache-dir = "elsewhere"\n', "ruff format a.py"),
    "mypy's cache": ("mypy.ini", "[mypy]\ncache_dir = elsewhere\n", "mypy a.py"),
    "a mypy report": ("pyproject.toml", '[tool.mypy]\nhtml_report = "r"\n', "mypy a.py"),
    "pytest's cache": ("pytest.ini", "[pytest]\ncache_dir = elsewhere\n", "pytest -q"),
    "pytest's log": ("tox.ini", "[pytest]\nlog_file = run.log\n", "python -m pytest"),
    "coverage in pytest's options": (
        "pyproject.toml",
        '[tool.pytest.ini_options]\naddopts = "-q --cov=src"\n',
        "pytest",
    ),
    "a report in pytest's options": (
        "setup.cfg",
        "[tool:pytest]\naddopts =\n    --junitxml=report.xml\n",
        "pytest",
    ),
    "the configuration of a directory the command names": (
        "sub/pytest.ini",
        "[pytest]\ncache_dir = elsewhere\n",
        "pytest sub/tests",
    ),
    "the configuration where the command runs": (
        "sub/pyproject.toml",
        '[tool.ruff]\ncache-dir = "elsewhere"\n',
        "cd sub && ruff check .",
    ),
}


@pytest.mark.parametrize(("file", "text", "command"), CONFIGURED.values(), ids=CONFIGURED)
def test_a_tool_configured_to_write_elsewhere_is_a_barrier(
    tmp_path: pathlib.Path, file: str, text: str, command: str
) -> None:
    (tmp_path / "sub" / "tests").mkdir(parents=True)
    (tmp_path / "a.py").write_text("x = 1\n")
    assert claims_of(tmp_path, command) != BARRIER
    (tmp_path / file).write_text(text)
    assert claims_of(tmp_path, command) == BARRIER


def test_a_plain_configuration_keeps_the_tools_claims(tmp_path: pathlib.Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.ruff]\nline-length = 99\n[tool.mypy]\nstrict = true\n"
        '[tool.pytest.ini_options]\naddopts = "-q -ra"\ntestpaths = ["tests"]\n'
    )
    assert {str(c) for c in claims_of(tmp_path, "ruff check && mypy . && pytest")} == {
        "shared .",
        "exclusive .ruff_cache",
        "exclusive .mypy_cache",
        "exclusive .pytest_cache",
    }


@pytest.mark.parametrize(
    ("variable", "command"),
    [("RUFF_CACHE_DIR", "ruff check"), ("MYPY_CACHE_DIR", "mypy ."), ("PYTEST_ADDOPTS", "pytest")],
)
def test_a_tool_whose_variable_is_inherited_is_a_barrier(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, variable: str, command: str
) -> None:
    monkeypatch.setenv(variable, "elsewhere")
    assert claims_of(tmp_path, command) == BARRIER


async def test_a_configuration_written_while_the_command_waited_makes_it_a_barrier(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The kernel computes the claims again once they are granted: the second command, queued
    # behind the first, then holds the workspace alone and runs unconfined, as ruff must to
    # write the cache the new configuration names.
    monkeypatch.setenv("PATH", f"{pathlib.Path(sys.executable).parent}:{os.environ['PATH']}")
    (tmp_path / "a.py").write_text("x = 1\n")
    configure = "sleep 0.1; printf 'cache-dir = \"moved\"\\n' > ruff.toml"
    async with tk.open_kernel(builtin_tools(bash=True), root=tmp_path) as kernel:
        first, second = await kernel.run(
            [
                tk.ToolCall("1", "Bash", {"command": configure}),
                tk.ToolCall("2", "Bash", {"command": "ruff check a.py"}),
            ]
        )
    assert first.status is tk.Status.OK, first.error
    assert second.status is tk.Status.OK, second.error
    assert (tmp_path / "moved").is_dir()

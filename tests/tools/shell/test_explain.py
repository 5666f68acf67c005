"""Explaining a prediction: the rules each claim comes from, what to tell a user about a write
the claims missed, and the environment a command needs for its claims to hold."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import toolkernel as tk
from toolkernel.tools.shell import analyse, claim_sources, command_environment, describe_miss


def test_each_claim_names_the_rules_it_comes_from() -> None:
    sources = claim_sources(analyse("pytest -q > out.txt && cd web && npm test"))
    assert sources[tk.exclusive(tk.path("out.txt"))] == ("redirection >",)
    assert sources[tk.exclusive(tk.path(".pytest_cache"))] == ("pytest",)
    assert sources[tk.exclusive(tk.path("web/node_modules/.cache"))] == ("npm test",)
    assert sources[tk.shared(tk.path())] == ("pytest", "npm test")


def test_a_barriers_claim_comes_from_its_reason() -> None:
    analysis = analyse("make")
    assert claim_sources(analysis) == {tk.exclusive(tk.path()): (analysis.barrier,)}


def test_a_miss_names_the_rule_to_add() -> None:
    message = describe_miss("uv run pytest -q", analyse("uv run pytest -q"), ["reports/junit.xml"])
    assert "changed reports/junit.xml" in message
    assert "uv, uv run, pytest" in message
    assert '[pytest]\n    writes = ["reports/junit.xml"]' in message
    dotted = describe_miss("mix deps.get", analyse("mix deps.get"), ["x.lock"])
    assert '[mix."deps.get"]' in dotted


def test_bytecode_goes_outside_the_workspace(tmp_path: pathlib.Path) -> None:
    # pytest imports the project's modules and rewrites its tests: with the environment the
    # prediction assumes, no __pycache__ appears beside them.
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("def double(x):\n    return 2 * x\n")
    (project / "tests").mkdir()
    (project / "tests" / "test_pkg.py").write_text(
        "from pkg import double\n\ndef test_double():\n    assert double(2) == 4\n"
    )
    cache = tmp_path / "cache"
    environment = {**os.environ, **command_environment(cache=cache)}
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    # Without the installed plugins that have nothing to do with the project (langsmith's,
    # hypothesis's), which would be compiled into the fresh cache too: seconds of this test.
    unrelated = ["-p", "no:langsmith_plugin", "-p", "no:hypothesispytest"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            *unrelated,
        ],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert not list(project.rglob("__pycache__"))
    assert list(cache.rglob("*.pyc"))


def test_the_default_cache_is_outside_any_workspace() -> None:
    found = command_environment({"XDG_CACHE_HOME": "/home/u/.cache"})
    assert found == {"PYTHONPYCACHEPREFIX": "/home/u/.cache/toolkernel/pycache"}

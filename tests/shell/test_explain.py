"""Explaining a prediction: the rules each claim comes from, what to tell a user about a write
the claims missed, and the environment a command needs for its claims to hold."""

from __future__ import annotations

import inspect
import os
import pathlib
import re
import subprocess
import sys

import pytest

import toolkernel as tk
import toolkernel.tools
from toolkernel.shell import (
    _confine,
    analyse,
    claim_sources,
    command_environment,
    describe_miss,
)


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


# -- a write outside the workspace that Landlock refused --------------------------------------


def launch(allowed: list[str], *, sandboxed: bool = True) -> _confine.Launch:
    argv = [*_confine._LAUNCHER, *(["--overlay", "r", "u", "w"] if sandboxed else []), "--"]
    return _confine.Launch(argv, {}, allowed=allowed, temporary=allowed[0])


@pytest.mark.parametrize(
    ("output", "refused"),
    [
        ("bash: {E}/x: Permission denied", "{E}/x"),
        ("bash: line 1: {E}/x: Permission denied", "{E}/x"),  # as the launched shell says it
        ("/usr/bin/bash: line 1: {E}/x: Permission denied", "{E}/x"),
        ("/usr/bin/bash: line 3: {E}/my file: Permission denied", "{E}/my file"),
        ("/bin/sh: 1: cannot create {E}/x: Permission denied", "{E}/x"),
        ("touch: cannot touch '{E}/x': Permission denied", "{E}/x"),
        ("mkdir: cannot create directory \u2018{E}/d\u2019: Permission denied", "{E}/d"),
        ("mkdir: cannot create directory \u2018{E}/my d\u2019: Permission denied", "{E}/my d"),
        ("cp: cannot create regular file '{E}/x': Permission denied", "{E}/x"),
        ("PermissionError: [Errno 13] Permission denied: '{E}/x'", "{E}/x"),
        ("sed: couldn't open temporary file {E}/sedAbc: Permission denied", "{E}/sedAbc"),
        # An apostrophe in a word is no quote: it closed on the path's opening quote.
        (
            'error: couldn\'t create a temp dir: Permission denied (os error 13) at path "{E}/rm"',
            "{E}/rm",
        ),
        ("Error: EACCES: permission denied, open '{E}/x'", "{E}/x"),
        ("java.io.FileNotFoundException: {E}/x (Permission denied)", "{E}/x"),
        # The path on a line before the one saying it was refused (Rust's causes).
        (
            "error: failed to create package `hello` at `{E}/hello`\n\nCaused by:\n  failed to "
            "create directory `{E}/hello`\n\nCaused by:\n  Permission denied (os error 13)",
            "{E}/hello",
        ),
    ],
)
def test_a_refused_write_outside_is_named_from_what_programs_say(
    tmp_path: pathlib.Path, output: str, refused: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    said = output.replace("{E}", str(elsewhere))
    message = launch([str(tmp_path / "tmp")]).explain(said, str(root))
    assert message is not None, said
    assert message.startswith(
        f"the sandbox refused writing {refused.replace('{E}', str(elsewhere))}: outside the "
        f"workspace"
    )
    assert "builtin_tools(bash=True, shell_writable=[...])" in message


def test_the_refusal_names_only_public_functions_and_their_real_parameters(
    tmp_path: pathlib.Path,
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    said = f"touch: cannot touch '{elsewhere}/x': Permission denied"
    message = launch([str(tmp_path / "tmp")]).explain(said, str(tmp_path / "root"))
    assert message is not None
    named = re.findall(r"([\w.]+)\(([^()]*)\)", message)
    assert named, message
    for function, arguments in named:
        module, _, name = function.rpartition(".")
        assert module == "toolkernel.tools", f"{function} is not a public function"
        parameters = inspect.signature(getattr(toolkernel.tools, name)).parameters
        for argument in re.findall(r"(\w+)=", arguments):
            assert argument in parameters, f"{function} has no parameter {argument}="


def test_without_the_sandbox_it_is_landlock_that_refused(tmp_path: pathlib.Path) -> None:
    message = launch([str(tmp_path / "tmp")], sandboxed=False).explain(
        f"touch: cannot touch '{tmp_path}/x': Permission denied", str(tmp_path / "root")
    )
    assert message is not None and message.startswith(f"Landlock refused writing {tmp_path}/x")


def test_a_place_this_process_may_not_write_either_was_refused_by_its_permissions(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not the sandbox's doing (a user who may not write /etc): nothing to allow.
    places = {str(tmp_path)}
    monkeypatch.setattr(_confine.os, "access", lambda path, mode: str(path) not in places)
    output = f"touch: cannot touch '{tmp_path}/x': Permission denied"
    assert launch([str(tmp_path / "tmp")]).explain(output, str(tmp_path / "root")) is None


def test_inside_the_workspace_and_where_it_may_write_nothing_is_explained(
    tmp_path: pathlib.Path,
) -> None:
    allowed = tmp_path / "cache"
    for output in (
        f"touch: cannot touch '{tmp_path}/root/a': Permission denied",
        f"touch: cannot touch '{allowed}/a': Permission denied",
        "cat: secret.txt: Permission denied",
    ):
        assert launch([str(allowed)]).explain(output, str(tmp_path / "root")) is None

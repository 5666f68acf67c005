"""``python -m NAME``: the modules the rules describe, and what Python itself writes.

A module named in ``python``'s ``command-names`` runs under the rule of that name; one without
a rule made every command running it a barrier (``curl ... | python3 -m json.tool``)."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from toolkernel.shell import analyse
from toolkernel.tools import ShellRules, shell_claims


def claims(command: str) -> set[str]:
    return {str(claim) for claim in shell_claims(command)}


@pytest.mark.parametrize("python", ["python", "python3"])
def test_json_tool_reads_its_input_and_writes_its_output(python: str) -> None:
    piped = analyse(f"curl -s https://example.com/a.json | {python} -m json.tool")
    assert piped.barrier is None, piped.barrier
    assert piped.effects_beyond == ()
    assert claims(f"{python} -m json.tool a.json") == {"shared a.json"}
    assert claims(f"{python} -m json.tool --indent 2 --sort-keys in.json out.json") == {
        "shared in.json",
        "exclusive out.json",
    }
    for options in ("--compact", "--json-lines --no-ensure-ascii", "--tab", "--no-indent"):
        assert claims(f"{python} -m json.tool {options} a.json") == {"shared a.json"}


def test_json_tool_with_the_project_read_has_known_effects(tmp_path: pathlib.Path) -> None:
    # Where it runs there is no json.py or json/ to shadow the standard library's module.
    (tmp_path / "a.json").write_text("{}")
    command = "python3 -m json.tool a.json"
    environ = {"PATH": os.environ["PATH"]}
    analysis = analyse(command, root=tmp_path, environ=environ)
    assert analysis.barrier is None and analysis.effects_known and analysis.confined
    # A module path of the environment's may hold another json: not looked at.
    with_path = analyse(command, root=tmp_path, environ={**environ, "PYTHONPATH": "src"})
    assert not with_path.effects_known
    (tmp_path / "json.py").write_text("import os\n")
    assert analyse(command, root=tmp_path, environ=environ).barrier is not None


def test_without_the_project_python_m_may_run_a_module_of_the_workspace() -> None:
    assert not analyse("python3 -m json.tool a.json").effects_known


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("python -m unittest", {"shared ."}),
        ("python3 -m unittest discover -s tests -p 'test_*.py'", {"shared ."}),
        ("python3 -m py_compile src/a.py", {"shared src/a.py"}),
        ("python3 -m compileall -q src", {"shared src"}),
        ("python3 -m compileall -b src", {"exclusive src"}),
        ("python3 -m tokenize src/a.py", {"shared src/a.py"}),
        ("python3 -m tabnanny src", {"shared src"}),
        ("python3 -m sysconfig", set()),
    ],
)
def test_more_modules_agents_run_are_described(command: str, expected: set[str]) -> None:
    assert analyse(command).barrier is None, analyse(command).barrier
    assert claims(command) == expected


def test_unittest_runs_the_projects_tests() -> None:
    assert any(
        reason.startswith("unittest:") for reason in analyse("python -m unittest").unknown_effects
    )


@pytest.mark.parametrize(
    "command",
    [
        "python3 -m http.server 8000",  # serves until it is killed
        "python3 -m pydoc -w json",  # imports modules and writes HTML
        "python3 -m timeit 'x = 1'",  # runs the code it is given
        "python3 -m ensurepip",  # installs
        "python3 -m zipfile -e a.zip out",
    ],
)
def test_modules_that_serve_run_code_or_write_elsewhere_are_barriers(command: str) -> None:
    assert analyse(command).barrier is not None


def _command_names(name: str, table: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for module in table.get("command-names", []):
        yield name, module
    for option, when in table.get("when", {}).items():
        for module in when.get("command-names", []):
            yield f"{name} {option}", module
    for key, value in table.items():
        if key != "when" and isinstance(value, Mapping):
            yield from _command_names(f"{name} {key}", value)


NAMED = [
    pair
    for program, table in ShellRules.default().tables.items()
    for pair in _command_names(program, table)
]


@pytest.mark.parametrize(("rule", "name"), NAMED)
def test_every_program_a_rule_says_it_runs_has_a_rule(rule: str, name: str) -> None:
    assert ShellRules.default().get(name) is not None, f"{rule} runs {name}, which has no rule"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # -X pycache_prefix=DIR overrides the environment's PYTHONPYCACHEPREFIX: bytecode goes
        # under DIR, from where it runs.
        (
            "python3 -X pycache_prefix=docs/pc -m json.tool a.json",
            {"shared a.json", "exclusive docs/pc"},
        ),
        (
            "cd sub && python3 -Xpycache_prefix=pc -m json.tool a.json",
            {"shared sub/a.json", "exclusive sub/pc"},
        ),
        # An empty prefix, -E and -I ignore the environment: bytecode beside every module.
        ("python3 -X pycache_prefix= -m json.tool a.json", {"exclusive ."}),
        ("python3 -E -m json.tool a.json", {"exclusive ."}),
        ("python3 -I -m json.tool a.json", {"exclusive ."}),
        # ... unless -B says to write none.
        ("python3 -E -B -m json.tool a.json", {"shared a.json"}),
        ("python3 -B -X pycache_prefix=pc -m json.tool a.json", {"shared a.json"}),
        ("python3 -X dev -X utf8 -X importtime -m json.tool a.json", {"shared a.json"}),
        # A prefix outside the workspace is not the kernel's to order.
        ("python3 -X pycache_prefix=/var/cache/pc -m json.tool a.json", {"shared a.json"}),
    ],
)
def test_what_python_is_told_about_bytecode_is_claimed(command: str, expected: set[str]) -> None:
    assert analyse(command).barrier is None, analyse(command).barrier
    assert claims(command) == expected


@pytest.mark.parametrize(
    "command",
    [
        "python3 -X presite=sitecustom -m json.tool a.json",  # imports a module first
        "python3 -X $OPTION -m json.tool a.json",
        "python3 -X frobnicate -m json.tool a.json",
        # The environment the Bash tool sets (PYTHONPYCACHEPREFIX) changed or dropped.
        "PYTHONPYCACHEPREFIX=docs/pc python3 -m pytest",
        "export PYTHONPYCACHEPREFIX=docs/pc; pytest",
        "env PYTHONPYCACHEPREFIX=docs/pc pytest",
        "env -u PYTHONPYCACHEPREFIX pytest",
        "env --unset=PYTHONPYCACHEPREFIX pytest",
        "env -i pytest",
        "env --ignore-environment pytest",
        "unset PYTHONPYCACHEPREFIX; pytest",
    ],
)
def test_what_the_rules_cant_follow_about_bytecode_is_a_barrier(command: str) -> None:
    assert analyse(command).barrier is not None


def test_env_may_unset_what_changes_nothing() -> None:
    assert analyse("env -u PYTHONDONTWRITEBYTECODE -u LANG ls").barrier is None

"""Bash semantics the walk follows, or refuses: a file named ``-``, logical ``cd``, ``set`` and
``shopt`` options that change how later commands are read, ``BASH_`` variables, ``find
-execdir``, links the command makes, ``sed --follow-symlinks``."""

from __future__ import annotations

import pytest

from toolkernel.shell import analyse
from toolkernel.tools import shell_claims

BARRIER = {"exclusive ."}


def claims(command: str) -> set[str]:
    return {str(claim) for claim in shell_claims(command)}


def test_a_file_named_dash_is_claimed() -> None:
    assert claims("echo hi > -") == {"exclusive -"}
    assert claims("cp a.txt -") == {"shared a.txt", "exclusive -"}
    assert claims("cd sub && echo x >> -") == {"exclusive sub/-"}


def test_cd_dot_dot_is_logical_and_physical() -> None:
    found = analyse("cd link/.. && echo x > out.txt")
    assert {a.path for a in found.accesses if a.kind == "write"} == {"out.txt", "link/../out.txt"}


def test_cd_physical_is_not_followed() -> None:
    assert claims("cd -P link && cd .. && touch x") == BARRIER


@pytest.mark.parametrize(
    "command",
    ["set -e; ls", "set -euo pipefail; ls", "set -x && ls", "set +e; ls", "set -- a b; ls"],
)
def test_set_options_that_change_nothing_read(command: str) -> None:
    assert claims(command) == {"shared ."}


@pytest.mark.parametrize(
    "command", ["set -k; ls", "set -o keyword; ls", "set -P; cd link/.. && ls", "set -eP; ls"]
)
def test_set_options_that_change_how_commands_are_read_are_barriers(command: str) -> None:
    assert claims(command) == BARRIER


def test_shopt_that_changes_cd_is_a_barrier() -> None:
    assert claims("shopt -s cdable_vars; cd foo && touch x") == BARRIER
    assert claims("shopt -s lastpipe; echo sub | cd x") == BARRIER
    assert claims("shopt -s nullglob globstar; ls src/**/*.py") == {"shared src"}
    assert claims("shopt extglob; ls") == {"shared ."}


@pytest.mark.parametrize(
    "command", ["BASH_CMDS[ls]=/tmp/x; ls", "BASH_ALIASES[ls]=rm; ls", "BASH_XTRACEFD=3 ls"]
)
def test_bash_variables_that_rename_programs_are_barriers(command: str) -> None:
    assert claims(command) == BARRIER


def test_find_execdir_claims_where_its_command_runs() -> None:
    # The command runs in the directory of each file found: beneath src, or src's own.
    assert claims("find sub/src -execdir touch x \\;") == {"exclusive sub"}
    assert claims("find . -name '*.py' -execdir grep -n foo {} +") == {"shared ."}
    assert claims("find src -execdir cat ../y \\;") == BARRIER


def test_links_the_command_makes_are_not_followed() -> None:
    assert claims("ln -s /etc x && cat x/passwd") == BARRIER
    assert claims("ln -s ../src l; echo y > l/a.py") == BARRIER
    assert claims("cp -s a b && echo x >> b") == BARRIER
    assert claims("ln -s src/a.py sub/link") == {"exclusive sub"}  # the link alone


def test_sed_following_links_is_a_barrier() -> None:
    assert claims("sed -i --follow-symlinks s/a/b/ link") == BARRIER


def test_pythonpath_makes_effects_unknown_but_not_a_barrier() -> None:
    found = analyse("PYTHONPATH=src ruff check src")
    assert found.barrier is None
    assert not found.effects_known


@pytest.mark.parametrize(
    "command",
    [
        "PYTHONPYCACHEPREFIX=pyc pytest -q",
        "export PYTHONUSERBASE=local && pip list",
        "PYTHONBREAKPOINT=os.system pytest",
    ],
)
def test_python_variables_that_move_writes_or_run_code_are_barriers(command: str) -> None:
    assert claims(command) == BARRIER


def test_python_variables_that_only_change_output_are_fine() -> None:
    assert claims("PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 ruff check src") == {
        "shared .",
        "exclusive .ruff_cache",
    }

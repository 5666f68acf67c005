"""``Analysis.effects_known``: whether a command's effects are known whole from its text and the
rules, or it runs the project's own code (tests, build scripts, hooks, an interpreter on a
workspace file). The flag comes from the rule table's ``unknown-effects`` field; the claims are
the same either way."""

from __future__ import annotations

import pytest

from toolkernel.shell import analyse
from toolkernel.tools import ShellRules, shell_claims

KNOWN = [
    "ls -la src",
    "cat a.txt | grep x > out.txt",
    "git status",
    "git log --oneline -5",
    "git tag -l",
    "ruff check src",
    "ruff format src",
    "mypy src",
    "cargo fmt",
    "go build ./...",
    "go vet ./...",
    "rg TODO",
    "uvx ruff check",
]

UNKNOWN = {
    "pytest -q": "pytest",
    "python -m pytest tests": "pytest",
    "python -m pip list": "python",
    "uv run pytest": "uv run",
    "npm test": "npm test",
    "cargo build": "cargo build",
    "cargo test --release": "cargo test",
    "go test ./...": "go test",
    "mix test": "mix test",
    "mix compile": "mix compile",
    "git commit -m x": "git commit",
    "git push": "git push",
    "git checkout main": "git checkout",
    "git help commit": "git help",
    "eslint src": "eslint",
    ".venv/bin/ruff check": ".venv/bin/ruff",
    "PYTHONPATH=src mypy src": "PYTHONPATH",
    # The workspace's activate script may do anything; its claim is what it reads.
    "source .venv/bin/activate && ruff check": "source",
    ". .venv/bin/activate; mypy src": "source",
}


@pytest.mark.parametrize("command", KNOWN)
def test_a_command_the_rules_describe_whole_has_known_effects(command: str) -> None:
    analysis = analyse(command)
    assert analysis.barrier is None
    assert analysis.effects_known, analysis.unknown_effects
    assert analysis.unknown_effects == ()


@pytest.mark.parametrize(("command", "source"), UNKNOWN.items())
def test_a_command_running_the_projects_code_has_unknown_effects(command: str, source: str) -> None:
    analysis = analyse(command)
    assert analysis.barrier is None, analysis.barrier
    assert not analysis.effects_known
    assert any(reason.startswith(f"{source}:") for reason in analysis.unknown_effects), (
        analysis.unknown_effects
    )


def test_a_barrier_never_has_known_effects() -> None:
    assert not analyse("make").effects_known
    assert not analyse("eval x").effects_known


def test_the_flag_does_not_change_the_claims() -> None:
    rules = ShellRules.default().extended('[pytest]\nunknown-effects = ""')
    assert analyse("pytest", rules).effects_known
    assert shell_claims("pytest", rules) == shell_claims("pytest")


def test_a_projects_rule_may_say_a_program_runs_its_code() -> None:
    rules = ShellRules.default().extended(
        """
        [bd.show]
        reads = [".beads/"]
        operands = "text..."
        [bd.doctor]
        writes = [".beads/"]
        unknown-effects = "it runs the repository's migrations"
        """
    )
    assert analyse("bd show x", rules).effects_known
    assert analyse("bd doctor", rules).unknown_effects == (
        "bd doctor: it runs the repository's migrations",
    )


def test_sourcing_a_virtualenv_keeps_its_claim() -> None:
    assert shell_claims(". .venv/bin/activate") == shell_claims("cat .venv/bin/activate")


def test_a_when_table_can_take_the_flag_back() -> None:
    assert not analyse("git tag v1").effects_known
    assert analyse("git tag --list").effects_known

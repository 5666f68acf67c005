"""``Analysis.effects_beyond`` and ``Analysis.confined``: what a command changes beyond the
sandbox (the network beyond fetching, a database server, a container daemon, a device,
something published), which throwing a run of it away does not undo, so the sandbox never runs
it twice. The reasons come from the rule table's ``effects-beyond`` field, from what curl, wget
and ``gh api`` are told to send, and from the shell's own ``/dev/tcp`` and device writes."""

from __future__ import annotations

import pathlib
import subprocess
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

import toolkernel as tk
from toolkernel.shell import analyse
from toolkernel.tools import ShellRules, shell_claims

CONFINED = [
    "cat a.txt",
    "sed -i s/a/b/ src/x.py",
    "git status",
    "git log --oneline -5",
    "docker ps",
    "docker images",
    "docker compose ps",
    "curl -s https://example.com/api",
    "curl -sSfL -o out.json https://example.com/a.json",
    "curl -I https://example.com",
    "curl -X GET https://example.com/items",
    "curl -G -d q=term https://example.com/search",
    "curl -G --data-urlencode 'q=a b' https://example.com/search",
    "curl ftp://example.com/file.txt",
    "wget -qO- https://example.com",
    "wget -q https://example.com/file.tar.gz",
    "wget --method=HEAD https://example.com",
    "gh pr view 12",
    "gh api repos/o/r/pulls",
    "gh api -X GET search/issues -f q=bug",
    "gh issue list",
]

BEYOND = {
    "git push": "git push",
    "git push origin main": "git push",
    "docker build -t app .": "docker build",
    "docker pull python:3.12": "docker pull",
    "docker push registry.example.com/app": "docker push",
    "curl -X POST https://example.com/items": "curl",
    "curl --request DELETE https://example.com/items/1": "curl",
    "curl -d a=1 https://example.com/items": "curl",
    "curl --data-binary @body.json https://example.com/items": "curl",
    "curl --json '{}' https://example.com/items": "curl",
    "curl -F file=@a.txt https://example.com/upload": "curl",
    "curl -T a.txt https://example.com/upload": "curl",
    "curl smtp://mail.example.com --mail-rcpt a@example.com -T mail.txt": "curl",
    "curl telnet://example.com:23": "curl",
    "wget --post-data=a=1 https://example.com/items": "wget",
    "wget --post-file=body.json https://example.com/items": "wget",
    "wget --method=DELETE https://example.com/items/1": "wget",
    "gh pr create -t title -b body": "gh pr create",
    "gh pr comment 12 -b ok": "gh pr comment",
    "gh issue create -t title -b body": "gh issue create",
    "gh api repos/o/r/issues -f title=x": "gh api",
    "gh api -X DELETE repos/o/r/issues/1": "gh api",
    "go install ./cmd/tool": "go install",
    "echo hi > /dev/tcp/example.com/80": "redirection >",
    "cat < /dev/tcp/example.com/80": "redirection <",
    "echo 1 > /dev/ttyS0": "redirection >",
    "tee /dev/sda < image.bin": "tee",
    "echo x > /dev/shm/state": "redirection >",
}


@pytest.mark.parametrize("command", CONFINED)
def test_a_command_whose_effects_stay_in_the_sandbox_is_confined(command: str) -> None:
    analysis = analyse(command)
    assert analysis.barrier is None, analysis.barrier
    assert analysis.effects_beyond == ()
    assert analysis.confined


@pytest.mark.parametrize(("command", "source"), BEYOND.items())
def test_a_command_with_effects_beyond_the_sandbox_is_not_confined(
    command: str, source: str
) -> None:
    analysis = analyse(command)
    assert analysis.barrier is None, analysis.barrier
    assert not analysis.confined
    assert [reason.split(": ", 1)[0] for reason in analysis.effects_beyond] == [source]


def test_the_reasons_say_what_goes_beyond() -> None:
    assert analyse("git push").effects_beyond == (
        "git push: it sends commits to a remote repository",
    )
    assert analyse("curl -d a=1 https://example.com").effects_beyond == (
        "curl: it sends data (a POST request)",
    )
    assert analyse("echo hi > /dev/tcp/example.com/80").effects_beyond == (
        "redirection >: it opens a network connection (/dev/tcp/example.com/80)",
    )


def test_a_dry_run_sends_nothing() -> None:
    # It still runs the pre-push hook: its effects are not known.
    analysis = analyse("git push --dry-run origin main")
    assert analysis.effects_beyond == ()
    assert not analysis.effects_known


def test_not_understood_or_unknown_effects_are_not_confined_either() -> None:
    # A database client is not in the rules: a barrier, so not confined, with no reason of
    # its own; pytest runs the project's tests, which may do anything.
    for command in ("psql -c 'select 1'", "mysql -e 'drop table t'", "redis-cli flushall"):
        analysis = analyse(command)
        assert analysis.barrier is not None
        assert not analysis.confined
    pytest_run = analyse("pytest -q")
    assert pytest_run.barrier is None and pytest_run.effects_beyond == ()
    assert not pytest_run.confined


def test_one_stage_going_beyond_makes_the_whole_pipeline_not_confined() -> None:
    analysis = analyse(
        "git status && curl -s https://example.com/a.json | jq . > a.json && "
        "curl -d @a.json https://example.com/items | tee reply.txt"
    )
    assert analysis.barrier is None
    assert analysis.effects_known
    assert analysis.effects_beyond == ("curl: it sends data (a POST request)",)
    assert not analysis.confined
    assert analyse("git status && curl -s https://example.com | jq .name").confined


def test_a_barrier_keeps_the_reasons_met_before_it() -> None:
    analysis = analyse("git push && make")
    assert analysis.barrier is not None
    assert analysis.effects_beyond == ("git push: it sends commits to a remote repository",)


def test_the_claims_do_not_change() -> None:
    rules = ShellRules.default().extended('[git.push]\neffects-beyond = ""')
    assert analyse("git push", rules).effects_beyond == ()
    assert shell_claims("git push", rules) == shell_claims("git push")
    # bash's /dev/tcp is no file: nothing to claim (it was a write out of the workspace).
    assert shell_claims("echo hi > /dev/tcp/example.com/80") == []


def test_a_projects_rule_may_say_a_program_goes_beyond_and_a_when_table_take_it_back() -> None:
    rules = ShellRules.default().extended(
        """
        [deploy-preview]
        reads = ["{workspace}"]
        effects-beyond = "it uploads the site to the preview server"
        [deploy-preview.when."--dry-run"]
        effects-beyond = ""
        """
    )
    assert analyse("deploy-preview", rules).effects_beyond == (
        "deploy-preview: it uploads the site to the preview server",
    )
    assert analyse("deploy-preview --dry-run", rules).confined


def test_a_projects_rules_file_is_read_for_it(tmp_path: pathlib.Path) -> None:
    (tmp_path / ".toolkernel").mkdir()
    (tmp_path / ".toolkernel" / "shell.toml").write_text(
        '[deploy-preview]\neffects-beyond = "it uploads the site"\n'
    )
    analysis = analyse("deploy-preview", root=tmp_path)
    assert analysis.effects_beyond == ("deploy-preview: it uploads the site",)


def test_a_repository_without_hooks_takes_back_git_push_unknown_effects_not_its_beyond(
    tmp_path: pathlib.Path,
) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    for hook in (tmp_path / ".git" / "hooks").iterdir():
        hook.unlink()
    analysis = analyse("git push", root=tmp_path)
    assert analysis.effects_known
    assert analysis.effects_beyond == ("git push: it sends commits to a remote repository",)
    assert not analysis.confined


def test_effects_beyond_must_be_a_reason() -> None:
    with pytest.raises(tk.errors.ShellRulesError, match="effects-beyond must be a reason"):
        ShellRules.from_toml("[x]\neffects-beyond = true")


# -- every rule that says it goes beyond does, when its command is run -------------------------


def _marked(name: str, table: Mapping[str, Any]) -> Iterator[tuple[str, str | None, str]]:
    """(rule, option of a `when` table or None, reason) for each effects-beyond in ``table``."""
    reason = table.get("effects-beyond")
    if reason:
        yield name, None, reason
    for option, when in table.get("when", {}).items():
        if when.get("effects-beyond"):
            yield name, option, when["effects-beyond"]
    for key, value in table.items():
        if key != "when" and isinstance(value, Mapping):
            yield from _marked(f"{name} {key}", value)


MARKED = [
    entry
    for program, table in ShellRules.default().tables.items()
    for entry in _marked(program, table)
]


def test_the_built_in_rules_mark_programs_that_go_beyond() -> None:
    marked = {name for name, _, _ in MARKED}
    assert {"git push", "docker build", "gh pr create", "go install"} <= marked


@pytest.mark.parametrize(("name", "option", "reason"), MARKED)
def test_every_rule_marked_beyond_is_understood_and_says_so(
    name: str, option: str | None, reason: str
) -> None:
    rule = ShellRules.default().get(name.split(" ")[0])
    assert rule is not None
    for word in name.split(" ")[1:]:
        rule = rule.subcommands[word]
    words = [*name.split(" "), *([option] if option else [])]
    if option is not None and rule.options.get(option) not in (None, "flag", "optional"):
        words.append("value")
    words += ["x"] * rule.min_operands
    analysis = analyse(" ".join(words))
    assert analysis.barrier is None, analysis.barrier
    assert f"{name}: {reason}" in analysis.effects_beyond
    assert not analysis.confined

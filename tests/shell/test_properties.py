"""Properties of ``shell_claims`` over generated commands.

- Whatever does not parse is never weaker than the barrier: it *is* the barrier.
- No redirection target is ever missed: each is covered by an exclusive claim (or the command is
  a barrier, which covers everything).
"""

from __future__ import annotations

import tree_sitter
import tree_sitter_bash
from hypothesis import given, settings

import toolkernel as tk
from toolkernel.locks import Mode, Path
from toolkernel.tools import shell_claims

from ..strategies import ShellCase, shell_cases, shell_noise

BARRIER = [tk.exclusive(tk.path())]
PARSER = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def covered_exclusively(target: str, claims: list[tk.Claim]) -> bool:
    key = tk.path(target)
    return any(
        claim.mode is Mode.EXCLUSIVE
        and isinstance(claim.resource, Path)
        and key.parts[: len(claim.resource.parts)] == claim.resource.parts
        for claim in claims
    )


@settings(max_examples=200, deadline=None)
@given(shell_noise)
def test_what_does_not_parse_is_a_barrier(text: str) -> None:
    claims = shell_claims(text)
    if PARSER.parse(text.encode()).root_node.has_error or not text.strip():
        assert claims == BARRIER


@settings(max_examples=200, deadline=None)
@given(shell_cases)
def test_no_redirection_target_is_missed(case: ShellCase) -> None:
    claims = shell_claims(case.command)
    for target in case.targets:
        assert covered_exclusively(target, claims), (case.command, target, claims)


@settings(max_examples=200, deadline=None)
@given(shell_cases)
def test_no_redirection_target_is_missed_after_cd(case: ShellCase) -> None:
    claims = shell_claims(f"cd sub && {case.command}")
    for target in case.targets:
        assert covered_exclusively(f"sub/{target}", claims), (case.command, target, claims)

"""The registry of rules that need code (``toolkernel.shell._coded``)."""

from __future__ import annotations

import pytest

from toolkernel.shell import ShellRules, _coded, _coded_rules, analyse


def test_every_coded_rule_is_a_rule_of_the_built_in_table() -> None:
    # A handler registered under a misspelled name would never run.
    assert _coded_rules.MODULES
    rules = ShellRules.default()
    names = [*_coded._HANDLERS, *_coded._OWN_READERS]
    assert {"sed", "curl", "pytest", "python3", "go build", "gcc", "find"} <= set(names)
    assert [name for name in names if _rule(rules, name) is None] == []


def _rule(rules: ShellRules, name: str) -> object:
    """The rule ``name`` names, a subcommand's (``go build``) included."""
    first, *subcommands = name.split(" ")
    rule = rules.get(first)
    for word in subcommands:
        rule = None if rule is None else rule.subcommands.get(word)
    return rule


def test_a_rule_has_one_handler() -> None:
    with pytest.raises(RuntimeError, match="'sed' has a handler already"):
        _coded.coded("sed")(lambda run: None)
    with pytest.raises(RuntimeError, match="'sed' has a handler already"):
        _coded.reads_own_words("sed")(lambda walk, rule, args, cwds: None)


def test_a_handler_runs_once_the_options_are_read() -> None:
    # sed's handler reads its script (the rule's data alone can't); find's reads its words.
    assert analyse("sed -f s.sed a.txt").barrier == (
        "sed: -f runs a script from a file, not known from the text"
    )
    accesses = analyse("find src -delete").accesses
    assert [(a.kind, a.path, a.rule) for a in accesses] == [
        ("read", "src", "find"),
        ("write", ".", "find -delete"),
    ]

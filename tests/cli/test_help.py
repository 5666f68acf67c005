"""``--help`` of the command line and of each command is plain text: no reStructuredText from a
docstring (``double backticks``, ``:func:`...```, a ``::`` ending a line) reaches the terminal."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from toolkernel.cli import main
from toolkernel.cli._main import build_parser

MARKUP = re.compile(r"`|:[a-z]+:|::\s*$|^\s*\.\. ", re.MULTILINE)
"""Backticks of any kind, a role (``:class:``), a literal block's ``::``, a directive."""


def _commands() -> list[str]:
    [action] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(action.choices)


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as ended:
        main([*argv, "--help"])
    assert ended.value.code == 0
    return capsys.readouterr().out


def test_every_command_is_checked() -> None:
    assert {"demo", "replay", "console", "serve", "mcp"} <= set(_commands())


@pytest.mark.parametrize("command", [None, *_commands()])
def test_help_has_no_markup_and_says_what_the_command_does(
    command: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _help([] if command is None else [command], capsys)
    assert MARKUP.search(text) is None, text
    # After the usage, a description in sentences, not only the options.
    description = text.split("\n\n")[1]
    assert not description.lstrip().startswith(("options:", "positional arguments:")), text
    assert description.rstrip().endswith("."), text


def test_python_dash_m_toolkernel_help_is_plain() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolkernel", "--help"], capture_output=True, text=True, check=True
    )
    assert MARKUP.search(done.stdout) is None, done.stdout
    assert "toolkernel runs the tool calls" in done.stdout

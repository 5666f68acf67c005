"""Which shell commands count as read-only: a conservative, textual allow-list.

The Bash tool does not use it: its claims come from ``shell_claims`` (a parse and a rule
table). It is the "read-only command list" of the coarse schemes the demo and the benchmarks
compare against (:func:`is_read_only_call`), the kind of list other agents keep. A command on
it would be safe under a *shared* lease on the workspace, so a program on it must never write a
file nor run another program, whatever its options and whatever the repository it runs in says:

- ``git`` is not on it. Even ``git status`` runs programs the repository's configuration names
  (``core.fsmonitor``, hooks, ``diff.external``, textconv and clean filters, ``core.pager``).
- options that write or execute are refused per program (``tree -o``, ``rg --pre``,
  ``file -C``, ``date -s``, ``find -exec``), including inside a cluster of short options
  (``tree -ao out``).
- redirection, substitution, sequencing, subshells, variables, ``VAR=value`` prefixes and
  anything unknown are refused; pipelines of allowed commands pass.

Refusing is always safe (the command just takes an exclusive lease), so when in doubt, refuse.
"""

from __future__ import annotations

import re
import shlex
from typing import Final

__all__ = ["is_read_only_command"]

_READ_ONLY_PROGRAMS: Final = frozenset(
    "ls cat head tail wc grep egrep fgrep rg pwd echo which file stat du df tree basename "
    "dirname realpath true false printf env date whoami uname find".split()
)
# Per program: short option letters (alone or in a cluster) and long option prefixes that make it
# write a file or run another program.
_RISKY_OPTIONS: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    "tree": ("oR", ()),  # -o FILE; -R writes 00Tree.html files (with -H)
    "rg": ("z", ("--pre", "--search-zip", "--hostname-bin")),  # all run programs
    "file": ("CzZ", ("--compile", "--uncompress")),  # -C writes magic.mgc; -z runs gzip & co
    "date": ("s", ("--set",)),
}
# find's actions that run programs or write files.
_FIND_ACTIONS: Final = frozenset(
    "-delete -exec -execdir -ok -okdir -fprint -fprint0 -fprintf -fls".split()
)
_SHELL_META: Final = re.compile(r"[;&><`$()\n\\{}]|\|\|")


def is_read_only_command(command: str) -> bool:
    """True only for commands this parser is sure neither write nor run other programs.

    Pipelines of read-only commands pass; redirection, substitution, sequencing, subshells,
    variables, git, and anything unknown do not. See the module's docstring for the rules.
    """
    if not command.strip() or _SHELL_META.search(command):
        return False
    for segment in command.split("|"):
        try:
            words = shlex.split(segment)
        except ValueError:
            return False
        if not words or not _allowed(words[0], words[1:]):
            return False
    return True


def _allowed(program: str, arguments: list[str]) -> bool:
    if program not in _READ_ONLY_PROGRAMS:
        return False  # a VAR=value prefix lands here too: it could change what runs
    if program == "env":
        return not arguments  # env with arguments runs them as a command
    if program == "find":
        return not any(argument in _FIND_ACTIONS for argument in arguments)
    if program == "date" and any(not a.startswith(("+", "-")) for a in arguments):
        return False  # `date MMDDhhmm` sets the clock
    letters, long_prefixes = _RISKY_OPTIONS.get(program, ("", ()))
    for argument in arguments:
        if argument.startswith("--"):
            if argument.startswith(long_prefixes):
                return False
        elif argument.startswith("-") and any(letter in argument[1:] for letter in letters):
            return False
    return True

"""What a sed script reads, writes and runs, read the way GNU sed reads it.

A sed script is a program: ``w file`` and the ``w`` flag of ``s`` write a file, ``r``/``R`` read
one, ``W`` writes one, and ``e`` (the command, or the flag of ``s``) runs the shell. So the
scripts of a ``sed`` command are parsed: each file they name is claimed, and a script that runs
a command, or that this reader does not follow, makes the command a barrier. ``-f`` (a script
in a file) is not known from the text: a barrier too. ``-i`` with a backup suffix holding a
``/`` puts the backup in another directory: a barrier.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from ._access import Cwds
from ._coded import Invocation, coded
from ._words import Word

if TYPE_CHECKING:
    from ._walk import Walk

__all__ = ["SedError", "sed", "sed_files"]

_NO_ARGUMENT: Final = frozenset("=dDgGhHnNpPxzF")
_NUMBER_ARGUMENT: Final = frozenset("qQlL")
_TEXT: Final = frozenset("aic")
_LABEL: Final = frozenset(":btTv")
_FILES: Final = {"r": "read", "R": "read", "w": "write", "W": "write"}
_SCRIPT_OPTIONS: Final = frozenset({"-e", "--expression"})
_FILE_OPTIONS: Final = frozenset({"-f", "--file"})
_END: Final = frozenset(";\n}#")


class SedError(Exception):
    """The script runs a command, or is not followed by this reader (the message says why)."""


class _Reader:
    def __init__(self, script: str) -> None:
        self.text = script
        self.at = 0
        self.files: list[tuple[str, str]] = []

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def blanks(self) -> None:
        while self.peek() in (" ", "\t"):
            self.at += 1

    def rest_of_line(self) -> str:
        end = self.text.find("\n", self.at)
        end = len(self.text) if end == -1 else end
        found = self.text[self.at : end]
        self.at = end
        return found

    def delimited(self, delimiter: str) -> None:
        """Skip to just past the next unescaped ``delimiter``."""
        while True:
            char = self.peek()
            if not char:
                raise SedError("a regular expression or replacement is not closed")
            self.at += 1
            if char == "\\":
                self.at += 1
            elif char == delimiter:
                return

    def address(self) -> None:
        char = self.peek()
        if char.isdigit():
            while self.peek().isdigit() or self.peek() == "~":
                self.at += 1
        elif char == "$":
            self.at += 1
        elif char in ("/", "\\"):
            self.at += 1
            if char == "\\":
                char = self.peek()
                self.at += 1
            self.delimited(char)
            while self.peek() in ("I", "M"):
                self.at += 1
        elif char in ("+", "~"):  # `addr,+N`, `addr,~N`
            self.at += 1
            while self.peek().isdigit():
                self.at += 1

    def command(self) -> None:
        self.address()
        self.blanks()
        if self.peek() == ",":
            self.at += 1
            self.blanks()
            self.address()
        self.blanks()
        while self.peek() == "!":
            self.at += 1
            self.blanks()
        name = self.peek()
        self.at += 1
        if name in ("{", "}"):
            return
        if name == "#":
            self.rest_of_line()
            return
        if name in _NO_ARGUMENT:
            pass
        elif name in _NUMBER_ARGUMENT:
            self.blanks()
            while self.peek().isdigit():
                self.at += 1
        elif name in _TEXT:
            # The text runs to the end of the line; a backslash before a newline continues it.
            while self.peek():
                char = self.peek()
                self.at += 1
                if char == "\\":
                    self.at += 1
                elif char == "\n":
                    break
            return
        elif name in _LABEL:
            while self.peek() and self.peek() not in ";\n":
                self.at += 1
        elif name in _FILES:
            self.blanks()
            self.file(_FILES[name], self.rest_of_line())
            return
        elif name == "e":
            raise SedError("its script runs a shell command (e)")
        elif name == "s":
            self.substitute()
        elif name == "y":
            delimiter = self.peek()
            if not delimiter or delimiter in "\n\\":
                raise SedError("a y command is not followed")
            self.at += 1
            self.delimited(delimiter)
            self.delimited(delimiter)
        else:
            raise SedError(f"its script's command {name!r} is not followed")
        self.blanks()
        if self.peek() and self.peek() not in _END:
            raise SedError(f"its script's command {name!r} is followed by what is not followed")

    def substitute(self) -> None:
        delimiter = self.peek()
        if not delimiter or delimiter in "\n\\":
            raise SedError("an s command is not followed")
        self.at += 1
        self.delimited(delimiter)
        self.delimited(delimiter)
        while True:
            flag = self.peek()
            if flag == "e":
                raise SedError("its script runs a shell command (the e flag of s)")
            if flag == "w":
                self.at += 1
                self.blanks()
                self.file("write", self.rest_of_line())
                return
            if flag and (flag.isdigit() or flag in "gpiImM"):
                self.at += 1
                continue
            return

    def file(self, kind: str, name: str) -> None:
        if not name:
            raise SedError("a file command names no file")
        self.files.append((kind, name))

    def read(self) -> list[tuple[str, str]]:
        while self.at < len(self.text):
            if self.peek() in " \t\n;":
                self.at += 1
                continue
            self.command()
        return self.files


def sed_files(script: str) -> list[tuple[str, str]]:
    """``(read or write, file)`` for each file ``script`` names; raises :class:`SedError` if it
    runs a command or can't be followed."""
    return _Reader(script).read()


def sed(
    walk: Walk, values: Sequence[tuple[str, str, Word]], operands: Sequence[Word], cwds: Cwds
) -> None:
    """Claim the files the scripts of one ``sed`` command name (its options already read)."""
    scripts: list[Word] = []
    for _, option, value in values:
        if option in _FILE_OPTIONS:
            raise walk.fail("sed: -f runs a script from a file, not known from the text")
        if option in _SCRIPT_OPTIONS:
            scripts.append(value)
        if option in ("-i", "--in-place") and (value.text is None or "/" in value.text):
            raise walk.fail("sed: a backup suffix with a '/' puts the backup elsewhere")
    if not scripts and operands:
        scripts.append(operands[0])
    for script in scripts:
        if script.text is None:
            raise walk.fail("sed: its script is not known from the text")
        try:
            files = sed_files(script.text)
        except SedError as error:
            raise walk.fail(f"sed: {error}") from None
        for kind, name in files:
            walk.touch(
                kind, name, cwds, f"sed {kind[0]}", create="file" if kind == "write" else None
            )


@coded("sed")
def _sed_rule(run: Invocation) -> None:
    sed(run.walk, run.values, run.operands, run.cwds)

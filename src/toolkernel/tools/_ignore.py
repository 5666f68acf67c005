"""``.gitignore`` rules, as git (and ripgrep) read them, for the search tools' walk.

Pure: it turns the text of one ``.gitignore`` into rules and answers whether a path below that
file's directory is ignored; reading the files is the walk's business. The rules are git's:

- a blank line or one starting with ``#`` is nothing; trailing spaces are dropped unless
  escaped with ``\\``; ``\\#`` and ``\\!`` start a pattern with those characters;
- ``!`` negates: it re-includes what an earlier rule ignored;
- a trailing ``/`` matches directories only;
- a pattern with a ``/`` at its start or in its middle is anchored to the file's directory;
  one without matches a name at any depth below it;
- ``*`` and ``?`` match within a name, ``[...]`` is a character class, ``**`` spans
  directories (``**/x``, ``x/**``, ``a/**/b``);
- within one file the last matching rule decides; a deeper file decides before a shallower one;
- a file in an ignored directory is never seen: the walk does not enter the directory, so no
  rule can re-include it (as in git).

Each pattern compiles to one ``re`` expression made only of literals, classes and ``[^/]*`` /
``.*``: no backtracking blow-up whatever a ``.gitignore`` holds.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Final

import attrs

__all__ = ["IgnoreRules", "ignored", "names_only"]

_MAX_RULES: Final = 10_000
"""Rules read from one file; a generated ``.gitignore`` of millions of lines is cut there."""


@attrs.frozen
class _Rule:
    expression: re.Pattern[str]
    negated: bool
    directories_only: bool
    anchored: bool
    """Matched against the path below the file's directory; else against the name alone (a
    pattern without ``/`` matches a name at any depth, and none of its wildcards spans a ``/``)."""


@attrs.frozen
class IgnoreRules:
    """The rules of one ``.gitignore``; paths are asked relative to its directory.

    ::

        rules = IgnoreRules.parse("build/\\n*.pyc\\n!keep.pyc\\n")
        rules.decide("src/a.pyc", is_dir=False)    # True: ignored
        rules.decide("keep.pyc", is_dir=False)     # False: re-included
        rules.decide("src/a.py", is_dir=False)     # None: no rule says
    """

    rules: tuple[_Rule, ...]
    # One expression for all rules of each kind: most paths match none, and are told so in
    # one call instead of one per rule.
    _any_name: re.Pattern[str] | None = attrs.field(init=False, eq=False, repr=False)
    _any_path: re.Pattern[str] | None = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        for anchored, field in ((False, "_any_name"), (True, "_any_path")):
            members = [r.expression.pattern for r in self.rules if r.anchored is anchored]
            combined = re.compile("|".join(f"(?:{m})" for m in members), re.DOTALL)
            object.__setattr__(self, field, combined if members else None)

    @classmethod
    def parse(cls, text: str) -> IgnoreRules:
        """The rules in ``text``, the content of a ``.gitignore``; bad lines are skipped."""
        rules = []
        for line in text.splitlines()[:_MAX_RULES]:
            rule = _compile(line)
            if rule is not None:
                rules.append(rule)
        return cls(tuple(rules))

    def decide(self, relative: str, *, is_dir: bool, name: str | None = None) -> bool | None:
        """True if ``relative`` (POSIX, below this file's directory) is ignored, False if a
        ``!`` rule re-includes it, None if no rule matches it. ``name``: its last component,
        if the caller has it at hand."""
        if name is None:
            name = relative.rpartition("/")[2]
        by_name = self._any_name is not None and self._any_name.fullmatch(name) is not None
        by_path = self._any_path is not None and self._any_path.fullmatch(relative) is not None
        if not (by_name or by_path):
            return None
        for rule in reversed(self.rules):
            if rule.directories_only and not is_dir:
                continue
            if rule.expression.fullmatch(relative if rule.anchored else name):
                return not rule.negated
        return None


def ignored(
    stack: Sequence[tuple[str, IgnoreRules]], relative: str, name: str, *, is_dir: bool
) -> bool:
    """Whether ``relative`` (whose last component is ``name``) is ignored by the
    ``.gitignore`` files in ``stack``.

    ``stack`` holds, shallowest first, each file's directory (relative to the same base as
    ``relative``, ``""`` for the base itself) and its rules; the deepest that decides wins.
    """
    for directory, rules in reversed(stack):
        below = relative[len(directory) + 1 :] if directory else relative
        decision = rules.decide(below, is_dir=is_dir, name=name)
        if decision is not None:
            return decision
    return False


@functools.lru_cache(maxsize=64)
def names_only(stack: tuple[tuple[str, IgnoreRules], ...]) -> re.Pattern[str] | None:
    """One expression matching every name a rule in ``stack`` could match, if all of them
    match names alone (no ``/`` in them); else None. A name it does not match is not ignored,
    found in one call rather than one per file of ``stack``; cached, as a walk asks for the
    same stack in directory after directory."""
    expressions = []
    for _, rules in stack:
        for rule in rules.rules:
            if rule.anchored:
                return None
            expressions.append(rule.expression.pattern)
    return re.compile("|".join(f"(?:{e})" for e in expressions) or "(?!)", re.DOTALL)


def _compile(line: str) -> _Rule | None:
    if not line or line.startswith("#"):
        return None
    # Trailing spaces are dropped unless the last one is escaped.
    stripped = line.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(line):
        stripped += " "
    line = stripped
    negated = line.startswith("!")
    if negated or line.startswith(("\\!", "\\#")):
        line = line[1:]
    directories_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    line = line.lstrip("/")
    body = _translate(line)
    if body is None:
        return None
    try:
        return _Rule(re.compile(body, re.DOTALL), negated, directories_only, anchored)
    except re.error:
        return None


def _translate(glob: str) -> str | None:
    """The regular expression for ``glob``, a gitignore pattern without its leading ``/``."""
    out: list[str] = []
    index, size = 0, len(glob)
    while index < size:
        char = glob[index]
        if char == "*":
            if glob.startswith("**", index):
                at_start = index == 0 or glob[index - 1] == "/"
                end = index + 2
                if at_start and end == size:
                    out.append(".*")  # "x/**": everything inside
                    index = end
                    continue
                if at_start and glob.startswith("/", end):
                    out.append("(?:.*/)?")  # "**/x", "a/**/b": any directories, or none
                    index = end + 1
                    continue
            out.append("[^/]*")
            while index < size and glob[index] == "*":
                index += 1
            continue
        if char == "?":
            out.append("[^/]")
        elif char == "[":
            closing = _class_end(glob, index)
            if closing is None:
                out.append(re.escape(char))
            else:
                inner = glob[index + 1 : closing]
                negate = inner.startswith(("!", "^"))
                if negate:
                    inner = inner[1:]
                # Escaped so that re reads no nested set or set operation ("&&", "~~", "||").
                inner = re.sub(r"([\\\[&~|])", r"\\\1", inner)
                out.append(f"[{'^/' if negate else ''}{inner}]")
                index = closing + 1
                continue
        elif char == "\\":
            index += 1
            if index == size:
                return None  # a pattern ending in a lone backslash is invalid in git
            out.append(re.escape(glob[index]))
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


def _class_end(glob: str, start: int) -> int | None:
    """The index of the ``]`` closing the class opened at ``start``, or None."""
    index = start + 1
    if index < len(glob) and glob[index] in "!^":
        index += 1
    if index < len(glob) and glob[index] == "]":
        index += 1  # a "]" first is a member
    while index < len(glob):
        if glob[index] == "]":
            return index
        if glob[index] == "/":
            return None
        index += 1
    return None

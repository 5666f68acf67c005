"""Which lines of a text a Grep pattern matches, as ``grep`` and ripgrep count them.

A pattern is matched against each line on its own (``^`` and ``$`` at the line's ends, nothing
spanning lines), unless ``multiline``: then against the whole text, with ``.`` matching line
ends too (ripgrep's ``-U --multiline-dotall``), and every line a match touches is a matching
line. Lines are split at ``\\n`` only, and a ``\\r`` before it is not part of the line
(:func:`text_lines`).

Searching line by line costs one call into the engine per line: a 5,000-line file is 5,000
calls, most of the time of a search. So the pattern is first searched in the whole text (with
``MULTILINE``, so ``^``/``$`` still mean a line's ends), which skips every line with no match in
one call; the line holding the start of a match is then searched on its own to confirm it,
and the search goes on from the next line. That finds the same lines as searching each line
when the pattern cannot tell a line's end from the text's: a pattern with look-around or
``\\A``/``\\Z``/``\\z``/``\\G`` (which can see past a line's end), and a text with a ``\\r``
(``$`` would not match before it), are searched line by line.

Every call into the engine gets ``timeout=`` from the caller's clock; a search that runs out
raises ``TimeoutError`` (the ``regex`` module's), which the tool turns into a message.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Final

import attrs
import regex

__all__ = [
    "LinePattern",
    "alternatives",
    "candidate_starts",
    "required_literal",
    "required_literals",
    "text_lines",
]

_LINE_BLIND: Final = regex.compile(r"\\[AZzG]|\(\?<?[=!]")
"""What in a pattern can see past a line's end: it is then searched line by line."""

Timeout = Callable[[], float]
"""Seconds the next call into the engine may take."""


def text_lines(text: str) -> list[str]:
    """The lines of ``text`` as editors and ``cat -n`` count them, without their line ends.

    Only ``\\n`` ends a line (``str.splitlines`` would also split at form feeds, ``\\x1c``,
    NEL and U+2028, and number lines differently from every editor); the ``\\r`` of a CRLF
    line end is dropped with it.
    """
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


@attrs.frozen
class LinePattern:
    """A compiled Grep pattern; :meth:`compile` it, then ask :meth:`lines` of each text.

    Compiling costs as much as the expression is long (0.1-0.3 ms an alternative: seconds for
    a 30,000-word alternation), so each expression is compiled once: the one used line by line
    doubles as the one searched in the whole text where ``MULTILINE`` changes nothing (no ``^``
    or ``$``), and a pattern split into :attr:`branches` compiles the whole only for a text that
    is searched line by line (:attr:`line`).
    """

    source: str
    """The pattern as given."""
    flags: int
    """The flags :attr:`line` is compiled with."""
    text: regex.Pattern[str] | None
    """The pattern with ``MULTILINE``, to find candidate lines in one call; None where it could
    find fewer lines than searching each (see the module's docstring), and where the pattern is
    searched as its :attr:`branches` instead."""
    multiline: bool
    blind: bool = False
    """True iff the pattern can see past a line's (or a text's) end: look-around, ``\\A``..."""
    literals: tuple[str, ...] | None = None
    """Texts one of which every match holds (:func:`required_literals`): a text without any
    has no match, told by ``in`` at the speed of ``memchr`` rather than by the engine. With
    :attr:`folded`, in lower case, and held in either case (asked only of texts without the
    characters that match ASCII letters ignoring case: ``_tree_search.foldable``)."""
    branches: tuple[regex.Pattern[str], ...] = ()
    """For ``a|b`` (no group), each alternative as :attr:`text` would be: searched one after
    the other, each at the speed of its own start, where the alternation tries every
    alternative at every position (five times as slow over Python sources, and 15 times with
    1,000 alternatives: splitting pays at every count measured). A line matches the pattern
    iff it matches one of them, so the lines found are the union of theirs."""
    folded: bool = False
    """True iff the pattern ignores case: a text holds a literal iff its lower case does, where
    the text holds no character that matches an ASCII letter (the Kelvin sign matches ``k``,
    the long s ``s``)."""
    _line: list[regex.Pattern[str]] = attrs.field(factory=list, eq=False, repr=False)
    """:attr:`line`, once compiled (at once, unless the pattern is split)."""

    @property
    def line(self) -> regex.Pattern[str]:
        """The pattern as given, searched in one line (or, ``multiline``, the whole text)."""
        if not self._line:
            # Only a pattern split into branches gets here, each of which compiled: so does it.
            self._line.append(regex.compile(self.source, self.flags))
        return self._line[0]

    @classmethod
    def compile(
        cls,
        pattern: str,
        *,
        ignore_case: bool,
        multiline: bool,
        check: Callable[[], object] = lambda: None,
    ) -> LinePattern:
        """Compile ``pattern`` (raises ``regex.error`` if it is not a valid expression).

        ``check`` is called before each alternative of a split pattern is compiled, and may
        raise to stop: one call into the engine compiles a whole expression and cannot be
        interrupted, but a huge alternation is compiled an alternative at a time.
        """
        flags = regex.IGNORECASE if ignore_case else 0
        blind = _LINE_BLIND.search(pattern) is not None
        literals = required_literals(pattern)
        if literals is not None and ignore_case:
            literals = tuple(literal.lower() for literal in literals)
        if multiline:
            flags |= regex.MULTILINE | regex.DOTALL
            whole = regex.compile(pattern, flags)
            return cls(pattern, flags, None, True, blind, literals, (), ignore_case, [whole])
        if blind:
            line = regex.compile(pattern, flags)
            return cls(pattern, flags, None, False, blind, literals, (), ignore_case, [line])
        split = alternatives(pattern) or []
        if len(split) > 1:
            branches = []
            for branch in split:
                check()
                branches.append(regex.compile(branch, flags | regex.MULTILINE))
            return cls(pattern, flags, None, False, False, literals, tuple(branches), ignore_case)
        text = regex.compile(pattern, flags | regex.MULTILINE)
        # MULTILINE changes what "^" and "$" match, and nothing else.
        anchored = "^" in pattern or "$" in pattern
        line = regex.compile(pattern, flags) if anchored else text
        return cls(pattern, flags, text, False, False, literals, (), ignore_case, [line])

    def lines(self, text: str, timeout: Timeout, *, first: bool = False) -> list[int]:
        """The 0-based numbers of the lines of ``text`` that match, in order; with ``first``,
        at most the first one."""
        if not text:
            return []
        if self.multiline:
            return _spanned_lines(self.line, text, timeout, first)
        if self.blind or "\r" in text:
            return _each_line(self.line, text, timeout, first)
        return _candidate_lines(self, text, timeout, first)

    def starts(self, text: str, timeout: Timeout, firsts: Sequence[int] | None = None) -> list[int]:
        """:func:`candidate_starts` of :attr:`text`, or the union of its :attr:`branches`'."""
        if not self.branches:
            assert self.text is not None
            return candidate_starts(self.text, self.line, text, timeout, firsts)
        found: set[int] = set()
        for branch in self.branches:
            # A line matches the pattern iff it matches one branch, whose own search finds
            # it: so the branch, on the line alone, is enough to confirm a line it found.
            found.update(candidate_starts(branch, branch, text, timeout, firsts))
        return sorted(found)

    @property
    def joinable(self) -> bool:
        """True iff texts may be searched joined, each ending with a line end: line by line
        (:func:`candidate_starts`, texts without ``\\r``), the lines found are those found in
        each alone; ``multiline``, a text holding the start of a match is one that may match
        alone, and one holding none does not match."""
        return not self.blind


_PLAIN: Final = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_ ,:;\"'=<>/!@%&~`-"
)
"""Characters that stand for themselves anywhere outside a class (no flag can change them:
patterns with inline flags are not looked into)."""
_MIN_LITERAL: Final = 3
_ESCAPES_WITH_ARGUMENTS: Final = frozenset("xuUNpPgkXLo")


def required_literals(pattern: str) -> tuple[str, ...] | None:
    """Texts one of which every match of ``pattern`` must hold, or None: the
    :func:`required_literal` of each alternative of a pattern ``a|b|c`` (None if one has none),
    or of the whole pattern."""
    branches = alternatives(pattern)
    if branches is None:
        return None
    found = []
    for branch in branches:
        literal = required_literal(branch)
        if literal is None:
            return None
        found.append(literal)
    return tuple(dict.fromkeys(found))


def alternatives(pattern: str) -> list[str] | None:
    """The alternatives of ``pattern`` (``a|b|c``; itself alone if it has none), or None if it
    has a group, where an alternative's end may be."""
    if "(" in pattern or ")" in pattern:
        return None
    branches, start, index, size = [], 0, 0, len(pattern)
    while index < size:
        char = pattern[index]
        if char == "\\":
            index += 2
        elif char == "[":
            index = _class_end(pattern, index)
            if index < 0:
                return None
        else:
            if char == "|":
                branches.append(pattern[start:index])
                start = index + 1
            index += 1
    branches.append(pattern[start:])
    return branches


def required_literal(pattern: str) -> str | None:
    """The longest run of plain characters that every match of ``pattern`` must hold, or None.

    Conservative: only a pattern without alternation, inline flags or groups is looked into
    (anything in a group may be optional), outside character classes and escapes; a character
    made optional by the quantifier after it is not part of the run, and a run shorter than
    :data:`_MIN_LITERAL` is not worth it.
    """
    if any(char in pattern for char in "|()"):
        return None
    best, run, index, size = "", "", 0, len(pattern)
    while index < size:
        char = pattern[index]
        if char in _PLAIN:
            following = pattern[index + 1] if index + 1 < size else ""
            if following in ("?", "*", "{"):
                best, run = max(best, run, key=len), ""  # optional, or counted: not required
            elif following == "+":
                best, run = max(best, run + char, key=len), ""  # required once, then maybe more
            else:
                run += char
            index += 1
            continue
        best, run = max(best, run, key=len), ""
        if char == "\\":
            escaped = pattern[index + 1 : index + 2]
            if not escaped or escaped in _ESCAPES_WITH_ARGUMENTS or escaped.isdigit():
                return None  # \x41, \N{...}, \p{L}, \g<1>, \1: not worth telling apart
            index += 2
        elif char == "[":
            index = _class_end(pattern, index)
            if index < 0:
                return None
        elif char == "{":
            index = pattern.find("}", index) + 1  # a count, never a literal
            if index == 0:
                return None
        else:
            index += 1
    best = max(best, run, key=len)
    return best if len(best) >= _MIN_LITERAL else None


def _class_end(pattern: str, start: int) -> int:
    """The index after the ``]`` closing the class opened at ``start``, or -1."""
    index = start + 1
    if pattern.startswith("^", index):
        index += 1
    if pattern.startswith("]", index):
        index += 1  # a "]" first is a member
    while index < len(pattern):
        if pattern[index] == "\\":
            index += 2
        elif pattern[index] == "[":
            return -1  # a nested set (V1) or a POSIX class: not looked into
        elif pattern[index] == "]":
            return index + 1
        else:
            index += 1
    return -1


def _each_line(pattern: regex.Pattern[str], text: str, timeout: Timeout, first: bool) -> list[int]:
    found = []
    for number, line in enumerate(text_lines(text)):
        if pattern.search(line, timeout=timeout(), concurrent=True) is not None:
            found.append(number)
            if first:
                break
    return found


def _candidate_lines(pattern: LinePattern, text: str, timeout: Timeout, first: bool) -> list[int]:
    found: list[int] = []
    number, counted = 0, 0  # ``number`` is the line that starts at ``counted``
    starts = pattern.starts(text, timeout, (0,) if first else None)
    for start in starts[:1] if first else starts:
        number += text.count("\n", counted, start)
        counted = start
        found.append(number)
    return found


def candidate_starts(
    whole: regex.Pattern[str],
    line: regex.Pattern[str],
    text: str,
    timeout: Timeout,
    firsts: Sequence[int] | None = None,
) -> list[int]:
    """Where the matching lines of ``text`` start, found by searching the whole text.

    ``text`` may be several texts joined, each ending with a line end: the search runs over
    all of them at once (one call into the engine for many small files), and finds in each the
    lines a search of it alone would. With ``firsts``, the offsets where those texts start
    (ascending), only the first matching line of each is wanted: the search skips on to the
    next text after one.
    """
    found: list[int] = []
    position, size = 0, len(text)
    while position < size:
        match = whole.search(text, position, timeout=timeout(), concurrent=True)
        if match is None or (match.start() == size and text.endswith("\n")):
            break  # an empty match after the last line end is on no line
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.start())
        if end < 0:
            end = size
        if match.end() <= end or line.search(text[start:end], timeout=timeout(), concurrent=True):
            found.append(start)
            if firsts is not None:
                following = bisect.bisect_right(firsts, start)
                if following == len(firsts):
                    break
                position = firsts[following]
                continue
        position = end + 1
    return found


def _spanned_lines(
    pattern: regex.Pattern[str], text: str, timeout: Timeout, first: bool
) -> list[int]:
    found: list[int] = []
    position, number, counted = 0, 0, 0
    size = len(text)
    while position <= size:
        match = pattern.search(text, position, timeout=timeout(), concurrent=True)
        if match is None:
            break
        begin, finish = match.span()
        number += text.count("\n", counted, begin)
        counted = begin
        last = number + text.count("\n", begin, max(finish - 1, begin))
        if begin == size and size and text.endswith("\n"):
            break  # an empty match after the last line end is on no line
        for line in range(max(number, found[-1] + 1 if found else 0), last + 1):
            found.append(line)
        if first and found:
            break
        # After an empty match, on to the next line (or the same line is found again and again).
        position = finish if finish > begin else text.find("\n", begin) + 1 or size + 1
    return found

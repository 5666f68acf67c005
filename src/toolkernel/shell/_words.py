"""Words of a shell command, as far as they can be known without running anything.

A word is known exactly (``src/a.py``, ``'a b'``, ``"x"``), or only up to a point: a glob
(``src/*.py``), a variable (``$f``), a command substitution (``$(ls)``). :class:`Word` keeps the
exact text when there is one, and otherwise the literal *prefix* before the first part that is
not known, and whether the unknown rest can only name paths beneath that prefix (a glob can; a
variable can hold ``../..``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import attrs

if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = ["Word", "literal", "word_of"]

# In an unquoted word, these (unescaped) make a glob or a brace expansion: several paths.
_GLOB: Final = re.compile(r"(?<!\\)(?:\\\\)*([*?\[]|\{[^{}]*(?:,|\.\.)[^{}]*\})")
_BRACES: Final = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")
_DOUBLE_QUOTE_ESCAPES: Final = frozenset('$`"\\\n')


@attrs.frozen
class Word:
    """One word: its exact text, or a literal prefix and how the rest may vary."""

    text: str | None
    """The exact text, if it is known."""
    prefix: str = ""
    """The literal text before the first unknown part (the whole text if it is known)."""
    beneath: bool = False
    """True if the unknown rest can only name paths beneath ``prefix``'s directory (a glob)."""
    raw: str = attrs.field(default="", eq=False)
    """The word as written in the command."""

    @classmethod
    def known(cls, text: str) -> Word:
        return cls(text, text)


def literal(text: str) -> Word:
    return Word.known(text)


def _unescape_unquoted(text: str) -> str:
    out = []
    chars = iter(text)
    for ch in chars:
        if ch == "\\":
            nxt = next(chars, "")
            if nxt != "\n":  # a line continuation vanishes
                out.append(nxt)
        else:
            out.append(ch)
    return "".join(out)


def _unescape_double_quoted(text: str) -> str:
    out = []
    chars = iter(text)
    for ch in chars:
        if ch == "\\":
            nxt = next(chars, "")
            if nxt in _DOUBLE_QUOTE_ESCAPES:
                if nxt != "\n":
                    out.append(nxt)
            else:
                out.append("\\" + nxt)
        else:
            out.append(ch)
    return "".join(out)


def _text(node: Node) -> str:
    raw = node.text
    return raw.decode("utf-8", errors="surrogateescape") if raw is not None else ""


def _unquoted(node: Node) -> Word:
    text = _text(node)
    glob = _GLOB.search(text)
    if glob is None:
        value = _unescape_unquoted(text)
        return Word(value, value)
    # Escaped glob characters are rare in commands; an escape before the match would only make
    # the prefix shorter than it could be, never wrong.
    prefix = _unescape_unquoted(text[: glob.start(1)])
    rest = text[glob.start(1) :]
    # A pattern part that starts with a dot may match `..` (dash and older bash do), which climbs.
    climbs = any(part.startswith(".") or ".." in part for part in rest.split("/"))
    return Word(None, prefix, beneath=not climbs)


def word_of(node: Node) -> Word:
    """The word a syntax node stands for (any kind of word node)."""
    return attrs.evolve(_word_of(node), raw=_text(node))


def _word_of(node: Node) -> Word:
    kind = node.type
    if kind in ("word", "number"):
        return _unquoted(node)
    if kind == "raw_string":
        return Word.known(_text(node)[1:-1])
    if kind in ("ansi_c_string", "translated_string"):
        # `$'a'` is `a` to bash but `$a` to dash (/bin/sh here, and the Bash tool runs /bin/sh):
        # not known from the text.
        return Word(None, "")
    if kind == "string":
        parts: list[str] = []
        for child in node.named_children:
            if child.type != "string_content":
                return Word(None, "".join(parts))
            parts.append(_unescape_double_quoted(_text(child)))
        # A string whose content sits directly between its quotes (no string_content child).
        if not node.named_children:
            parts.append(_unescape_double_quoted(_text(node)[1:-1]))
        value = "".join(parts)
        return Word(value, value)
    if kind == "concatenation":
        prefix = ""
        children = node.children
        for at, child in enumerate(children):
            part = _word_of(child)
            if child.type == "word" and _text(child) == "{" and _BRACES.search(_text(node)):
                part = Word(None, "", beneath=".." not in _text(node))  # a brace expansion
            if part.text is None:
                # The rest stays beneath only if nothing after the glob can hold `..`.
                rest = [_word_of(c) for c in children[at + 1 :]]
                beneath = part.beneath and all(
                    (r.text is not None and ".." not in r.text) or r.beneath for r in rest
                )
                return Word(None, prefix + part.prefix, beneath)
            prefix += part.text
        return Word(prefix, prefix)
    if kind == "process_substitution":
        return Word.known("/dev/fd/63")  # what the command sees: a pipe, not a file
    # Expansions, substitutions, arithmetic, brace expressions: unknown.
    return Word(None, "")

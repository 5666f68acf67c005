"""One path a shell command touches, and how paths are spelled as the walk follows ``cd``."""

from __future__ import annotations

import posixpath

import attrs

from ._words import Word

__all__ = ["Access", "Cwds", "join", "parent_of", "path_text"]

Cwds = frozenset[str]
"""The directories a command may be running in, spelled as :attr:`Access.path` is."""


@attrs.frozen
class Access:
    """One path a command touches."""

    kind: str
    """``read``, ``write``, or ``cd`` (a directory it runs in, which must be in the workspace)."""
    path: str | None
    """As spelled: relative to the workspace root, absolute, or starting with ``~``; None if it
    can't be known from the text."""
    rule: str
    """The rule (or shell construct) it comes from, for messages."""
    create: str | None = None
    """``file`` or ``dir``: what the Bash tool may create before the command runs, if it is
    missing, so the command can be confined to it."""
    optional: bool = False
    """True for a place that may not exist (``.git`` in a parent): one outside the workspace is
    dropped rather than making the command a barrier."""


def join(cwd: str, path: str) -> str:
    """``path`` as seen from ``cwd`` (both spelled as in :class:`Access`)."""
    if path.startswith(("/", "~")) or cwd == ".":
        return path or "."
    return cwd if path in ("", ".") else f"{cwd}/{path}"


def parent_of(path: str) -> str:
    """The directory holding the entry ``path`` names."""
    stripped = path.rstrip("/") or "/"
    last = stripped.rsplit("/", 1)[-1]
    if last in (".", ".."):
        return f"{stripped}/.."
    head = posixpath.dirname(stripped)
    return head or "."


def path_text(word: Word) -> str | None:
    """The path a word names, or the directory its possible values all lie beneath, or None."""
    if word.text is not None:
        return word.text
    if word.beneath:
        head, slash, _ = word.prefix.rpartition("/")
        return (head or "/") if slash else "."
    return None

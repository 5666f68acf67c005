"""Parsing shell commands with tree-sitter-bash, failing closed on what the grammar gets wrong.

tree-sitter and its bash grammar are optional (the ``shell`` extra). Without them, every command
is a barrier: :func:`parse` returns the reason instead of a tree.

A tree is refused (the command stays a barrier) when it has an error or a missing node, and when
a command's words span a newline that is not a line continuation: the grammar absorbs the first
command of a line into the arguments of the command before it when that line ends in a pipeline
of two or more stages and the next continues with ``&&`` or ``||`` (tree-sitter-bash issue 347),
and reports no error. Bash never lets a newline separate a command's words, so any such command
is this trap, or one like it.
"""

from __future__ import annotations

import functools
import itertools
import threading
from typing import TYPE_CHECKING, Any, Final

from .._extras import install_command

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

__all__ = ["missing_parser", "parse", "split_by_newline"]


@functools.cache
def missing_parser() -> str:
    """Why a command can't be read when tree-sitter is missing, and the command to add it."""
    return (
        f"the shell parser is not installed ({install_command('shell')} for tree-sitter and "
        "tree-sitter-bash)"
    )


MAX_NODES: Final = 20_000
"""Syntax nodes a command may have before it is a barrier unread: the walk costs some tens of
microseconds a node, and claims are computed before the command can start."""

_local = threading.local()  # a tree-sitter Parser is not safe to share between threads


def _parser() -> Parser | None:
    parser: Parser | None = getattr(_local, "parser", None)
    if parser is None:
        try:
            import tree_sitter
            import tree_sitter_bash
        except ImportError:
            return None
        parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
        _local.parser = parser
    return parser


def parse(source: bytes) -> tuple[Any, str | None]:
    """The tree of ``source`` and None, or None and why it can't be trusted."""
    parser = _parser()
    if parser is None:
        return None, missing_parser()
    tree = parser.parse(source)
    root = tree.root_node
    if root.has_error:
        return None, "the command does not parse as bash"
    if root.descendant_count > MAX_NODES:
        return None, f"the command has more than {MAX_NODES} syntax nodes"
    return tree, None


def split_by_newline(node: Node) -> bool:
    """True if a newline that is not a line continuation separates two children of ``node``."""
    source: bytes = node.text or b""
    base = node.start_byte
    children = node.children
    for before, after in itertools.pairwise(children):
        gap = source[before.end_byte - base : after.start_byte - base]
        at = gap.find(b"\n")
        while at != -1:
            if not gap[:at].endswith(b"\\"):
                return True
            at = gap.find(b"\n", at + 1)
    return False

"""The rules that need code: each program's handler, registered by the module that implements it.

Most of what a program does is data (``rules.toml``); what data can't say is code: sed's scripts,
curl's value languages, find's expressions, the file a C compiler names after its source. Such
a module registers its handler under the rules' names with :func:`coded` (run once the rule's
options are read) or :func:`reads_own_words` (run instead of the option reader, for a program
with a grammar of its own, as ``find``); :mod:`._programs` looks the handler up by the rule's
name. Adding a coded rule is a module that registers it, listed in :mod:`._coded_rules`; the
dispatcher is never edited. One name has at most one handler: a second registration is a bug,
raised at import.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from ._access import Cwds
from ._rules import Rule
from ._words import Word

if TYPE_CHECKING:
    from ._walk import Walk

__all__ = ["Invocation", "coded", "handler_for", "own_reader_for", "reads_own_words"]


class Invocation(Protocol):
    """One program run, its options read: what a :func:`coded` handler is given."""

    @property
    def walk(self) -> Walk: ...
    @property
    def rule(self) -> Rule: ...
    @property
    def present(self) -> set[str]:
        """The options given, by their full names."""

    @property
    def values(self) -> Sequence[tuple[str, str, Word]]:
        """The options' values: (kind, option, value)."""

    @property
    def operands(self) -> Sequence[Word]: ...
    @property
    def cwds(self) -> Cwds: ...
    def fail(self, why: str) -> Exception:
        """The error to raise for a run not understood, naming the rule."""


Handler = Callable[[Invocation], None]
OwnReader = Callable[["Walk", Rule, Sequence[Word], Cwds], None]
_F = TypeVar("_F", Handler, OwnReader)

_HANDLERS: dict[str, Handler] = {}
_OWN_READERS: dict[str, OwnReader] = {}


def _register(table: dict[str, _F], names: tuple[str, ...]) -> Callable[[_F], _F]:
    def register(handler: _F) -> _F:
        for name in names:
            if name in _HANDLERS or name in _OWN_READERS:
                raise RuntimeError(f"the rule {name!r} has a handler already")
            table[name] = handler
        return handler

    return register


def coded(*names: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as what the rules ``names`` do once options are read."""
    return _register(_HANDLERS, names)


def reads_own_words(*names: str) -> Callable[[OwnReader], OwnReader]:
    """Register the decorated function as the reader of the rules ``names``' words whole."""
    return _register(_OWN_READERS, names)


def handler_for(name: str) -> Handler | None:
    """The :func:`coded` handler of the rule ``name``, if it has one."""
    return _HANDLERS.get(name)


def own_reader_for(name: str) -> OwnReader | None:
    """The :func:`reads_own_words` reader of the rule ``name``, if it has one."""
    return _OWN_READERS.get(name)

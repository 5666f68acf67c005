"""What a call of a framework's tool claims, declared by tool name as the adapters take it.

``reads=``/``writes=`` map a tool's name to the names of its arguments that hold paths (a
string, or a list of strings): shared leases on what it reads, exclusive on what it writes.
``claims=`` maps it to a function of the arguments returning claims (None: a barrier), or to a
list of claims for every call. A tool declared nothing is a barrier, as every tool is.

A path argument left out claims nothing (as a default of None would); one that is not a path
makes the call a barrier, and the framework answers the bad argument as it always does.
Mistakes in the declarations are refused when the adapter is built, naming the tool.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias

from .._errors import ToolDeclarationError
from ..kernel import KeyFunction
from ..locks import Claim, Mode, Path, exclusive, path, shared

__all__ = ["ClaimsFunction", "Declaration", "declarations", "process_key"]

ClaimsFunction: TypeAlias = Callable[[Mapping[str, Any]], Iterable[Claim] | None]
"""Claims of one tool's call from its arguments (as the model sent them); None: a barrier."""


class Declaration:
    """What a call of one tool claims, from ``reads=``/``writes=``/``claims=``."""

    def __init__(
        self,
        reads: Sequence[str],
        writes: Sequence[str],
        claims: ClaimsFunction | Sequence[Claim] | None,
    ) -> None:
        self.reads = tuple(reads)
        self.writes = tuple(writes)
        self.function = claims if callable(claims) else None
        self.fixed = None if claims is None or callable(claims) else tuple(claims)

    def claims(self, arguments: Mapping[str, Any], key: KeyFunction) -> list[Claim] | None:
        found: list[Claim] = []
        for names, make in ((self.reads, shared), (self.writes, exclusive)):
            for name in names:
                value = arguments.get(name)
                if value is None:
                    continue  # left out: claims nothing, as a default of None would
                if isinstance(value, str):
                    value = [value]
                if not isinstance(value, list | tuple) or not all(
                    isinstance(v, str) for v in value
                ):
                    return None  # not a path: a barrier; the framework answers the bad argument
                found.extend(make(key(raw)) for raw in value)
        extra = self.fixed if self.function is None else self.function(arguments)
        if extra is None:
            return None if self.function is not None else found
        for claim in extra:
            if not isinstance(claim, Claim):
                raise TypeError(f"claims must be toolkernel claims, not {claim!r}")
            if isinstance(claim.resource, Path):  # spelled lexically: key it as paths are
                make = exclusive if claim.mode is Mode.EXCLUSIVE else shared
                claim = make(key(str(claim.resource)))
            found.append(claim)
        return found


def declarations(
    names: Sequence[str],
    claims: Mapping[str, ClaimsFunction | Sequence[Claim]] | None,
    reads: Mapping[str, Sequence[str]] | None,
    writes: Mapping[str, Sequence[str]] | None,
) -> dict[str, Declaration | None]:
    """Each tool's declaration; None for a tool declared nothing (a barrier)."""
    for option, given in (("claims", claims), ("reads", reads), ("writes", writes)):
        if given is None:
            continue
        if not isinstance(given, Mapping):
            raise ToolDeclarationError(
                f"{option}= maps tool names to what their calls claim, such as "
                f"{option}={{'edit_file': ...}}; not {given!r}"
            )
        for name, value in given.items():
            if name not in names:
                raise ToolDeclarationError(
                    f"{option}= names tool {name!r}, but there is no tool by that name; "
                    f"its tools are {', '.join(names) or 'none'}"
                )
            _check_declared(option, name, value)
    found: dict[str, Declaration | None] = {}
    for name in names:
        given_reads = (reads or {}).get(name, ())
        given_writes = (writes or {}).get(name, ())
        given_claims = (claims or {}).get(name)
        if given_reads or given_writes or given_claims is not None:
            found[name] = Declaration(given_reads, given_writes, given_claims)
        else:
            found[name] = None
    return found


def _check_declared(option: str, name: str, value: Any) -> None:
    if option == "claims":
        if callable(value):
            return
        if _is_list_of(value, Claim):
            return
        raise ToolDeclarationError(
            f"claims= for tool {name!r} must be a function of the arguments returning claims, "
            f"or a list of claims; not {value!r}"
        )
    if _is_list_of(value, str):
        return
    raise ToolDeclarationError(
        f"{option}= for tool {name!r} must list the names of arguments holding paths, such "
        f"as ['path']; not {value!r}"
    )


def _is_list_of(value: Any, kind: type) -> bool:
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        return False
    return all(isinstance(item, kind) for item in value)


def process_key(raw: str) -> Path:
    """A path's key in a kernel of the adapter's own, which has no workspace: the path as this
    process opens it (relative to its working directory, ``~`` expanded), made absolute and
    normalized lexically (symlinks are not followed), so every spelling of it is one key."""
    absolute = os.path.normpath(os.path.join(os.getcwd(), os.path.expanduser(raw)))
    return path(absolute.lstrip(os.sep) or ".")

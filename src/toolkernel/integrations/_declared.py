"""What a call of a framework's tool claims, declared by tool name: one rule for every adapter.

The adapters (``langgraph.ToolNode``, ``openai_agents.leased``, ``pydantic_ai.LeasedToolset``)
take the same three options, as ``toolkernel.mcp.stdio_tools`` does:

- ``reads=`` / ``writes=`` map a tool's name to the names of its arguments that hold paths (a
  string, or a list of strings): shared leases on what a call reads, exclusive on what it writes;
- ``claims=`` maps a tool's name to a function of the arguments returning claims (devices,
  pools, paths built from several arguments), or to a list of claims for every call; or it is
  one function ``(tool, arguments) -> claims`` for every tool. A function's None leaves the
  call to ``reads``/``writes``, or makes it a barrier. Path claims are keyed as paths are.

A tool declared nothing is a barrier (exclusive on everything), as every tool is. So is a call
with a path that can't be keyed, as for the MCP adapter: a path outside the workspace, a ``~``
path (a tool may expand it), an empty one, a value that is not a string or a list of strings,
or an argument left out whose default the tool's schema does not state. Such a call is never
refused: it runs alone, and the tool serves it, or answers its bad argument, as it would
without leases.

Mistakes in the declarations are refused when the adapter is built (:func:`check_options`),
or when a tool's schema is first seen (:func:`declaration`), naming the tool and the fix.

The MCP adapter's ``_claims`` keys paths the same way, but can't be shared from here:
``toolkernel.mcp`` needs its extra (the ``mcp`` SDK) to be imported at all.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, TypeAlias, TypeVar

from .._errors import InvalidClaimError, ToolDeclarationError
from ..kernel import KeyFunction
from ..locks import Claim, Mode, Path, exclusive, path, shared

__all__ = [
    "ClaimsFunction",
    "ToolClaimsFunction",
    "Declaration",
    "check_options",
    "declaration",
    "declarations",
    "process_key",
]

ToolT = TypeVar("ToolT")

ClaimsFunction: TypeAlias = Callable[[Mapping[str, Any]], Iterable[Claim] | None]
"""Claims of one tool's call from its arguments (as the model sent them); None leaves the call
to ``reads``/``writes``, or makes it a barrier."""
ToolClaimsFunction: TypeAlias = Callable[[ToolT, Mapping[str, Any]], Iterable[Claim] | None]
"""Claims of any tool's call from the tool (as the adapter names it: the framework's tool, or
its name) and the arguments; None leaves the call to ``reads``/``writes``, or makes it a
barrier."""
ClaimsOption: TypeAlias = (
    Mapping[str, ClaimsFunction | Sequence[Claim]] | ToolClaimsFunction[ToolT] | None
)
"""What ``claims=`` takes."""

# A module global: on Python 3.11 ``Mode.EXCLUSIVE`` costs ~0.1 us a read (the enum metaclass).
_EXCLUSIVE = Mode.EXCLUSIVE


class Declaration:
    """What a call of one tool claims, from ``reads=``/``writes=``/``claims=`` and the
    defaults its schema states."""

    __slots__ = ("defaults", "fixed", "function", "paths", "tool_function")

    def __init__(
        self,
        reads: Sequence[str],
        writes: Sequence[str],
        claims: ClaimsFunction | Sequence[Claim] | None,
        tool_claims: ToolClaimsFunction[Any] | None,
        properties: Mapping[str, Any],
    ) -> None:
        self.paths = tuple(
            (name, make) for names, make in ((reads, shared), (writes, exclusive)) for name in names
        )
        self.function = claims if callable(claims) else None
        self.fixed = None if claims is None or callable(claims) else tuple(claims)
        self.tool_function = tool_claims
        # The defaults the schema states for the path arguments (a call may leave them out).
        self.defaults: dict[str, Any] = {}
        for name, _ in self.paths:
            schema = properties.get(name)
            if isinstance(schema, Mapping) and "default" in schema:
                self.defaults[name] = schema["default"]

    def claims(
        self, arguments: Mapping[str, Any], key: KeyFunction, tool: Any = None
    ) -> list[Claim] | None:
        """A call's claims, its paths keyed by ``key``; None for a barrier. ``tool`` is what a
        ``claims=`` function for every tool is given."""
        if self.function is not None:
            declared = self.function(arguments)
        elif self.tool_function is not None:
            declared = self.tool_function(tool, arguments)
        else:
            declared = self.fixed
        if declared is None and not self.paths:
            return None
        found: list[Claim] = []
        for name, make in self.paths:
            if name in arguments:
                value = arguments[name]
            elif name in self.defaults:
                value = self.defaults[name]
            else:
                return None  # left out, and what the tool takes instead can't be seen
            if value is None:
                continue  # the argument names no path
            if isinstance(value, str):
                value = (value,)
            elif not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                return None  # not a path: the framework answers the bad argument
            for raw in value:
                keyed = _keyed(raw, key)
                if keyed is None:
                    return None
                found.append(make(keyed))
        for claim in declared or ():
            if not isinstance(claim, Claim):
                raise TypeError(f"claims must be toolkernel claims, not {claim!r}")
            if isinstance(claim.resource, Path):  # spelled lexically: key it as paths are
                keyed = _keyed(str(claim.resource), key)
                if keyed is None:
                    return None
                claim = exclusive(keyed) if claim.mode is _EXCLUSIVE else shared(keyed)
            found.append(claim)
        return found


def _keyed(raw: str, key: KeyFunction) -> Path | None:
    """The key of a path, or None where it can't be had (the call is then a barrier)."""
    if not raw or raw.startswith("~") or "\0" in raw:
        return None  # "~" is the tool's to expand, or not: no workspace path either way
    try:
        return key(raw)
    except (InvalidClaimError, ValueError, OSError):
        return None  # outside the workspace: the tool may still serve it


def check_options(
    claims: object, reads: object, writes: object, tools: Collection[str] | None
) -> None:
    """Refuse ``claims``/``reads``/``writes`` of the wrong shape, or naming a tool not among
    ``tools`` (None: the tools are not known yet)."""
    if claims is not None and not isinstance(claims, Mapping) and not callable(claims):
        raise ToolDeclarationError(
            "claims= must map tool names to what their calls claim (a function of the "
            "arguments returning claims, or a list of claims), such as "
            "claims={'tap': lambda args: [exclusive(device('phone'))]}, or be one function "
            f"(tool, arguments) -> claims for every tool; not {claims!r}"
        )
    for option, given in (("claims", claims), ("reads", reads), ("writes", writes)):
        if given is None or (option == "claims" and not isinstance(given, Mapping)):
            continue  # one function for every tool
        if not isinstance(given, Mapping):
            raise ToolDeclarationError(
                f"{option}= must map tool names to lists of argument names holding paths, "
                f"such as {option}={{'read_file': ['path']}}; not {given!r}"
            )
        for name, value in given.items():
            if not isinstance(name, str):
                raise ToolDeclarationError(
                    f"{option}= must map tool names to what their calls claim; {name!r} is "
                    f"not a tool name"
                )
            if tools is not None and name not in tools:
                raise ToolDeclarationError(
                    f"{option}= names tool {name!r}, but there is no tool by that name; its "
                    f"tools are {', '.join(tools) or 'none'}"
                )
            _check_declared(option, name, value)


def _check_declared(option: str, name: str, value: object) -> None:
    if option == "claims":
        if callable(value) or _is_list_of(value, Claim):
            return
        raise ToolDeclarationError(
            f"claims= for tool {name!r} must be a function of the arguments returning claims, "
            f"or a list of claims; not {value!r}"
        )
    if not _is_list_of(value, str):
        raise ToolDeclarationError(
            f"{option}= for tool {name!r} must be a list of argument names holding paths, such "
            f"as ['path']; not {value!r}"
        )


def _is_list_of(value: object, kind: type) -> bool:
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        return False
    return all(isinstance(item, kind) for item in value)


def declaration(
    name: str,
    properties: Mapping[str, Any],
    claims: ClaimsOption[Any],
    reads: Mapping[str, Sequence[str]] | None,
    writes: Mapping[str, Sequence[str]] | None,
) -> Declaration | None:
    """The declaration of tool ``name``, whose schema's ``properties`` are given; None for a
    tool declared nothing (a barrier). Options are checked first by :func:`check_options`;
    here ``reads``/``writes`` naming an argument the tool lacks are refused."""
    given_reads = (reads or {}).get(name, ())
    given_writes = (writes or {}).get(name, ())
    for option, arguments in (("reads", given_reads), ("writes", given_writes)):
        for argument in arguments:
            if argument not in properties:
                takes = ", ".join(map(str, properties)) or "no arguments"
                raise ToolDeclarationError(
                    f"{option}= names argument {argument!r} of tool {name!r}, which has no "
                    f"such argument (it takes {takes}); name an argument that holds a path"
                )
    if isinstance(claims, Mapping):
        given_claims, every = claims.get(name), None
    else:
        given_claims, every = None, claims
    if not (given_reads or given_writes) and given_claims is None and every is None:
        return None
    return Declaration(given_reads, given_writes, given_claims, every, properties)


def declarations(
    tools: Mapping[str, Mapping[str, Any]],
    claims: ClaimsOption[Any],
    reads: Mapping[str, Sequence[str]] | None,
    writes: Mapping[str, Sequence[str]] | None,
) -> dict[str, Declaration | None]:
    """Each tool's declaration, by name, from the tools' schemas' ``properties``; None for a
    tool declared nothing (a barrier)."""
    check_options(claims, reads, writes, tools)
    return {
        name: declaration(name, properties, claims, reads, writes)
        for name, properties in tools.items()
    }


def process_key(raw: str) -> Path:
    """A path's key in a kernel of the adapter's own, which has no workspace: the path as this
    process opens it (relative to its working directory), made absolute and normalized
    lexically (symlinks are not followed), so every spelling of it is one key."""
    absolute = os.path.normpath(os.path.join(os.getcwd(), raw))
    return path(absolute.lstrip(os.sep) or ".")

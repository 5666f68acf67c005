"""What a call of an MCP tool claims: the user's word, a preset, inference, or a barrier.

An MCP server is where a user plugs in tools the kernel knows nothing about, so a tool is
ordered against the kernel's file tools unless something says what it touches. In order:

1. **The user's** ``reads=``/``writes=``/``claims=``: a shared lease on the server's device and
   what they declare.
2. **A preset** for the reference servers (``_presets``): which arguments hold paths read or
   written, which tools touch no file.
3. **Inference** from the tool's ``inputSchema``: arguments named as paths are (``path``,
   ``file_path``, ``paths``, ``repo_path``, ``*_dir``...), read under ``readOnlyHint``,
   written otherwise. Not for a tool that also takes a command or code, which may touch anything.
4. Otherwise a **barrier**: the whole workspace and the server's device, shared for a tool
   whose ``readOnlyHint`` says so, exclusive otherwise (the spec's default).

Path arguments (2, 3) are claims only where the server reads a path as the kernel does: the
server was told the kernel's workspace as its one root (the MCP roots capability), and a
relative path is resolved where the kernel resolves it (the server's working directory is that
root, or the preset says the server resolves relative paths against its root). A call whose
path can't be keyed so (outside the workspace, ``~/...``, a server elsewhere, an argument left
out) is a barrier: it is never refused, and never runs beside a conflicting call.
"""

from __future__ import annotations

import contextlib
import os
import re
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._errors import InvalidClaimError
from ..kernel import KeyFunction
from ..kernel._protocol import key_owner
from ..locks import Claim, Mode, Path, Resource, exclusive, shared
from ._presets import Effects

__all__ = ["ServerPlace", "infer_effects", "effect_claims", "barrier_claims"]

# Argument names that hold a path: whole words, or the ends of snake_case and camelCase names.
_PATH_NAMES = re.compile(
    r"(?:^|[_-])(?:path|paths|file|files|filename|filenames|filepath|dir|dirs|directory|"
    r"directories|folder|folders)$|^(?:root|cwd|destination|dest|dst)$",
    re.IGNORECASE,
)
_CAMEL_PATH_NAMES = re.compile(r"[a-z](?:Path|Paths|File|Files|Dir|Directory|Folder)$")
# "source" is a path beside a destination (a move or a copy); alone it may be source code.
_SOURCE_NAMES = frozenset({"source", "src"})
# Arguments that make a call do whatever their value says: no inference for such a tool.
_COMMAND_NAMES = frozenset(
    {"command", "commands", "cmd", "script", "code", "shell", "program", "exec", "argv"}
)


@attrs.frozen
class ServerPlace:
    """Where a server reads paths: the roots it was told (absolute directories) and its
    working directory, when known (a server started here over stdio)."""

    roots: tuple[str, ...] = ()
    cwd: str | None = None


def _is_path_name(name: str, *, beside_destination: bool) -> bool:
    if name.lower() in _SOURCE_NAMES:
        return beside_destination
    return bool(_PATH_NAMES.search(name) or _CAMEL_PATH_NAMES.search(name))


def _holds_paths(schema: Any) -> bool:
    """Whether an argument's schema says a string, or a list of strings."""
    if not isinstance(schema, Mapping):
        return False
    kind = schema.get("type")
    if kind == "string":
        return True
    if kind == "array":
        items = schema.get("items")
        return isinstance(items, Mapping) and items.get("type") == "string"
    return False


def infer_effects(properties: Mapping[str, Any], read_only: bool) -> Effects | None:
    """What a tool touches, from the names and types of its arguments; None if that can't be
    told (no path argument, or an argument that runs a command)."""
    if any(name.lower() in _COMMAND_NAMES for name in properties):
        return None
    moves = any(name.lower() in ("destination", "dest", "dst") for name in properties)
    found = tuple(
        name
        for name, schema in properties.items()
        if _is_path_name(name, beside_destination=moves) and _holds_paths(schema)
    )
    if not found:
        return None
    return Effects(reads=found) if read_only else Effects(writes=found)


# Whether a directory is a workspace's root, by workspace: asked for every call of a tool with
# path arguments, and a key of an absolute path costs a few resolutions.
_ROOTS: weakref.WeakKeyDictionary[object, dict[str, bool]] = weakref.WeakKeyDictionary()


def _is_root(directory: str | None, key: KeyFunction) -> bool:
    """Whether ``directory`` (absolute) is the kernel's workspace root."""
    if directory is None:
        return False
    owner = key_owner(key)  # the Workspace whose key this is
    known = None
    if owner is not None:
        with contextlib.suppress(TypeError):  # not weakly referable: don't remember
            known = _ROOTS.setdefault(owner, {})
    if known is not None and directory in known:
        return known[directory]
    try:
        found = key(directory) == key(".")
    except (InvalidClaimError, ValueError, OSError):
        found = False  # outside the workspace, or no workspace to be inside of
    if known is not None:
        known[directory] = found
    return found


def effect_claims(
    effects: Effects,
    arguments: Mapping[str, Any],
    key: KeyFunction,
    place: ServerPlace,
    *,
    relative_to_root: bool,
    server: Resource,
    serial: bool,
) -> list[Claim] | None:
    """The claims of a call with these ``effects``, or None where a path can't be keyed as the
    server reads it (the call is then a barrier)."""
    server_mode = Mode.EXCLUSIVE if serial else effects.server
    found = [exclusive(server) if server_mode is Mode.EXCLUSIVE else shared(server)]
    if not effects.path_arguments:
        return found
    if len(place.roots) != 1 or not _is_root(place.roots[0], key):
        return None
    relative_ok = relative_to_root or _is_root(place.cwd, key)
    for names, make in ((effects.reads, shared), (effects.writes, exclusive)):
        for name in names:
            values = _path_values(arguments.get(name))
            if values is None:
                return None
            for raw in values:
                keyed = _keyed(raw, key, relative_ok)
                if keyed is None:
                    return None
                found.append(make(keyed))
    return found


def _path_values(value: Any) -> Sequence[str] | None:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value
    return None


def _keyed(raw: str, key: KeyFunction, relative_ok: bool) -> Path | None:
    if not raw or raw.startswith("~") or "\0" in raw:
        return None  # a server expands "~" to its home: not a workspace path
    if not os.path.isabs(raw) and not relative_ok:
        return None
    try:
        return key(raw)
    except (InvalidClaimError, ValueError, OSError):
        return None


def barrier_claims(
    key: KeyFunction, server: Resource, *, read_only: bool, serial: bool
) -> list[Claim]:
    """The whole workspace and the server: shared for a read-only tool, exclusive otherwise."""
    workspace = key(".")
    if read_only:
        return [shared(workspace), exclusive(server) if serial else shared(server)]
    return [exclusive(workspace), exclusive(server)]

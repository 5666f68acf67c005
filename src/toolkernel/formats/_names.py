"""Tool names on the wire: the names OpenAI and Anthropic accept, and the way back.

Both providers take function names of 1 to 64 characters from ``[A-Za-z0-9_-]``. A tool whose
name already fits keeps it. Any other name (an MCP server's ``git.status``, a name with spaces,
non-ASCII letters, more than 64 characters) is renamed: accents are dropped, every other
character that does not fit becomes ``_``, and a short hash of the original name is appended
when the result is cut to length or would be the name of another tool (another digest if that
too is taken: no two tools ever share a wire name). The mapping depends only on the set of
names, never on their order, so a toolset exports the same wire names at every step of a
conversation (and keeps a provider's prompt cache warm).

Renaming is reversible only with the tool list in hand: :func:`wire_names` gives the mapping,
and the ``calls_from_*`` functions take ``tools=`` to map the model's names back.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Mapping

__all__ = ["wire_names", "NameMap", "tool_names"]

MAX_LENGTH = 64
_FITS = re.compile(r"[A-Za-z0-9_-]{1,64}")
_UNFIT = re.compile(r"[^A-Za-z0-9_-]")


def tool_names(tools: Iterable[object]) -> list[str]:
    """The names of ``tools``: tool objects (anything with ``.name``), names, or a mapping of
    name to tool (such as ``kernel.tools``)."""
    names = []
    for item in tools:
        name = item if isinstance(item, str) else getattr(item, "name", None)
        if isinstance(name, str):
            names.append(name)
    return names


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def _fitted(name: str) -> str:
    ascii_only = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return _UNFIT.sub("_", ascii_only) or "tool"


def wire_names(tools: Iterable[object]) -> dict[str, str]:
    """Each tool's name as a wire format accepts it: ``{tool name: wire name}``.

    ::

        >>> wire_names(["Read", "git.status", "search files"])
        {'Read': 'Read', 'git.status': 'git_status', 'search files': 'search_files'}
    """
    names = sorted(set(tool_names(tools)))
    kept = {name for name in names if _FITS.fullmatch(name)}
    fitted = {name: _fitted(name) for name in names if name not in kept}
    counts: dict[str, int] = {}
    for base in fitted.values():
        counts[base] = counts.get(base, 0) + 1
    mapping: dict[str, str] = {}
    hashed: list[tuple[str, str]] = []
    for name in names:
        base = fitted.get(name, name)
        if name not in kept and (len(base) > MAX_LENGTH or base in kept or counts[base] > 1):
            hashed.append((name, base))
        else:
            mapping[name] = base  # unique: kept as it is, or fitted to a name nobody else has
    # A hashed name may still be another tool's (``a.b`` becomes ``a_b_2e7336dc``, which a
    # tool may be called, or ``a.b_2e7336dc`` fitted) or share its 8 digits: then a model's
    # call to one would run the other. The next digest of the name is taken instead, in
    # sorted order, so the mapping still depends only on the set of names.
    taken = set(mapping.values())
    for name, base in hashed:
        wire, salt = f"{base[: MAX_LENGTH - 9]}_{_digest(name)}", 0
        while wire in taken:
            salt += 1
            wire = f"{base[: MAX_LENGTH - 9]}_{_digest(f'{name}#{salt}')}"
        mapping[name] = wire
        taken.add(wire)
    return {name: mapping[name] for name in names}


class NameMap:
    """Both directions of :func:`wire_names` for one toolset."""

    __slots__ = ("from_wire", "to_wire")

    def __init__(self, tools: Iterable[object] = ()) -> None:
        self.to_wire: Mapping[str, str] = wire_names(tools)
        self.from_wire: Mapping[str, str] = {w: n for n, w in self.to_wire.items()}

    def wire(self, name: str) -> str:
        """The wire name of a tool (a name not in the toolset is fitted the same way)."""
        found = self.to_wire.get(name)
        if found is not None:
            return found
        return name if _FITS.fullmatch(name) else wire_names([name])[name]

    def tool(self, wire_name: str) -> str:
        """The tool a wire name stands for; a name the toolset does not know is left as it is,
        so the kernel can answer that no such tool exists."""
        return self.from_wire.get(wire_name, wire_name)

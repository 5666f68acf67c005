"""On the way back from strict mode: a model's ``null`` for "leave it out", removed again.

Strict mode makes every optional property required and nullable, so a strict model answers
``null`` for each one it would have left out. :func:`drop_nulls` undoes that, guided by the
tool's own schema: a ``null`` for an optional property whose schema refuses ``null`` is
removed, so the tool sees the property absent and applies its default. It looks inside nested
objects and arrays, through ``$ref`` and through unions (``Point | None`` is ``anyOf: [Point,
null]``: the object inside is a ``Point``), as deep as the schema says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._schema import accepts_null, resolve_ref

__all__ = ["drop_nulls"]

_MAX_HOPS = 32  # references followed in a row before giving up (a schema could loop)
# How deep it looks: a schema that refers to itself (an MCP server's tree) would otherwise
# follow a model's arguments as deep as they go, and exhaust the stack. Below this the
# arguments go as they are (the tool's validation says what is wrong with them).
_MAX_DEPTH = 64


def drop_nulls(
    value: Any, schema: Any, root: Mapping[str, Any] | None = None, depth: int = 0
) -> Any:
    """``value`` without the ``null`` of every optional property whose schema refuses it.

    ``root`` is the schema that ``$ref`` s point into (``schema`` itself at the top)."""
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return value
    if root is None:
        root = schema
    if isinstance(value, dict):
        shape = _variant(value, schema, root)
        if shape is None:
            return value
        properties = shape["properties"]
        required = set(shape.get("required") or ())
        out = {}
        for key, item in value.items():
            sub = _resolved(properties.get(key), root)
            if item is None and key not in required and sub is not None and not accepts_null(sub):
                continue
            out[key] = drop_nulls(item, sub, root, depth + 1)
        return out
    if isinstance(value, list):
        for option in _options(schema, root):
            items = option.get("items")
            if isinstance(items, Mapping):
                return [drop_nulls(item, items, root, depth + 1) for item in value]
    return value


def _resolved(schema: Any, root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``schema`` with ``$ref`` followed (None if it is no schema or leads nowhere)."""
    for _ in range(_MAX_HOPS):
        if not isinstance(schema, Mapping):
            return None
        if "$ref" not in schema:
            return schema
        target = resolve_ref(root, schema["$ref"])
        if target is None:
            return None
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return None


def _options(schema: Mapping[str, Any], root: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The schemas a value may match: ``schema`` itself and, through unions, its options."""
    found: list[Mapping[str, Any]] = []
    pending: list[Any] = [schema]
    while pending and len(found) < _MAX_HOPS:
        current = _resolved(pending.pop(0), root)
        if current is None:
            continue
        found.append(current)
        for key in ("anyOf", "oneOf", "allOf"):
            options = current.get(key)
            if isinstance(options, list):
                pending.extend(options)
    return found


def _variant(
    value: Mapping[str, Any], schema: Mapping[str, Any], root: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    """The object schema ``value`` is meant for: the first that declares all its keys, else the
    first that declares any properties."""
    shapes = [s for s in _options(schema, root) if isinstance(s.get("properties"), Mapping)]
    for shape in shapes:
        if value.keys() <= shape["properties"].keys():
            return shape
    return shapes[0] if shapes else None

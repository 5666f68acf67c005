"""Arguments for a call of any tool, drawn from its JSON Schema (needs ``hypothesis``).

A tool's ``parameters_schema()`` is what pydantic wrote from its signature, so values that
follow it validate. Path arguments (the tool's ``reads`` and ``writes``) are drawn from a path
strategy instead, so calls collide on a few files spelled many ways; strings are drawn from a
small alphabet, so an Edit's ``old_string`` is now and then found in a file; numbers and lists
stay small. Only the parts of JSON Schema that pydantic writes for a tool's parameters are
understood (types, ``enum``, ``const``, ``anyOf``, arrays, objects, ``$ref`` to ``$defs``);
anything else draws ``None``, which the tool's validation then refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

__all__ = ["arguments_from_schema", "TEXT"]

TEXT = st.text(st.sampled_from("ab. \n"), max_size=6)
"""Strings for arguments that are not paths: short, over few letters, so they collide."""

_Schema = Mapping[str, Any]


def arguments_from_schema(
    schema: _Schema,
    *,
    overrides: Mapping[str, st.SearchStrategy[Any]],
    text: st.SearchStrategy[str] = TEXT,
) -> st.SearchStrategy[dict[str, Any]]:
    """Argument objects following ``schema`` (an object schema); ``overrides`` draws the named
    properties instead (and always gives them, even when optional)."""
    return _object(schema, schema, text, overrides)


def _object(
    schema: _Schema,
    root: _Schema,
    text: st.SearchStrategy[str],
    overrides: Mapping[str, st.SearchStrategy[Any]] | None = None,
) -> st.SearchStrategy[dict[str, Any]]:
    overrides = overrides or {}
    properties: Mapping[str, _Schema] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    fixed: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for name, part in properties.items():
        drawn = overrides.get(name)
        if drawn is None:
            drawn = _value(part, root, text)
        (fixed if name in required or name in overrides else optional)[name] = drawn
    return st.fixed_dictionaries(fixed, optional=optional)


def _value(schema: _Schema, root: _Schema, text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    if "$ref" in schema:
        return _value(_resolve(schema["$ref"], root), root, text)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(list(schema["enum"]))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([_value(part, root, text) for part in schema[key]])
    kinds = schema.get("type")
    if isinstance(kinds, list):
        return st.one_of([_value({**schema, "type": kind}, root, text) for kind in kinds])
    if kinds == "string":
        return text
    if kinds == "integer":
        low, high = schema.get("minimum", 0), schema.get("maximum")
        return st.integers(low, high if high is not None else low + 5)
    if kinds == "number":
        low, high = schema.get("minimum", 0.0), schema.get("maximum")
        return st.sampled_from(sorted({low, low + 0.5, high if high is not None else low + 2.0}))
    if kinds == "boolean":
        return st.booleans()
    if kinds == "null":
        return st.none()
    if kinds == "array":
        items = _value(schema.get("items", {}), root, text)
        low = schema.get("minItems", 0)
        return st.lists(items, min_size=low, max_size=max(low, min(schema.get("maxItems", 3), 3)))
    if kinds == "object" or "properties" in schema:
        return _object(schema, root, text)
    return st.none()


def _resolve(reference: str, root: _Schema) -> _Schema:
    found: Any = root
    for part in reference.removeprefix("#/").split("/"):
        found = found[part]
    resolved: _Schema = found
    return resolved

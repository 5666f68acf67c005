"""pydantic's JSON Schema, made plain for a model to read and for every client to accept.

pydantic writes a title for every property (``"title": "File Path"``, tokens that say nothing the
name does not) and puts ``TypedDict`` shapes in ``$defs`` behind ``$ref``, which some clients'
tool schemas do not accept. Here titles go, references are inlined, and a union of plain types is
written ``{"type": ["integer", "null"]}``. The top level always lists ``required`` and says
whether ``additionalProperties`` are accepted.
"""

from __future__ import annotations

from typing import Any

__all__ = ["tidy_schema"]

# Keywords whose values are data, not schemas: nothing inside them is rewritten.
_DATA = frozenset({"default", "enum", "const", "examples"})


def tidy_schema(schema: dict[str, Any], accepts_extra: bool) -> dict[str, Any]:
    """The arguments schema pydantic wrote for a tool, tidied as described above."""
    definitions = schema.get("$defs", {})
    tidied = _tidy(schema, definitions, ())
    return {
        "type": "object",
        "properties": tidied.get("properties", {}),
        "required": list(tidied.get("required", [])),
        "additionalProperties": accepts_extra,
    }


def _tidy(
    schema: dict[str, Any], definitions: dict[str, Any], seen: tuple[str, ...]
) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in seen:
            raise ValueError(f"the schema of {name} refers to itself")
        rest = {key: value for key, value in schema.items() if key != "$ref"}
        return _tidy({**definitions[name], **rest}, definitions, (*seen, name))
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" or key == "$defs":
            continue
        if key in _DATA:
            out[key] = value
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _tidy(sub, definitions, seen) for name, sub in value.items()}
        elif isinstance(value, dict):
            out[key] = _tidy(value, definitions, seen)
        elif isinstance(value, list) and key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            out[key] = [_tidy(sub, definitions, seen) for sub in value]
        else:
            out[key] = value
    options = out.get("anyOf")
    if options and all(set(o) == {"type"} and isinstance(o["type"], str) for o in options):
        del out["anyOf"]
        out = {"type": [o["type"] for o in options], **out}
    return out

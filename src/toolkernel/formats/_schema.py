"""Tool schemas for the wire: the plain export, OpenAI's strict mode, and the way back.

Strict mode (OpenAI's Structured Outputs, "Supported schemas") accepts a subset of JSON Schema:

- the root is an object, never an ``anyOf``;
- every object lists all its properties in ``required`` and says ``additionalProperties:
  false``, so an optional property becomes a required one that may be ``null``;
- types are string, number, integer, boolean, object, array, enum and const, and ``anyOf``
  (nested); ``$defs``/``$ref`` are allowed;
- the constraints kept are ``pattern`` and ``format`` (date-time, time, date, duration, email,
  hostname, ipv4, ipv6, uuid) for strings, ``multipleOf``, ``minimum``, ``maximum``,
  ``exclusiveMinimum``, ``exclusiveMaximum`` for numbers, ``minItems``, ``maxItems`` for arrays;
- ``allOf``, ``not``, ``if``/``then``/``else``, ``dependentRequired``, ``dependentSchemas`` are
  not supported; objects nest at most 10 levels.

:func:`strict_schema` rewrites a tool's schema to that subset. A keyword it has to drop that
still tells the model something (``default``, ``minLength``, an unsupported ``format``) moves
into the property's description, so nothing the model should know is lost. What can't be said
at all (an object with free-form keys, a value of any type, an array with no item schema)
raises :class:`~toolkernel.errors.SchemaError` naming the tool and the property.

Schemas other programs wrote (an MCP server's) come in other dialects, rewritten too: a
``$ref`` beside other keywords (pydantic's ``{"$ref": ..., "description": ...}``, which strict
mode refuses) is replaced by what it points at, those keywords winning; draft-07
``definitions`` (zod's) become ``$defs``; a root object with no properties and nothing said
about other keys (``{"type": "object"}``, FastMCP's schema of a tool without arguments) takes
no arguments.

Because strict mode makes optional properties nullable, a model answers ``null`` for "leave it
out"; :func:`~toolkernel.formats._nulls.drop_nulls` undoes that on the way back.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from .._errors import SchemaError

__all__ = [
    "tool_schema",
    "with_dependencies",
    "strict_schema",
    "declares",
    "accepts_null",
    "resolve_ref",
]

_KEPT = frozenset(
    {
        "type",
        "description",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "$defs",
        "$ref",
        "pattern",
        "format",
        "multipleOf",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
    }
)
_SILENT = frozenset({"title", "examples", "$schema", "$id", "$comment", "readOnly", "writeOnly"})
_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_UNSUPPORTED = ("not", "if", "then", "else", "dependentRequired", "dependentSchemas", "prefixItems")
MAX_DEPTH = 10
_COMBINED = frozenset({"anyOf", "oneOf", "allOf", "$ref", "enum", "const", "not", "if"})

DEPENDS_ON = "depends_on"
"""The argument a model uses to make a call wait for others of the same message."""

_DEPENDS_ON_SCHEMA = {
    "type": "array",
    "items": {"type": "integer"},
    "description": (
        "Positions (1 = first) of other calls in this same message that must finish before "
        "this one runs; write ${N} inside a string argument to use call N's output there."
    ),
}


def tool_schema(tool: object) -> dict[str, Any]:
    """A copy of the tool's arguments schema (an empty object schema if it has none), saying
    ``type: object`` and ``properties`` at its root: OpenAI refuses parameters without them,
    and Anthropic an input schema without the type, while MCP servers send ``{}`` or
    ``{"type": "object"}`` for a tool without arguments (arguments are always an object), or a
    root that is only a ``$ref`` to the object schema (zod's, given a name)."""
    schema_of = getattr(tool, "parameters_schema", None)
    schema = schema_of() if callable(schema_of) else None
    if not isinstance(schema, Mapping):
        return {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    schema = copy.deepcopy(dict(schema))
    target = resolve_ref(schema, schema.get("$ref")) if "type" not in schema else None
    if target is not None and target is not schema:  # zod's named root: the object it names
        schema = {**{k: v for k, v in schema.items() if k != "$ref"}, **copy.deepcopy(target)}
    if "type" not in schema and not (_COMBINED & schema.keys()):
        schema["type"] = "object"
    if schema.get("type") == "object" and "properties" not in schema:
        schema["properties"] = {}
    return schema


def declares(schema: Mapping[str, Any], name: str) -> bool:
    """Whether a tool's schema has a top-level property ``name``."""
    properties = schema.get("properties")
    return isinstance(properties, Mapping) and name in properties


def with_dependencies(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with the optional ``depends_on`` argument, unless the tool has its own."""
    if declares(schema, DEPENDS_ON) or schema.get("type") != "object":
        return schema
    properties = dict(schema.get("properties") or {})
    properties[DEPENDS_ON] = copy.deepcopy(_DEPENDS_ON_SCHEMA)
    return {**schema, "properties": properties}


# -- strict mode ---------------------------------------------------------------------------------


def strict_schema(schema: Mapping[str, Any], tool_name: str) -> dict[str, Any]:
    """``schema`` rewritten to OpenAI's strict-mode subset (see the module docstring)."""
    if schema.get("type") != "object" or "anyOf" in schema:
        raise SchemaError(
            f"tool {tool_name!r} can't be exported in strict mode: its parameters must be a JSON "
            f"object schema (type: object), not {_preview(schema)}; export it with strict=False"
        )
    if not schema.get("properties") and "additionalProperties" not in schema:
        schema = {**schema, "properties": {}, "additionalProperties": False}  # no arguments
    converter = _Strict(tool_name, schema)
    converted = converter.convert(schema, "", 0)
    definitions = _definitions(schema)
    if definitions:
        converted["$defs"] = {
            name: converter.convert(sub, f"$defs/{name}", 0) for name, sub in definitions.items()
        }
    return converted


def _definitions(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The root's named schemas: its ``$defs`` and draft-07 ``definitions`` (as ``$defs``)."""
    found: dict[str, Any] = {}
    for key in ("definitions", "$defs"):
        named = schema.get(key)
        if isinstance(named, Mapping):
            found.update(named)
    return found


def resolve_ref(root: Mapping[str, Any], ref: object) -> Mapping[str, Any] | None:
    """The schema a local ``$ref`` (``#``, ``#/$defs/Name``, any JSON pointer into ``root``)
    points at, or None."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node: Any = root
    for part in ref[2:].split("/") if ref != "#" else ():
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node if isinstance(node, Mapping) else None


def _strict_ref(ref: object) -> str | None:
    """How a ``$ref`` is written in the strict schema, when it can stay a reference: to the
    root, or to a named schema (``definitions`` become ``$defs``)."""
    if ref == "#":
        return "#"
    for prefix in ("#/$defs/", "#/definitions/"):
        if isinstance(ref, str) and ref.startswith(prefix) and "/" not in ref[len(prefix) :]:
            return "#/$defs/" + ref[len(prefix) :]
    return None


class _Strict:
    def __init__(self, tool_name: str, root: Mapping[str, Any]) -> None:
        self.tool_name = tool_name
        self.root = root
        self.inlining: set[str] = set()

    def fail(self, where: str, why: str) -> SchemaError:
        place = f"property {where!r}" if where else "its parameters"
        return SchemaError(
            f"tool {self.tool_name!r} can't be exported in strict mode: {place} {why}; give it a "
            f"precise type, or export the tools with strict=False"
        )

    def convert(self, schema: Mapping[str, Any], where: str, depth: int) -> dict[str, Any]:
        if not isinstance(schema, Mapping):
            raise self.fail(where, f"has the schema {_preview(schema)}, which is not an object")
        schema = dict(schema)
        for key in _UNSUPPORTED:
            if key in schema:
                raise self.fail(where, f"uses {key!r}, which strict mode does not support")
        if "oneOf" in schema:  # exactly one of disjoint options: as good as any of them
            schema["anyOf"] = [*schema.get("anyOf", ()), *schema.pop("oneOf")]
        if "allOf" in schema:
            parts = schema.pop("allOf")
            if not isinstance(parts, list) or len(parts) != 1:
                raise self.fail(where, "combines schemas with 'allOf'")
            schema = {**parts[0], **schema}
        if "$ref" in schema:
            ref = schema["$ref"]
            kept = _strict_ref(ref)
            if kept is None or (schema.keys() - _SILENT - {"$ref", "$defs", "definitions"}):
                return self._inline(schema, where, depth)
            return {"$ref": kept}
        notes: list[str] = []
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in _SILENT or key in ("$defs", "definitions"):
                continue
            if key == "format" and value not in _FORMATS:
                notes.append(f"format: {value}")
            elif key == "default":
                if value is not None:
                    notes.append(f"default: {json.dumps(value, default=str)}")
            elif key not in _KEPT:
                notes.append(f"{key}: {json.dumps(value, default=str)}")
            else:
                out[key] = value
        if notes:
            text = out.get("description")
            note = "; ".join(notes)
            out["description"] = f"{text} ({note})" if text else f"({note})"
        if "anyOf" in out:
            out["anyOf"] = [self.convert(sub, where, depth) for sub in out["anyOf"]]
        if "$ref" in out or "enum" in out or "const" in out or "anyOf" in out:
            return out
        kind = out.get("type")
        kinds = kind if isinstance(kind, list) else [kind]
        if kind is None:
            raise self.fail(where, "accepts a value of any type")
        if "object" in kinds:
            self._object(out, where, depth + 1)
        if "array" in kinds:
            items = out.get("items")
            if not isinstance(items, Mapping):
                raise self.fail(where, "is an array without a schema for its items")
            out["items"] = self.convert(items, f"{where}[]", depth)
        return out

    def _inline(self, schema: Mapping[str, Any], where: str, depth: int) -> dict[str, Any]:
        """A ``$ref`` with keywords beside it (strict mode refuses them), or to somewhere other
        than a named schema: what it points at, with those keywords over it."""
        ref = schema["$ref"]
        target = resolve_ref(self.root, ref)
        if target is None:
            raise self.fail(where, f"refers to {ref!r}, which is not in the schema")
        if ref in self.inlining:  # recursion: a reference is all that can be said
            kept = _strict_ref(ref)
            if kept is None:
                raise self.fail(where, f"refers to {ref!r} within itself")
            return {"$ref": kept}
        self.inlining.add(ref)
        try:
            merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
            return self.convert(merged, where, depth)
        finally:
            self.inlining.discard(ref)

    def _object(self, out: dict[str, Any], where: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise self.fail(where, f"nests objects more than {MAX_DEPTH} levels deep")
        properties = out.get("properties") or {}
        extra = out.get("additionalProperties", not properties)
        if extra is not False or not isinstance(properties, Mapping):
            raise self.fail(where, "is an object with free-form keys")
        required = set(out.get("required") or ())
        converted = {}
        for name, sub in properties.items():
            path = f"{where}.{name}" if where else name
            schema = self.convert(sub, path, depth)
            converted[name] = schema if name in required else _nullable(schema)
        out["properties"] = converted
        out["required"] = list(converted)
        out["additionalProperties"] = False


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` accepting ``null`` as well."""
    if accepts_null(schema):
        return schema
    kind = schema.get("type")
    plain = not ({"enum", "const", "anyOf", "$ref"} & schema.keys())
    if plain and isinstance(kind, str):
        return {**schema, "type": [kind, "null"]}
    if plain and isinstance(kind, list):
        return {**schema, "type": [*kind, "null"]}
    if set(schema) <= {"anyOf", "description"}:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    inner = {key: value for key, value in schema.items() if key != "description"}
    wrapped: dict[str, Any] = {"anyOf": [inner, {"type": "null"}]}
    if "description" in schema:
        wrapped["description"] = schema["description"]
    return wrapped


def accepts_null(schema: Mapping[str, Any]) -> bool:
    """Whether ``null`` is valid for ``schema`` (as far as can be told without ``$ref``)."""
    if not isinstance(schema, Mapping):
        return False
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if "enum" in schema:
        return None in schema["enum"]
    if "const" in schema:
        return schema["const"] is None
    options = [*schema.get("anyOf", ()), *schema.get("oneOf", ())]
    if options:
        return any(accepts_null(option) for option in options)
    return kind is None and "$ref" not in schema and "allOf" not in schema


def _preview(value: object, limit: int = 80) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

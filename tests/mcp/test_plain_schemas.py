"""A schema that gives each argument only a scalar type is checked without jsonschema (its cost
is a call's own, on the event loop): whatever that quick check lets through, jsonschema lets
through too, and whatever it doubts goes to jsonschema, which words the message."""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import given
from hypothesis import strategies as st

from toolkernel.mcp._arguments import _plain_types, _plainly_valid

TYPES = ["string", "integer", "number", "boolean", "null"]
NAMES = st.sampled_from(["a", "b", "c", "d"])
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
)


@st.composite
def plain_schemas(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(NAMES, unique=True, max_size=4))
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: {"type": draw(st.sampled_from(TYPES))} for name in names},
    }
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    return schema


@given(plain_schemas(), st.dictionaries(NAMES, VALUES, max_size=4))
def test_what_the_quick_check_lets_through_jsonschema_lets_through(
    schema: dict[str, Any], arguments: dict[str, Any]
) -> None:
    types = _plain_types(schema)
    assert types is not None
    if _plainly_valid(types, arguments):
        assert not list(jsonschema.Draft202012Validator(schema).iter_errors(arguments))


def test_anything_more_than_a_type_is_left_to_jsonschema() -> None:
    assert _plain_types({"type": "object", "properties": {"a": {"type": "string"}}}) is not None
    for sub in (
        {"type": "string", "pattern": "^a"},
        {"type": "string", "enum": ["a"]},
        {"type": "array", "items": {"type": "string"}},
        {"type": ["string", "null"]},
        {"anyOf": [{"type": "string"}]},
    ):
        assert _plain_types({"type": "object", "properties": {"a": sub}}) is None
    assert _plain_types({"type": "object", "properties": {}, "allOf": []}) is None
    assert _plain_types({"type": "object", "additionalProperties": {"type": "string"}}) is None
    # A number is no boolean, and a boolean is no number.
    types = _plain_types({"type": "object", "properties": {"n": {"type": "number"}}})
    assert types is not None
    assert not _plainly_valid(types, {"n": True}) and _plainly_valid(types, {"n": 1.5})

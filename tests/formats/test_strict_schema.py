"""``strict=True`` exports schemas that pass OpenAI's strict-mode rules, and what a strict model
must then send (``null`` for every optional argument) is what the tool accepts.

The rules, from OpenAI's "Structured Outputs: supported schemas": the root is an object and not
``anyOf``; every object has ``additionalProperties: false`` and lists every property in
``required`` (optional ones are nullable instead); only these keywords; string formats from a
fixed list; objects nest at most 10 deep; ``allOf``, ``not``, ``if``/``then``/``else``,
``dependentRequired``, ``dependentSchemas`` are not supported.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

import pytest
from hypothesis import given
from pydantic import Field

import toolkernel as tk
from toolkernel.formats import anthropic, openai
from toolkernel.tools import builtin_tools

from ..strategies import generated_tools

ALLOWED = {
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
FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}


def strict_violations(root: Mapping[str, Any]) -> list[str]:
    """Every way ``root`` breaks the strict-mode rules (empty: it passes)."""
    found: list[str] = []
    if root.get("type") != "object" or "anyOf" in root:
        found.append("root: not a plain object schema")

    def check(node: Any, where: str, depth: int) -> None:
        if not isinstance(node, Mapping):
            found.append(f"{where}: not a schema")
            return
        if "$ref" in node and len(node) > 1:  # OpenAI: "$ref cannot have keywords"
            found.append(f"{where}: $ref with other keywords {sorted(set(node) - {'$ref'})}")
        if "$ref" in node and _resolve(root, node["$ref"]) is None:
            found.append(f"{where}: $ref {node['$ref']!r} points at nothing")
        for key in node:
            if key not in ALLOWED:
                found.append(f"{where}: keyword {key!r}")
        if "format" in node and node["format"] not in FORMATS:
            found.append(f"{where}: format {node['format']!r}")
        if not ({"type", "anyOf", "enum", "const", "$ref"} & node.keys()):
            found.append(f"{where}: no type")
        kinds = node.get("type")
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if "object" in kinds:
            if depth > 10:
                found.append(f"{where}: nested deeper than 10")
            if node.get("additionalProperties") is not False:
                found.append(f"{where}: additionalProperties is not false")
            properties = node.get("properties", {})
            if sorted(node.get("required", [])) != sorted(properties):
                found.append(f"{where}: not every property is required")
            for name, sub in properties.items():
                check(sub, f"{where}.{name}", depth + 1)
        if "array" in kinds:
            if "items" not in node:
                found.append(f"{where}: array without items")
            else:
                check(node["items"], f"{where}[]", depth)
        for option in node.get("anyOf", ()):
            check(option, f"{where}|", depth)
        for name, sub in node.get("$defs", {}).items():
            check(sub, f"$defs.{name}", 1)

    check(root, "", 1)
    return found


def _resolve(root: Mapping[str, Any], ref: object) -> Any:
    """What a local ``$ref`` (``#`` or ``#/$defs/Name``) points at, or None."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node: Any = root
    for part in ref[2:].split("/") if ref != "#" else ():
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def function(tool: tk.Tool, **options: Any) -> dict[str, Any]:
    exported: dict[str, Any] = openai.chat_tools([tool], strict=True, **options)[0]["function"]
    return exported


@pytest.mark.parametrize("dependencies", [False, True])
def test_every_builtin_tool_passes_the_strict_mode_rules(dependencies: bool) -> None:
    for tool in builtin_tools(bash=True):
        exported = function(tool, dependencies=dependencies)
        assert exported["strict"] is True
        assert strict_violations(exported["parameters"]) == [], tool.name
    for spec in openai.responses_tools(builtin_tools(), strict=True):
        assert spec["strict"] is True and strict_violations(spec["parameters"]) == []


def test_optional_arguments_become_required_and_nullable_at_every_depth() -> None:
    read = function(builtin_tools()[0])["parameters"]
    assert read["required"] == ["file_path", "offset", "limit"]
    assert read["properties"]["offset"]["type"] == ["integer", "null"]
    multi_edit = next(t for t in builtin_tools() if t.name == "MultiEdit")
    item = function(multi_edit)["parameters"]["properties"]["edits"]["items"]
    assert item["required"] == ["old_string", "new_string", "replace_all"]
    assert item["properties"]["replace_all"]["type"] == ["boolean", "null"]


def test_an_optional_enum_is_wrapped_in_any_of_with_null_and_keeps_its_default_in_words() -> None:
    grep = next(t for t in builtin_tools() if t.name == "Grep")
    mode = function(grep)["parameters"]["properties"]["output_mode"]
    assert mode["anyOf"][1] == {"type": "null"}
    assert mode["anyOf"][0]["enum"] == ["files_with_matches", "content", "count"]
    assert '(default: "files_with_matches")' in mode["description"]


@tk.tool(claims=lambda args: [])
async def constrained(
    ctx: tk.ToolContext,
    name: Annotated[str, Field(min_length=1, max_length=20)],
    count: Annotated[int, Field(ge=1, le=9)] = 3,
) -> str:
    """Constrained arguments.

    Args:
        name: A short name.
        count: How many.
    """
    return name * count


def test_unsupported_constraints_move_into_the_description_and_supported_ones_stay() -> None:
    properties = function(constrained)["parameters"]["properties"]
    assert "minLength" not in properties["name"]
    assert properties["name"]["description"] == "A short name. (maxLength: 20; minLength: 1)"
    assert properties["count"]["minimum"] == 1 and properties["count"]["maximum"] == 9
    assert "(default: 3)" in properties["count"]["description"]


@tk.tool(claims=lambda args: [])
async def free_form(ctx: tk.ToolContext, labels: dict[str, str]) -> str:
    """Free-form keys."""
    return ""


@tk.tool(claims=lambda args: [])
async def anything(ctx: tk.ToolContext, value: Any) -> str:
    """Any value."""
    return ""


@tk.tool(claims=lambda args: [])
async def pair(ctx: tk.ToolContext, point: tuple[int, int]) -> str:
    """A tuple."""
    return ""


@pytest.mark.parametrize(
    ("tool", "why"),
    [
        (free_form, "property 'labels' is an object with free-form keys"),
        (anything, "property 'value' accepts a value of any type"),
        (pair, "property 'point' uses 'prefixItems'"),
    ],
)
def test_what_strict_mode_cannot_say_raises_a_schema_error_naming_tool_and_property(
    tool: tk.Tool, why: str
) -> None:
    with pytest.raises(
        tk.errors.SchemaError, match=f"tool '{tool.name}' can't be exported in strict"
    ):
        openai.chat_tools([tool], strict=True)
    with pytest.raises(ValueError, match=why):
        openai.responses_tools([tool], strict=True)
    assert openai.chat_tools([tool])[0]["function"]["strict"] is False  # fine when not strict


def test_without_strict_the_tools_own_schema_goes_out_unchanged() -> None:
    for tool in builtin_tools(bash=True):
        assert openai.chat_tools([tool])[0]["function"]["parameters"] == tool.parameters_schema()
        assert openai.responses_tools([tool])[0]["parameters"] == tool.parameters_schema()
        assert anthropic.tools([tool])[0]["input_schema"] == tool.parameters_schema()


# -- what a strict model sends, the tool accepts ------------------------------------------------


@given(generated_tools())
def test_what_strict_mode_makes_a_model_send_is_what_the_tool_accepts(
    generated: tuple[tk.Tool, dict[str, Any]],
) -> None:
    tool, arguments = generated
    assert strict_violations(function(tool)["parameters"]) == []
    message = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": tool.name, "arguments": json.dumps(arguments)},
            }
        ],
    }
    (call,) = openai.calls_from_chat(message, tools=[tool])
    assert isinstance(call.arguments, dict)
    tool.parse_arguments(call.arguments)  # raises InvalidArgumentsError if it would fail


def test_null_stays_for_an_optional_argument_that_accepts_null() -> None:
    read = builtin_tools()[0]
    message = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {
                    "name": "Read",
                    "arguments": '{"file_path": "a", "offset": null, "limit": null}',
                },
            }
        ],
    }
    (call,) = openai.calls_from_chat(message, tools=[read])
    assert call.arguments == {"file_path": "a", "offset": None, "limit": None}

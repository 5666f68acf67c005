"""Schemas toolkernel did not write, on the wire: MCP servers send their tools' schemas as their
SDKs make them (pydantic's ``$defs`` with ``$ref`` beside a description, zod's ``definitions``,
``{"type": "object"}`` or ``{}`` for a tool with no arguments). Every provider must accept the
export, strict or not, and what a strict model sends back (``null`` for every optional
property, at every depth) must be what the tool's own schema accepts."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pydantic
import pytest
from anthropic.types import ToolParam
from openai.types.chat import ChatCompletionFunctionToolParam
from pydantic import TypeAdapter

import toolkernel as tk
from toolkernel.formats import anthropic, openai

from .test_strict_schema import strict_violations


class SchemaTool:
    """A tool as the wire formats see it: a name and a JSON schema (an MCP tool, say)."""

    def __init__(self, name: str, schema: dict[str, Any]) -> None:
        self.name = name
        self.description = ""
        self.schema = schema

    def parameters_schema(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.schema))


class Point(pydantic.BaseModel):
    x: int
    z: int = 0


class Shape(pydantic.BaseModel):
    center: Point = pydantic.Field(description="the centre")
    corners: list[Point] = []
    via: Point | None = None


PYDANTIC = SchemaTool("draw", Shape.model_json_schema())  # FastMCP's way: $defs, $ref + siblings
ZOD = SchemaTool(  # the TypeScript SDK's zod-to-json-schema: draft-07 ``definitions``
    "place",
    {
        "type": "object",
        "properties": {
            "at": {"$ref": "#/definitions/Spot", "description": "where"},
            "near": {"$ref": "#/definitions/Spot"},
        },
        "required": ["at"],
        "definitions": {
            "Spot": {
                "type": "object",
                "properties": {"lat": {"type": "number"}, "label": {"type": "string"}},
                "required": ["lat"],
            }
        },
    },
)


def strict_parameters(tool: object) -> dict[str, Any]:
    parameters: dict[str, Any] = openai.chat_tools([tool], strict=True)[0]["function"]["parameters"]
    return parameters


@pytest.mark.parametrize("tool", [PYDANTIC, ZOD], ids=["pydantic", "zod"])
def test_refs_beside_other_keywords_and_draft_07_definitions_export_strict(
    tool: SchemaTool,
) -> None:
    assert strict_violations(strict_parameters(tool)) == []


def test_a_ref_beside_a_description_keeps_the_description() -> None:
    center = strict_parameters(PYDANTIC)["properties"]["center"]
    assert center["description"] == "the centre"
    assert center["properties"]["x"] == {"type": "integer"}


@pytest.mark.parametrize(
    "schema",
    [{"type": "object"}, {"type": "object", "properties": {}, "title": "pingArguments"}],
)
def test_a_tool_without_arguments_exports_strict_as_an_empty_object(
    schema: dict[str, Any],
) -> None:
    assert strict_parameters(SchemaTool("ping", schema)) == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_an_explicitly_open_root_object_still_cannot_be_strict() -> None:
    with pytest.raises(
        tk.errors.SchemaError, match="its parameters is an object with free-form keys"
    ):
        strict_parameters(SchemaTool("open", {"type": "object", "additionalProperties": True}))


def sent(tool: SchemaTool | tk.Tool, arguments: dict[str, Any]) -> Any:
    """The arguments of the call a model sent with ``arguments``, as the tool will see them."""
    function = {"name": tool.name, "arguments": json.dumps(arguments)}
    message = {"role": "assistant", "tool_calls": [{"id": "c1", "function": function}]}
    (call,) = openai.calls_from_chat(message, tools=[tool])
    return call.arguments


def test_nulls_for_optional_properties_inside_refs_and_unions_are_dropped() -> None:
    strict_model_sends = {
        "center": {"x": 1, "z": None},
        "corners": [{"x": 2, "z": None}],
        "via": {"x": 3, "z": None},
    }
    assert strict_violations(strict_parameters(PYDANTIC)) == []
    arguments = sent(PYDANTIC, strict_model_sends)
    assert arguments == {"center": {"x": 1}, "corners": [{"x": 2}], "via": {"x": 3}}
    jsonschema.validate(arguments, PYDANTIC.schema)
    arguments = sent(ZOD, {"at": {"lat": 1.5, "label": None}, "near": None})
    assert arguments == {"at": {"lat": 1.5}}
    jsonschema.validate(arguments, ZOD.schema)


@tk.tool(claims=lambda args: [])
async def move(
    ctx: tk.ToolContext, via: Point | None = None, many: list[Point] | None = None
) -> str:
    """Move through points."""
    return f"{via} {many}"


async def test_a_strict_models_nulls_inside_an_optional_model_reach_the_tool_as_defaults() -> None:
    assert strict_violations(strict_parameters(move)) == []
    arguments = {"via": {"x": 1, "z": None}, "many": [{"x": 2, "z": None}]}
    async with tk.open_kernel(tools=[move]) as kernel:
        (result,) = await kernel.run([tk.ToolCall("c1", "move", sent(move, arguments))])
    assert result.ok, result.error
    assert result.output == "x=1 z=0 [Point(x=2, z=0)]"


DRAFT_07 = "http://json-schema.org/draft-07/schema#"


@pytest.mark.parametrize(
    "schema", [{}, {"$schema": DRAFT_07}, {"type": "object"}], ids=["empty", "dialect", "bare"]
)
def test_a_schema_without_type_or_properties_goes_out_as_an_object_every_provider_accepts(
    schema: dict[str, Any],
) -> None:
    # OpenAI refuses parameters that are not 'type: "object"', and an object schema missing
    # properties; Anthropic's input_schema must say type object. MCP servers send all three.
    tool = SchemaTool("help", schema)
    for parameters in (
        openai.chat_tools([tool])[0]["function"]["parameters"],
        openai.responses_tools([tool])[0]["parameters"],
        anthropic.tools([tool])[0]["input_schema"],
        strict_parameters(tool),
    ):
        assert parameters["type"] == "object" and parameters["properties"] == {}
    TypeAdapter(ToolParam).validate_python(anthropic.tools([tool])[0])
    TypeAdapter(ChatCompletionFunctionToolParam).validate_python(openai.chat_tools([tool])[0])


NAMED_ROOT = SchemaTool(  # zod-to-json-schema given a name: the root is a $ref to it
    "named",
    {
        "$ref": "#/definitions/namedArgs",
        "definitions": {
            "namedArgs": {
                "type": "object",
                "properties": {
                    "at": {"$ref": "#/definitions/namedArgs/properties/near"},
                    "near": {"type": "string"},
                },
                "required": ["at"],
            }
        },
        "$schema": DRAFT_07,
    },
)


def test_a_root_that_refers_to_its_object_schema_goes_out_as_that_object() -> None:
    for parameters in (
        openai.chat_tools([NAMED_ROOT])[0]["function"]["parameters"],
        anthropic.tools([NAMED_ROOT])[0]["input_schema"],
    ):
        assert parameters["type"] == "object" and set(parameters["properties"]) == {"at", "near"}
    strict = strict_parameters(NAMED_ROOT)
    assert strict_violations(strict) == []
    assert strict["properties"]["at"] == {"type": "string"}
    assert sent(NAMED_ROOT, {"at": "x", "near": None}) == {"at": "x"}

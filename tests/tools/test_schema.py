"""Arguments validated against a tool's type hints, and the JSON Schema written from the same hints.

Models send JSON; a value passes only if it already has the declared type, and a mistake comes
back as one message naming the argument, what was expected and what came.
"""

from __future__ import annotations

import enum
import json
import types
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, TypedDict

import pytest
import typing_extensions
from pydantic import BaseModel, ConfigDict, Field

import toolkernel as tk
from toolkernel.errors import InvalidArgumentsError
from toolkernel.tools import builtin_tools
from toolkernel.tools._arguments import Aliases


class _Point(TypedDict):
    x: int
    y: int


class Point(_Point, total=False):
    label: str


@tk.tool(claims=lambda args: [])
async def shapes(
    ctx: tk.ToolContext,
    name: str,
    count: int = 1,
    ratio: float = 1.0,
    flag: bool = False,
    nothing: None = None,
    anything: Any = None,
    names: list[str] | None = None,
    sequence: Sequence[int] = (),
    weights: dict[str, float] | None = None,
    mapping: Mapping[str, int] | None = None,
    mode: Literal["fast", "slow"] = "fast",
    level: Literal[1, 2, 3] = 1,
    either: int | str = 0,
    points: list[Point] | None = None,
) -> None:
    """Take one of every supported shape.

    Args:
        name: A name.
        count: How many; a description may go on
            over two lines.
    """


def parse(arguments: Mapping[Any, Any], tool: tk.Tool = shapes) -> dict[str, Any]:
    return tool.parse_arguments(arguments)


def error_of(arguments: Mapping[Any, Any], tool: tk.Tool = shapes) -> str:
    with pytest.raises(InvalidArgumentsError) as info:
        tool.parse_arguments(arguments)
    return str(info.value)


# -- what passes --------------------------------------------------------------------------------


def test_valid_arguments_come_back_completed_with_defaults() -> None:
    parsed = parse({"name": "a", "count": 3})
    assert parsed == {
        "name": "a",
        "count": 3,
        "ratio": 1.0,
        "flag": False,
        "nothing": None,
        "anything": None,
        "names": None,
        "sequence": (),
        "weights": None,
        "mapping": None,
        "mode": "fast",
        "level": 1,
        "either": 0,
        "points": None,
    }


def test_a_float_accepts_an_int_and_makes_it_a_float() -> None:
    parsed = parse({"name": "a", "ratio": 2})
    assert parsed["ratio"] == 2.0 and type(parsed["ratio"]) is float


def test_every_supported_shape_accepts_its_json_values() -> None:
    arguments = {
        "name": "a",
        "count": 2,
        "ratio": 0.5,
        "flag": True,
        "nothing": None,
        "anything": {"any": ["thing", 1]},
        "names": ["x", "y"],
        "sequence": [1, 2],
        "weights": {"a": 1.5, "b": 2},
        "mapping": {"a": 1},
        "mode": "slow",
        "level": 3,
        "either": "text",
        "points": [{"x": 1, "y": 2}, {"x": 3, "y": 4, "label": "p"}],
    }
    parsed = parse(arguments)
    assert parsed == {**arguments, "weights": {"a": 1.5, "b": 2.0}}


def test_python_callers_may_pass_tuples_for_lists_and_any_mapping_for_a_dict() -> None:
    parsed = parse(
        {
            "name": "a",
            "names": ("x", "y"),
            "weights": types.MappingProxyType({"a": 1.0}),
            "points": ({"x": 1, "y": 2},),
        }
    )
    assert parsed["names"] == ["x", "y"]
    assert parsed["weights"] == {"a": 1.0}
    assert parsed["points"] == [{"x": 1, "y": 2}]
    assert parse(types.MappingProxyType({"name": "a"}))["name"] == "a"


# -- what fails, and what the model is told ------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"name": 3}, "shapes argument 'name' must be string, not integer (3)"),
        (
            {"name": "a", "count": "10"},
            "shapes argument 'count' must be integer, not string ('10')",
        ),
        (
            {"name": "a", "count": True},
            "shapes argument 'count' must be integer, not boolean (True)",
        ),
        ({"name": "a", "count": 2.0}, "shapes argument 'count' must be integer, not number (2.0)"),
        (
            {"name": "a", "ratio": True},
            "shapes argument 'ratio' must be number, not boolean (True)",
        ),
        ({"name": "a", "flag": 1}, "shapes argument 'flag' must be boolean, not integer (1)"),
        ({"name": "a", "nothing": 0}, "shapes argument 'nothing' must be null, not integer (0)"),
        (
            {"name": "a", "names": "xy"},
            "shapes argument 'names' must be array or null, not string ('xy')",
        ),
        (
            {"name": "a", "names": ["x", 2]},
            "shapes argument 'names'[1] must be string, not integer (2)",
        ),
        ({"name": "a", "sequence": "12"}, "shapes argument 'sequence' must be array, not string"),
        (
            {"name": "a", "weights": {"a": "heavy"}},
            "shapes argument 'weights'['a'] must be number, not string ('heavy')",
        ),
        (
            {"name": "a", "mode": "medium"},
            "shapes argument 'mode' must be one of 'fast', 'slow', not string ('medium')",
        ),
        (
            {"name": "a", "level": True},
            "shapes argument 'level' must be one of 1, 2, 3, not boolean (True)",
        ),
        (
            {"name": "a", "level": 2.0},
            "shapes argument 'level' must be one of 1, 2, 3, not number (2.0)",
        ),
        (
            {"name": "a", "either": 2.5},
            "shapes argument 'either' must be integer or string, not number (2.5)",
        ),
        (
            {"name": "a", "points": [{"x": 1, "y": "2"}]},
            "shapes argument 'points'[0]['y'] must be integer, not string ('2')",
        ),
        (
            {"name": "a", "points": [{"x": 1}]},
            "shapes argument 'points'[0] is missing the key 'y'",
        ),
        (
            {"name": "a", "points": [{"x": 1, "y": 2, "z": 3}]},
            "shapes argument 'points'[0] has an unknown key 'z'; it takes label, x, y",
        ),
        ({"count": 1}, "shapes is missing required argument 'name'"),
        ({"name": "a", "colour": "red"}, "shapes got unexpected argument 'colour'; it takes name"),
        (
            {"name": "a", "colour": "red", "size": 1},
            "shapes got unexpected arguments 'colour', 'size'",
        ),
    ],
)
def test_a_mistake_is_one_message_naming_the_argument_the_type_and_the_value(
    arguments: dict[str, Any], message: str
) -> None:
    assert error_of(arguments).startswith(message)


def test_missing_arguments_are_all_named_in_signature_order() -> None:
    @tk.tool(claims=lambda args: [])
    async def pair(ctx: tk.ToolContext, first: str, second: str) -> None: ...

    assert error_of({}, pair) == "pair is missing required arguments 'first', 'second'"


def test_an_unexpected_argument_is_named_before_a_wrong_type() -> None:
    message = error_of({"name": 3, "colour": "red"})
    assert message.startswith("shapes got unexpected argument 'colour'")


def test_a_constraint_of_the_users_own_is_told_in_pydantics_words() -> None:
    @tk.tool(claims=lambda args: [])
    async def page(ctx: tk.ToolContext, number: Annotated[int, Field(ge=1)] = 1) -> None: ...

    assert page.parse_arguments({"number": 3}) == {"number": 3}
    assert error_of({"number": 0}, page) == (
        "page argument 'number': input should be greater than or equal to 1"
    )
    assert page.parameters_schema()["properties"]["number"]["minimum"] == 1


# -- keys that are not strings: the arguments' fault, not the claims' --------------------------


@pytest.mark.parametrize(
    "arguments",
    [{1: "x"}, {1: "x", None: "y"}, {"name": "a", 2: "b"}],
    ids=["one int key", "keys of two types", "beside a good argument"],
)
def test_an_argument_name_that_is_not_a_string_is_an_arguments_error(
    arguments: dict[Any, Any],
) -> None:
    assert error_of(arguments).startswith("shapes argument names must be strings, not ")


def test_a_nested_key_that_is_not_a_string_is_an_arguments_error() -> None:
    assert error_of({"name": "a", "weights": {1: 2.0}}).startswith(
        "shapes argument 'weights' must have string keys, not 1"
    )
    message = error_of({"name": "a", "points": [{"x": 1, "y": 2, 1: "a", None: "b"}]})
    assert message.startswith("shapes argument 'points'[0] must have string keys")


def test_a_tool_taking_any_keyword_still_refuses_a_name_that_is_not_a_string() -> None:
    @tk.tool(claims=lambda args: [tk.reads(name) for name in sorted(args)])
    async def anything(ctx: tk.ToolContext, **more: str) -> None: ...

    assert anything.parse_arguments({"a": "x", "b": 1}) == {"a": "x", "b": 1}
    assert error_of({1: "x", "b": "y"}, anything).startswith(
        "anything argument names must be strings, not integer (1)"
    )


async def test_a_call_with_a_key_that_is_not_a_string_blames_its_arguments(
    autojump_clock: object,
) -> None:
    async with tk.open_kernel(tools=builtin_tools()) as kernel:
        (result,) = await kernel.run(
            [tk.ToolCall("c1", "Read", {"file_path": "a", 1: "x", None: 0})]
        )
    assert result.status is tk.Status.ERROR
    assert result.error is not None
    assert result.error.startswith("InvalidArgumentsError: Read argument names must be strings")


# -- the schema ----------------------------------------------------------------------------------


def test_the_schema_describes_every_shape_with_the_docstrings_words() -> None:
    schema = shapes.parameters_schema()
    json.dumps(schema)
    assert schema["type"] == "object"
    assert schema["required"] == ["name"]
    assert schema["additionalProperties"] is False
    properties = schema["properties"]
    assert properties["name"] == {"type": "string", "description": "A name."}
    assert properties["count"] == {
        "type": "integer",
        "default": 1,
        "description": "How many; a description may go on over two lines.",
    }
    assert properties["ratio"]["type"] == "number"
    assert properties["flag"]["type"] == "boolean"
    assert properties["nothing"]["type"] == "null"
    assert "type" not in properties["anything"]
    assert properties["names"]["anyOf"] == [
        {"type": "array", "items": {"type": "string"}},
        {"type": "null"},
    ]
    assert properties["sequence"] == {"type": "array", "items": {"type": "integer"}, "default": []}
    assert properties["mapping"]["anyOf"][0] == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
    }
    assert properties["mode"] == {"type": "string", "enum": ["fast", "slow"], "default": "fast"}
    assert properties["level"]["enum"] == [1, 2, 3]
    assert properties["either"]["type"] == ["integer", "string"]
    point = properties["points"]["anyOf"][0]["items"]
    assert point == {
        "type": "object",
        "properties": {
            "x": {"type": "integer"},
            "y": {"type": "integer"},
            "label": {"type": "string"},
        },
        "required": ["x", "y"],
        "additionalProperties": False,
    }
    assert "title" not in json.dumps(schema) and "$ref" not in json.dumps(schema)


def test_a_tool_taking_any_keyword_says_so_in_its_schema() -> None:
    @tk.tool(claims=lambda args: [])
    async def anything(ctx: tk.ToolContext, **more: Any) -> None: ...

    schema = anything.parameters_schema()
    assert schema == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": True,
    }


def test_the_schema_is_a_fresh_copy_each_time() -> None:
    schema = shapes.parameters_schema()
    schema["properties"]["name"]["type"] = "integer"
    assert shapes.parameters_schema()["properties"]["name"]["type"] == "string"


def test_a_default_that_is_not_json_is_left_out_of_the_schema() -> None:
    marker = object()

    @tk.tool(claims=lambda args: [])
    async def odd(ctx: tk.ToolContext, value: Any = marker) -> None: ...

    assert "default" not in odd.parameters_schema()["properties"]["value"]
    assert odd.parse_arguments({}) == {"value": marker}


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Coats(enum.IntEnum):
    ONE = 1
    TWO = 2


class Size(BaseModel):
    model_config = ConfigDict(extra="forbid")
    width: int


@tk.tool(claims=lambda args: [])
async def paint(
    ctx: tk.ToolContext,
    size: Size,
    colour: Colour = Colour.RED,
    coats: Coats = Coats.ONE,
    at: tuple[int, int] = (0, 0),
) -> None:
    """Paint."""


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"size": 3}, "paint argument 'size' must be object, not integer (3)"),
        ({"size": {"width": 1, "depth": 2}}, "paint argument 'size' has an unknown key 'depth'"),
        (
            {"size": {"width": 1}, "colour": "green"},
            "paint argument 'colour' must be one of 'red', 'blue', not string ('green')",
        ),
        (
            {"size": {"width": 1}, "coats": True},
            "paint argument 'coats' must be one of 1, 2, not boolean (True)",
        ),
        (
            {"size": {"width": 1}, "coats": "2"},
            "paint argument 'coats' must be one of 1, 2, not string ('2')",
        ),
        (
            {"size": {"width": 1}, "at": [1, "2"]},
            "paint argument 'at'[1] must be integer, not string ('2')",
        ),
    ],
)
def test_models_enums_and_tuples_are_named_in_json_words(
    arguments: dict[str, Any], message: str
) -> None:
    assert error_of(arguments, paint) == message


def test_models_enums_and_tuples_come_back_as_python_values() -> None:
    parsed = paint.parse_arguments(
        {"size": {"width": 2}, "colour": "blue", "coats": 2, "at": [3, 4]}
    )
    assert parsed == {
        "size": Size(width=2),
        "colour": Colour.BLUE,
        "coats": Coats.TWO,
        "at": (3, 4),
    }


class Corner(typing_extensions.TypedDict):
    x: int


def test_a_typing_extensions_typeddict_is_as_strict_as_a_typing_one() -> None:
    @tk.tool(claims=lambda args: [])
    async def corners(ctx: tk.ToolContext, at: list[Corner]) -> None: ...

    assert error_of({"at": [{"x": 1, "y": 2}]}, corners) == (
        "corners argument 'at'[0] has an unknown key 'y'; it takes x"
    )
    assert error_of({"at": [{"x": True}]}, corners) == (
        "corners argument 'at'[0]['x'] must be integer, not boolean (True)"
    )


# -- aliases ------------------------------------------------------------------------------------


@tk.tool(claims=lambda args: [])
async def spelled(
    ctx: tk.ToolContext,
    ignore_case: Annotated[bool, Aliases("-i")] = False,
    context: Annotated[int, Field(ge=0), Aliases("-C", "ctx_lines")] = 0,
) -> None:
    """Take parameters known by other names too."""


def test_an_alias_is_taken_as_its_parameter() -> None:
    assert parse({"-i": True, "-C": 2}, spelled) == {"ignore_case": True, "context": 2}
    assert parse({"ctx_lines": 1}, spelled) == {"ignore_case": False, "context": 1}
    # Given under both spellings with one value, it is that value.
    assert parse({"-i": True, "ignore_case": True}, spelled)["ignore_case"] is True
    # What the parameter's own hint says still holds under its alias.
    assert "-C" not in error_of({"-C": -1}, spelled)
    assert "context" in error_of({"-C": -1}, spelled)


def test_two_spellings_of_one_parameter_with_different_values_are_refused() -> None:
    message = error_of({"ignore_case": False, "-i": True}, spelled)
    assert message == (
        "spelled got 'ignore_case'=False and '-i'=True: both set 'ignore_case', with different "
        "values; give it once"
    )
    assert "both set 'context'" in error_of({"-C": 1, "ctx_lines": 2}, spelled)


def test_the_schema_shows_each_parameter_under_its_own_name_only() -> None:
    schema = spelled.parameters_schema()
    assert list(schema["properties"]) == ["ignore_case", "context"]
    assert schema["properties"]["context"]["minimum"] == 0
    assert "-i" not in json.dumps(schema)


def test_an_alias_that_names_another_parameter_or_two_parameters_is_refused() -> None:
    with pytest.raises(tk.ToolDeclarationError, match=r"the alias 'b'.* another parameter"):

        @tk.tool(claims=lambda args: [])
        async def clash(
            ctx: tk.ToolContext, a: Annotated[int, Aliases("b")] = 0, b: int = 0
        ) -> None:
            """Clash."""

    with pytest.raises(tk.ToolDeclarationError, match="alias '-x' to more than one parameter"):

        @tk.tool(claims=lambda args: [])
        async def twice(
            ctx: tk.ToolContext,
            a: Annotated[int, Aliases("-x")] = 0,
            b: Annotated[int, Aliases("-x")] = 0,
        ) -> None:
            """Twice."""

"""A tool's arguments from its signature: validation and JSON Schema from the same type hints.

The parameters after the context become one ``TypedDict`` (required where the parameter has no
default, the default filled in where it has one, the ``Args:`` line of the docstring as its
description) and pydantic's ``TypeAdapter`` over it does both jobs: it validates each call's
arguments (in strict mode, see ``_hints``) and writes the JSON Schema the model is shown. A
signature that can't be read, or a hint pydantic can't validate or describe, is a
:class:`ToolDeclarationError` when the tool is declared, naming the parameter.

A parameter may be given other names, as ``Annotated`` metadata: ``ignore_case:
Annotated[bool, Aliases("-i")] = False`` takes ``{"-i": true}`` as ``ignore_case=True`` (models
trained on another tool's schema use its spellings). The schema shows the parameter's own name
only; a call giving two spellings of one parameter with different values is refused.

Supported hints: ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``, ``list[T]`` /
``Sequence[T]``, ``dict[str, T]`` / ``Mapping[str, T]``, ``Literal[...]``, unions
(``T | None``), ``TypedDict`` (``total=False`` for optional keys), and whatever else pydantic
validates and describes (``Annotated[int, Field(ge=1)]``, pydantic models, dataclasses, enums).
"""

from __future__ import annotations

import inspect
import typing
import warnings
from collections.abc import Callable, Mapping
from typing import Annotated, Any, NotRequired, Required

import attrs
from pydantic import ConfigDict, Field, PydanticUserError, TypeAdapter, ValidationError
from pydantic.json_schema import PydanticJsonSchemaWarning

from .._errors import InvalidArgumentsError, ToolDeclarationError
from ..kernel import ToolContext
from ._docstring import docstring_parts
from ._hints import for_pydantic, make_typed_dict
from ._json_schema import tidy_schema
from ._messages import explain

__all__ = ["Aliases", "Arguments", "Parameter"]

_CONTEXT_NAMES = ("ctx", "context")


@attrs.frozen(init=False)
class Aliases:
    """Other names a parameter is accepted under (``Annotated`` metadata; see the module)."""

    names: tuple[str, ...]

    def __init__(self, *names: str) -> None:
        self.__attrs_init__(names)


@attrs.frozen
class Parameter:
    """One parameter of a tool (after the context)."""

    name: str
    annotation: Any
    required: bool
    default: Any
    description: str


@attrs.frozen(eq=False)
class Arguments:
    """A tool's parameters, ready to validate a call's arguments and to describe them."""

    parameters: tuple[Parameter, ...]
    description: str
    """The docstring's text before its ``Args:`` section."""
    accepts_extra: bool
    """The signature ends with ``**kwargs``: unexpected arguments are passed on, unchecked."""
    _hints: dict[str, Any] = attrs.field(repr=False)
    _validate: Callable[[Any], Any] = attrs.field(repr=False)
    _schema: dict[str, Any] = attrs.field(repr=False)
    _aliases: dict[str, str] = attrs.field(factory=dict, repr=False)
    """Each alias, and the name of the parameter it stands for."""

    @classmethod
    def from_function(cls, tool_name: str, fn: Callable[..., Any]) -> Arguments:
        """Read ``fn``'s signature: the context first, then keyword-passable parameters.

        Raises :class:`ToolDeclarationError` naming the tool and the fix.
        """
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError) as exc:
            raise ToolDeclarationError(
                f"can't read the signature of tool {tool_name!r}: {exc}"
            ) from exc
        try:
            hints = typing.get_type_hints(fn, include_extras=True)
        except Exception as exc:
            raise ToolDeclarationError(
                f"can't read the type hints of tool {tool_name!r}: {exc}; every name in an "
                f"annotation must be importable from the tool's module"
            ) from exc
        params = list(signature.parameters.values())
        _check_context(tool_name, params, hints)
        description, docs = docstring_parts(inspect.getdoc(fn) or "")
        parameters, accepts_extra = [], False
        aliases: dict[str, str] = {}
        for p in params[1:]:
            if p.kind is p.VAR_KEYWORD:
                accepts_extra = True
                continue
            if p.kind in (p.VAR_POSITIONAL, p.POSITIONAL_ONLY):
                star = "*" if p.kind is p.VAR_POSITIONAL else ""
                raise ToolDeclarationError(
                    f"tool {tool_name!r} parameter {star}{p.name} can't be passed by keyword; "
                    f"models name every argument, so make it an ordinary parameter"
                )
            required = p.default is inspect.Parameter.empty
            annotation = _take_aliases(tool_name, p.name, hints.get(p.name, Any), aliases)
            parameters.append(
                Parameter(
                    name=p.name,
                    annotation=annotation,
                    required=required,
                    default=None if required else p.default,
                    description=docs.get(p.name, ""),
                )
            )
        for alias, name in aliases.items():
            if any(p.name == alias for p in parameters):
                raise ToolDeclarationError(
                    f"tool {tool_name!r} gives parameter {name!r} the alias {alias!r}, which is "
                    f"the name of another parameter"
                )
        adapter, schema = _adapter(tool_name, parameters, accepts_extra)
        return cls(
            parameters=tuple(parameters),
            description=description,
            accepts_extra=accepts_extra,
            hints={p.name: p.annotation for p in parameters},
            validate=adapter.validator.validate_python,
            schema=schema,
            aliases=aliases,
        )

    def validate(self, tool_name: str, arguments: Mapping[Any, Any]) -> dict[str, Any]:
        """The arguments checked and completed with defaults; else :class:`InvalidArgumentsError`
        with one message saying what to fix."""
        if type(arguments) is not dict:
            arguments = dict(arguments)
        if self._aliases and not self._aliases.keys().isdisjoint(arguments):
            arguments = _unaliased(tool_name, self._aliases, arguments)
        try:
            validated: dict[str, Any] = self._validate(arguments)
        except ValidationError as error:
            raise InvalidArgumentsError(
                explain(tool_name, self._hints, error, arguments)
            ) from error
        return validated

    def json_schema(self) -> dict[str, Any]:
        """JSON Schema of the arguments object (a fresh copy: callers may change it)."""
        copied: dict[str, Any] = _copy(self._schema)
        return copied


def _take_aliases(tool_name: str, name: str, hint: Any, aliases: dict[str, str]) -> Any:
    """``hint`` without its :class:`Aliases`, which are entered in ``aliases``."""
    if typing.get_origin(hint) is not Annotated:
        return hint
    kept = []
    for item in hint.__metadata__:
        if not isinstance(item, Aliases):
            kept.append(item)
            continue
        for alias in item.names:
            if alias in aliases or alias == name:
                raise ToolDeclarationError(
                    f"tool {tool_name!r} gives the alias {alias!r} to more than one parameter, "
                    f"or to the parameter of that name"
                )
            aliases[alias] = name
    return Annotated[(hint.__origin__, *kept)] if kept else hint.__origin__


def _unaliased(
    tool_name: str, aliases: dict[str, str], arguments: dict[Any, Any]
) -> dict[Any, Any]:
    """``arguments`` with every alias replaced by its parameter's name; two spellings of one
    parameter with different values are an :class:`InvalidArgumentsError`."""
    result: dict[Any, Any] = {}
    spelled: dict[Any, Any] = {}  # each parameter given, and the spelling it was given as
    for key, value in arguments.items():
        name = aliases.get(key, key) if isinstance(key, str) else key
        if name in result and result[name] != value:
            raise InvalidArgumentsError(
                f"{tool_name} got {spelled[name]!r}={result[name]!r} and {key!r}={value!r}: "
                f"both set {name!r}, with different values; give it once"
            )
        result[name] = value
        spelled[name] = key
    return result


def _check_context(tool_name: str, params: list[inspect.Parameter], hints: dict[str, Any]) -> None:
    example = f"async def {tool_name}(ctx: ToolContext, ...)"
    if not params or params[0].kind in (params[0].VAR_POSITIONAL, params[0].KEYWORD_ONLY):
        raise ToolDeclarationError(
            f"tool {tool_name!r} must take the context as its first parameter: {example}"
        )
    first = params[0]
    hint = hints.get(first.name)
    if first.kind is first.VAR_KEYWORD or not (
        first.name in _CONTEXT_NAMES or (isinstance(hint, type) and issubclass(hint, ToolContext))
    ):
        raise ToolDeclarationError(
            f"tool {tool_name!r} must take the context as its first parameter, but its first "
            f"parameter is {first.name!r}; write {example}"
        )


def _adapter(
    tool_name: str, parameters: list[Parameter], accepts_extra: bool
) -> tuple[TypeAdapter[Any], dict[str, Any]]:
    fields = {p.name: _field(p) for p in parameters}
    config = ConfigDict(strict=True, extra="allow" if accepts_extra else "forbid")
    arguments = make_typed_dict(f"{tool_name}Arguments", fields, config)
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(arguments)
        with warnings.catch_warnings():
            # A default that is not JSON (a sentinel object) is left out of the schema.
            warnings.simplefilter("ignore", PydanticJsonSchemaWarning)
            schema = tidy_schema(adapter.json_schema(), accepts_extra)
    except (PydanticUserError, TypeError, ValueError, NameError, RuntimeError) as exc:
        raise ToolDeclarationError(_unsupported(tool_name, parameters, exc)) from exc
    return adapter, schema


def _field(p: Parameter) -> Any:
    options: dict[str, Any] = {}
    if p.description:
        options["description"] = p.description
    if not p.required:
        options["default"] = p.default
    hint = p.annotation
    if typing.get_origin(hint) is Annotated:  # the user's own metadata goes last, so it wins
        hint = Annotated[(for_pydantic(hint.__origin__), Field(**options), *hint.__metadata__)]
    elif options:
        hint = Annotated[for_pydantic(hint), Field(**options)]
    else:
        hint = for_pydantic(hint)
    return (Required if p.required else NotRequired)[hint]


def _unsupported(tool_name: str, parameters: list[Parameter], exc: Exception) -> str:
    """Which parameter's hint pydantic can't handle, tried one by one."""
    for p in parameters:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PydanticJsonSchemaWarning)
                tidy_schema(TypeAdapter(for_pydantic(p.annotation)).json_schema(), False)
        except Exception as own:
            reason = str(own).split("\n", 1)[0]
            return (
                f"tool {tool_name!r} parameter {p.name!r} has a type hint that can't be turned "
                f"into a JSON Schema ({p.annotation!r}: {reason}); use JSON types (str, int, "
                f"float, bool, None, list, dict, Literal, TypedDict) or a pydantic model"
            )
    reason = str(exc).split("\n", 1)[0]
    return f"can't turn the parameters of tool {tool_name!r} into a JSON Schema: {reason}"


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value

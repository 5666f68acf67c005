"""Type hints as a tool declares them, made ready for pydantic, and named the way models read them.

Models send JSON, so a tool's arguments are validated strictly (pydantic's strict mode): a string
is not an int, ``True`` is not an int, a float accepts an int. :func:`for_pydantic` rewrites a
hint where pydantic's strict mode and what a tool may expect part ways:

- containers (``list``, ``tuple``, ``Sequence``, ``dict``, ``Mapping``, ``TypedDict``) accept any
  sequence or mapping from Python callers (a tuple for a list, a mapping proxy for a dict), while
  their items stay strict;
- a ``Literal`` holding ints or bools takes only values of the same type (pydantic compares by
  equality, so ``True`` would pass for ``Literal[1]``);
- an ``Enum`` takes its members' values, of the same type (strict mode wants a member, which
  JSON can't send; lax mode would take ``"1"`` for ``1``);
- a ``typing.TypedDict`` (which pydantic refuses before Python 3.12) becomes the same
  ``typing_extensions.TypedDict``, with unknown keys refused.

A pydantic model or a dataclass is validated with its own configuration, strict or not.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import types
import typing
from typing import Annotated, Any, Literal, NotRequired, Required, Union, get_args, get_origin

import typing_extensions
from pydantic import BaseModel, BeforeValidator, ConfigDict, Strict
from pydantic_core import PydanticCustomError

__all__ = [
    "for_pydantic",
    "make_typed_dict",
    "type_name",
    "describe_value",
    "typed_dict_hints",
    "unwrap",
]

STRICT_FIELDS = ConfigDict(strict=True, extra="forbid")
_LAX_CONTAINER = Strict(False)  # the container's own check only; its items keep strict mode

_JSON_NAMES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
    list: "array",
    tuple: "array",
    dict: "object",
}
_SEQUENCES = (list, tuple, collections.abc.Sequence)
_MAPPINGS = (dict, collections.abc.Mapping)
_CONCRETE = (list, tuple, dict)


def describe_value(value: Any) -> str:
    """How a JSON value is named in messages: ``string ('10')``, ``integer (3)``."""
    name = _JSON_NAMES.get(type(value), type(value).__name__)
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{name} ({text})"


def unwrap(hint: Any) -> Any:
    """``hint`` without ``Annotated[...]`` metadata."""
    while get_origin(hint) is Annotated:
        hint = hint.__origin__
    return hint


def is_union(hint: Any) -> bool:
    return get_origin(hint) in (Union, types.UnionType)


def is_sequence(hint: Any) -> bool:
    return hint in _SEQUENCES or get_origin(hint) in _SEQUENCES


def is_mapping(hint: Any) -> bool:
    return hint in _MAPPINGS or get_origin(hint) in _MAPPINGS


def typed_dict_hints(hint: Any) -> tuple[dict[str, Any], frozenset[str]]:
    """A TypedDict's keys with their hints, and its required keys."""
    hints = typing.get_type_hints(hint, include_extras=True)
    required = frozenset(getattr(hint, "__required_keys__", hints))
    return {key: _strip_required(value) for key, value in hints.items()}, required


def _strip_required(hint: Any) -> Any:
    if get_origin(hint) in (Required, NotRequired):
        return get_args(hint)[0]
    return hint


def type_name(hint: Any) -> str:
    """What a value of ``hint`` is called in a message: ``integer or null``, ``one of 'a', 'b'``."""
    hint = unwrap(hint)
    if hint is Any or hint is object:
        return "any value"
    if hint in _JSON_NAMES:
        return _JSON_NAMES[hint]
    if get_origin(hint) is Literal:
        return "one of " + ", ".join(repr(option) for option in get_args(hint))
    if is_union(hint):
        return " or ".join(type_name(option) for option in get_args(hint))
    if is_sequence(hint):
        return "array"
    if is_mapping(hint) or typing_extensions.is_typeddict(hint) or _is_model(hint):
        return "object"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return "one of " + ", ".join(repr(member.value) for member in hint)
    return getattr(hint, "__name__", str(hint))


def _is_model(hint: Any) -> bool:
    return isinstance(hint, type) and (
        issubclass(hint, BaseModel) or dataclasses.is_dataclass(hint)
    )


def for_pydantic(hint: Any) -> Any:
    """``hint`` rewritten so that pydantic's strict mode validates it as described above."""
    return _Rewriter().rewrite(hint)


class _Rewriter:
    def __init__(self) -> None:
        self._building: set[type] = set()
        self._built: dict[type, Any] = {}  # one rebuilt class per TypedDict, however often used

    def rewrite(self, hint: Any) -> Any:
        origin, args = get_origin(hint), get_args(hint)
        if origin is Annotated:
            return Annotated[(self.rewrite(hint.__origin__), *hint.__metadata__)]
        if origin is Literal:
            if all(type(option) is str for option in args):
                return hint  # strings compare exactly already
            return Annotated[hint, BeforeValidator(_exact_literal(args))]
        if origin in (Union, types.UnionType):
            return Union[tuple(self.rewrite(a) for a in args)]  # noqa: UP007 - built from a tuple
        if typing_extensions.is_typeddict(hint):
            return Annotated[self._typed_dict(hint), _LAX_CONTAINER]
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return Annotated[hint, BeforeValidator(_exact_enum(hint))]
        if hint in _CONCRETE or origin in (*_SEQUENCES, *_MAPPINGS):
            container = origin if origin is not None else hint
            if args:
                hint = container[tuple(a if a is Ellipsis else self.rewrite(a) for a in args)]
            # ``Sequence`` and ``Mapping`` take any sequence or mapping already.
            return Annotated[hint, _LAX_CONTAINER] if container in _CONCRETE else hint
        return hint

    def _typed_dict(self, hint: type) -> Any:
        if hint in self._built:
            return self._built[hint]
        if hint in self._building:
            raise TypeError(f"TypedDict {hint.__name__} refers to itself; give it a flat shape")
        self._building.add(hint)
        try:
            fields, required = typed_dict_hints(hint)
            marked = {
                key: (Required if key in required else NotRequired)[self.rewrite(value)]
                for key, value in fields.items()
            }
        finally:
            self._building.discard(hint)
        config = ConfigDict(**{**STRICT_FIELDS, **getattr(hint, "__pydantic_config__", {})})
        rebuilt = make_typed_dict(hint.__name__, marked, config)
        rebuilt.__doc__ = hint.__doc__
        self._built[hint] = rebuilt
        return rebuilt


def make_typed_dict(name: str, fields: dict[str, Any], config: ConfigDict) -> Any:
    """A ``typing_extensions.TypedDict`` class (the kind pydantic takes), checked by ``config``."""
    factory: Any = typing_extensions.TypedDict  # called with a computed name, as mypy can't check
    made = factory(name, fields, total=False)
    made.__pydantic_config__ = config
    return made


def _exact_literal(options: tuple[Any, ...]) -> typing.Callable[[Any], Any]:
    def check(value: Any) -> Any:
        for option in options:
            if type(value) is type(option) and value == option:
                return value
        raise PydanticCustomError("literal_error", "Input should be one of the allowed values")

    return check


def _exact_enum(kind: type[enum.Enum]) -> typing.Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if isinstance(value, kind):
            return value
        for member in kind:
            if type(value) is type(member.value) and value == member.value:
                return member
        raise PydanticCustomError("enum", "Input should be one of the allowed values")

    return check

"""Tool parameters from a Python signature: strict validation of JSON values and JSON Schema.

Models send JSON. A value is accepted only if it already has the declared type (an ``int`` is not
a ``str``, ``True`` is not an ``int``); the error says which argument, what was expected and what
came, so the model can fix the call. Supported annotations: ``str``, ``int``, ``float``, ``bool``,
``None``, ``Any``, ``list[T]`` / ``Sequence[T]``, ``dict[str, T]`` / ``Mapping[str, T]``,
``Literal[...]``, unions (``T | None``), and ``TypedDict`` classes.
"""

from __future__ import annotations

import collections.abc
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union, get_args, get_origin, is_typeddict

import attrs

from .._errors import InvalidArgumentsError

__all__ = ["Parameter", "ParameterSpec", "describe_value"]

_JSON_NAMES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
    list: "array",
    dict: "object",
}


def describe_value(value: Any) -> str:
    """How a JSON value is named in messages: ``string ('10')``, ``integer (3)``."""
    name = _JSON_NAMES.get(type(value), type(value).__name__)
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{name} ({text})"


def _type_name(hint: Any) -> str:
    origin = get_origin(hint)
    if hint is Any:
        return "any value"
    if hint in _JSON_NAMES:
        return _JSON_NAMES[hint]
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(hint))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(hint))
    if origin in (list, collections.abc.Sequence, tuple):
        return "array"
    if origin in (dict, collections.abc.Mapping) or is_typeddict(hint):
        return "object"
    return getattr(hint, "__name__", str(hint))


def check_value(hint: Any, value: Any, where: str) -> Any:
    """Return ``value`` if it fits ``hint`` (tuples of JSON arrays become lists), else raise."""
    origin = get_origin(hint)
    if hint is Any or hint is object:
        return value
    if origin in (Union, types.UnionType):
        for option in get_args(hint):
            try:
                return check_value(option, value, where)
            except InvalidArgumentsError:
                continue
        raise InvalidArgumentsError(
            f"{where} must be {_type_name(hint)}, not {describe_value(value)}"
        )
    if origin is Literal:
        if any(value == option and type(value) is type(option) for option in get_args(hint)):
            return value
        raise InvalidArgumentsError(
            f"{where} must be {_type_name(hint)}, not {describe_value(value)}"
        )
    if hint is type(None) or hint is None:
        if value is None:
            return None
    elif hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif origin in (list, collections.abc.Sequence, tuple) or hint in (list, tuple):
        if isinstance(value, list | tuple):
            args = get_args(hint)
            item = args[0] if args else Any
            return [check_value(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    elif is_typeddict(hint):
        if isinstance(value, Mapping):
            return _check_typeddict(hint, value, where)
    elif origin in (dict, collections.abc.Mapping) or hint in (dict,):
        if isinstance(value, Mapping):
            args = get_args(hint)
            item = args[1] if len(args) == 2 else Any
            out = {}
            for k, v in value.items():
                if not isinstance(k, str):
                    raise InvalidArgumentsError(f"{where} must have string keys, not {k!r}")
                out[k] = check_value(item, v, f"{where}[{k!r}]")
            return out
    else:
        if isinstance(hint, type) and isinstance(value, hint):
            return value
    raise InvalidArgumentsError(f"{where} must be {_type_name(hint)}, not {describe_value(value)}")


def _check_typeddict(hint: Any, value: Mapping[str, Any], where: str) -> dict[str, Any]:
    hints = typing.get_type_hints(hint)
    required = getattr(hint, "__required_keys__", frozenset(hints))
    out = {}
    for key in sorted(set(value) - set(hints)):
        raise InvalidArgumentsError(
            f"{where} has an unknown key {key!r}; it takes {', '.join(sorted(hints))}"
        )
    for key in sorted(required - set(value)):
        raise InvalidArgumentsError(f"{where} is missing the key {key!r}")
    for key, v in value.items():
        out[key] = check_value(hints[key], v, f"{where}[{key!r}]")
    return out


def json_schema(hint: Any) -> dict[str, Any]:
    """The JSON Schema of values of ``hint``."""
    origin = get_origin(hint)
    if hint is Any or hint is object:
        return {}
    if origin in (Union, types.UnionType):
        options = [json_schema(a) for a in get_args(hint)]
        simple = [o.get("type") for o in options if set(o) == {"type"}]
        if len(simple) == len(options) and all(isinstance(t, str) for t in simple):
            return {"type": simple}
        return {"anyOf": options}
    if origin is Literal:
        values = list(get_args(hint))
        schema: dict[str, Any] = {"enum": values}
        kinds = {_JSON_NAMES.get(type(v)) for v in values}
        if len(kinds) == 1 and None not in kinds:
            schema["type"] = kinds.pop()
        return schema
    if hint in _JSON_NAMES:
        return {"type": _JSON_NAMES[hint]}
    if origin in (list, collections.abc.Sequence, tuple):
        args = get_args(hint)
        return {"type": "array", "items": json_schema(args[0]) if args else {}}
    if is_typeddict(hint):
        hints = typing.get_type_hints(hint)
        required = sorted(getattr(hint, "__required_keys__", frozenset(hints)))
        return {
            "type": "object",
            "properties": {k: json_schema(v) for k, v in hints.items()},
            "required": required,
            "additionalProperties": False,
        }
    if origin in (dict, collections.abc.Mapping):
        args = get_args(hint)
        return {"type": "object", "additionalProperties": json_schema(args[1]) if args else {}}
    return {}


@attrs.frozen
class Parameter:
    """One parameter of a tool."""

    name: str
    annotation: Any
    required: bool
    default: Any
    description: str


_ARG_LINE = re.compile(r"^\s{2,}(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _docstring_parts(doc: str) -> tuple[str, dict[str, str]]:
    """The description (text before an ``Args:`` section) and per-parameter descriptions."""
    doc = inspect.cleandoc(doc)
    match = re.search(r"^(Args|Arguments|Parameters):\s*$", doc, re.MULTILINE)
    if match is None:
        return doc.strip(), {}
    description = doc[: match.start()].strip()
    params: dict[str, str] = {}
    current: str | None = None
    for line in doc[match.end() :].splitlines():
        if line and not line[0].isspace():
            break  # the next section
        found = _ARG_LINE.match(line)
        if found:
            current = found.group(1).lstrip("*")
            params[current] = found.group(2).strip()
        elif current and line.strip():
            params[current] = f"{params[current]} {line.strip()}"
    return description, params


# The plain JSON types a value is accepted as without conversion when it has exactly that type
# (``check_value`` decides everything else, subclasses included).
_EXACT_TYPES = (str, int, bool)


def _exact_type(hint: Any) -> type | None:
    """The type whose exact instances ``check_value(hint, value, ...)`` returns unchanged."""
    return hint if hint in _EXACT_TYPES else None


@attrs.frozen
class ParameterSpec:
    """A function's parameters after the context, ready to validate and describe."""

    parameters: tuple[Parameter, ...]
    description: str
    accepts_extra: bool
    # Worked out once from ``parameters``, since every call is validated: the names, the
    # required names, and per parameter (name, annotation, exact type or None, default).
    _names: frozenset[str] = attrs.field(init=False, eq=False, repr=False)
    _required: frozenset[str] = attrs.field(init=False, eq=False, repr=False)
    _plan: tuple[tuple[str, Any, type | None, Any], ...] = attrs.field(
        init=False, eq=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        set_field = object.__setattr__  # frozen: the usual way to fill derived fields
        set_field(self, "_names", frozenset(p.name for p in self.parameters))
        set_field(self, "_required", frozenset(p.name for p in self.parameters if p.required))
        plan = tuple(
            (p.name, p.annotation, _exact_type(p.annotation), p.default) for p in self.parameters
        )
        set_field(self, "_plan", plan)

    @classmethod
    def from_function(cls, fn: Callable[..., Any], *, skip_first: bool = True) -> ParameterSpec:
        signature = inspect.signature(fn)
        try:
            hints = typing.get_type_hints(fn)
        except Exception as exc:
            raise TypeError(f"can't read the type hints of {fn!r}: {exc}") from exc
        description, docs = _docstring_parts(inspect.getdoc(fn) or "")
        params = list(signature.parameters.values())
        if skip_first:
            if not params:
                raise TypeError(f"{fn!r} must take the context (ctx) as its first parameter")
            params = params[1:]
        result = []
        accepts_extra = False
        for p in params:
            if p.kind is p.VAR_KEYWORD:
                accepts_extra = True
                continue
            if p.kind in (p.VAR_POSITIONAL, p.POSITIONAL_ONLY):
                raise TypeError(f"tool parameter {p.name!r} must be passable by keyword")
            required = p.default is inspect.Parameter.empty
            result.append(
                Parameter(
                    name=p.name,
                    annotation=hints.get(p.name, Any),
                    required=required,
                    default=None if required else p.default,
                    description=docs.get(p.name, ""),
                )
            )
        return cls(tuple(result), description, accepts_extra)

    def validate(self, tool_name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Check and complete arguments; raise :class:`InvalidArgumentsError` naming the fix."""
        given = arguments.keys()
        # The set comparisons are the cheap test; the messages are worked out only on failure.
        extra = [] if given <= self._names else sorted(set(given) - self._names)
        if extra and not self.accepts_extra:
            takes = ", ".join(p.name for p in self.parameters) or "no arguments"
            raise InvalidArgumentsError(
                f"{tool_name} got unexpected argument{'s' if len(extra) > 1 else ''} "
                f"{', '.join(repr(e) for e in extra)}; it takes {takes}"
            )
        if not given >= self._required:
            missing = [p.name for p in self.parameters if p.required and p.name not in arguments]
            raise InvalidArgumentsError(
                f"{tool_name} is missing required argument{'s' if len(missing) > 1 else ''} "
                f"{', '.join(repr(m) for m in missing)}"
            )
        out: dict[str, Any] = {}
        for name, annotation, exact, default in self._plan:
            if name not in arguments:
                out[name] = default
                continue
            value = arguments[name]
            if exact is not None and type(value) is exact:
                out[name] = value  # what check_value would return, without building ``where``
            else:
                out[name] = check_value(annotation, value, f"{tool_name} argument {name!r}")
        for name in extra:
            out[name] = arguments[name]
        return out

    def json_schema(self) -> dict[str, Any]:
        """JSON Schema of the arguments object."""
        properties = {}
        for p in self.parameters:
            schema = json_schema(p.annotation)
            if p.description:
                schema = {**schema, "description": p.description}
            if not p.required and p.default is not None:
                schema = {**schema, "default": p.default}
            properties[p.name] = schema
        return {
            "type": "object",
            "properties": properties,
            "required": [p.name for p in self.parameters if p.required],
            "additionalProperties": self.accepts_extra,
        }

"""pydantic's validation errors, turned into one short message a model can act on.

A message names the argument (and the item or key inside it), what was expected, and what came:
``Read argument 'offset' must be integer or null, not string ('10')``. The expected type is
named from the tool's own type hints (JSON Schema's words: string, integer, number, boolean,
null, array, object), so it reads like the schema the model was given. pydantic reports a failed
union once per member, with the member's name in the location; the error that got deepest into
the value is the one that says what is wrong, and the names of union members are skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, get_args

from pydantic import ValidationError
from pydantic_core import ErrorDetails
from typing_extensions import is_typeddict

from ._hints import (
    describe_value,
    is_mapping,
    is_sequence,
    is_union,
    type_name,
    typed_dict_hints,
    unwrap,
)

__all__ = ["explain"]

# Error types that mean "a value of the wrong kind"; any other (a constraint of the user's own,
# such as ``Field(ge=1)``) is reported with pydantic's own words.
_WRONG_KIND = frozenset(
    {
        "literal_error",
        "none_required",
        "sequence_str",
        "enum",
        "is_instance_of",
        "int_from_float",
        "union_tag_invalid",
        "union_tag_not_found",
    }
)


def explain(
    tool_name: str,
    hints: Mapping[str, Any],
    error: ValidationError,
    arguments: Mapping[Any, Any],
) -> str:
    """The message for ``error``, raised validating ``arguments`` against parameters ``hints``."""
    errors = error.errors(include_url=False, include_context=False, include_input=False)
    takes = ", ".join(hints) or "no arguments"
    bad_names = [e["loc"][0] for e in errors if e["type"] == "invalid_key" and len(e["loc"]) == 1]
    if bad_names:
        return (
            f"{tool_name} argument names must be strings, not {describe_value(bad_names[0])}; "
            f"it takes {takes}"
        )
    top = [e for e in errors if len(e["loc"]) == 1]
    extra = sorted(str(e["loc"][0]) for e in top if e["type"] == "extra_forbidden")
    if extra:
        return (
            f"{tool_name} got unexpected argument{'s' if len(extra) > 1 else ''} "
            f"{', '.join(repr(name) for name in extra)}; it takes {takes}"
        )
    missing = {e["loc"][0] for e in top if e["type"] == "missing"}
    if missing:
        names = [name for name in hints if name in missing]
        return (
            f"{tool_name} is missing required argument{'s' if len(names) > 1 else ''} "
            f"{', '.join(repr(name) for name in names)}"
        )
    first = errors[0]["loc"][0] if errors and errors[0]["loc"] else None
    if not isinstance(first, str) or first not in hints or first not in arguments:
        return f"the arguments of {tool_name} are not valid: {_lower(errors[0]['msg'])}"
    # Of the errors about this argument, the one that got deepest into the value says most.
    about = [
        _Located(e, hints[first], arguments[first]) for e in errors if e["loc"][:1] == (first,)
    ]
    worst = max(about, key=lambda located: len(located.path))
    return worst.message(f"{tool_name} argument {first!r}")


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:]


class _Located:
    """One error, followed through the hint and the value to where it is."""

    def __init__(self, error: ErrorDetails, hint: Any, value: Any) -> None:
        self.error = error
        loc = error["loc"][1:]
        self.bad_key: Any = None
        if "[key]" in loc:  # pydantic's marker: the key before it is the bad part, not its value
            at = loc.index("[key]")
            self.bad_key, loc = loc[at - 1], loc[: at - 1]
        self.path: list[str | int] = []
        for step in loc:
            found = _step_into(unwrap(hint), value, step)
            if found is not None:  # else a union member's name, or a key that is not there
                hint, value = found
                self.path.append(step)
        self.hint, self.value = unwrap(hint), value

    def message(self, argument: str) -> str:
        where = argument + "".join(f"[{step!r}]" for step in self.path)
        kind, last = self.error["type"], self.error["loc"][-1]
        if self.bad_key is not None:
            return f"{where} must have string keys, not {self.bad_key!r}"
        if kind == "missing":
            return f"{where} is missing the key {last!r}"
        if kind == "extra_forbidden":
            message = f"{where} has an unknown key {last!r}"
            if is_typeddict(self.hint):
                message += f"; it takes {', '.join(sorted(typed_dict_hints(self.hint)[0]))}"
            return message
        if kind == "invalid_key":
            return f"{where} must have string keys, not {last!r}"
        if kind.endswith("_type") or kind in _WRONG_KIND:
            return f"{where} must be {type_name(self.hint)}, not {describe_value(self.value)}"
        return f"{where}: {_lower(self.error['msg'])}"


def _step_into(hint: Any, value: Any, step: str | int) -> tuple[Any, Any] | None:
    """The hint and value one step (a list index, a key) inside, or None if ``step`` is not one."""
    if is_union(hint):
        for option in get_args(hint):
            found = _step_into(unwrap(option), value, step)
            if found is not None:
                return found
        return None
    if isinstance(step, int) and isinstance(value, Sequence) and not isinstance(value, str):
        if not (is_sequence(hint) and 0 <= step < len(value)):
            return None
        args = get_args(hint)
        if (len(args) == 2 and args[1] is Ellipsis) or len(args) == 1:
            return args[0], value[step]
        return (args[step] if step < len(args) else Any), value[step]
    if isinstance(step, str) and isinstance(value, Mapping) and step in value:
        if is_typeddict(hint):
            fields = typed_dict_hints(hint)[0]
            return (fields[step], value[step]) if step in fields else None
        if is_mapping(hint):
            args = get_args(hint)
            return (args[1] if len(args) == 2 else Any), value[step]
    return None

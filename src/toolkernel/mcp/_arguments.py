"""A call's arguments checked against the MCP tool's own ``inputSchema``, before any lease.

Why here and not only on the server: a call with bad arguments would otherwise take its lease
(exclusive on the whole server, for a tool that writes), wait its turn behind other calls, and
make a round trip, only to be refused; and claims declared from arguments (a path argument)
need the argument to be there and to be a string. The server still validates what it receives:
this check is for the model's sake, not the server's safety.

The schema is checked with ``jsonschema`` (which the ``mcp`` SDK depends on anyway), in the
dialect it names with ``$schema`` and in JSON Schema 2020-12 (the MCP default) otherwise. A
schema that is not valid JSON Schema, or that refers to documents outside itself, is not held
against the tool: its calls then only have to be objects, and the server judges the rest.
Messages read like the kernel's own for Python tools: ``git_log is missing required argument
'repo_path'``, ``git_log argument 'max_count' must be integer, not string ('ten')``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from .._errors import InvalidArgumentsError
from ..tools._hints import describe_value

__all__ = ["ArgumentsSchema"]

_log = logging.getLogger("toolkernel.mcp")


class ArgumentsSchema:
    """A tool's ``inputSchema``, compiled once, checking each call's arguments."""

    def __init__(self, tool_name: str, schema: Mapping[str, Any]) -> None:
        self.tool_name = tool_name
        self.schema = dict(schema)
        properties = self.schema.get("properties")
        self.properties: dict[str, Any] = (
            dict(properties) if isinstance(properties, Mapping) else {}
        )
        required = self.schema.get("required")
        self.required: tuple[str, ...] = (
            tuple(r for r in required if isinstance(r, str)) if isinstance(required, list) else ()
        )
        self._validator: Any = None
        cls: Any = jsonschema.validators.validator_for(
            self.schema, default=jsonschema.Draft202012Validator
        )
        try:
            cls.check_schema(self.schema)
        except jsonschema.exceptions.SchemaError as exc:
            _log.warning(
                "toolkernel.mcp: the input schema of %r is not valid JSON Schema (%s); its "
                "arguments are left to the server to check",
                tool_name,
                exc.message,
            )
        else:
            self._validator = cls(self.schema)

    def check(self, arguments: Mapping[str, Any]) -> None:
        """Raise :class:`InvalidArgumentsError` (a message for the model) unless ``arguments``
        match the schema."""
        name = self.tool_name
        bad_keys = [key for key in arguments if not isinstance(key, str)]
        if bad_keys:
            raise InvalidArgumentsError(
                f"{name} argument names must be strings, not {describe_value(bad_keys[0])}"
            )
        missing = [r for r in self.required if r not in arguments]
        if missing:
            raise InvalidArgumentsError(
                f"{name} is missing required argument{'s' if len(missing) > 1 else ''} "
                f"{', '.join(repr(m) for m in missing)}"
            )
        if self._validator is None:
            return
        try:
            errors = list(self._validator.iter_errors(dict(arguments)))
        except Exception as exc:  # a $ref it can't resolve: the server will judge
            _log.debug("toolkernel.mcp: can't check the arguments of %r: %s", name, exc)
            return
        if errors:
            raise InvalidArgumentsError(self._explain(arguments, errors))

    def _explain(
        self, arguments: Mapping[str, Any], errors: list[jsonschema.ValidationError]
    ) -> str:
        name = self.tool_name
        takes = ", ".join(self.properties) or "no arguments"
        top = [e for e in errors if not e.path]
        if any(e.validator == "additionalProperties" for e in top):
            extra = sorted(k for k in arguments if k not in self.properties)
            if extra:
                return (
                    f"{name} got unexpected argument{'s' if len(extra) > 1 else ''} "
                    f"{', '.join(repr(k) for k in extra)}; it takes {takes}"
                )
        error = jsonschema.exceptions.best_match(errors)
        if not error.path:
            return f"the arguments of {name} are not valid: {error.message}"
        where = _location(error.path)
        if error.validator == "type":
            expected = error.validator_value
            wanted = (
                " or ".join(str(t) for t in expected)
                if isinstance(expected, list)
                else str(expected)
            )
            return (
                f"{name} argument {where!r} must be {wanted}, not {describe_value(error.instance)}"
            )
        return f"{name} argument {where!r}: {error.message}"


def _location(path: Iterable[Any]) -> str:
    """``edits[0].old_string`` for the path ``["edits", 0, "old_string"]``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text

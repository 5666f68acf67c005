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

Regexes: RE2, never a backtracking engine
-----------------------------------------

The check runs on the event loop, and the schema is the server's. ``jsonschema`` matches
``pattern`` and ``patternProperties`` with Python's ``re``, which backtracks: ``^(a+)+$``
against ``aaa…a!`` takes a second with 24 ``a``, twice as long for each one more, and every
other call waits (``re`` holds the GIL, so not even a thread would help). So every
keyword that matches a regex against a call's arguments (``pattern``, ``patternProperties``,
and ``additionalProperties``, which matches the ``patternProperties`` names) runs on Google's
RE2 (``google-re2``) instead, which never backtracks: its time grows with the text's length
times the size of the pattern's compiled program. That covers ``propertyNames`` (it applies
``pattern`` to each name) and subschemas in another dialect (a nested ``$schema``, a reference
to a metaschema), which get the same keywords. What RE2 leaves to the server:

- A pattern RE2 can't run (a backreference, a lookaround, a program over ``_OPTIONS.max_mem``)
  is skipped, with one warning when the tool is listed.
- RE2's worst case is still length times program (a 3 kB pattern built for it and 20 kB of
  text: half a minute), so the matches of one call share a budget, ``_MAX_WORK``; a match that
  would overdraw it is skipped.
- ``unevaluatedProperties`` in a schema that also has ``patternProperties`` is skipped, with a
  warning at listing: ``jsonschema`` finds the properties it evaluated by matching those
  patterns with ``re`` itself.

Patterns are ECMA-262 (JSON Schema's dialect), read by code point (its ``u`` flag). RE2
already reads ``\\d``, ``\\w``, ``\\b`` and ``$`` as ECMA does (ASCII classes; ``$`` only at the
very end), which ``re`` does not; ``\\uXXXX`` and ``\\u{X}`` are rewritten as RE2's ``\\x{X}``,
and ``\\s``/``\\S`` as ECMA's whitespace (with ``\\v`` and the Unicode spaces) and the rest.
Left as RE2 reads it: ``.`` also matches ``\\r``, U+2028 and U+2029 (which only lets more
through). ``\\cX``, ``[\\b]``, ``\\p{Letter}``-style long names and counts over 1000 don't
compile, so those patterns are skipped.

Listing the tool checks its schema against the metaschema, which matches only the metaschema's
own patterns (simple ones) and compiles the schema's (``format: regex``, with ``re``), never
matching them; a schema too deeply nested for that check is treated as not valid JSON Schema.
"""

from __future__ import annotations

import contextvars
import functools
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

from .._extras import require_extra

# Every way into toolkernel.mcp imports this module: the one place that says which extra
# brings the packages it needs (the SDK itself is imported when a server is opened).
require_extra("mcp", "toolkernel.mcp", "mcp", "jsonschema", "re2")

import jsonschema  # noqa: E402
import jsonschema.exceptions  # noqa: E402
import jsonschema.validators  # noqa: E402
import re2  # type: ignore[import-untyped]  # noqa: E402

from .._errors import InvalidArgumentsError  # noqa: E402
from ..tools._hints import describe_value  # noqa: E402

__all__ = ["ArgumentsSchema"]

_log = logging.getLogger("toolkernel.mcp")

# The metaschema check when a tool is listed asserts only ``format: regex`` (which compiles the
# schema's patterns): checkers that optional packages add for URIs would run their own regexes
# on the server's strings.
_SCHEMA_FORMATS = jsonschema.FormatChecker(formats=("regex",))


# JSON Schema's types as Python's, for schemas that say nothing but an argument's type.
_PLAIN_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}
_PLAIN_KEYWORDS = frozenset({"type", "title", "description", "default", "examples"})
_PLAIN_TOP = frozenset(
    {"type", "properties", "required", "additionalProperties", "$schema", "title", "description"}
)


def _plain_types(schema: Mapping[str, Any]) -> dict[str, tuple[type, ...]] | None:
    """For a schema that gives each argument only a scalar type (and maybe forbids others):
    each argument's Python types, with ``""`` mapping to () when other arguments are refused.
    None for any other schema."""
    if not set(schema) <= _PLAIN_TOP or schema.get("type", "object") != "object":
        return None
    extra = schema.get("additionalProperties", True)
    if not isinstance(extra, bool):
        return None
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        return None
    found: dict[str, tuple[type, ...]] = {}
    for name, sub in properties.items():
        if not isinstance(sub, Mapping) or not set(sub) <= _PLAIN_KEYWORDS:
            return None
        kind = sub.get("type")
        if not isinstance(kind, str) or kind not in _PLAIN_TYPES:
            return None
        found[name] = _PLAIN_TYPES[kind]
    if not extra:
        found[""] = ()
    return found


def _plainly_valid(types: Mapping[str, tuple[type, ...]], arguments: Mapping[str, Any]) -> bool:
    """Whether ``arguments`` surely match a schema :func:`_plain_types` read (False: ask
    jsonschema, which also words the message)."""
    closed = "" in types
    for name, value in arguments.items():
        wanted = types.get(name)
        if wanted is None:
            if closed or name == "":
                return False
            continue
        if isinstance(value, bool) and bool not in wanted:
            return False  # JSON's true is no number
        if not isinstance(value, wanted):
            return False
    return True


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
        self._plain = _plain_types(self.schema)
        cls: Any = jsonschema.validators.validator_for(
            self.schema, default=jsonschema.Draft202012Validator
        )
        try:
            cls.check_schema(self.schema, format_checker=_SCHEMA_FORMATS)
        except (jsonschema.exceptions.SchemaError, RecursionError) as exc:
            _log.warning(
                "toolkernel.mcp: the input schema of %r is not valid JSON Schema (%s); its "
                "arguments are left to the server to check",
                tool_name,
                exc.message
                if isinstance(exc, jsonschema.exceptions.SchemaError)
                else "nested too deeply to check",
            )
        else:
            regexes = _Regexes.of(self.schema)
            for pattern in regexes.patterns:
                problem = _compiled(pattern).problem
                if problem is not None:
                    _log.warning(
                        "toolkernel.mcp: RE2 can't run the pattern %r in the input schema of %r "
                        "(%s); the server checks it",
                        pattern,
                        tool_name,
                        problem,
                    )
            if regexes.unevaluated_properties and regexes.pattern_properties:
                _log.warning(
                    "toolkernel.mcp: the input schema of %r has both patternProperties and "
                    "unevaluatedProperties; the server checks unevaluatedProperties",
                    tool_name,
                )
            self._validator = _linear(cls, not regexes.pattern_properties)(self.schema)

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
        if self._plain is not None and _plainly_valid(self._plain, arguments):
            return  # what jsonschema would say, without it (a call's own cost, on the loop)
        work = _Work()
        token = _work.set(work)
        try:
            errors = list(self._validator.iter_errors(dict(arguments)))
        except Exception as exc:  # a $ref it can't resolve: the server will judge
            _log.debug("toolkernel.mcp: can't check the arguments of %r: %s", name, exc)
            return
        finally:
            _work.reset(token)
        if work.overdrawn:
            _log.debug(
                "toolkernel.mcp: the patterns of %r would take too long on these arguments; "
                "some are left to the server",
                name,
            )
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


# -- RE2 -----------------------------------------------------------------------------------

# RE2 as schema patterns need it: compile errors come back to us (RE2 would print them), no
# capture groups (only whether a pattern matches), and 1 MiB for a pattern's program and its
# matching caches, which bounds what compiling and keeping one costs (a counted repeat of a
# large class, like ``[\p{L}]{1,64}``, needs more: skipped, with a warning).
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
_OPTIONS.never_capture = True
_OPTIONS.max_mem = 1 << 20

# What the pattern matches of one call may cost together, in program instructions times bytes
# of text: RE2's slowest rate measured, on patterns built to defeat its DFA, was about 40 ns
# per instruction per byte, so a sixth of a second at worst. A 300-instruction pattern (a
# 64-character name) still checks 12 kB; a 9,000-instruction one (``[^"]{0,1000}``), 440 bytes.
_MAX_WORK = 4_000_000


@attrs.define(eq=False)
class _Work:
    """What the pattern matches of the call being checked may still cost."""

    left: int = _MAX_WORK
    overdrawn: bool = False  # a match was skipped: it would have cost more than was left

    def spend(self, cost: int) -> bool:
        """Take ``cost`` from what is left, or refuse (``False``) if there is not enough."""
        if cost > self.left:
            self.overdrawn = True
            return False
        self.left -= cost
        return True


# The call being checked (``ArgumentsSchema.check`` sets it; each thread and task has its own).
_work: contextvars.ContextVar[_Work] = contextvars.ContextVar("toolkernel_mcp_pattern_work")


@attrs.frozen
class _Compiled:
    """A schema's pattern as RE2 compiled it, or why RE2 can't run it (``problem``)."""

    regex: Any = None  # re2's compiled pattern
    problem: str | None = None

    def search(self, text: str) -> bool | None:
        """Whether the pattern matches somewhere in ``text`` (JSON Schema patterns are not
        anchored); ``None`` when that is left to the server."""
        if self.regex is None:
            return None
        try:
            size = len(text.encode())
        except UnicodeEncodeError:  # a lone surrogate (JSON allows "\ud800"): not UTF-8
            return None
        work = _work.get(None) or _Work()
        if not work.spend(self.regex.programsize * max(size, 1)):
            return None
        return self.regex.search(text) is not None


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> _Compiled:
    """``pattern`` compiled by RE2, once (the cache holds the patterns of the tools in use)."""
    try:
        return _Compiled(regex=re2.compile(_re2_syntax(pattern), _OPTIONS))
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "RE2 refused it"
        if isinstance(reason, bytes):
            reason = reason.decode(errors="replace")
        return _Compiled(problem=str(reason))


# ECMA-262's ``\s`` (its WhiteSpace and LineTerminator) and what it leaves out, as the inside
# of an RE2 class: RE2's own ``\s`` is only ``[\t\n\f\r ]``.
_ECMA_SPACE = (
    r"\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}"
)
_ECMA_NOT_SPACE = (
    r"\x{0}-\x{8}\x{e}-\x{1f}\x{21}-\x{9f}\x{a1}-\x{167f}\x{1681}-\x{1fff}\x{200b}-\x{2027}"
    r"\x{202a}-\x{202e}\x{2030}-\x{205e}\x{2060}-\x{2fff}\x{3001}-\x{fefe}\x{ff00}-\x{10ffff}"
)
_HEX = frozenset("0123456789abcdefABCDEF")


def _re2_syntax(pattern: str) -> str:
    """The ECMA-262 ``pattern`` in RE2's syntax, where the two differ and it is cheap to say:
    ``\\uXXXX`` (a surrogate pair as one code point) and ``\\u{X}`` as ``\\x{X}``, ``\\s`` and
    ``\\S`` as ECMA's whitespace and the rest."""
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            escape = pattern[i + 1]
            found = _unicode_escape(pattern, i) if escape == "u" else None
            if found is not None:
                code, i = found
                out.append(f"\\x{{{code:x}}}")
                continue
            if escape in "sS":
                inside = _ECMA_SPACE if escape == "s" else _ECMA_NOT_SPACE
                out.append(inside if in_class else f"[{inside}]")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        out.append(char)
        i += 1
    return "".join(out)


def _unicode_escape(pattern: str, start: int) -> tuple[int, int] | None:
    """The code point of the ``\\u`` escape at ``pattern[start]`` and where the escape ends,
    or ``None`` if it is not one (RE2 then refuses the ``\\u``)."""
    if pattern.startswith("{", start + 2):
        end = pattern.find("}", start + 3, start + 16)
        digits = pattern[start + 3 : end]
        if end < 0 or not digits or not _HEX.issuperset(digits) or int(digits, 16) > 0x10FFFF:
            return None
        return int(digits, 16), end + 1
    digits = pattern[start + 2 : start + 6]
    if len(digits) < 4 or not _HEX.issuperset(digits):
        return None
    code = int(digits, 16)
    low = pattern[start + 8 : start + 12]
    if (
        0xD800 <= code < 0xDC00
        and pattern.startswith("\\u", start + 6)
        and len(low) == 4
        and _HEX.issuperset(low)
        and 0xDC00 <= int(low, 16) < 0xE000
    ):
        return 0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00), start + 12
    return code, start + 6


@attrs.frozen
class _Regexes:
    """The regexes a schema holds, looked for everywhere in it: a ``$ref`` can make any object
    in the document a subschema."""

    patterns: tuple[str, ...]  # ``pattern`` values and ``patternProperties`` names
    pattern_properties: bool
    unevaluated_properties: bool

    @classmethod
    def of(cls, schema: object) -> _Regexes:
        patterns: dict[str, None] = {}
        pattern_properties = unevaluated_properties = False
        stack = [schema]
        while stack:
            node = stack.pop()
            if isinstance(node, list):
                stack.extend(node)
                continue
            if not isinstance(node, Mapping):
                continue
            for key, value in node.items():
                if key == "pattern" and isinstance(value, str):
                    patterns[value] = None
                elif key == "patternProperties" and isinstance(value, Mapping):
                    pattern_properties = True
                    patterns.update((name, None) for name in value if isinstance(name, str))
                elif key == "unevaluatedProperties":
                    unevaluated_properties = True
                stack.append(value)
        return cls(tuple(patterns), pattern_properties, unevaluated_properties)


# -- jsonschema's keywords that match regexes, on RE2 --------------------------------------


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "string") or not isinstance(pattern, str):
        return
    if _compiled(pattern).search(instance) is False:
        shown = repr(instance)  # jsonschema's message, but a long argument is not echoed whole
        if len(shown) > 40:
            shown = shown[:37] + "..."
        yield jsonschema.ValidationError(f"{shown} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        compiled = _compiled(pattern)
        for name, value in instance.items():
            if compiled.search(name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = [_compiled(p) for p in schema.get("patternProperties", {})]
    # A name that a pattern may match (RE2 could not say) is not held to be additional.
    extras = [
        name
        for name in instance
        if name not in properties and all(p.search(name) is False for p in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        names = ", ".join(repr(name) for name in sorted(extras, key=str))
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(p) for p in sorted(schema["patternProperties"]))
            yield jsonschema.ValidationError(
                f"{names} {verb} not match any of the regexes: {regexes}"
            )
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield jsonschema.ValidationError(
                f"Additional properties are not allowed ({names} {verb} unexpected)"
            )


def _left_to_the_server(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
    return iter(())


@functools.cache
def _linear(dialect: Any, unevaluated_properties: bool) -> Any:
    """jsonschema's validator class for ``dialect`` with its regex keywords on RE2 (and
    ``unevaluatedProperties`` skipped unless ``unevaluated_properties``)."""
    keywords: dict[str, Any] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    if not unevaluated_properties:
        keywords["unevaluatedProperties"] = _left_to_the_server
    cls: Any = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        dialect, {k: f for k, f in keywords.items() if k in dialect.VALIDATORS}
    )

    def evolve(self: Any, **changes: Any) -> Any:
        # jsonschema's own evolve, except for the class: a subschema that names another dialect
        # (``$schema``; a metaschema reached by ``$ref``) gets that dialect's class from
        # jsonschema, without these keywords; here it gets ours.
        schema = changes.setdefault("schema", self.schema)
        named = jsonschema.validators.validator_for(schema, default=cls)
        new = cls if named is cls else _linear(named, unevaluated_properties)
        for field in attrs.fields(cls):
            if field.init and field.alias not in changes:
                changes[field.alias] = getattr(self, field.name)
        return new(**changes)

    cls.evolve = evolve
    return cls

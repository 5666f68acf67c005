"""From the calls a model wrote to kernel calls, and from results to one answer per call id.

Every wire format ends up here once it has found, for each call the model emitted, an id, a
name and arguments (a JSON string or an object). What a model can get wrong never raises:

- a missing or empty id gets one made up from the call's position (``call_2``), unique in the
  message; the call runs, and its answer carries that id (the agent loop records the assistant
  message with it, so the conversation stays consistent);
- arguments that are not valid JSON, or not an object, go to the kernel as they came: the
  call's result is an ERROR saying what is wrong with them;
- an unknown tool name goes to the kernel as it came: an ERROR listing the tools there are;
- a second call with an id already used in the message: the kernel fails it with an ERROR
  (``call id ... is used twice``), and :func:`answers` folds its message into the answer to that
  id, so every id is answered exactly once.

Dependencies (``depends_on``) are resolved here too; see ``_dependencies``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import attrs

from ..kernel import Content, Status, ToolCall, ToolResult
from ._attachments import Attachment, attachment
from ._dependencies import resolve_dependencies
from ._names import NameMap
from ._nulls import drop_nulls
from ._schema import DEPENDS_ON, declares, tool_schema, with_dependencies

__all__ = [
    "WireCall",
    "to_tool_calls",
    "Answer",
    "answers",
    "field",
    "tool_objects",
    "unicode_text",
]

_SURROGATES = re.compile(r"[\ud800-\udfff]")


def unicode_text(text: str) -> str:
    """``text`` with every lone surrogate as U+FFFD, what a JSON peer can decode.

    A file name that is not UTF-8 (``touch $'bad\\xff'``) comes from ``os.listdir`` and its
    kin with its undecodable bytes as lone surrogates; so does a JSON string holding a lone
    ``\\udc80`` escape. Python carries them, UTF-8 can't: an encoder (pydantic's, a model
    provider's) refuses the whole message. The model sees the byte as a replacement
    character, as ``ls`` shows it."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return _SURROGATES.sub("\N{REPLACEMENT CHARACTER}", text)
    return text


def field(obj: object, name: str, default: Any = None) -> Any:
    """``obj[name]`` for a mapping, ``obj.name`` for an SDK object."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def tool_objects(tools: Iterable[object] | Mapping[str, object]) -> list[object]:
    """The tools given as a list of tools or names, or as ``kernel.tools`` (name -> tool)."""
    if isinstance(tools, Mapping):
        return list(tools.values())
    return list(tools)


def exported_tools(
    tools: Iterable[object] | Mapping[str, object], dependencies: bool
) -> list[tuple[str, str, str, dict[str, Any]]]:
    """What every format exports of each tool: ``(name, name on the wire, description,
    parameters schema)``, the schema offering ``depends_on`` if ``dependencies``. Objects
    without a string name are left out."""
    toolset = tool_objects(tools)
    names = NameMap(toolset)
    exported = []
    for tool in toolset:
        name = getattr(tool, "name", None)
        if not isinstance(name, str):
            continue
        schema = tool_schema(tool)
        if dependencies:
            schema = with_dependencies(schema)
        description = getattr(tool, "description", "")
        description = description if isinstance(description, str) else ""
        exported.append((name, names.wire(name), description, schema))
    return exported


@attrs.frozen
class WireCall:
    """A call as a wire format spelled it, before anything was checked."""

    id: object
    name: object
    arguments: object


def to_tool_calls(wire: Sequence[WireCall], tools: Iterable[object]) -> list[ToolCall]:
    """Kernel calls for the calls of one model message, in order (see the module docstring)."""
    lookup = ToolLookup(tools)
    ids = _ids(wire)
    return [
        lookup.call(call, call_id, position, ids)
        for position, (call, call_id) in enumerate(zip(wire, ids, strict=True), start=1)
    ]


class ToolLookup:
    """The tools a message's calls name: wire names mapped back, each schema read once."""

    def __init__(self, tools: Iterable[object] | Mapping[str, object]) -> None:
        toolset = tool_objects(tools)
        self._names = NameMap(toolset)
        self._by_name = {n: t for t in toolset if isinstance(n := getattr(t, "name", None), str)}
        self._schemas: dict[str, dict[str, Any] | None] = {}

    def call(self, call: WireCall, call_id: str, position: int, ids: Sequence[str]) -> ToolCall:
        """The kernel call for the message's call at ``position`` (from 1), given its id and
        the ids ``depends_on`` may name."""
        name = self._names.tool(call.name) if isinstance(call.name, str) else ""
        if name not in self._schemas:
            tool = self._by_name.get(name)
            self._schemas[name] = tool_schema(tool) if tool is not None else None
        schema = self._schemas[name]
        arguments = _arguments(call.arguments)
        requested: object = None
        if isinstance(arguments, dict):
            if DEPENDS_ON in arguments and not (schema and declares(schema, DEPENDS_ON)):
                requested = arguments.pop(DEPENDS_ON)
            if schema is not None:
                arguments = drop_nulls(arguments, schema)
        after, arguments = resolve_dependencies(requested, arguments, position, ids)
        # Arguments that are not an object go as they came: the kernel's error says so.
        return ToolCall(call_id, name, cast(Any, arguments), after=after)


def _ids(wire: Sequence[WireCall]) -> list[str]:
    taken = {c.id for c in wire if isinstance(c.id, str) and c.id}
    ids = []
    for position, call in enumerate(wire, start=1):
        if isinstance(call.id, str) and call.id:
            ids.append(call.id)
            continue
        made, n = f"call_{position}", 1
        while made in taken:
            n += 1
            made = f"call_{position}_{n}"
        taken.add(made)
        ids.append(made)
    return ids


def _arguments(raw: object) -> object:
    """A JSON object's text parsed to a dict; anything else as it came (the kernel says what is
    wrong with it)."""
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError):
            return raw
        return parsed if isinstance(parsed, dict) else raw
    if isinstance(raw, Mapping):
        return dict(raw)
    return raw


# -- results ------------------------------------------------------------------------------------


@attrs.frozen
class Answer:
    """What goes back to the model for one call id: the text of each result with that id (one,
    unless the model repeated the id), and whether the call succeeded."""

    call_id: str
    parts: tuple[tuple[Status, str], ...]
    content: Content | None = None
    """The output of the call, when it succeeded with a :class:`~toolkernel.Content`."""

    @property
    def ok(self) -> bool:
        return self.parts[0][0] is Status.OK

    @property
    def text(self) -> str:
        return "\n\n".join(text for _, text in self.parts)

    def labelled(self) -> str:
        """The text, each failed part saying first how its call ended (for formats with no
        error flag of their own): ``error: ...``, ``timeout: ...``."""
        return "\n\n".join(_labelled(status, text) for status, text in self.parts)

    def segments(self, *, labelled: bool = False) -> list[str | Attachment] | None:
        """The answer as runs of text and the images and documents between them, in order,
        for formats that carry those; None when it has none (send :attr:`text` or
        :meth:`labelled`). Blocks between attachments read as in ``Content.text()``; the
        parts of a repeated id follow as one more run of text."""
        if self.content is None:
            return None
        segments: list[str | Attachment] = []
        for segment in self.content.segments(lambda block: attachment(block) is not None):
            found = unicode_text(segment) if isinstance(segment, str) else attachment(segment)
            if found is not None:
                segments.append(found)
        if all(isinstance(segment, str) for segment in segments):
            return None
        rest = [_labelled(s, t) if labelled else t for s, t in self.parts[1:]]
        if rest:
            segments.append("\n\n".join(rest))
        return segments


def _labelled(status: Status, text: str) -> str:
    if status is Status.OK or text.startswith(status.value):
        return text
    return f"{status.value}: {text}"


def answers(results: Iterable[ToolResult]) -> list[Answer]:
    """One answer per call id, in the order of the results; a later result with an id already
    answered (a repeat the kernel refused) adds its message to that answer."""
    found: dict[str, list[tuple[Status, str]]] = {}
    contents: dict[str, Content] = {}
    for result in results:
        text = unicode_text(result.text() if result.ok else (result.error or result.status.value))
        if result.ok and not text:
            text = "(no output)"
        call_id = str(result.call_id)
        parts = found.setdefault(call_id, [])
        if not parts and result.ok and isinstance(result.output, Content):
            contents[call_id] = result.output
        parts.append((result.status, text))
    return [
        Answer(call_id, tuple(parts), contents.get(call_id)) for call_id, parts in found.items()
    ]

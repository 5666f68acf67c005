"""Rich outputs: text, images, audio and resources, in MCP's content-block shapes.

A tool's output is usually text or a JSON value. :class:`Content` is the output for what text
can't carry: it holds content blocks spelled as the MCP specification spells them (the shape
MCP servers answer in, so their results pass through unchanged), and optionally structured
content for programs. Models read :meth:`Content.text`; the wire formats carry the images and
documents their APIs accept in their own shapes and fall back to that text for the rest.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

__all__ = ["Content"]

_KINDS = ("text", "image", "audio", "resource_link", "resource")


def _copied_blocks(blocks: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    # A lone block or a string would iterate as its keys or characters: say what went wrong.
    if isinstance(blocks, Mapping | str | bytes):
        kind = "a single mapping" if isinstance(blocks, Mapping) else type(blocks).__name__
        raise TypeError(
            f"Content takes a sequence of content blocks, not {kind}; wrap the block in a list"
        )
    copied: list[Mapping[str, Any]] = []
    for block in blocks:
        if isinstance(block, Mapping):
            # Copies, so a caller changing its dict later can't change (or break) the value.
            block = dict(block)
            if isinstance(block.get("resource"), Mapping):
                block["resource"] = dict(block["resource"])
        copied.append(block)
    return tuple(copied)


def _need(block: Mapping[str, Any], where: str, key: str, *, optional: bool = False) -> None:
    value = block.get(key)
    if value is None:
        if optional:
            return
        raise ValueError(f"{where} has no {key!r}")
    if not isinstance(value, str):
        # The usual slip is raw bytes where the spec has base64 text.
        what = "a base64 string" if key in ("data", "blob") else "a string"
        raise TypeError(f"{where} needs {key!r} as {what}, not {type(value).__name__}")


def _check_blocks(
    instance: object, attribute: attrs.Attribute[Any], blocks: tuple[Mapping[str, Any], ...]
) -> None:
    for index, block in enumerate(blocks):
        if not isinstance(block, Mapping):
            raise TypeError(f"content block {index} must be a mapping, not {type(block).__name__}")
        kind = block.get("type")
        if kind not in _KINDS:
            raise ValueError(
                f"content block {index} has type {kind!r}; a block's type is one of "
                + ", ".join(repr(k) for k in _KINDS)
            )
        where = f"content block {index} ({kind})"
        if kind == "text":
            _need(block, where, "text")
        elif kind in ("image", "audio"):
            _need(block, where, "data")
            _need(block, where, "mimeType")
        elif kind == "resource_link":
            _need(block, where, "uri")
            _need(block, where, "name")
            _need(block, where, "mimeType", optional=True)
        else:
            resource = block.get("resource")
            if not isinstance(resource, Mapping):
                raise TypeError(
                    f"{where} needs 'resource' as a mapping with 'uri' and 'text' or 'blob', "
                    f"not {type(resource).__name__}"
                )
            where += " resource"
            _need(resource, where, "uri")
            _need(resource, where, "mimeType", optional=True)
            has_text, has_blob = resource.get("text") is not None, resource.get("blob") is not None
            if has_text == has_blob:
                raise ValueError(f"{where} needs exactly one of 'text' and 'blob'")
            _need(resource, where, "text" if has_text else "blob")


def _size(base64_text: str) -> str:
    """The size of what ``base64_text`` encodes, for people: ``512 bytes``, ``12 KiB``."""
    size = len(base64_text.rstrip("=")) * 3 // 4
    if size < 1024:
        return "1 byte" if size == 1 else f"{size} bytes"
    if size < 1024 * 1024:
        return f"{round(size / 1024)} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


def block_text(block: Mapping[str, Any]) -> str:
    """What a model reads of one (valid) block: its text, or a bracketed placeholder."""
    kind = block["type"]
    if kind == "text":
        return str(block["text"])
    if kind in ("image", "audio"):
        return f"[{kind}: {block['mimeType']}, {_size(block['data'])}]"
    if kind == "resource_link":
        return f"[resource link: {block['name']} <{block['uri']}>]"
    resource = block["resource"]
    if resource.get("text") is not None:
        return str(resource["text"])
    about = [resource["mimeType"]] if resource.get("mimeType") else []
    return f"[resource: {resource['uri']} ({', '.join([*about, _size(resource['blob'])])})]"


def _short_blocks(blocks: tuple[Mapping[str, Any], ...]) -> str:
    # A repr quoting a megabyte of base64 helps nobody: long data shows as its length.
    def short(block: Mapping[str, Any]) -> dict[str, Any]:
        shown = dict(block)
        for key, value in block.items():
            if key in ("data", "blob") and isinstance(value, str) and len(value) > 40:
                shown[key] = f"{value[:20]}...({len(value)} chars)"
            elif key == "resource" and isinstance(value, Mapping):
                shown[key] = short(value)
        return shown

    return repr(tuple(short(block) for block in blocks))


@attrs.frozen
class Content:
    """A tool's output that is more than text: content blocks, and structured content.

    ``blocks`` are content blocks in the MCP specification's shapes (plain dicts)::

        {"type": "text", "text": "..."}
        {"type": "image", "data": "<base64>", "mimeType": "image/png"}
        {"type": "audio", "data": "<base64>", "mimeType": "audio/wav"}
        {"type": "resource_link", "uri": "file:///r.pdf", "name": "r.pdf", "mimeType": ...}
        {"type": "resource", "resource": {"uri": ..., "mimeType": ..., "text": ...}}
        {"type": "resource", "resource": {"uri": ..., "mimeType": ..., "blob": "<base64>"}}

    (other keys, such as ``annotations`` and ``_meta``, are kept as they are). A malformed block
    raises ``TypeError`` or ``ValueError`` when the value is made. ``structured`` is structured
    content, for programs (an MCP tool's ``structuredContent``); models read the blocks.

    The output of an MCP tool whose result is not all text is a ``Content``, and a tool of your
    own may return one, to show the model an image::

        @tk.tool(reads=["path"])
        async def screenshot(ctx: tk.ToolContext, path: str) -> tk.Content:
            png = await ctx.fs.read_bytes(path)
            return tk.Content([
                {"type": "text", "text": f"the screen, as saved in {path}:"},
                {"type": "image", "data": base64.b64encode(png).decode(), "mimeType": "image/png"},
            ])

    :func:`toolkernel.formats.anthropic.tool_results` and
    :func:`toolkernel.formats.openai.responses_outputs` send PNG, JPEG, GIF and WebP images, and
    PDF documents (``blob`` resources), as their APIs' image and file inputs; everything else
    reaches the model as :meth:`text`.
    """

    blocks: tuple[Mapping[str, Any], ...] = attrs.field(
        default=(), converter=_copied_blocks, validator=_check_blocks, repr=_short_blocks
    )
    structured: Any = None

    def text(self) -> str:
        """What a model reads: text blocks (and text resources) joined by newlines, with a
        bracketed placeholder for each block text can't carry (``[image: image/png, 12 KiB]``,
        ``[audio: audio/wav, 3 KiB]``, ``[resource link: name <uri>]``, ``[resource: uri
        (application/pdf, 80 KiB)]``). With no blocks, the structured content as JSON."""
        if not self.blocks:
            if self.structured is None:
                return ""
            try:  # structured content is JSON: an MCP server's is, and so should one's own
                return json.dumps(self.structured, ensure_ascii=False, default=str)
            except (TypeError, ValueError, RecursionError):
                return str(self.structured)
        return "\n".join(block_text(block) for block in self.blocks)

    def segments(
        self, carries: Callable[[Mapping[str, Any]], bool]
    ) -> list[str | Mapping[str, Any]]:
        """The content as a wire format sends it: the blocks ``carries`` accepts, in order,
        between runs of text (the :meth:`text` of the blocks between them). For writing a wire
        format that takes images or files.

        >>> image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
        >>> Content([{"type": "text", "text": "a"}, image]).segments(lambda b: b["type"] == "image")
        ['a', {'type': 'image', 'data': 'AAAA', 'mimeType': 'image/png'}]
        """
        if not self.blocks:
            text = self.text()
            return [text] if text else []
        segments: list[str | Mapping[str, Any]] = []
        run: list[str] = []
        for block in self.blocks:
            if carries(block):
                if run:
                    segments.append("\n".join(run))
                    run = []
                segments.append(block)
            else:
                run.append(block_text(block))
        if run:
            segments.append("\n".join(run))
        return segments

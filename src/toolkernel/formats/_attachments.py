"""Images and documents a wire format sends as themselves, not as text.

A :class:`~toolkernel.Content` output holds MCP content blocks. Anthropic's ``tool_result`` and
OpenAI Responses' ``function_call_output`` take images and files beside text; what both take
is the same: PNG, JPEG, GIF and WebP images (an ``image`` block, or a ``blob`` resource of one
of those types) and PDF documents (a ``blob`` resource). Every other block (audio, resource
links, other types) reaches the model as its text placeholder (``Content.text()``), and so does
everything in OpenAI Chat, whose tool messages take text only.
"""

from __future__ import annotations

import posixpath
import urllib.parse
from collections.abc import Mapping
from typing import Any, Literal

import attrs

__all__ = ["Attachment", "attachment", "IMAGE_TYPES"]

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The image types both APIs accept."""
_DOCUMENT_TYPES = frozenset({"application/pdf"})


@attrs.frozen
class Attachment:
    """An image or a document, as a wire format needs it."""

    kind: Literal["image", "document"]
    media_type: str
    data: str
    """The bytes, base64-encoded."""
    name: str = ""
    """A resource's file name (the last part of its URI's path), or ``""``."""

    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.data}"


def _media_type(value: object) -> str:
    """``image/PNG; foo=bar`` -> ``image/png``."""
    return value.split(";", 1)[0].strip().lower() if isinstance(value, str) else ""


def _file_name(uri: object) -> str:
    if not isinstance(uri, str):
        return ""
    return urllib.parse.unquote(posixpath.basename(urllib.parse.urlsplit(uri).path))


def attachment(block: Mapping[str, Any]) -> Attachment | None:
    """The attachment a (valid) content block is, or None if it is text or text can only
    describe it."""
    kind = block.get("type")
    if kind == "image":
        media_type, data = _media_type(block.get("mimeType")), block.get("data")
        if media_type in IMAGE_TYPES and data:
            return Attachment("image", media_type, data)
    elif kind == "resource":
        resource = block["resource"]
        media_type, data = _media_type(resource.get("mimeType")), resource.get("blob")
        if not data:
            return None
        if media_type in IMAGE_TYPES:
            return Attachment("image", media_type, data, _file_name(resource.get("uri")))
        if media_type in _DOCUMENT_TYPES:
            return Attachment("document", media_type, data, _file_name(resource.get("uri")))
    return None

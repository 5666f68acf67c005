"""The lease service's wire format: length-prefixed JSON, one object a frame, with a version.

A frame is a 4-byte big-endian length, then that many bytes of UTF-8 JSON holding one object.
Every object carries ``"v": 1``. Requests carry ``"op"`` and a client-chosen number ``"n"``;
replies and grants carry ``"re"``, the number of the request they answer.

Claims travel as ``{"r": "path", "p": [parts...], "m": "exclusive", "u": 1}`` (``r`` one of
``path``, ``device`` with ``"name"``, ``pool`` with ``"name"``, ``everything``); the receiver
rebuilds them through the public constructors, so a hostile claim fails their checks. A change
to publish names its paths by the same keys, rebuilt the same way: a ``..`` never climbs above
the root.

Whatever a peer sends is decoded by :func:`loads`, which refuses arrays and objects nested deeper
than :data:`MAX_DEPTH` as it refuses what is not JSON: json's own recursion, and every walk of
what it returns (a ``repr`` in an error message, a comparison), would otherwise raise
``RecursionError``, which nothing expects of a malformed frame.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping
from typing import Any, Final

import anyio

from ..locks import EVERYTHING, Claim, Device, Mode, Path, Pool, Resource
from ._backend import Chmod, MakeDirectory, Op, RemoveDirectory, Rename, SetTimes, Unlink

__all__ = [
    "VERSION",
    "MAX_FRAME",
    "ProtocolError",
    "frame",
    "parse_frame",
    "loads",
    "encode_claims",
    "decode_claims",
    "encode_op",
    "decode_op",
]

VERSION: Final = 1
MAX_FRAME: Final = 1 << 20
"""The largest frame accepted (1 MiB): a bigger length prefix is an attack or a bug."""
MAX_DEPTH: Final = 32
"""The deepest nesting of arrays and objects accepted (ours go four deep)."""
_LENGTH = struct.Struct(">I")
_TIME_T_NS: Final = 2**63 * 10**9  # past it, os.utime raises OverflowError
HEADER_SIZE: Final = _LENGTH.size
BATCH_BYTES: Final = 1 << 16


class ProtocolError(ValueError):
    """A frame that breaks the wire format; the message says how (sent back to the peer)."""


def frame(message: Mapping[str, Any]) -> bytes:
    body = json.dumps({"v": VERSION, **message}, separators=(",", ":")).encode()
    return _LENGTH.pack(len(body)) + body


def batched(first: bytes, frames: Any) -> bytes:
    """``first`` and the frames already queued after it, as one write of about
    :data:`BATCH_BYTES`: a burst of grants or requests costs a system call per batch, not one a
    frame, and a write to a slow reader still ends often (the service takes that as a sign of
    life)."""
    batch = [first]
    size = len(first)
    while size < BATCH_BYTES:
        try:
            data = frames.receive_nowait()
        except (anyio.WouldBlock, anyio.EndOfStream):
            break
        batch.append(data)
        size += len(data)
    return b"".join(batch)


def frame_length(header: bytes) -> int:
    (length,) = _LENGTH.unpack(header)
    if length > MAX_FRAME:
        raise ProtocolError(f"a frame of {length} bytes is over the limit of {MAX_FRAME}")
    return int(length)


def loads(data: bytes | str) -> Any:
    """``data`` decoded as JSON; :class:`ProtocolError` if it is not JSON, or nests arrays and
    objects deeper than :data:`MAX_DEPTH`."""
    try:
        value = json.loads(data)
    except RecursionError:  # json's C scanner recurses once a level
        raise ProtocolError(f"nested deeper than {MAX_DEPTH} levels") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"not JSON: {exc}") from None
    # Level by level, not recursively: a recursive walk is what this guards against.
    level = [value]
    for _ in range(MAX_DEPTH):
        level = [
            child
            for item in level
            if isinstance(item, (list, dict))
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, (list, dict))
        ]
        if not level:
            return value
    raise ProtocolError(f"nested deeper than {MAX_DEPTH} levels")


def parse_frame(body: bytes) -> dict[str, Any]:
    try:
        message = loads(body)
    except ProtocolError as exc:
        raise ProtocolError(f"a frame that is {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError("a frame that is not a JSON object")
    if message.get("v") != VERSION:
        raise ProtocolError(f"wire version {message.get('v')!r} is not {VERSION}")
    return message


def field(message: Mapping[str, Any], name: str, kind: type[Any]) -> Any:
    value = message.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolError(f"field {name!r} must be {kind.__name__}, not {value!r}")
    return value


def encode_claims(claims: Iterable[Claim]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for claim in claims:
        resource = claim.resource
        item: dict[str, Any]
        if isinstance(resource, Path):
            item = {"r": "path", "p": list(resource.parts)}
        elif isinstance(resource, Device):
            item = {"r": "device", "name": resource.name}
        elif isinstance(resource, Pool):
            item = {"r": "pool", "name": resource.name}
        else:
            item = {"r": "everything"}
        item["m"] = claim.mode.value
        if claim.units != 1:
            item["u"] = claim.units
        out.append(item)
    return out


def decode_claims(items: object) -> list[Claim]:
    """Claims from the wire; :class:`ProtocolError` or the claims' own errors if malformed."""
    if not isinstance(items, list):
        raise ProtocolError("field 'claims' must be a list")
    claims = []
    for item in items:
        if not isinstance(item, dict):
            raise ProtocolError(f"a claim must be an object, not {item!r}")
        kind = item.get("r")
        resource: Resource
        if kind == "path":
            parts = item.get("p")
            if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
                raise ProtocolError(f"a path claim's 'p' must be a list of strings: {item!r}")
            resource = Path(tuple(parts))
        elif kind == "device":
            resource = Device(field(item, "name", str))
        elif kind == "pool":
            resource = Pool(field(item, "name", str))
        elif kind == "everything":
            resource = EVERYTHING
        else:
            raise ProtocolError(f"unknown resource kind {kind!r}")
        try:
            mode = Mode(item.get("m"))
        except ValueError:
            raise ProtocolError(f"unknown mode {item.get('m')!r}") from None
        units = item.get("u", 1)
        if not isinstance(units, int) or isinstance(units, bool):
            raise ProtocolError(f"'u' must be an integer, not {units!r}")
        claims.append(Claim(resource, mode, units=units))
    return claims


def _parts(value: object, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ProtocolError(f"{name!r} must be a list of strings")
    # A key as a claim's is: the directories to it are opened from the root one component at
    # a time, so a ".." left in would climb out of it.
    return Path(tuple(value)).parts


def encode_op(op: Op) -> dict[str, Any]:
    if isinstance(op, Rename):
        if op.source_dir is not None:
            raise ValueError("a rename from a descriptor is staged by the client, not sent")
        return {
            "kind": "rename",
            "source": list(op.source),
            "target": list(op.target),
            "replace": op.replace,
        }
    if isinstance(op, Unlink):
        return {"kind": "unlink", "target": list(op.target)}
    if isinstance(op, MakeDirectory):
        return {"kind": "mkdir", "target": list(op.target), "mode": op.mode}
    if isinstance(op, RemoveDirectory):
        return {"kind": "rmdir", "target": list(op.target)}
    if isinstance(op, Chmod):
        return {"kind": "chmod", "target": list(op.target), "mode": op.mode}
    return {"kind": "utime", "target": list(op.target), "ns": list(op.ns)}


def decode_op(message: Mapping[str, Any]) -> Op:
    kind = message.get("kind")
    target = _parts(message.get("target"), "target")
    if kind == "rename":
        replace = message.get("replace", True)
        if not isinstance(replace, bool):
            raise ProtocolError("'replace' must be a boolean")
        return Rename(_parts(message.get("source"), "source"), target, replace)
    if kind == "unlink":
        return Unlink(target)
    if kind == "mkdir":
        return MakeDirectory(target, _mode(message))
    if kind == "rmdir":
        return RemoveDirectory(target)
    if kind == "chmod":
        return Chmod(target, _mode(message))
    if kind == "utime":
        ns = message.get("ns")
        if (
            not isinstance(ns, list)
            or len(ns) != 2
            or not all(isinstance(t, int) and not isinstance(t, bool) for t in ns)
        ):
            raise ProtocolError("'ns' must be two integers")
        if not all(-_TIME_T_NS <= t < _TIME_T_NS for t in ns):
            raise ProtocolError("'ns' must be times a 64-bit time_t can hold")
        return SetTimes(target, (ns[0], ns[1]))
    raise ProtocolError(f"unknown change kind {kind!r}")


def _mode(message: Mapping[str, Any]) -> int:
    mode = field(message, "mode", int)
    if not 0 <= mode <= 0o7777:
        raise ProtocolError(f"mode {mode!r} is out of range")
    return int(mode)

"""File handles: which lower file an overlay's copy-up came from.

When overlayfs copies a lower file up to change it, it records in the copy's
``user.overlay.origin`` attribute the lower file's *file handle* (``name_to_handle_at(2)``),
inside its own header (``struct ovl_fb`` in the kernel's ``fs/overlayfs/overlayfs.h``)::

    version (1 byte), magic 0xfb, length of the whole, flags, handle type, uuid (16 bytes),
    the handle's bytes

:func:`origin_handle` reads the handle out of that attribute and :func:`file_handle` asks the
file system for the handle of an entry of the lower layer; equal handles are one file. Where the
file system gives no handles (or the attribute has another format), both answer None, and the
caller assumes the worse.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Final

__all__ = ["file_handle", "origin_handle"]

_MAGIC: Final = 0xFB
_HEADER: Final = 21  # version, magic, length, flags, type, uuid
_MAX_HANDLE: Final = 128  # MAX_HANDLE_SZ


class _FileHandle(ctypes.Structure):
    _fields_ = (
        ("handle_bytes", ctypes.c_uint),
        ("handle_type", ctypes.c_int),
        ("f_handle", ctypes.c_ubyte * _MAX_HANDLE),
    )


NameToHandle = Callable[[int, bytes, object, object, int], int]


@functools.cache
def _name_to_handle_at() -> NameToHandle | None:
    try:
        function = ctypes.CDLL(None, use_errno=True).name_to_handle_at
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_int
    return function


def file_handle(directory: int, name: str) -> tuple[int, bytes] | None:
    """The file handle (its type and bytes) of entry ``name`` of ``directory`` (a link is not
    followed); None where the file system gives none."""
    call = _name_to_handle_at()
    if call is None:
        return None
    handle = _FileHandle(_MAX_HANDLE, 0)
    mount = ctypes.c_int()
    if call(directory, name.encode(), ctypes.byref(handle), ctypes.byref(mount), 0) != 0:
        return None
    return handle.handle_type, bytes(handle.f_handle[: handle.handle_bytes])


def origin_handle(origin: bytes) -> tuple[int, bytes] | None:
    """The file handle an overlay's ``user.overlay.origin`` attribute names; None for one of
    another format."""
    if len(origin) < _HEADER or origin[1] != _MAGIC or origin[2] != len(origin):
        return None
    return origin[4], bytes(origin[_HEADER:])

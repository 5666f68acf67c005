"""What ``ctx.fs`` is, as the kernel may name it: the public surface of the tools' file access.

The kernel sits below the tools and may not import them, so it can't name their
``toolkernel.tools.FileAccess``, which is what ``ctx.fs`` is whenever the kernel has a workspace.
Typing ``ctx.fs`` ``Any`` let a typo (``ctx.fs.read_txt``) through ``mypy --strict``; this
protocol spells the same methods, so a tool's use of ``ctx.fs`` is checked. The tools' own
types (``Workspace``, ``Entry``, ``Subtree``, ...) are ``Any`` here, for the same reason.
``FileAccess`` is checked against it wherever ``open_kernel`` hands one to a kernel.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ..locks import Claim, Path

__all__ = ["FileSystem"]

T = TypeVar("T")
PathArg = str | os.PathLike[str]


class FileSystem(Protocol):
    """The file access of a call, checked against its claims (``ctx.fs``). Its documentation
    is ``toolkernel.tools.FileAccess``'s."""

    @property
    def workspace(self) -> Any: ...
    @property
    def call_id(self) -> str | None: ...
    @property
    def observer(self) -> Any: ...
    @property
    def view(self) -> Any: ...
    @property
    def read_first(self) -> bool: ...
    @property
    def fence(self) -> Any: ...
    @property
    def claims(self) -> tuple[Claim, ...]: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def can_read(self, path: PathArg) -> bool: ...
    def can_write(self, path: PathArg) -> bool: ...
    def entry_key(self, path: PathArg) -> Path: ...
    async def read_bytes(
        self,
        path: PathArg,
        *,
        max_bytes: int | None = None,
        as_seen: bool = False,
        fresh: bool = False,
    ) -> bytes: ...
    async def read_with(
        self,
        path: PathArg,
        work: Callable[[io.FileIO], T],
        *,
        max_bytes: int | None = None,
        as_seen: bool = False,
    ) -> T: ...
    async def read_text(
        self,
        path: PathArg,
        encoding: str = "utf-8",
        errors: str = "strict",
        *,
        max_bytes: int | None = None,
    ) -> str: ...
    async def exists(self, path: PathArg, *, follow_links: bool = True) -> bool: ...
    async def is_file(self, path: PathArg) -> bool: ...
    async def is_dir(self, path: PathArg) -> bool: ...
    async def stat(self, path: PathArg) -> os.stat_result: ...
    async def listdir(self, path: PathArg = ".") -> list[str]: ...
    async def list_entries(self, path: PathArg = ".") -> list[Any]: ...
    async def list_first_entries(
        self, path: PathArg = ".", limit: int | None = None
    ) -> tuple[list[Any], int]: ...
    async def walk(self, path: PathArg = ".") -> list[str]: ...
    async def search(self, path: PathArg, work: Callable[[Any], T]) -> T: ...
    async def write_bytes(
        self,
        path: PathArg,
        data: bytes | bytearray | memoryview,
        *,
        parents: bool = False,
        fresh: bool = False,
    ) -> None: ...
    async def write_text(
        self,
        path: PathArg,
        text: str,
        encoding: str = "utf-8",
        errors: str = "strict",
        *,
        parents: bool = False,
        fresh: bool = False,
    ) -> None: ...
    async def mkdir(
        self, path: PathArg, *, parents: bool = True, exist_ok: bool = True
    ) -> None: ...
    async def delete(self, path: PathArg) -> None: ...
    async def move(
        self, src: PathArg, dst: PathArg, *, parents: bool = False, replace: bool = True
    ) -> None: ...

"""File access for one tool call, checked against the leases the call was granted.

A tool never opens files itself: it gets ``ctx.fs``, a :class:`FileAccess` bound to the call's
granted claims. Every operation turns its path argument into a canonical key with
:meth:`Workspace.key` *first*, then checks that key against the claims, then does the I/O on the
path the key resolved to. So a tool cannot reach a file its call did not declare under some other
spelling (``../``, a symlink, another case), and a declared read cannot be used to write.

Coverage: a claim on a path covers its whole subtree, and a claim on ``EVERYTHING`` covers every
path. A read needs any covering claim; a write (create, modify, delete, either end of a move,
mkdir) needs an exclusive one.

Writes are atomic: the new content goes to a temporary file in the same directory, is flushed and
fsync-ed, takes the permission bits of the file it replaces, and is renamed over it with
``os.replace``. Readers (and a crash) see the old content or the new, never a mix; a failure or a
cancellation before the rename removes the temporary file and leaves the old content whole.

Blocking I/O runs in worker threads (``trio.to_thread.run_sync``); the key resolution and the
access check run in the same thread call as the I/O, so the event loop never waits on the disk.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pathlib
import secrets
import shutil
import stat
from collections.abc import Callable, Iterable
from typing import Final

import attrs
import trio

from .._errors import InvalidClaimError, UndeclaredAccessError
from ..locks import Claim, Everything, Mode, Path
from ._workspace import Workspace

__all__ = ["FileAccess"]

_CHUNK: Final = 1 << 20
"""Bytes written between cancellation checks, so a big write can still be cancelled."""
_TEMP_SUFFIX: Final = ".tktmp"


def _as_claims(claims: Iterable[Claim]) -> tuple[Claim, ...]:
    result = tuple(claims)
    for claim in result:
        if not isinstance(claim, Claim):
            raise InvalidClaimError(f"FileAccess needs Claim objects, got {claim!r}")
    return result


@attrs.define(eq=False)
class FileAccess:
    """The file access a tool call gets (``ctx.fs``), limited to the claims its call was granted.

    ::

        fs = FileAccess(workspace, [reads("src"), writes("out/report.md")])
        text = await fs.read_text("src/a.py")          # covered by the shared claim on src
        await fs.write_text("out/report.md", text)     # atomic; covered by the exclusive claim
        await fs.write_text("src/a.py", "")            # UndeclaredAccessError: only shared

    Paths are spelled as for :meth:`Workspace.key`. Every operation raises
    :class:`UndeclaredAccessError` (a ``PermissionError``) when the call's claims do not cover it,
    :class:`PathEscapeError` or :class:`InvalidClaimError` for paths that are not in the
    workspace, and the usual ``OSError`` subclasses (``FileNotFoundError``, ``IsADirectoryError``,
    ...) for what the file system refuses.

    Operations on a spelling that passes through a symlink act on the link's target, since that is
    the file the key names (deleting ``link`` deletes what it points to).
    """

    workspace: Workspace
    """The workspace whose keys the claims are made of."""
    _claims: tuple[Claim, ...] = attrs.field(converter=_as_claims, alias="claims")
    _path_modes: dict[tuple[str, ...], Mode] = attrs.field(init=False, repr=False)
    _everything_mode: Mode | None = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        # Strongest mode per claimed key, so a check walks the key's ancestors: O(depth).
        self._path_modes = {}
        self._everything_mode = None
        for claim in self._claims:
            resource = claim.resource
            if isinstance(resource, Everything):
                self._everything_mode = _stronger(self._everything_mode, claim.mode)
            elif isinstance(resource, Path):
                previous = self._path_modes.get(resource.parts)
                self._path_modes[resource.parts] = _stronger(previous, claim.mode)

    @property
    def claims(self) -> tuple[Claim, ...]:
        """The claims granted to the call, as given."""
        return self._claims

    # -- access checks ---------------------------------------------------------------------------

    def can_read(self, path: str | os.PathLike[str]) -> bool:
        """True iff the call's claims allow reading ``path`` (raises for paths outside the root)."""
        return self._refusal(self.workspace.key(path), write=False) is None

    def can_write(self, path: str | os.PathLike[str]) -> bool:
        """True iff the call's claims allow writing ``path`` (raises for paths outside the root)."""
        return self._refusal(self.workspace.key(path), write=True) is None

    def _refusal(self, key: Path, *, write: bool) -> str | None:
        """Why the claims do not allow the access, or None if they do."""
        shared_holder: str | None = None
        if self._everything_mode is Mode.EXCLUSIVE:
            return None
        if self._everything_mode is Mode.SHARED:
            if not write:
                return None
            shared_holder = "everything"
        for depth in range(len(key.parts) + 1):
            mode = self._path_modes.get(key.parts[:depth])
            if mode is Mode.EXCLUSIVE or (mode is Mode.SHARED and not write):
                return None
            if mode is Mode.SHARED:
                shared_holder = (
                    "it" if depth == len(key.parts) else repr(str(Path(key.parts[:depth])))
                )
        if shared_holder is not None:
            return f"the call declared only a shared lease on {shared_holder}"
        return "the call did not declare it"

    def _locate(
        self, path: str | os.PathLike[str], *, write: bool, verb: str
    ) -> tuple[Path, pathlib.Path]:
        key, real = self.workspace.locate(path)
        reason = self._refusal(key, write=write)
        if reason is not None:
            raise UndeclaredAccessError(f"can't {verb} {self.workspace.display(key)!r}: {reason}")
        return key, real

    def _readable(self, path: str | os.PathLike[str]) -> pathlib.Path:
        return self._locate(path, write=False, verb="read")[1]

    # -- reading ---------------------------------------------------------------------------------

    async def read_bytes(self, path: str | os.PathLike[str]) -> bytes:
        """Return the content of the file at ``path``. Needs a read lease."""
        return await trio.to_thread.run_sync(self._read_bytes, path)

    def _read_bytes(self, path: str | os.PathLike[str]) -> bytes:
        return self._readable(path).read_bytes()

    async def read_text(
        self, path: str | os.PathLike[str], encoding: str = "utf-8", errors: str = "strict"
    ) -> str:
        """Return the content of the file at ``path``, decoded. Needs a read lease.

        Line endings are left as they are (no ``\\r\\n`` translation), so text read and written
        back keeps its bytes.
        """
        data = await self.read_bytes(path)
        return data.decode(encoding, errors)

    async def exists(self, path: str | os.PathLike[str]) -> bool:
        """True iff something exists at ``path``. Needs a read lease."""
        return await trio.to_thread.run_sync(self._test, path, pathlib.Path.exists)

    async def is_file(self, path: str | os.PathLike[str]) -> bool:
        """True iff ``path`` is a regular file. Needs a read lease."""
        return await trio.to_thread.run_sync(self._test, path, pathlib.Path.is_file)

    async def is_dir(self, path: str | os.PathLike[str]) -> bool:
        """True iff ``path`` is a directory. Needs a read lease."""
        return await trio.to_thread.run_sync(self._test, path, pathlib.Path.is_dir)

    def _test(
        self, path: str | os.PathLike[str], predicate: Callable[[pathlib.Path], bool]
    ) -> bool:
        return predicate(self._readable(path))

    async def stat(self, path: str | os.PathLike[str]) -> os.stat_result:
        """Return ``os.stat`` of ``path`` (links followed). Needs a read lease."""
        return await trio.to_thread.run_sync(self._stat, path)

    def _stat(self, path: str | os.PathLike[str]) -> os.stat_result:
        return os.stat(self._readable(path))

    async def listdir(self, path: str | os.PathLike[str] = ".") -> list[str]:
        """Return the sorted names in directory ``path``. Needs a read lease on the directory."""
        return await trio.to_thread.run_sync(self._listdir, path)

    def _listdir(self, path: str | os.PathLike[str]) -> list[str]:
        return sorted(os.listdir(self._readable(path)))

    async def walk(self, path: str | os.PathLike[str] = ".") -> list[str]:
        """Return the workspace-relative POSIX paths of all files below ``path``, sorted.

        Needs a read lease on ``path`` (so on the whole subtree). A file ``path`` gives itself.
        Symbolic links to directories are not followed: their files are listed where they really
        live, and following them could loop or leave the subtree the lease covers. A symbolic link
        to a file is listed only if its target is in the workspace and this call may read it, so
        every path returned can be passed to :meth:`read_bytes`.
        """
        return await trio.to_thread.run_sync(self._walk, path)

    def _walk(self, path: str | os.PathLike[str]) -> list[str]:
        real = self._readable(path)
        root = self.workspace.root
        status = os.stat(real)
        base = real.relative_to(root).as_posix()
        if not stat.S_ISDIR(status.st_mode):
            return [base]
        found: list[str] = []
        pending = [real]
        while pending:
            directory = pending.pop()
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue  # vanished or unreadable; like os.walk, skip it
            for entry in entries:
                entry_path = pathlib.Path(entry.path)
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry_path)
                elif entry.is_symlink():
                    if self._linked_file_readable(entry_path):
                        found.append(entry_path.relative_to(root).as_posix())
                elif entry.is_file(follow_symlinks=False):
                    found.append(entry_path.relative_to(root).as_posix())
        found.sort()
        return found

    def _linked_file_readable(self, link: pathlib.Path) -> bool:
        try:
            key, target = self.workspace.locate(link)
        except InvalidClaimError:  # escapes the root, or loops
            return False
        return target.is_file() and self._refusal(key, write=False) is None

    # -- writing ---------------------------------------------------------------------------------

    async def write_bytes(
        self,
        path: str | os.PathLike[str],
        data: bytes | bytearray | memoryview,
        *,
        parents: bool = False,
    ) -> None:
        """Replace or create file ``path`` holding ``data``, atomically. Needs an exclusive lease.

        With ``parents=True`` missing parent directories are created. An existing file keeps its
        permission bits; a new one gets the default (``0o666`` less the umask). If the write
        fails or is cancelled before the final rename, the old content is untouched and no
        temporary file is left behind.
        """
        if isinstance(data, str):
            raise TypeError("write_bytes() needs bytes; use write_text() for str")
        # Copy, so the caller changing a bytearray while the thread writes can't tear the file.
        await trio.to_thread.run_sync(self._write, path, bytes(data), parents)

    async def write_text(
        self,
        path: str | os.PathLike[str],
        text: str,
        encoding: str = "utf-8",
        errors: str = "strict",
        *,
        parents: bool = False,
    ) -> None:
        """Encode ``text`` and write it as :meth:`write_bytes` does (no newline translation)."""
        if not isinstance(text, str):
            raise TypeError(f"write_text() needs a str, not {type(text).__name__}")
        await trio.to_thread.run_sync(self._write, path, text.encode(encoding, errors), parents)

    def _write(self, path: str | os.PathLike[str], data: bytes, parents: bool) -> None:
        key, real = self._locate(path, write=True, verb="write")
        if not key.parts:
            raise IsADirectoryError(errno.EISDIR, "can't write over the workspace root", str(real))
        if parents:
            real.parent.mkdir(parents=True, exist_ok=True)
        _replace_atomically(real, data)

    async def mkdir(
        self, path: str | os.PathLike[str], *, parents: bool = True, exist_ok: bool = True
    ) -> None:
        """Create directory ``path`` and, by default, missing parents. Needs an exclusive lease."""
        await trio.to_thread.run_sync(self._mkdir, path, parents, exist_ok)

    def _mkdir(self, path: str | os.PathLike[str], parents: bool, exist_ok: bool) -> None:
        real = self._locate(path, write=True, verb="create")[1]
        real.mkdir(parents=parents, exist_ok=exist_ok)

    async def delete(self, path: str | os.PathLike[str]) -> None:
        """Delete the file or the whole directory tree at ``path``. Needs an exclusive lease.

        The workspace root itself can't be deleted (``PermissionError``). Deleting a tree is not
        atomic: a failure part-way leaves part of it.
        """
        await trio.to_thread.run_sync(self._delete, path)

    def _delete(self, path: str | os.PathLike[str]) -> None:
        key, real = self._locate(path, write=True, verb="delete")
        if not key.parts:
            raise PermissionError(errno.EPERM, "can't delete the workspace root", str(real))
        if stat.S_ISDIR(os.lstat(real).st_mode):
            shutil.rmtree(real)
        else:
            os.unlink(real)

    async def move(
        self, src: str | os.PathLike[str], dst: str | os.PathLike[str], *, parents: bool = False
    ) -> None:
        """Rename the file or directory ``src`` to ``dst`` atomically (``os.replace``).

        Needs exclusive leases on both. ``dst`` is the new path itself (not a directory to move
        into); an existing file there is replaced. With ``parents=True`` missing parents of
        ``dst`` are created. Both must be on one file system.
        """
        await trio.to_thread.run_sync(self._move, src, dst, parents)

    def _move(
        self, src: str | os.PathLike[str], dst: str | os.PathLike[str], parents: bool
    ) -> None:
        src_key, src_real = self._locate(src, write=True, verb="move")
        dst_key, dst_real = self._locate(dst, write=True, verb="move to")
        if not src_key.parts or not dst_key.parts:
            raise PermissionError(errno.EPERM, "can't move the workspace root", str(src_real))
        if parents:
            dst_real.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src_real, dst_real)


def _stronger(a: Mode | None, b: Mode) -> Mode:
    return Mode.EXCLUSIVE if Mode.EXCLUSIVE in (a, b) else Mode.SHARED


def _replace_atomically(target: pathlib.Path, data: bytes) -> None:
    """Write ``data`` to a temporary sibling of ``target``, then rename it over ``target``.

    Must run in a ``trio.to_thread`` worker: it polls for cancellation between chunks and once
    more just before the rename, the last moment at which backing out leaves the old content.
    """
    mode: int | None = None
    try:
        status = os.stat(target)
    except FileNotFoundError:
        pass
    else:
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(target))
        mode = stat.S_IMODE(status.st_mode)
    # A short prefix of the name helps whoever finds a leftover after a power cut, and stays far
    # below NAME_MAX whatever the target's name is.
    temporary = target.with_name(f".{target.name[:32]}.{secrets.token_hex(6)}{_TEMP_SUFFIX}")
    # 0o666 through the umask, like any new file; O_EXCL so we never write into someone's file.
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        try:
            view = memoryview(data)
            written = 0
            while written < len(view):
                if written:
                    trio.from_thread.check_cancelled()
                written += os.write(fd, view[written : written + _CHUNK])
            os.fsync(fd)
            if mode is not None:
                os.fchmod(fd, mode)
        finally:
            os.close(fd)
        trio.from_thread.check_cancelled()
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise

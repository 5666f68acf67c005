"""File access for one tool call, checked against the leases the call was granted.

A tool never opens files itself: it gets ``ctx.fs``, a :class:`FileAccess` bound to the call's
granted claims. Every operation turns its path argument into a canonical key with
:meth:`Workspace.key` *first*, then checks that key against the claims, then does the I/O on the
path the key resolved to. So a tool cannot reach a file its call did not declare under some other
spelling (``../``, a symlink, another case), and a declared read cannot be used to write.

What is checked is what is opened: the I/O starts from the workspace's root directory descriptor
and opens each directory of the resolved path without following links (``_beneath``). A directory
swapped for a symbolic link between the check and the I/O (by another process) is met as a link
and refused with :class:`PathChangedError`; nothing outside the root is read or written.

Access ends with the call: :meth:`FileAccess.close` (the kernel calls it when the call finishes)
revokes it. Every operation checks first, and every mutating system call checks again in its
worker thread, under a lock ``close`` takes too, so a task that outlives its call cannot write
once ``close`` has returned (:class:`CallEndedError`).

Coverage: a claim on a path covers its whole subtree, and a claim on ``EVERYTHING`` covers every
path. A read needs any covering claim; a write (create, modify, delete, either end of a move,
mkdir) needs an exclusive one.

Writes are atomic: the new content goes to a temporary file in the same directory, is flushed and
fsync-ed, takes the permission bits of the file it replaces, and is renamed over it with
``os.replace``. Readers (and a crash) see the old content or the new, never a mix; a failure or a
cancellation before the rename removes the temporary file and leaves the old content whole.
Deleting a tree is whole or nothing the same way: the tree is renamed aside to a hidden name in
its directory, then removed, and a cancellation after the rename lets the removal finish and
returns as done (:meth:`FileAccess.delete`).

Symbolic links: reading or writing through a link reaches its target, the file the key names
(as ``cat link`` and ``echo > link`` do), so the target is what the claims must cover, and a
link leading out of the root is refused. Deleting and moving change a directory entry, and act
on the entry the last component names, a link included, as ``rm`` and ``mv`` do: ``delete
("node_modules/foo")`` removes the link, never the tree it points to. The parents are resolved
as for every path. The entry's key (:meth:`FileAccess.entry_key`) is then the resolved parent
and the link's own name, and a claim covering it is needed: :func:`entry_keys` says what a tool
deleting or moving a spelled path should claim.

Observing: a :class:`FileAccess` made with an ``observer`` calls it with a
:class:`FileAccessed` for every access it checks, allowed or refused, in the worker thread
doing the I/O, just after the check and before the I/O (``toolkernel.testing.Recorder`` uses
it to see what each call touched). Without one it costs a ``None`` check per operation.

Fencing: a :class:`FileAccess` made with a ``fence`` (a kernel with shared leases gives each call
its grant's, ``open_kernel(leases=...)``) makes every change visible through it (the final
rename of a write, ``mkdir``, an ``unlink``, a tree's rename aside, a move): once the grant is
lost (its client cut off, its leases gone to another process) the change is refused with
:class:`~toolkernel.errors.FencedOutError` and nothing is touched. Without one, each is its
system call.
(Fenced, the lock is not held across the round trip, see ``_fileops``: a change already
sent when :meth:`FileAccess.close` is called lands before the grant's release, never after.)

Blocking I/O runs in worker threads (``anyio.to_thread.run_sync``), one thread hop per operation;
the key resolution and the access check run in the same thread call as the I/O, so the event loop
never waits on the disk. A search (:meth:`FileAccess.search`) is one operation: one check of the
directory searched, one hop for the whole tree below it. Only regular files are read: a fifo or
a device would block a worker thread for good.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
import attrs

from .._errors import (
    CallEndedError,
    InvalidClaimError,
    PathChangedError,
    UndeclaredAccessError,
    WrongLoopError,
)
from ..kernel._loop import running_here
from ..leases._backend import Fence
from ..locks import Claim, Everything, Mode, Path
from . import _fileops
from ._fileops import Entry
from ._views import FileView, version_of
from ._workspace import Workspace, _path_text

__all__ = ["FileAccess", "FileAccessed", "Entry", "Subtree", "entry_keys"]

T = TypeVar("T")
CANCEL_POLL: Final = 0.002
"""Seconds between two looks at a search's cancellation (:meth:`Subtree.check`)."""
PathArg = str | os.PathLike[str]


def _split_entry(path: PathArg) -> tuple[str, str] | None:
    """``(parent, name)`` for a spelling whose last component names a directory entry (trailing
    slashes ignored); None for one that names no entry of its own (``.``, ``..``, the root),
    which is resolved whole. Raises :class:`InvalidClaimError` for what is not a path."""
    text = _path_text(path).rstrip("/")
    slash = text.rfind("/")
    name = text[slash + 1 :]
    if name in ("", ".", ".."):
        return None
    parent = text[:slash] if slash > 0 else ("/" if slash == 0 else ".")
    return parent, name


def _spellings(name: str) -> dict[str, None]:
    """``name`` as each way a workspace may fold it (none, case, Unicode form, both) spells it,
    without repeats, in that order."""
    nfc = unicodedata.normalize("NFC", name)
    both = unicodedata.normalize("NFC", nfc.casefold())
    return dict.fromkeys((name, name.casefold(), nfc, both))


def entry_keys(key: Callable[[str], Path], spelling: str) -> tuple[Path, ...]:
    """The keys a call deleting or moving ``spelling`` holds exclusively, keyed by ``key``
    (the kernel's ``KeyFunction``): what it changes and what changes meaning with it.

    For anything but a symbolic link: ``key(spelling)``, the entry itself. For a link (as
    :meth:`FileAccess.delete` and :meth:`FileAccess.move` act on the link, not its target):
    the link's own entry (:meth:`FileAccess.entry_key`: its resolved directory and its name),
    and the link's target if that is in the workspace, since every path spelled through the
    link changes meaning with it. ``key`` does not say how the workspace folds names, so the
    entry is claimed under each folding of the name that differs (most names have one): more
    conflicts, never fewer. A link that leads outside the root or loops gives its entry only;
    any other spelling the workspace refuses raises as ``key`` does.
    """
    split = _split_entry(spelling)
    if split is None:
        return (key(spelling),)
    parent_text, name = split
    target: Path | None
    try:
        target = key(spelling)
    except InvalidClaimError:  # the link leads outside the root, or loops
        target = None
    else:
        if target.parts == tuple(spelling.split("/")):
            return (target,)  # canonical, and no link on the way: the usual case, one key
    parent = key(parent_text).parts
    entries = tuple(Path((*parent, folded)) for folded in _spellings(name))
    if target is None:
        return entries
    if target in entries:
        # No link (its key is one of them), or a link to a sibling of a name that folds alike:
        # claiming every folding covers the entry either way.
        return entries
    return (*entries, target)


def _as_claims(claims: Iterable[Claim]) -> tuple[Claim, ...]:
    result = tuple(claims)
    for claim in result:
        if not isinstance(claim, Claim):
            raise InvalidClaimError(f"FileAccess needs Claim objects, got {claim!r}")
    return result


@attrs.frozen
class FileAccessed:
    """One access a call made through ``ctx.fs``, as an observer of its :class:`FileAccess`
    sees it (after the claims were checked, before the I/O)."""

    call_id: str | None
    """The call that made it."""
    path: Path
    """The canonical key of the path (``Workspace.key``); ``str(path)`` spells it."""
    write: bool
    """True for an access that needs an exclusive lease (write, create, delete, move)."""
    verb: str
    """What was done: ``read``, ``list``, ``write``, ``create``, ``delete``, ``move`` (the
    source of a move) or ``move to`` (its destination)."""
    allowed: bool
    """False if the call's claims did not cover it: it was refused with
    :class:`UndeclaredAccessError` and nothing was touched."""


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
    the file the key names (writing ``link`` writes what it points to, creating it if the link
    dangles, as ``echo > link`` does; the claims must cover the target, and a link leading out
    of the root is refused). :meth:`delete` and :meth:`move` are the exception: they act on the
    directory entry the last component names, a link itself included, as ``rm`` and ``mv`` do
    (see :meth:`entry_key`). If a directory or the file itself is found to be a symbolic link at
    the moment of the I/O, where the check saw none (or a link is found to be one no more), the
    path changed meaning under the call: :class:`PathChangedError`, nothing touched.

    ``call_id`` names the call in messages. After :meth:`close` every operation raises
    :class:`CallEndedError`. ``observer``, if given, is called with a :class:`FileAccessed`
    for every access checked (from the worker thread: keep it quick and thread-safe).
    """

    workspace: Workspace
    """The workspace whose keys the claims are made of."""
    _claims: tuple[Claim, ...] = attrs.field(converter=_as_claims, alias="claims")
    call_id: str | None = attrs.field(default=None, kw_only=True)
    """The id of the call this access belongs to, for messages; None if there is no call."""
    observer: Callable[[FileAccessed], None] | None = attrs.field(
        default=None, kw_only=True, repr=False
    )
    """Told of every access checked (see the module's docstring); None: nobody is."""
    view: FileView | None = attrs.field(default=None, kw_only=True, repr=False)
    """The view of the files of the agent making the call (``_views``): reads with
    ``as_seen`` or ``fresh`` and writes with ``fresh`` keep it and are checked against it.
    None: no views are kept, nothing is checked."""
    read_first: bool = attrs.field(default=False, kw_only=True)
    """True where the call comes from a model: a ``fresh`` write refuses an existing file the
    agent never read (``StaleRule.NOT_READ``)."""
    fence: Fence | None = attrs.field(default=None, kw_only=True, repr=False)
    """The fence of the call's grant when leases are shared with other processes: every change
    is made visible through it (see the module's docstring). None: directly."""
    before_grant: bool = attrs.field(default=False, kw_only=True)
    """True for an access made while its call runs ahead of its lease grant
    (``toolkernel.kernel.Ahead``): it reads what the claims cover, and writes nothing, since
    nothing a call writes may be visible before its grant (the call takes ``ctx.fs`` again
    once ``ctx.wait_granted()`` has returned)."""
    _path_modes: dict[tuple[str, ...], Mode] = attrs.field(init=False, repr=False)
    _everything_mode: Mode | None = attrs.field(init=False, repr=False)
    _closed: bool = attrs.field(init=False, default=False, repr=False)
    # Held by close() and around every mutating system call (see the module's docstring).
    _lock: threading.Lock = attrs.field(init=False, factory=threading.Lock, repr=False)

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

    # -- revocation ------------------------------------------------------------------------------

    def close(self) -> None:
        """Revoke this access: every operation raises :class:`CallEndedError` from now on.

        Idempotent and synchronous (not a checkpoint). An operation already in a worker thread
        is stopped before its next mutating system call; if one is under way when ``close`` is
        called, ``close`` waits for that one system call to return.
        """
        with self._lock:
            self._closed = True

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def _ended(self, verb: str, path: object) -> CallEndedError:
        call = f"call {self.call_id}" if self.call_id is not None else "its call"
        return CallEndedError(
            f"can't {verb} {_spelling(path)!r}: {call} has ended; its file access was revoked "
            f"(a tool must not use ctx.fs after it returns, nor from a task that outlives it)"
        )

    def _ensure_open(self, verb: str, path: object) -> None:
        if self._closed:
            raise self._ended(verb, path)

    def _gate(self, verb: str, path: object, *, cancellable: bool = True) -> _Gate:
        return _Gate(self, verb, path, cancellable)

    # -- access checks ---------------------------------------------------------------------------

    def can_read(self, path: str | os.PathLike[str]) -> bool:
        """True iff the call's claims allow reading ``path`` (raises for paths outside the root)."""
        return self._refusal(self.workspace.key(path), write=False) is None

    def can_write(self, path: str | os.PathLike[str]) -> bool:
        """True iff the call's claims allow writing ``path`` (raises for paths outside the root)."""
        return self._refusal(self.workspace.key(path), write=True) is None

    def _refusal(self, key: Path, *, write: bool) -> str | None:
        """Why the claims do not allow the access, or None if they do."""
        if write and self.before_grant:
            return (
                f"call {self.call_id} took this ctx.fs before its leases were granted (it runs "
                f"ahead of its grant), and nothing it writes may be visible before then; await "
                f"ctx.wait_granted() and write through ctx.fs taken after it"
            )
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

    def _check(self, path: PathArg, *, write: bool, verb: str) -> tuple[Path, tuple[str, ...]]:
        """Key ``path``, check the claims cover it, and return its key and on-disk components."""
        key, parts = self.workspace._locate_parts(path)
        self._checked(key, write, verb)
        return key, parts

    def _checked(self, key: Path, write: bool, verb: str) -> None:
        """Check the claims cover ``key``; tell the observer; raise if they do not."""
        reason = self._refusal(key, write=write)
        if self.observer is not None:
            self.observer(FileAccessed(self.call_id, key, write, verb, reason is None))
        if reason is not None:
            raise UndeclaredAccessError(f"can't {verb} {self.workspace.display(key)!r}: {reason}")

    def entry_key(self, path: PathArg) -> Path:
        """The key of the directory entry ``path`` names: what :meth:`delete` and :meth:`move`
        change. Synchronous; it may ``lstat`` and ``readlink``.

        It is ``workspace.key(path)`` unless the last component is a symbolic link: then the
        key of its resolved parent joined with the link's own name (the link is not followed,
        so it may dangle, loop or lead outside the root). Trailing slashes are ignored; ``.``,
        ``..`` and the root name no entry of their own and are resolved whole.
        """
        return self._locate_entry(path)[0]

    def _locate_entry(self, path: PathArg) -> tuple[Path, tuple[str, ...], bool]:
        """``(entry key, on-disk components, is a link)`` of the entry ``path`` names."""
        workspace = self.workspace
        split = _split_entry(path)
        if split is None:
            return (*workspace._locate_parts(path), False)
        whole: tuple[Path, tuple[str, ...]] | None
        try:
            whole = workspace._locate_parts(path)
        except InvalidClaimError:  # escapes, or loops: the last component may be such a link
            whole = None
        else:
            if type(path) is str and whole[1] == tuple(path.split("/")):
                return (*whole, False)  # canonical, no link met: the usual case
        parent_text, name = split
        parent_key, parent_parts = workspace._locate_parts(parent_text)
        found = workspace._find_entry(str(workspace.root.joinpath(*parent_parts)), name)
        if found is not None and stat.S_ISLNK(found[1].st_mode):
            spelled = found[0]
            key = Path((*parent_key.parts, workspace._fold(spelled)))
            return key, (*parent_parts, spelled), True
        if whole is None:
            whole = workspace._locate_parts(path)  # raises why it was refused
        return (*whole, False)

    def _check_entry(
        self, path: PathArg, *, write: bool, verb: str
    ) -> tuple[Path, tuple[str, ...], bool]:
        """As :meth:`_check`, for the entry ``path`` names (:meth:`entry_key`); also whether
        the check found a link there."""
        key, parts, link = self._locate_entry(path)
        self._checked(key, write, verb)
        return key, parts, link

    def _in_thread(
        self, verb: str, path: PathArg, write: bool, io: Callable[[int, tuple[str, ...]], T]
    ) -> T:
        """Check, then run ``io(root_fd, parts)``; the body of every one-path operation."""
        self._ensure_open(verb, path)
        with self.workspace._borrowed_root() as root:
            key, parts = self._check(path, write=write, verb=verb)
            with self._explained(verb, key, parts):
                return io(root, parts)

    async def _run(
        self, verb: str, path: PathArg, write: bool, io: Callable[[int, tuple[str, ...]], T]
    ) -> T:
        self._ensure_open(verb, path)
        return await _in_worker(verb, path, self._in_thread, verb, path, write, io)

    def _in_thread_keyed(
        self, verb: str, path: PathArg, write: bool, io: Callable[[int, Path, tuple[str, ...]], T]
    ) -> T:
        """As :meth:`_in_thread`, for an ``io`` that needs the key too (to keep the view)."""
        self._ensure_open(verb, path)
        with self.workspace._borrowed_root() as root:
            key, parts = self._check(path, write=write, verb=verb)
            with self._explained(verb, key, parts):
                return io(root, key, parts)

    async def _run_keyed(
        self, verb: str, path: PathArg, write: bool, io: Callable[[int, Path, tuple[str, ...]], T]
    ) -> T:
        self._ensure_open(verb, path)
        return await _in_worker(verb, path, self._in_thread_keyed, verb, path, write, io)

    def _seen(self, key: Path, file: io.FileIO, fresh: bool) -> None:
        """Keep the version of ``file``, open and not yet read, in the view; with ``fresh``,
        refuse it first if the view has another (so the version is taken before the content:
        a change after it only makes the view look stale, never fresh)."""
        view = self.view
        if view is None:
            return
        version = version_of(os.fstat(file.fileno()))
        if fresh:
            view.check(
                key.parts, version, read_first=self.read_first, shown=self.workspace.display(key)
            )
        view.saw(key.parts, version)

    @contextlib.contextmanager
    def _explained(
        self, verb: str, key: Path, parts: tuple[str, ...], other: tuple[str, ...] = ()
    ) -> Iterator[None]:
        """Name the workspace paths in OS errors, and say what a changed path means."""
        shown = self.workspace.display(key)
        try:
            yield
        except PathChangedError as exc:
            raise PathChangedError(
                f"can't {verb} {shown!r}: {exc}, where it was not when the call checked the "
                f"path; something changed it while the call was using it, so nothing was "
                f"touched; check the path and try again"
            ) from None
        except OSError as exc:
            # The system calls name only the last component (they ran relative to a directory);
            # a move's error names both ends, as os.rename's does.
            if exc.filename is not None:
                exc.filename = "/".join(parts) or "."
                if other:
                    exc.filename2 = "/".join(other) or "."
            raise

    # -- reading ---------------------------------------------------------------------------------

    async def read_bytes(
        self,
        path: PathArg,
        *,
        max_bytes: int | None = None,
        as_seen: bool = False,
        fresh: bool = False,
    ) -> bytes:
        """Return the content of the regular file at ``path``. Needs a read lease.

        Anything but a regular file (a fifo, a socket, a device) is refused with an ``OSError``
        before it is read: reading one could block for ever. With ``max_bytes``, a larger file
        is refused with ``OSError(errno.EFBIG)`` before it is read, and no more than
        ``max_bytes + 1`` bytes are ever read from it. One thread hop.

        With a :attr:`view`: ``as_seen`` keeps the version read as what the agent has seen
        (the ``Read`` tool); ``fresh`` first refuses, with :class:`~toolkernel.StaleViewError`,
        a file whose version is not the one the agent saw (``Edit`` reading what it changes).
        """
        if as_seen or fresh:

            def seen(root: int, key: Path, parts: tuple[str, ...]) -> bytes:
                with _fileops.open_regular(root, parts, max_bytes) as file:
                    self._seen(key, file, fresh)
                    if max_bytes is None:
                        return file.readall()
                    return _fileops.read_at_most(file, parts, max_bytes)

            return await self._run_keyed("read", path, False, seen)
        if max_bytes is None:
            return await self._run("read", path, False, _fileops.read_regular)

        def io(root: int, parts: tuple[str, ...]) -> bytes:
            return _fileops.read_regular(root, parts, max_bytes)

        return await self._run("read", path, False, io)

    async def read_with(
        self,
        path: PathArg,
        work: Callable[[io.FileIO], T],
        *,
        max_bytes: int | None = None,
        as_seen: bool = False,
    ) -> T:
        """Open the regular file at ``path`` and return ``work(file)``, run in the worker thread
        that checked the read: to read only the part of a big file that is needed. Needs a read
        lease; refuses what :meth:`read_bytes` refuses, before ``work`` runs. One thread hop.
        ``as_seen`` keeps the version opened in the :attr:`view`, as for :meth:`read_bytes`.
        """

        def opened(root: int, key: Path, parts: tuple[str, ...]) -> T:
            with _fileops.open_regular(root, parts, max_bytes) as file:
                if as_seen:
                    self._seen(key, file, False)
                return work(file)

        return await self._run_keyed("read", path, False, opened)

    async def read_text(
        self,
        path: PathArg,
        encoding: str = "utf-8",
        errors: str = "strict",
        *,
        max_bytes: int | None = None,
    ) -> str:
        """Return the content of the file at ``path``, decoded. Needs a read lease.

        Line endings are left as they are (no ``\\r\\n`` translation), so text read and written
        back keeps its bytes. ``max_bytes`` bounds the read as for :meth:`read_bytes`.
        """
        data = await self.read_bytes(path, max_bytes=max_bytes)
        return data.decode(encoding, errors)

    async def exists(self, path: PathArg, *, follow_links: bool = True) -> bool:
        """True iff something exists at ``path``. Needs a read lease.

        A symbolic link is followed (a dangling one: False), unless ``follow_links=False``:
        then the entry ``path`` names is looked at (:meth:`entry_key`), and a link is there
        whatever it points to, as :meth:`delete` and :meth:`move` see it.
        """
        if follow_links:
            return await self._run("read", path, False, _mode_test(lambda mode: True))
        self._ensure_open("read", path)
        return await _in_worker("read", path, self._entry_exists, path)

    def _entry_exists(self, path: PathArg) -> bool:
        self._ensure_open("read", path)
        with self.workspace._borrowed_root() as root:
            key, parts, link = self._check_entry(path, write=False, verb="read")
            with self._explained("read", key, parts):
                return _fileops.entry_exists(root, parts, link)

    async def is_file(self, path: PathArg) -> bool:
        """True iff ``path`` is a regular file. Needs a read lease."""
        return await self._run("read", path, False, _mode_test(stat.S_ISREG))

    async def is_dir(self, path: PathArg) -> bool:
        """True iff ``path`` is a directory. Needs a read lease."""
        return await self._run("read", path, False, _mode_test(stat.S_ISDIR))

    async def stat(self, path: PathArg) -> os.stat_result:
        """Return ``os.stat`` of ``path`` (it is never a link: links were resolved to their
        targets when the path was keyed). Needs a read lease."""
        return await self._run("read", path, False, _fileops.status)

    async def listdir(self, path: PathArg = ".") -> list[str]:
        """Return the sorted names in directory ``path``. Needs a read lease on the directory."""
        return await self._run("list", path, False, _fileops.listdir)

    async def list_entries(self, path: PathArg = ".") -> list[Entry]:
        """Return the entries of directory ``path``, sorted by name, without following links.

        Each :class:`Entry` says whether the name is a file, a directory, a symbolic link (with
        the text it holds, never resolved) or something else. Needs a read lease on ``path``.
        """
        found, _ = await self.list_first_entries(path, None)
        return found

    async def list_first_entries(
        self, path: PathArg = ".", limit: int | None = None
    ) -> tuple[list[Entry], int]:
        """Return the first ``limit`` entries of directory ``path`` (all with None), as
        :meth:`list_entries` does, and how many entries it has in all."""

        def io(root: int, parts: tuple[str, ...]) -> tuple[list[Entry], int]:
            return _fileops.entries(root, parts, limit)

        return await self._run("list", path, False, io)

    async def walk(self, path: PathArg = ".") -> list[str]:
        """Return the workspace-relative POSIX paths of all regular files below ``path``, sorted.

        Needs a read lease on ``path`` (so on the whole subtree). A regular file ``path`` gives
        itself. Symbolic links to directories are not followed: their files are listed where they
        really live, and following them could loop or leave the subtree the lease covers. A
        symbolic link to a regular file is listed only if its target is in the workspace and this
        call may read it, so every path returned can be passed to :meth:`read_bytes`.
        """

        def io(root: int, parts: tuple[str, ...]) -> list[str]:
            return _fileops.walk(root, parts, lambda link: self._links_to_readable(root, link))

        return await self._run("read", path, False, io)

    async def search(self, path: PathArg, work: Callable[[Subtree], T]) -> T:
        """Check a read of ``path`` (so of its whole subtree) and run ``work`` on it in one
        worker thread: a search reads a whole tree in one hop, not one hop per file.

        ``work`` gets a :class:`Subtree`: the root descriptor and the path's on-disk components,
        below which it opens without following links, and the access's checks for what it
        meets on the way (links, observers, the call's end). Cancelling the call abandons the
        thread at once (so a search stuck in one file does not hold up its call's end); ``work``
        must call :meth:`Subtree.check` before each file it opens, which stops it there.
        """
        self._ensure_open("read", path)
        return await _in_worker(
            "search", path, self._search_in_thread, path, work, abandon_on_cancel=True
        )

    def _search_in_thread(self, path: PathArg, work: Callable[[Subtree], T]) -> T:
        self._ensure_open("read", path)
        with self.workspace._borrowed_root() as root:
            key, parts = self._check(path, write=False, verb="read")
            with self._explained("read", key, parts):
                return work(Subtree(self, root, key, parts))

    def _links_to_readable(self, root: int, link: str) -> bool:
        try:
            key, parts = self.workspace._locate_parts(link)
        except InvalidClaimError:  # escapes the root, or loops
            return False
        if self._refusal(key, write=False) is not None:
            return False
        try:
            return stat.S_ISREG(_fileops.status(root, parts).st_mode)
        except OSError:
            return False

    # -- writing ---------------------------------------------------------------------------------

    async def write_bytes(
        self,
        path: PathArg,
        data: bytes | bytearray | memoryview,
        *,
        parents: bool = False,
        fresh: bool = False,
    ) -> None:
        """Replace or create file ``path`` holding ``data``, atomically. Needs an exclusive lease.

        With ``parents=True`` missing parent directories are created. An existing file keeps its
        permission bits; a new one gets the default (``0o666`` less the umask). If the write
        fails or is cancelled before the final rename, the old content is untouched and no
        temporary file is left behind.

        With ``fresh`` and a :attr:`view`, the file about to be replaced is compared with the
        version the agent last saw, just before the rename: one that differs (or, with
        :attr:`read_first`, one it never saw) is refused with
        :class:`~toolkernel.StaleViewError`, untouched; what is written becomes the agent's view.
        """
        if isinstance(data, str):
            raise TypeError("write_bytes() needs bytes; use write_text() for str")
        # Copy, so the caller changing a bytearray while the thread writes can't tear the file.
        await self._write(path, bytes(data), parents, fresh)

    async def write_text(
        self,
        path: PathArg,
        text: str,
        encoding: str = "utf-8",
        errors: str = "strict",
        *,
        parents: bool = False,
        fresh: bool = False,
    ) -> None:
        """Encode ``text`` and write it as :meth:`write_bytes` does (no newline translation)."""
        if not isinstance(text, str):
            raise TypeError(f"write_text() needs a str, not {type(text).__name__}")
        await self._write(path, text.encode(encoding, errors), parents, fresh)

    async def _write(self, path: PathArg, data: bytes, parents: bool, fresh: bool) -> None:
        gate = self._gate("write", path)
        view = self.view if fresh else None
        if view is None:

            def io(root: int, parts: tuple[str, ...]) -> None:
                _fileops.replace_atomically(
                    root, parts, data, gate, parents=parents, fence=self.fence
                )

            await self._run("write", path, True, io)
            return

        def checked(root: int, key: Path, parts: tuple[str, ...]) -> None:
            shown = self.workspace.display(key)

            def check(current: os.stat_result | None) -> None:
                version = None if current is None else version_of(current)
                view.check(key.parts, version, read_first=self.read_first, shown=shown)

            status = _fileops.replace_atomically(
                root, parts, data, gate, parents=parents, check=check, fence=self.fence
            )
            view.saw(key.parts, version_of(status))

        await self._run_keyed("write", path, True, checked)

    async def mkdir(self, path: PathArg, *, parents: bool = True, exist_ok: bool = True) -> None:
        """Create directory ``path`` and, by default, missing parents. Needs an exclusive lease."""
        gate = self._gate("create", path)

        def io(root: int, parts: tuple[str, ...]) -> None:
            _fileops.make_directory(
                root, parts, gate, parents=parents, exist_ok=exist_ok, fence=self.fence
            )

        await self._run("create", path, True, io)

    async def delete(self, path: PathArg) -> None:
        """Delete the file or the whole directory tree at ``path``. Needs an exclusive lease on
        the entry ``path`` names (:meth:`entry_key`).

        A symbolic link is deleted itself, as ``rm`` deletes it: never what it points to, and
        whether it dangles, loops or leads outside the root. The workspace root itself can't be
        deleted (``PermissionError``). Links inside a tree are removed, never followed.

        A tree is whole or gone, never half. First every directory in it is checked to be one
        this process may empty (read, write and search permission, and the sticky bit's rule);
        if one is not, ``PermissionError`` names it and nothing is deleted. Then the tree is
        renamed to a hidden name beside it (``.<name>.toolkernel-deleted-<hex>``), and removed.
        Cancelled before that rename, nothing changed (and the cancellation is raised); after
        it, the removal finishes and this returns: the tree is deleted, whatever the
        cancellation (which the caller meets at its next checkpoint). If the removal still
        fails part-way (the permissions changed since the check, an immutable file), what is
        left is put back under ``path`` and the error raised says what was deleted. Listings
        leave such hidden names out, and deleting a directory first removes any a crash left
        beside it. A file is one ``unlink``.
        """
        gate = self._gate("delete", path)
        committed = self._gate("delete", path, cancellable=False)
        self._ensure_open("delete", path)
        await _in_worker("delete", path, self._delete, path, gate, committed)

    def _delete(self, path: PathArg, gate: _Gate, committed: _Gate) -> None:
        self._ensure_open("delete", path)
        with self.workspace._borrowed_root() as root:
            key, parts, link = self._check_entry(path, write=True, verb="delete")
            with self._explained("delete", key, parts):
                _fileops.delete(root, parts, gate, committed, self.fence, link=link)

    async def move(
        self, src: PathArg, dst: PathArg, *, parents: bool = False, replace: bool = True
    ) -> None:
        """Rename the file or directory ``src`` to ``dst`` atomically (``os.replace``).

        Needs exclusive leases on both entries (:meth:`entry_key`): as ``mv`` does, a symbolic
        link ``src`` is moved itself (never its target), and a link at ``dst`` is replaced (or,
        with ``replace=False``, counts as something there); the parents of both are resolved.
        ``dst`` is the new path itself (not a directory to move into); an existing file there is
        replaced, unless ``replace=False``: then anything at ``dst`` makes it fail with
        ``FileExistsError`` and stays as it was (atomically on Linux, where ``renameat2`` has
        ``RENAME_NOREPLACE``; elsewhere checked just before). With ``parents=True`` missing
        parents of ``dst`` are created. Both must be on one file system.

        With a :attr:`view`, what the agent saw of the file (or of the files below the
        directory) moves with it: a file it read or wrote and that is unchanged can be written
        at its new path without a new read.
        """
        self._ensure_open("move", src)
        await _in_worker("move", src, self._move, src, dst, parents, replace)

    def _move(self, src: PathArg, dst: PathArg, parents: bool, replace: bool) -> None:
        self._ensure_open("move", src)
        with self.workspace._borrowed_root() as root:
            source_key, source, link = self._check_entry(src, write=True, verb="move")
            target_key, target, _ = self._check_entry(dst, write=True, verb="move to")
            gate = self._gate("move", src)
            with self._explained("move", source_key, source, target):
                moved = _fileops.move(
                    root,
                    source,
                    target,
                    gate,
                    parents=parents,
                    replace=replace,
                    fence=self.fence,
                    link=link,
                )
            view = self.view
            if view is not None and not link:
                # A link's target keeps its key (keys are resolved): only a file or a tree moves.
                after = None if moved.after is None else version_of(moved.after)
                view.moved(
                    source_key.parts,
                    target_key.parts,
                    version_of(moved.before),
                    after,
                    directory=stat.S_ISDIR(moved.before.st_mode),
                )


class Subtree:
    """The tree below a path a search checked (:meth:`FileAccess.search`), in its worker thread.

    ``root`` is the workspace's root descriptor and ``parts`` the path's components as the
    directories spell them; everything below them is covered by the check already made, as long
    as it is opened beneath them without following a link (``_beneath``). The methods answer for
    what the walk meets on the way.
    """

    __slots__ = ("_access", "_key", "_next_poll", "observed", "parts", "root")

    def __init__(self, access: FileAccess, root: int, key: Path, parts: tuple[str, ...]) -> None:
        self._access, self.root, self._key, self.parts = access, root, key, parts
        self.observed = access.observer is not None
        """True iff the access has an observer to tell of each file read (:meth:`read`)."""
        self._next_poll = 0.0

    def check(self) -> None:
        """Raise if the call has ended, or was cancelled (its thread abandoned); call it before
        each file the search opens, so an abandoned search stops there.

        The end is seen at once; a cancellation within :data:`CANCEL_POLL` seconds (asking
        the event loop costs as much as reading a small file, so it is asked that often).
        """
        now = time.monotonic()
        if now >= self._next_poll:
            anyio.from_thread.check_cancelled()
            self._next_poll = now + CANCEL_POLL
        if self._access._closed:
            raise self._access._ended("read", "/".join(self.parts) or ".")

    def read(self, relative: tuple[str, ...]) -> None:
        """Tell the access's observer of a read of ``relative`` (components below ``parts``);
        the subtree's check covers it."""
        observer = self._access.observer
        if observer is not None:
            fold = self._access.workspace._fold
            key = Path(self._key.parts + tuple(fold(name) for name in relative))
            observer(FileAccessed(self._access.call_id, key, False, "read", True))

    def readable_link(self, link: str) -> bool:
        """True iff the symbolic link ``link`` (root-relative) leads to a regular file in the
        workspace that the call may read."""
        return self._access._links_to_readable(self.root, link)

    def read_beside(self, path: str, max_bytes: int) -> bytes | None:
        """The content of file ``path`` (root-relative) outside the subtree, such as an ignore
        file above it, read as :meth:`read_link` reads; None if the call's claims do not cover
        it, or it can't be read."""
        try:
            if not self._access.can_read(path):
                return None
            return self.read_link(path, max_bytes)
        except (OSError, InvalidClaimError):
            return None

    def read_link(self, link: str, max_bytes: int) -> bytes:
        """The content of the file the link ``link`` (root-relative) leads to, checked as any
        read through the access is (raises as :meth:`FileAccess.read_bytes` does)."""
        access = self._access
        key, parts = access._check(link, write=False, verb="read")
        with access._explained("read", key, parts):
            return _fileops.read_regular(self.root, parts, max_bytes)


class _Gate:
    """The context of one mutating system call: holds the access's lock, refuses once closed,
    and, if ``cancellable``, stops the operation there if its call was cancelled.

    Reusable, unlike a generator-based context manager: one operation passes through it for
    each of its mutations. Entered only in worker threads (``anyio.to_thread``), where a
    cancelled call is seen with ``check_cancelled``: a ``mkdir -p`` stops between two system
    calls, each of which is whole. A gate that is not ``cancellable`` guards the mutations that
    finish what is committed already (removing a tree a delete moved aside).
    """

    __slots__ = ("_access", "_cancellable", "_path", "_verb")

    def __init__(self, access: FileAccess, verb: str, path: object, cancellable: bool) -> None:
        self._access, self._verb, self._path = access, verb, path
        self._cancellable = cancellable

    def __enter__(self) -> None:
        if self._cancellable:
            anyio.from_thread.check_cancelled()
        access = self._access
        access._lock.acquire()
        if access._closed:
            access._lock.release()
            raise access._ended(self._verb, self._path)

    def __exit__(self, *exc_info: object) -> None:
        self._access._lock.release()


async def _in_worker(
    verb: str,
    path: object,
    function: Callable[..., T],
    *args: Any,
    abandon_on_cancel: bool = False,
) -> T:
    """``function(*args)`` in a worker thread (the one hop an operation makes), or an error
    saying why not when no event loop runs here: the coroutine of an operation was run by hand
    in a thread (a ``thread=True`` tool's), where anyio finds no loop to hop from."""
    try:
        return await anyio.to_thread.run_sync(function, *args, abandon_on_cancel=abandon_on_cancel)
    except RuntimeError:
        if running_here():
            raise
        raise WrongLoopError(
            f"can't {verb} {_spelling(path)!r}: ctx.fs's methods are async and run on the "
            f"kernel's event loop, but this one ran in a thread where no event loop runs; from "
            f"a worker thread (a thread=True tool), call them through the loop, as in "
            f"anyio.from_thread.run(ctx.fs.read_text, path)"
        ) from None


def _spelling(path: object) -> str:
    try:
        text = os.fspath(path)  # type: ignore[call-overload]
    except TypeError:
        return repr(path)
    return text if isinstance(text, str) else repr(text)


def _mode_test(
    predicate: Callable[[int], bool],
) -> Callable[[int, tuple[str, ...]], bool]:
    """An ``io`` answering ``predicate(mode)``, or False where nothing is (or can be)."""

    def io(root: int, parts: tuple[str, ...]) -> bool:
        try:
            mode = _fileops.status(root, parts).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return False
        return predicate(mode)

    return io


def _stronger(a: Mode | None, b: Mode) -> Mode:
    return Mode.EXCLUSIVE if Mode.EXCLUSIVE in (a, b) else Mode.SHARED

"""The workspace: one canonical lease key for every spelling of a path.

Leases are only as good as their keys. If ``src/a.py``, ``./src//a.py``, ``/abs/root/src/a.py``,
``link-to-src/a.py`` and (on a case-insensitive disk) ``SRC/A.py`` gave different keys, two calls
could hold "non-conflicting" exclusive leases on the same file, and the lease table would be
guarding nothing. So :meth:`Workspace.key` resolves a spelling the way the kernel would when the
file is opened:

- components are walked one at a time from the root (or from ``/`` for an absolute path); each
  existing component is ``lstat``-ed and, if it is a symbolic link, replaced by its target, so
  ``..`` after a link climbs out of the link's *target* (physical semantics, like ``cd -P``);
- once a component does not exist, the rest is appended lexically, so a file about to be created
  has the key it will have once it exists;
- the result must lie inside the root, or :class:`PathEscapeError` is raised: a lease on a key
  cannot protect a file outside the tree the keys describe;
- when the file system folds case (or Unicode normalization form), key components are folded the
  same way, so every spelling the file system accepts for one file gives one key.

Whether the file system folds is probed once, at construction, the way git does at ``git init``:
create a probe file and look it up under another spelling. Both modes can be forced, so folding
behaviour is testable on a case-sensitive Linux file system.

Rejected: keying by ``(st_dev, st_ino)``. It is exact for existing files, but a file that does not
exist yet has no inode, directories would lose their subtree relation, and hard links would still
need a rule. Paths keep the hierarchy that subtree leases need.

Keys are computed on the event loop for every path of every call, twice (at admission and after
the grant), so the common case is made cheap: a relative spelling that is already canonical
(``src/a.py``: no ``.``, ``..``, empty component) on a file system that does not fold is checked
with one ``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`` beneath the root's descriptor (one
relative ``lstat`` for a single component, which is cheaper). If no link is met, the key is the
spelling itself; if one is, the component walk above decides. Without ``openat2`` the fast path
``lstat``-s each prefix relative to the root descriptor instead.

The workspace holds that descriptor open (``O_CLOEXEC``). :meth:`Workspace.close` (or leaving a
``with Workspace(...)`` block) closes it; a workspace dropped unclosed is closed by a finalizer.
:class:`FileAccess` does all its I/O relative to it, so a symlink swapped between a key's check
and the I/O it guards is caught there (``PathChangedError``), not here.

Known limits: ``str.casefold`` folds a little more than file systems do (``ß`` and ``ss`` give one
key), which errs towards more conflicts, never fewer; hard links to one file give different keys.
POSIX paths only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pathlib
import secrets
import stat
import sys
import threading
import unicodedata
import weakref
from collections.abc import Iterator, Sequence
from typing import Final

from .. import _beneath
from .._errors import InvalidClaimError, PathEscapeError
from ..locks import Path
from ..locks._resources import _valid_path

__all__ = ["Workspace"]

MAX_PATH_BYTES: Final = 4096
"""The longest path (in bytes, as the file system sees it) a key may be made from (``PATH_MAX``)."""
MAX_COMPONENT_BYTES: Final = 255
"""The longest single component (``NAME_MAX``)."""
MAX_SYMLINKS: Final = 40
"""How many symbolic links one resolution may follow before it is taken as a loop (Linux's
``MAXSYMLINKS``)."""

_ROOT_FLAGS: Final = (getattr(os, "O_PATH", 0) or os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC
# What the fast key check may answer for a spelling that is its own key (see the module's essay).
_LEXICAL_ERRNOS: Final = frozenset({0, errno.ENOENT, errno.ENOTDIR})

_NFC: Final = "NFC"
_NO_FORM: Final = "none"
_PROBE_PREFIX: Final = ".toolkernel-probe-"


class Workspace:
    """A directory tree whose files are named by canonical lease keys.

    ::

        ws = Workspace(".")
        ws.key("src//a.py") == ws.key("./src/../src/a.py") == path("src/a.py")
        ws.real_path(ws.key("src/a.py"))   # absolute pathlib.Path on disk
        ws.display(ws.key("src/a.py"))     # 'src/a.py', for messages

    ``root`` must be an existing directory; it is resolved (symlinks and all) to an absolute path.
    ``fold_case`` and ``unicode_form`` say whether the file system treats ``A`` and ``a``, or the
    NFC and NFD spellings of ``é``, as one name. ``None`` (the default) probes the file system once,
    by creating and removing a hidden file in ``root``; ``True``/``False`` and ``"NFC"``/``"none"``
    force the mode. When case is folded, key components are ``str.casefold``-ed; when Unicode is
    folded, they are normalized to NFC.

    The workspace keeps a descriptor of ``root`` open for :class:`FileAccess`; close it with
    :meth:`close` or a ``with`` block (a finalizer closes it otherwise). Keys still work once it
    is closed (more slowly); file access does not.
    """

    __slots__ = (
        "__weakref__",
        "_closed",
        "_fast_fd",
        "_fd",
        "_finalizer",
        "_fold_case",
        "_links_met",
        "_lock",
        "_root",
        "_root_parts",
        "_unicode_form",
        "_users",
    )

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        fold_case: bool | None = None,
        unicode_form: str | None = None,
    ) -> None:
        root_text = os.fspath(root)
        if not isinstance(root_text, str):
            raise TypeError(
                f"the workspace root must be a str path, not {type(root_text).__name__}"
            )
        resolved = pathlib.Path(root_text).resolve(strict=True)
        if not resolved.is_dir():
            raise NotADirectoryError(
                errno.ENOTDIR, "the workspace root is not a directory", str(resolved)
            )
        if fold_case is not None and not isinstance(fold_case, bool):
            raise TypeError(f"fold_case must be True, False or None, not {fold_case!r}")
        if unicode_form is not None and unicode_form not in (_NFC, _NO_FORM):
            raise ValueError(
                f"unicode_form must be 'NFC', 'none' or None (probe), not {unicode_form!r}"
            )
        self._root = resolved
        self._root_parts = resolved.parts[1:]
        if fold_case is None:
            fold_case = _probe_fold_case(resolved)
        if unicode_form is None:
            unicode_form = _NFC if _probe_unicode_folding(resolved) else _NO_FORM
        self._fold_case = fold_case
        self._unicode_form: str | None = _NFC if unicode_form == _NFC else None
        self._lock = threading.Lock()
        self._users = 0
        self._closed = False
        self._fd = os.open(resolved, _ROOT_FLAGS)
        # What the fast key path reads: -1 when it is off (closed, or a folding file system).
        self._fast_fd = -1 if self._folding else self._fd
        self._finalizer = weakref.finalize(self, os.close, self._fd)
        self._links_met: tuple[int, list[Path]] | None = None  # ``note_links``: thread, list

    # -- the root descriptor ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the root directory descriptor. Idempotent; synchronous.

        File access through the workspace fails afterwards (``ValueError``); operations already
        running keep the descriptor until they finish, and the last one closes it. :meth:`key`
        keeps working, without its fast path. Don't close a workspace while another thread is
        computing a key with it.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._fast_fd = -1
            if self._users:
                return  # the last borrower closes it
        self._finalizer()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _borrowed_root(self) -> Iterator[int]:
        """The root descriptor, kept open until the block ends even if :meth:`close` is called."""
        with self._lock:
            if self._closed:
                raise ValueError(
                    f"the workspace {str(self._root)!r} is closed; its files can't be reached"
                )
            self._users += 1
        try:
            yield self._fd
        finally:
            with self._lock:
                self._users -= 1
                last = self._closed and not self._users
            if last:
                self._finalizer()

    @property
    def root(self) -> pathlib.Path:
        """The resolved, absolute root directory."""
        return self._root

    @property
    def fold_case(self) -> bool:
        """True iff key components are case-folded (``str.casefold``)."""
        return self._fold_case

    @property
    def unicode_form(self) -> str | None:
        """``"NFC"`` if key components are Unicode-normalized to NFC, else ``None``."""
        return self._unicode_form

    def __repr__(self) -> str:
        return (
            f"Workspace({str(self._root)!r}, fold_case={self._fold_case!r}, "
            f"unicode_form={self._unicode_form!r})"
        )

    # -- keys ------------------------------------------------------------------------------------

    def key(self, p: str | os.PathLike[str]) -> Path:
        """Return the canonical lease key of ``p``, one key for every spelling of one file.

        ``p`` is relative to the root or absolute inside it; ``.`` is the root itself. ``./``,
        ``//``, trailing ``/``, ``..`` and symbolic links are resolved against the file system;
        components that do not exist yet are appended lexically. Synchronous; it may ``lstat`` and
        ``readlink``.

        Raises :class:`PathEscapeError` if ``p`` resolves outside the root (lexically or through a
        link), and :class:`InvalidClaimError` if ``p`` is not a path at all: empty, not a string
        or ``os.PathLike``, containing a NUL byte, too long, or looping through links.
        """
        fd = self._fast_fd
        if fd >= 0 and type(p) is str:
            parts = _fast_parts(fd, p)
            if parts is not None:
                return _valid_path(parts)  # canonical already: skip Path's own checks
        return self._resolve_key(p)[0]

    def note_links(self, into: list[Path] | None) -> list[Path] | None:
        """While ``into`` is a list, append to it the key of each symbolic link in the
        workspace that a spelling keyed in this thread passes through (the link's own entry,
        not followed); None stops. Returns the list noted into before.

        A key found through a link holds only while the link points where it did: the kernel
        claims each link a call's paths pass through, shared, so that a call changing the
        link (``rm L``, ``ln -sfn e L``) comes first in emission order, and a call that ran
        ahead of such a change is run again. A spelling with no link in it (the fast path)
        notes nothing and costs nothing more."""
        previous = None if self._links_met is None else self._links_met[1]
        self._links_met = None if into is None else (threading.get_ident(), into)
        return previous

    def locate(self, p: str | os.PathLike[str]) -> tuple[Path, pathlib.Path]:
        """Return ``(key(p), path on disk)`` from one resolution.

        The path on disk is where ``p`` resolves to, symlinks followed; I/O should use it rather
        than the spelling it was given, so the file touched is the one the key names.
        """
        key, parts = self._locate_parts(p)
        return key, self._root.joinpath(*parts)

    def _locate_parts(self, p: str | os.PathLike[str]) -> tuple[Path, tuple[str, ...]]:
        """Return ``(key(p), components on disk)``: where ``p`` resolves, relative to the root,
        spelled as the directories hold the names (they differ from the key's when folding)."""
        fd = self._fast_fd
        if fd >= 0 and type(p) is str:
            parts = _fast_parts(fd, p)
            if parts is not None:
                return _valid_path(parts), parts
        return self._resolve_key(p)

    def _resolve_key(self, p: str | os.PathLike[str]) -> tuple[Path, tuple[str, ...]]:
        """The component walk: every spelling, links followed one at a time (the essay)."""
        text = _path_text(p)
        resolved = self._resolve(text)
        inside = len(resolved) >= len(self._root_parts) and self._same_components(
            resolved[: len(self._root_parts)], self._root_parts
        )
        if not inside:
            raise PathEscapeError(
                f"path {text!r} resolves to {'/' + '/'.join(resolved)!r}, outside the workspace "
                f"root {str(self._root)!r}"
            )
        relative = tuple(resolved[len(self._root_parts) :])
        if not self._folding:
            return Path(relative), relative
        return Path(tuple(self._fold(component) for component in relative)), relative

    def real_path(self, key: Path) -> pathlib.Path:
        """Return the absolute path on disk that ``key`` names.

        When the key is folded (case or Unicode), each existing component is looked up under the
        spelling the directory actually holds, so the real file is found even on a file system
        that does not fold.
        """
        _check_key(key)
        if not self._folding:
            return self._root.joinpath(*key.parts)
        directory = str(self._root)
        found_so_far = True
        for component in key.parts:
            name = component
            if found_so_far:
                entry = self._find_entry(directory, component)
                if entry is None:
                    found_so_far = False
                else:
                    name = entry[0]
            directory = os.path.join(directory, name)
        return pathlib.Path(directory)

    def _entry_key(self, parts: Sequence[str]) -> Path:
        """The key of the entry at ``parts`` (components from the root, as its directories
        hold them), none of them resolved as a link: what a commit of a sandbox's change set
        changes there, whatever the entry is now."""
        if not self._folding:
            return Path(tuple(parts))
        return Path(tuple(self._fold(part) for part in parts))

    def display(self, key: Path) -> str:
        """Return the workspace-relative POSIX spelling of ``key`` for messages (root: ``.``)."""
        _check_key(key)
        return str(key)

    # -- resolution ------------------------------------------------------------------------------

    @property
    def _folding(self) -> bool:
        return self._fold_case or self._unicode_form is not None

    def _fold(self, component: str) -> str:
        if self._unicode_form is not None:
            component = unicodedata.normalize(_NFC, component)
        if self._fold_case:
            component = component.casefold()
            if self._unicode_form is not None:
                # Case folding can undo normalization ("İ" folds to "i" + combining dot).
                component = unicodedata.normalize(_NFC, component)
        return component

    def _same_components(self, a: tuple[str, ...] | list[str], b: tuple[str, ...]) -> bool:
        if not self._folding:
            return tuple(a) == b
        return [self._fold(x) for x in a] == [self._fold(y) for y in b]

    def _find_entry(self, directory: str, name: str) -> tuple[str, os.stat_result] | None:
        """The entry of ``directory`` that ``name`` names, with its ``lstat``; None if none does."""
        try:
            return name, os.lstat(os.path.join(directory, name))
        except OSError:
            pass
        if not self._folding:
            return None
        # The file system does not fold (or we were told to fold anyway): find the entry whose
        # folded spelling matches. Sorted, so the choice among clashing names is deterministic.
        try:
            entries = sorted(os.listdir(directory))
        except OSError:
            return None
        wanted = self._fold(name)
        for entry in entries:
            if self._fold(entry) == wanted:
                try:
                    return entry, os.lstat(os.path.join(directory, entry))
                except OSError:
                    return None
        return None

    def _resolve(self, text: str) -> list[str]:
        """Resolve ``text`` to absolute components, following links while the path exists."""
        current: list[str] = [] if text.startswith("/") else list(self._root_parts)
        # ``current[:known]`` exists on disk with no links in it; beyond it we append lexically.
        known = len(current)
        pending = text.split("/")
        pending.reverse()
        links = 0
        while pending:
            name = pending.pop()
            if name in ("", "."):
                continue
            if name == "..":
                if current:
                    current.pop()
                known = min(known, len(current))
                continue
            if known == len(current):
                directory = "/" + "/".join(current)
                entry = self._find_entry(directory, name)
                if entry is not None:
                    spelled, status = entry
                    if stat.S_ISLNK(status.st_mode):
                        if self._links_met is not None:
                            self._note_link([*current, spelled])
                        links += 1
                        if links > MAX_SYMLINKS:
                            raise InvalidClaimError(
                                f"path {text!r} passes through more than {MAX_SYMLINKS} symbolic "
                                "links; is there a loop?"
                            )
                        try:
                            target = os.readlink(os.path.join(directory, spelled))
                        except OSError:
                            # No longer a link (removed, or replaced since the lstat by another
                            # process): look the name up again; ``links`` bounds the retries.
                            pending.append(name)
                            continue
                        if target.startswith("/"):
                            current = []
                            known = 0
                        segments = target.split("/")
                        segments.reverse()
                        pending.extend(segments)
                        continue
                    name = spelled
                    known += 1
            current.append(name)
        return current

    def _note_link(self, entry: list[str]) -> None:
        """Note the link at ``entry`` (absolute components, its directories resolved) for
        ``note_links``, if it is in the workspace and this is the thread noting."""
        noting = self._links_met
        root = self._root_parts
        if noting is None or noting[0] != threading.get_ident() or len(entry) <= len(root):
            return
        if self._same_components(entry[: len(root)], root):
            noting[1].append(self._entry_key(entry[len(root) :]))


def _fast_parts(root_fd: int, text: str) -> tuple[str, ...] | None:
    """The key of a canonical relative spelling that passes through no link, or None.

    None means "ask :meth:`Workspace._resolve_key`": the spelling is not canonical, is long
    enough to need the length checks, or a link (or something unusual) was met.
    """
    components = text.split("/")
    if "" in components or "." in components or ".." in components or "\x00" in text:
        return None
    if text.isascii():  # its bytes are its characters: no encoding to pay for
        if len(text) > MAX_COMPONENT_BYTES:
            return None
        encoded = None
    else:
        try:
            encoded = os.fsencode(text)
        except UnicodeEncodeError:
            return None
        if len(encoded) > MAX_COMPONENT_BYTES:
            return None  # so no component can be too long, nor the whole
    if len(components) == 1:
        # One lstat is cheaper than openat2 through ctypes; from two components on, it isn't.
        try:
            status = os.lstat(text, dir_fd=root_fd)
        except OSError as exc:
            answer = exc.errno or -1
        else:
            answer = errno.ELOOP if stat.S_ISLNK(status.st_mode) else 0
    else:
        answer = _beneath.probe_no_links(root_fd, encoded or text.encode())
        if answer < 0:
            answer = _probe_prefixes(root_fd, components)
    return tuple(components) if answer in _LEXICAL_ERRNOS else None


def _probe_prefixes(root_fd: int, components: list[str]) -> int:
    """:func:`_beneath.probe_no_links` without ``openat2``: ``lstat`` each prefix in turn."""
    for depth in range(1, len(components) + 1):
        try:
            status = os.lstat("/".join(components[:depth]), dir_fd=root_fd)
        except OSError as exc:
            return exc.errno or -1
        if stat.S_ISLNK(status.st_mode):
            return errno.ELOOP
    return 0


def _path_text(p: object) -> str:
    """Check that ``p`` is a usable path spelling and return it as a str."""
    if not isinstance(p, str | os.PathLike):
        raise InvalidClaimError(f"a path must be a str or os.PathLike, not {type(p).__name__}")
    text = os.fspath(p)
    if not isinstance(text, str):
        raise InvalidClaimError(f"a path must be a str, not {type(text).__name__}")
    if not text:
        raise InvalidClaimError("a path must not be empty; use '.' for the workspace root")
    if "\x00" in text:
        raise InvalidClaimError(f"path {text!r} contains a NUL byte")
    try:
        encoded = os.fsencode(text)
    except UnicodeEncodeError:
        raise InvalidClaimError(f"path {text!r} can't be encoded for the file system") from None
    if len(encoded) > MAX_PATH_BYTES:
        raise InvalidClaimError(
            f"path {_preview(text)!r} is {len(encoded)} bytes long; the limit is {MAX_PATH_BYTES}"
        )
    for component in encoded.split(b"/"):
        if len(component) > MAX_COMPONENT_BYTES:
            raise InvalidClaimError(
                f"path {_preview(text)!r} has a component of {len(component)} bytes; the limit "
                f"is {MAX_COMPONENT_BYTES}"
            )
    return text


def _preview(text: str) -> str:
    return text if len(text) <= 80 else text[:60] + "..." + text[-12:]


def _check_key(key: object) -> None:
    if not isinstance(key, Path):
        raise InvalidClaimError(f"expected a path key made by Workspace.key(), not {key!r}")
    for component in key.parts:
        if component in ("", ".", "..") or "/" in component or "\x00" in component:
            raise InvalidClaimError(f"{key!r} is not a canonical key: bad component {component!r}")


# -- probing the file system ---------------------------------------------------------------------


def _probe_fold_case(root: pathlib.Path) -> bool:
    token = secrets.token_hex(6)
    answer = _probe(root, f"{_PROBE_PREFIX}{token}-Aa", f"{_PROBE_PREFIX}{token}-aA")
    if answer is None:
        # Can't write the root (read-only checkout): guess from the platform's usual default.
        return sys.platform in ("darwin", "win32")
    return answer


def _probe_unicode_folding(root: pathlib.Path) -> bool:
    token = secrets.token_hex(6)
    nfc = f"{_PROBE_PREFIX}{token}-\u00e9"
    answer = _probe(root, nfc, unicodedata.normalize("NFD", nfc))
    if answer is None:
        return sys.platform == "darwin"
    return answer


def _probe(root: pathlib.Path, name: str, other: str) -> bool | None:
    """Create ``name`` in ``root``; True iff ``other`` names the same file, None if unknowable."""
    created = root / name
    try:
        fd = os.open(created, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except (OSError, UnicodeError):
        return None
    try:
        os.close(fd)
        try:
            first, second = os.lstat(created), os.lstat(root / other)
        except FileNotFoundError:
            return False
        except OSError:
            return None
        return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(created)

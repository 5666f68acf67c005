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

Known limits: ``str.casefold`` folds a little more than file systems do (``ß`` and ``ss`` give one
key), which errs towards more conflicts, never fewer; hard links to one file give different keys;
a symlink swapped between :meth:`Workspace.key` and the I/O it guards is not noticed here (the
kernel re-checks keys after a grant). POSIX paths only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pathlib
import secrets
import stat
import sys
import unicodedata
from typing import Final

from .._errors import InvalidClaimError, PathEscapeError
from ..locks import Path

__all__ = ["Workspace"]

MAX_PATH_BYTES: Final = 4096
"""The longest path (in bytes, as the file system sees it) a key may be made from (``PATH_MAX``)."""
MAX_COMPONENT_BYTES: Final = 255
"""The longest single component (``NAME_MAX``)."""
MAX_SYMLINKS: Final = 40
"""How many symbolic links one resolution may follow before it is taken as a loop (Linux's
``MAXSYMLINKS``)."""

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
    """

    __slots__ = ("_fold_case", "_root", "_root_parts", "_unicode_form")

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
        return self.locate(p)[0]

    def locate(self, p: str | os.PathLike[str]) -> tuple[Path, pathlib.Path]:
        """Return ``(key(p), path on disk)`` from one resolution.

        The path on disk is where ``p`` resolves to, symlinks followed; I/O should use it rather
        than the spelling it was given, so the file touched is the one the key names.
        """
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
        relative = resolved[len(self._root_parts) :]
        key = Path(tuple(self._fold(component) for component in relative))
        return key, self._root.joinpath(*relative)

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
                    name, status = entry
                    if stat.S_ISLNK(status.st_mode):
                        links += 1
                        if links > MAX_SYMLINKS:
                            raise InvalidClaimError(
                                f"path {text!r} passes through more than {MAX_SYMLINKS} symbolic "
                                "links; is there a loop?"
                            )
                        target = os.readlink(os.path.join(directory, name))
                        if target.startswith("/"):
                            current = []
                            known = 0
                        segments = target.split("/")
                        segments.reverse()
                        pending.extend(segments)
                        continue
                    known += 1
            current.append(name)
        return current


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

"""Checking and applying one visible change (an :data:`Op`) beneath a workspace root.

Whoever fences a write uses these: the lease service applies the change itself, in its event
loop, right after checking the grant; a backend that can only check-then-act (etcd) applies it
in the client. ``check_covered`` says whether a grant's claims cover what the change alters;
``apply_op`` makes the change, relative to directory descriptors opened without following links
(so a link swapped in never leads outside the root).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Sequence
from typing import Final

import attrs

from .._beneath import LINK_ERRNOS, READ_NONBLOCK_FLAGS, changed, open_directory, rename_no_replace
from ..locks import EVERYTHING, Claim, Mode, Path
from ._backend import Chmod, Fence, MakeDirectory, Op, RemoveDirectory, Rename, SetTimes, Unlink

__all__ = [
    "is_scratch",
    "changed_keys",
    "check_covered",
    "apply_op",
    "make_change",
    "stage",
    "CoveringFence",
]

# The names the write paths give what is not visible yet: ``tools._fileops``' temporary files and
# trees moved aside for deletion, ``sandbox._commit``'s temporaries. (A test checks they agree.)
SCRATCH_SUFFIX: Final = ".tktmp"
_MOVED_ASIDE: Final = re.compile(r"\..*\.toolkernel-deleted-[0-9a-f]{12}", re.DOTALL)


def is_scratch(parts: Sequence[str]) -> bool:
    """True iff ``parts`` names a scratch entry (hidden, unique): changing it needs no lease."""
    if not parts:
        return False
    name = parts[-1]
    return name.startswith(".") and (
        name.endswith(SCRATCH_SUFFIX) or _MOVED_ASIDE.fullmatch(name) is not None
    )


def changed_keys(op: Op) -> tuple[tuple[str, ...], ...]:
    """The workspace keys ``op`` changes that a lease must cover exclusively."""
    if isinstance(op, Rename):
        keys = (op.target,) if op.source_dir is not None else (op.source, op.target)
    else:
        keys = (op.target,)
    return tuple(key for key in keys if not is_scratch(key))


def _covers(claim: Claim, key: tuple[str, ...]) -> bool:
    if claim.mode is not Mode.EXCLUSIVE:
        return False
    resource = claim.resource
    if resource is EVERYTHING:
        return True
    return isinstance(resource, Path) and key[: len(resource.parts)] == resource.parts


def _on_the_way(claim: Claim, key: tuple[str, ...]) -> bool:
    """True iff ``key`` is a directory above what ``claim`` holds exclusively."""
    resource = claim.resource
    return (
        claim.mode is Mode.EXCLUSIVE
        and isinstance(resource, Path)
        and len(resource.parts) > len(key)
        and resource.parts[: len(key)] == key
    )


def check_covered(claims: Sequence[Claim], op: Op) -> None:
    """Raise ``PermissionError`` unless ``claims`` cover every key ``op`` changes exclusively.

    Making a missing directory on the way to a held path is covered too (a write with
    ``parents``, a command's ``mkdir -p``): anyone who could see it appear holds a lease
    conflicting with this one, but for another writer below it, who would make it too."""
    for key in changed_keys(op):
        if isinstance(op, MakeDirectory) and any(_on_the_way(claim, key) for claim in claims):
            continue
        if not any(_covers(claim, key) for claim in claims):
            where = "/".join(key) or "."
            raise PermissionError(
                errno.EACCES, f"can't change {where!r}: the grant does not hold it exclusively"
            )


def apply_op(root: int | str | os.PathLike[str], claims: Sequence[Claim] | None, op: Op) -> None:
    """Check that ``claims`` cover what ``op`` changes (unless None: checked already), then make
    the change beneath ``root`` (a directory descriptor or path), following no link.

    Synchronous: the caller has made sure the grant is held, and keeps it held until this
    returns (the service by doing it in one step of its loop).
    """
    if claims is not None:
        check_covered(claims, op)
    if isinstance(root, int):
        make_change(root, op)
        return
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        make_change(root_fd, op)
    finally:
        os.close(root_fd)


def make_change(root_fd: int, op: Op) -> None:
    """Make ``op``'s change beneath ``root_fd``, following no link. Synchronous."""
    target = op.target
    if not target:
        raise PermissionError(errno.EPERM, "can't change the workspace root itself", ".")
    parent = open_directory(root_fd, target[:-1])
    try:
        name = target[-1]
        if isinstance(op, Rename):
            _rename(root_fd, parent, op)
        elif isinstance(op, Unlink):
            if stat.S_ISDIR(os.lstat(name, dir_fd=parent).st_mode):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), "/".join(target))
            os.unlink(name, dir_fd=parent)
        elif isinstance(op, MakeDirectory):
            os.mkdir(name, op.mode, dir_fd=parent)
        elif isinstance(op, RemoveDirectory):
            os.rmdir(name, dir_fd=parent)
        elif isinstance(op, Chmod):
            # Through a descriptor opened without following a link: chmod has no "nofollow"
            # on Linux, and a link's own mode means nothing there.
            try:
                fd = os.open(name, READ_NONBLOCK_FLAGS, dir_fd=parent)
            except OSError as exc:
                if exc.errno in LINK_ERRNOS:
                    raise changed(target, len(target) - 1) from None
                raise
            try:
                os.fchmod(fd, op.mode)
            finally:
                os.close(fd)
        elif isinstance(op, SetTimes):
            os.utime(name, ns=op.ns, dir_fd=parent, follow_symlinks=False)
    finally:
        os.close(parent)


def _rename(root_fd: int, target_parent: int, op: Rename) -> None:
    if op.source_dir is not None:
        source_parent = open_directory(op.source_dir, op.source[:-1])
    elif op.source:
        source_parent = open_directory(root_fd, op.source[:-1])
    else:
        raise PermissionError(errno.EPERM, "can't move the workspace root", ".")
    try:
        if op.replace:
            os.replace(
                op.source[-1], op.target[-1], src_dir_fd=source_parent, dst_dir_fd=target_parent
            )
        else:
            rename_no_replace(source_parent, op.source[-1], target_parent, op.target[-1])
    finally:
        os.close(source_parent)


def stage(root_fd: int, op: Rename) -> Rename:
    """Move a rename's source from outside the workspace (``source_dir``) to a scratch name
    beside its target, and return the rename from there: what a service that can't see the
    caller's descriptors applies. ``OSError(EXDEV)`` if they are on different file systems."""
    assert op.source_dir is not None
    scratch = (*op.target[:-1], f".{op.target[-1][:40]}.{os.urandom(6).hex()}{SCRATCH_SUFFIX}")
    staged = Rename(op.source, scratch, replace=False, source_dir=op.source_dir)
    make_change(root_fd, staged)
    return Rename(scratch, op.target, op.replace)


@attrs.frozen
class CoveringFence:
    """The fence of a call holding leases from several grants (a nested call: its own grant,
    then its ancestors'): each change goes through the first grant whose claims cover it."""

    fences: tuple[tuple[tuple[Claim, ...], Fence], ...]
    """Each grant's claims and fence, the nearest first."""

    def publish(self, op: Op) -> None:
        refused: PermissionError | None = None
        for claims, fence in self.fences:
            try:
                check_covered(claims, op)
            except PermissionError as exc:
                refused = refused or exc
                continue
            fence.publish(op)
            return
        assert refused is not None
        raise refused

"""The workspace's files, as the project's readers read them.

:class:`ProjectFiles` is the part of the project every reader shares: its root and the
environment the command runs with, where a spelled path lands in the workspace, each file read
once per analysis, and the record of every file read or looked for (``consulted``), which
decides whether the command's own writes make what was read stale.

Every file is read at most :data:`FILE_LIMIT` bytes; a larger one counts as saying anything.
"""

from __future__ import annotations

import os
import pathlib
import tomllib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs

if TYPE_CHECKING:
    from ._walk import Walk

__all__ = ["FILE_LIMIT", "ProjectFiles", "TooLarge", "parse_toml"]

FILE_LIMIT: Final = 1 << 20
"""Bytes of a configuration file read."""


class TooLarge(Exception):
    pass


_TOO_LARGE: Final = "\0too large"  # a read's memo for a file past FILE_LIMIT


@attrs.define(eq=False)
class ProjectFiles:
    """The files of the workspace in ``root``, and the environment its commands run with."""

    root: pathlib.Path
    environ: Mapping[str, str]
    consulted: set[pathlib.Path] = attrs.field(factory=set)
    """Every file read (or looked for) to decide what the command does."""
    _texts: dict[pathlib.Path, str | None] = attrs.field(factory=dict, init=False)

    def place(self, spelled: str) -> pathlib.Path | None:
        """The directory or file ``spelled`` (as the walk spells paths) names, if it is in the
        workspace; None if not (or not known)."""
        if spelled.startswith("~"):
            spelled = os.path.expanduser(spelled)
            if spelled.startswith("~"):
                return None
        where = pathlib.Path(os.path.normpath(self.root / spelled))
        if where != self.root and self.root not in where.parents:
            return None
        return where

    def read(self, file: pathlib.Path) -> str | None:
        """The text of ``file``, or None if there is none; raises :class:`TooLarge` past
        :data:`FILE_LIMIT` bytes."""
        self.consulted.add(file)
        if file in self._texts:  # one analysis reads a file once
            text = self._texts[file]
        else:
            try:
                with open(file, "rb") as handle:
                    data = handle.read(FILE_LIMIT + 1)
            except OSError:
                data = None
            text = None if data is None else data.decode("utf-8", errors="replace")
            if data is not None and len(data) > FILE_LIMIT:
                text = _TOO_LARGE
            self._texts[file] = text
        if text is _TOO_LARGE:
            raise TooLarge(str(file))
        return text

    def text(self, walk: Walk, file: pathlib.Path) -> str | None:
        try:
            return self.read(file)
        except TooLarge:
            raise walk.fail(f"{self.shown(file)} is too large to read") from None

    def shown(self, file: pathlib.Path) -> str:
        try:
            return file.relative_to(self.root).as_posix() or "."
        except ValueError:
            return str(file)

    def spelled(self, file: pathlib.Path) -> str:
        """``file`` spelled as the walk spells paths (relative to the root)."""
        return self.shown(file)

    def nearest(self, cwd: str, name: str) -> pathlib.Path | None:
        """``name`` in ``cwd`` or the nearest directory above it, within the workspace."""
        where = self.place(cwd)
        while where is not None:
            self.consulted.add(where / name)
            if (where / name).is_file():
                return where / name
            if where == self.root:
                return None
            where = where.parent
        return None


def parse_toml(text: str) -> dict[str, Any]:
    """The table ``text`` holds; empty if it is not TOML."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}

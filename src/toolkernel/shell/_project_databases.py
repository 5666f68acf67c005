"""The SQLite databases a project's configuration names, which its programs open.

- **mix**: the tasks that start the application (``_project_mix``) open the databases
  ``config/config.exs``, ``dev.exs`` and ``test.exs`` name (a database named in a way not read
  here is a barrier);
- **Rails**: ``rspec``, ``rails``, ``rake`` open the databases ``config/database.yml`` names
  (``<%= %>`` in it: a barrier).

Each database is written with the ``-wal``, ``-shm`` and ``-journal`` SQLite keeps beside it.
"""

from __future__ import annotations

import os
import pathlib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from ._access import Cwds
from ._programs import apply_rule
from ._project_files import ProjectFiles
from ._rules import Rule
from ._words import Word

if TYPE_CHECKING:
    from ._walk import Walk

__all__ = ["SQLITE_SIDES", "database", "mix_databases", "rails"]

SQLITE_SIDES: Final = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database it opens."""


def database(walk: Walk, spelled: str, rule: str) -> None:
    """A SQLite database a program opens, with the files SQLite keeps beside it."""
    for side in ("", *SQLITE_SIDES):
        walk.touch("write", spelled + side, frozenset({"."}), rule, optional=True)


# -- mix: Ecto's configuration -------------------------------------------------------------------

_DATABASE: Final = re.compile(
    r"\bdatabase\s*:\s*(?P<value>Path\.(?:expand|join)\((?:[^()\n]|\([^()\n]*\))*\)"
    r'|"(?:[^"\n#]|#\{[^}\n]*\})*"|[^\n,]+)'
)
_EXPANDED: Final = re.compile(
    r'^Path\.(?:expand\(\s*"(?P<path>[^"]+)"\s*,\s*__DIR__\s*\)'
    r'|join\(\s*__DIR__\s*,\s*"(?P<joined>[^"]+)"\s*\))\s*$'
)
_STRING: Final = re.compile(r'^"(?P<path>[^"]+)"\s*$')
# `#{System.get_env("MIX_TEST_PARTITION")}` in a database's name: the variable's value.
_INTERPOLATED_ENV: Final = re.compile(r'#\{System\.get_env\("(?P<name>\w+)"\)\}')


def mix_databases(project: ProjectFiles, walk: Walk, where: pathlib.Path | None) -> list[str]:
    """The databases the configuration of the mix project in ``where`` names."""
    if where is None:
        return []
    found = []
    for name in ("config.exs", "dev.exs", "test.exs"):
        config = where / "config" / name
        text = project.text(walk, config)
        if text is None:
            continue
        for match in _DATABASE.finditer(text):
            value = _INTERPOLATED_ENV.sub(
                lambda m: project.environ.get(m.group("name"), ""), match.group("value").strip()
            )
            expanded = _EXPANDED.match(value)
            plain = _STRING.match(value)
            if "#{" in value:
                expanded = plain = None  # a name computed another way
            if expanded is not None:
                relative = expanded.group("path") or expanded.group("joined")
                file = pathlib.Path(os.path.normpath(config.parent / relative))
            elif plain is not None:
                file = pathlib.Path(os.path.normpath(where / plain.group("path")))
            else:
                raise walk.fail(
                    f"{project.shown(config)} names a database in a way not read here ({value})"
                )
            found.append(project.spelled(file) if project.place(str(file)) else str(file))
    return found


# -- Rails ---------------------------------------------------------------------------------------

_YAML_DATABASE: Final = re.compile(r"^\s*database\s*:\s*(?P<value>\S+)\s*$", re.MULTILINE)


def rails(project: ProjectFiles, walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds) -> bool:
    """``rspec``, ``rails``, ``rake``: the rule, and the databases of database.yml."""
    apply_rule(walk, rule, args, cwds)
    for cwd in sorted(cwds):
        where = project.place(cwd)
        if where is None:
            continue
        config = where / "config" / "database.yml"
        text = project.text(walk, config)
        if text is None or "sqlite3" not in text:
            continue
        if "<%" in text:
            raise walk.fail(f"{project.shown(config)} computes its databases (ERB)")
        for match in _YAML_DATABASE.finditer(text):
            value = match.group("value").strip("\"'")
            file = pathlib.Path(os.path.normpath(where / value))
            if project.place(str(file)) is not None:
                database(walk, project.spelled(file), rule.name)
    return True

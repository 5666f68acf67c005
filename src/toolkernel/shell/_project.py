"""The project's own configuration, where it decides what a command does.

The rules describe programs; a project decides what some of them run. With a workspace to read
(``analyse(command, rules, root=...)``, which the Bash tool uses), the walk reads:

- **its rules file**: ``.toolkernel/shell.toml`` in the workspace root, and the
  ``[tool.toolkernel.shell]`` table of its ``pyproject.toml``, merged over the given rules
  (``.toolkernel/shell.toml`` last), in the rule format of ``_rules``;
- **package.json scripts** (``_project_package_json``): the script ``npm test`` or ``npm run
  NAME`` runs is walked as a command;
- **mix** (``_project_mix``): an alias's steps, the project's compilers, each environment's
  ``_build``, and the places a project in the default layout reads;
- **mise tasks** (``_project_mise``): the ``run`` scripts of ``mise run TASK``;
- **SQLite databases** (``_project_databases``): the ones mix's configuration or Rails'
  ``database.yml`` names, opened with the files SQLite keeps beside them;
- **pyproject build backends** (``_project_python_build``): a backend that runs none of the
  project's code has known effects, any other is a barrier;
- **workspace programs** (``_project_programs``): a program of the workspace standing in for
  the one a rule describes (``.venv/bin/pytest``, ``python -m NAME`` finding ``NAME.py``) is a
  barrier unless it is what installs it;
- **the repository** (``_project_git``): a configuration naming programs git runs, or a hook
  where git writes, is a barrier; a ``.git`` file is followed;
- **tools' configuration and the environment** (``_project_tools``): what moves a tool's writes
  into the workspace is a barrier.

What was read must still be what the command's later steps see: a command that writes a file
the analysis read to decide what its own programs do (``echo ... > package.json && npm
test``) is a barrier.

Files are read by :class:`~._project_files.ProjectFiles`, each at most
:data:`~._project_files.FILE_LIMIT` bytes. Reading is textual and errs towards more claims:
what is not understood is a barrier.
"""

from __future__ import annotations

import os
import pathlib
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from ._access import Cwds
from ._analysis import Analysis, _analyse, walk_command
from ._programs import apply
from ._project_databases import rails
from ._project_files import ProjectFiles, parse_toml
from ._project_git import git_barrier, with_repository
from ._project_mise import mise
from ._project_mix import mix, places_read
from ._project_package_json import SCRIPT_RUNNERS, package_script
from ._project_programs import check_workspace_program, python_module
from ._project_python_build import python_build
from ._project_tools import tool_barrier
from ._rules import Rule, ShellRules
from ._walk import Walk
from ._words import Word

__all__ = ["Project", "analyse", "analyse_in_project", "project_rules"]

_RULES_FILE: Final = ".toolkernel/shell.toml"


def analyse_in_project(
    command: str, rules: ShellRules, root: str | os.PathLike[str], environ: Mapping[str, str]
) -> Analysis:
    """:func:`analyse` with the project in ``root`` read where it decides what runs."""
    project = Project(pathlib.Path(os.path.abspath(root)), environ)
    walk = Walk(project.rules(rules), apply, project)
    analysis = walk_command(walk, command)
    if analysis.barrier is not None:
        return analysis
    why = (
        project.stale(analysis) or git_barrier(project, analysis) or tool_barrier(project, analysis)
    )
    if why is not None:
        return attrs.evolve(analysis, accesses=(), barrier=why)
    return with_repository(project, analysis)


def project_rules(root: str | os.PathLike[str], rules: ShellRules | None = None) -> ShellRules:
    """``rules`` (default: the built-in ones) extended with the project's rules file:
    ``[tool.toolkernel.shell]`` in ``pyproject.toml``, then ``.toolkernel/shell.toml``."""
    base = ShellRules.default() if rules is None else rules
    return Project(pathlib.Path(os.path.abspath(root)), os.environ).rules(base)


# A project's rules, by the table they extend, then by the workspace and its files' stamps.
_rules_cache: weakref.WeakKeyDictionary[ShellRules, dict[tuple[Any, ...], ShellRules]] = (
    weakref.WeakKeyDictionary()
)


@attrs.define(eq=False)
class Project(ProjectFiles):
    """The workspace in ``root``, read as the programs run in it would read it."""

    _sources: dict[str, list[str] | None] = attrs.field(factory=dict, init=False)

    def stale(self, analysis: Analysis) -> str | None:
        """Why what was read may not be what the command's later steps see: it writes (or
        makes) a file that decides what its own programs do (``echo ... > package.json &&
        npm test``)."""
        written = [
            tuple(a.path.strip("/").split("/"))
            for a in analysis.accesses
            if a.kind == "write" and a.path is not None and self.place(a.path) is not None
        ]
        for file in sorted(self.consulted):
            if self.place(str(file)) is None or file == self.root / _RULES_FILE:
                continue
            parts = tuple(self.spelled(file).split("/"))
            exists = file.exists()
            for place in written:
                if place in ((".",), ("",)):
                    continue  # the whole workspace: its claims hold everything already
                # A file there that a write covers, or one looked for that it makes.
                if (exists and parts[: len(place)] == place) or parts == place:
                    return (
                        f"it writes {'/'.join(place)}, and {self.shown(file)} decides what "
                        f"its own commands do"
                    )
        return None

    # -- the rules file ----------------------------------------------------------------------

    def rules(self, base: ShellRules) -> ShellRules:
        files = (self.root / "pyproject.toml", self.root / _RULES_FILE)
        stamps: list[tuple[int, int, int] | None] = []
        for file in files:
            try:
                status = file.stat()
                stamps.append((status.st_mtime_ns, status.st_size, status.st_ino))
            except OSError:
                stamps.append(None)
        if stamps == [None, None]:
            return base
        key = (str(self.root), tuple(stamps))
        known = _rules_cache.setdefault(base, {})
        cached = known.get(key)
        if cached is not None:
            return cached
        rules = base
        pyproject = parse_toml(self.read(files[0]) or "")
        table = pyproject.get("tool", {}).get("toolkernel", {}).get("shell")
        if isinstance(table, Mapping) and table:
            rules = rules.extended(dict(table))
        own = self.read(files[1])
        if own is not None:
            rules = rules.extended(own)
        if len(known) > 64:
            known.clear()
        known[key] = rules
        return rules

    # -- what the walk asks of the project ---------------------------------------------------

    def apply(self, walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds) -> bool:
        """Record what ``rule``'s program does in this project, if the project decides it;
        False to let the rule alone say."""
        reader = _READERS.get(rule.name)
        if reader is None:
            return False
        return reader(self, walk, rule, args, cwds)

    def check_program(self, walk: Walk, name: str, cwds: Cwds) -> None:
        """Refuse a workspace program that is not what the rule of its name describes."""
        check_workspace_program(self, walk, name, cwds)

    def mix_sources(self, cwd: str) -> list[str] | None:
        """The places a mix project in ``cwd`` reads (spelled from the root), or None if they
        are not known (``_project_mix``)."""
        if cwd not in self._sources:
            self._sources[cwd] = places_read(self, cwd)
        return self._sources[cwd]


Reader = Callable[[ProjectFiles, Walk, Rule, Sequence[Word], Cwds], bool]
"""What a program does in the project, where its configuration decides it (``Project.apply``)."""
_READERS: Final[dict[str, Reader]] = {
    **dict.fromkeys(SCRIPT_RUNNERS, package_script),
    "mix": mix,
    "mise run": mise,
    **dict.fromkeys(("rspec", "rails", "rake"), rails),
    **dict.fromkeys(("uv run", "uv sync", "uv tool install", "build"), python_build),
    **dict.fromkeys(("python", "python3"), python_module),
}


def analyse(
    command: str,
    rules: ShellRules | None = None,
    *,
    root: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Analysis:
    """What ``command`` reads, writes and runs according to ``rules`` (default: the built-in
    ones), without running it.

    With ``root`` (the workspace's directory), the project's own configuration is read too,
    where it decides what the command does (``_project``): its rules file
    (``.toolkernel/shell.toml`` or ``[tool.toolkernel.shell]`` in ``pyproject.toml``),
    package.json scripts, mix aliases and database paths, the repository's hooks and the
    programs its git configuration names, build backends, workspace programs shadowing the
    ones the rules describe. ``environ`` is the environment the command will run with
    (default: this process's). Without ``root``, only the text and the rules count.
    """
    rules = ShellRules.default() if rules is None else rules
    if root is None:
        return _analyse(command, rules)
    return analyse_in_project(command, rules, root, os.environ if environ is None else environ)

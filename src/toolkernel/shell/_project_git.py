"""The repository: what git runs of the repository its commands run in.

For every git command, the repository of each directory it runs in (a nested one too, and the
submodules under ``.git/modules``): a configuration naming programs git may run (drivers,
filters, ``core.hooksPath``, ``core.editor``, ``man.viewer``, ``remote.*.uploadpack``,
includes...) is a barrier; for one that writes, so is any hook installed; with neither, its
``unknown-effects`` ("it runs the repository's hooks") are taken back. A ``.git`` file (a linked
worktree, a submodule) is followed: the directory it points to is claimed where the command
writes ``.git``.
"""

from __future__ import annotations

import os
import pathlib
import re
from typing import TYPE_CHECKING, Final

import attrs

from ._access import Access
from ._project_files import ProjectFiles, TooLarge

if TYPE_CHECKING:
    from ._analysis import Analysis

__all__ = ["git_barrier", "repository", "with_repository"]

# Settings naming a program git runs (or a file of more settings): a repository that has one
# runs what it says. For commands that only read, the Bash tool switches off hooks, the
# fsmonitor and the pager through the environment, so those don't count there.
_PROGRAMS_READING: Final = re.compile(
    r"""\[\s*(?:diff|filter|difftool|mergetool|browser|man)\s*(?:"|\.)   # a driver, a tool
      | \[\s*include(?:if)?\b                                          # another file's settings
      | ^\s*(?:external|showsignature|textconv|viewer|browser|worktree|sshcommand|askpass
               |gitproxy|uploadpack|receivepack|helper|program)\s*=
    """,
    re.IGNORECASE | re.MULTILINE | re.VERBOSE,
)
_PROGRAMS_WRITING: Final = re.compile(
    _PROGRAMS_READING.pattern
    + r"""| \[\s*merge\s*"
      | ^\s*(?:hookspath|fsmonitor|editor|pager|driver|process|clean|smudge|update)\s*=
    """,
    re.IGNORECASE | re.MULTILINE | re.VERBOSE,
)


def repository(project: ProjectFiles, spelled: str) -> tuple[pathlib.Path, pathlib.Path] | None:
    """(work tree, git directory) of the repository git finds from ``spelled``."""
    start = project.place(spelled)
    if start is None:
        outside = os.path.expanduser(spelled)
        if not os.path.isabs(outside):
            return None
        start = pathlib.Path(outside)
    directory = start
    while True:
        git_dir = _git_dir(project, directory)
        if git_dir is not None:
            return directory, git_dir
        if directory.parent == directory:
            return None
        directory = directory.parent


def _repositories(
    project: ProjectFiles, analysis: Analysis
) -> list[tuple[pathlib.Path, pathlib.Path]]:
    """(work tree, git directory) of each repository the git commands run in."""
    found = (repository(project, spelled) for spelled in analysis.git_directories)
    return list(dict.fromkeys(f for f in found if f is not None))


def git_barrier(project: ProjectFiles, analysis: Analysis) -> str | None:
    """Why the repositories' configuration or hooks make the git commands unknown, as a
    barrier; None if they run no program of the repository's."""
    if not analysis.git_directories:
        return None
    writes = analysis.git == "write"
    for _tree, git_dir in _repositories(project, analysis):
        for config in _configs(project, git_dir):
            why = _names_programs(project, config, writes=writes)
            if why is not None:
                return why
        if writes:
            hook = _installed_hook(project, git_dir)
            if hook is not None:
                return f"the repository's hook {hook} runs with its git commands"
    return None


def with_repository(project: ProjectFiles, analysis: Analysis) -> Analysis:
    """``analysis`` with the places a ``.git`` file points to claimed where ``.git`` is
    written, and the hooks' unknown effects taken back (there are none)."""
    unknown = analysis.unknown_effects
    repositories = _repositories(project, analysis)
    every = [repository(project, spelled) for spelled in analysis.git_directories]
    if every and None not in every:
        # Every repository its git commands run in was read: none runs a hook or a program.
        unknown = tuple(u for u in unknown if not _git_rule(u))
    extra: list[Access] = []
    written = {a.path for a in analysis.accesses if a.kind == "write" and a.path}
    for tree, git_dir in repositories:
        dot_git = tree / ".git"
        if not dot_git.is_file() or project.spelled(dot_git) not in written:
            continue
        for place in (git_dir, _common_dir(project, git_dir)):
            if place is None:
                continue
            spelled = project.spelled(place) if project.place(str(place)) else str(place)
            extra.append(Access("write", spelled, "git", optional=True))
    if not extra and unknown == analysis.unknown_effects:
        return analysis
    accesses = tuple(dict.fromkeys((*analysis.accesses, *extra)))
    return attrs.evolve(analysis, accesses=accesses, unknown_effects=unknown)


def _git_dir(project: ProjectFiles, directory: pathlib.Path) -> pathlib.Path | None:
    dot_git = directory / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():  # a linked worktree or a submodule: "gitdir: <path>"
        try:
            text = project.read(dot_git) or ""
        except TooLarge:
            return None
        if text.startswith("gitdir:"):
            target = text[len("gitdir:") :].strip()
            return pathlib.Path(os.path.normpath(directory / target))
    return None


def _common_dir(project: ProjectFiles, git_dir: pathlib.Path) -> pathlib.Path | None:
    try:
        text = project.read(git_dir / "commondir")
    except TooLarge:
        return None
    if text is None:
        return None
    return pathlib.Path(os.path.normpath(git_dir / text.strip()))


def _configs(project: ProjectFiles, git_dir: pathlib.Path) -> list[pathlib.Path]:
    """The repository's own configuration files, and its submodules'."""
    found = [git_dir / "config", git_dir / "config.worktree"]
    common = _common_dir(project, git_dir)
    if common is not None:
        found.append(common / "config")
    for base in (git_dir, common):
        modules = None if base is None else base / "modules"
        if modules is not None and modules.is_dir():
            found.extend(sorted(modules.rglob("config")))
    return found


def _names_programs(project: ProjectFiles, config: pathlib.Path, *, writes: bool) -> str | None:
    shown = project.shown(config)
    try:
        text = project.read(config)
    except TooLarge:
        return f"{shown} is too large to read"
    if text is None:
        return None
    pattern = _PROGRAMS_WRITING if writes else _PROGRAMS_READING
    if pattern.search(text) is not None:
        return f"{shown} names programs git runs (a driver, a hook path, an editor, ...)"
    return None


def _installed_hook(project: ProjectFiles, git_dir: pathlib.Path) -> str | None:
    common = _common_dir(project, git_dir) or git_dir
    hooks = common / "hooks"
    try:
        names = sorted(os.listdir(hooks))
    except OSError:
        return None
    for name in names:
        if not name.endswith(".sample") and (hooks / name).is_file():
            return name
    return None


def _git_rule(reason: str) -> bool:
    return reason.startswith("git ")

"""Workspace programs: a program of the workspace standing in for the one a rule describes.

A program of the workspace that the rules describe by name (``.venv/bin/pytest``, an activated
virtualenv's ``pytest`` on ``PATH``, ``node_modules/.bin/eslint``, ``./gradlew``) must be what
installs it (a console-script shim, a link to an interpreter, the wrapper's script), or the
command is a barrier; ``python -m NAME`` with a ``NAME.py`` or ``NAME/`` where it runs runs that
instead: a barrier, and without either, ``python -m``'s ``unknown-effects`` (the module it
finds there first) is taken back.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from ._access import Cwds, join
from ._programs import apply_rule
from ._project_files import ProjectFiles, TooLarge
from ._rules import Rule
from ._words import Word

if TYPE_CHECKING:
    from ._walk import Walk

__all__ = ["check_workspace_program", "python_module"]

_SHIM: Final = re.compile(
    r"\A#![^\n]*python[^\n]*\n(?:#[^\n]*\n)*import (?:re|sys)\n"
    r"(?:import (?:re|sys)\n)?from [\w.]+ import \w+\n",
)
_WRAPPERS: Final = {
    "gradlew": "Gradle start up script",
    "mvnw": "Apache Maven Wrapper",
}


def check_workspace_program(project: ProjectFiles, walk: Walk, name: str, cwds: Cwds) -> None:
    """Refuse a workspace program that is not what the rule of its name describes."""
    for cwd in sorted(cwds):
        if "/" in name:
            where = project.place(join(cwd, name))
        else:
            found = shutil.which(name, path=project.environ.get("PATH", os.defpath))
            where = None if found is None else project.place(os.path.abspath(found))
        if where is None:
            continue
        program = where.name
        if _installed_as(project, where, program):
            continue
        raise walk.fail(
            f"{project.shown(where)} is the workspace's own program, not the {program} "
            f"its rule describes"
        )


def _installed_as(project: ProjectFiles, where: pathlib.Path, program: str) -> bool:
    """True if ``where`` is what a package manager installs as ``program``: a link to an
    interpreter or a program outside the workspace, pip's or uv's console-script shim, npm's
    link into a package, a build wrapper's script."""
    if where.is_symlink():
        target = pathlib.Path(os.path.realpath(where))
        if project.root not in target.parents:
            return True  # the system's interpreter, or a program outside the workspace
        return "node_modules" in target.parts  # npm links .bin/x into its package
    try:
        head = project.read(where) or ""
    except TooLarge:
        return False
    head = head[:4096]
    if head.startswith("\x7fELF"):
        return True  # a program a wheel or a package installed, built for this machine
    if program in _WRAPPERS:
        return _WRAPPERS[program] in head
    return _SHIM.match(head) is not None


def python_module(
    project: ProjectFiles, walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds
) -> bool:
    """``python -m NAME``: the directory it runs in comes first on the module path."""
    module = None
    for at, word in enumerate(args):
        text = word.text or ""
        if text == "-m" and at + 1 < len(args):
            module = args[at + 1].text
            break
        if text.startswith("-m") and len(text) > 2:
            module = text[2:]
            break
        if not text.startswith("-"):
            break
    if not module:
        return False
    top = module.split(".")[0]
    checked = True
    for cwd in sorted(cwds):
        where = project.place(cwd)
        if where is None:
            checked = False
            continue
        for shadow in (where / f"{top}.py", where / top):
            if shadow.exists():
                raise walk.fail(
                    f"python -m {module} runs {project.shown(shadow)}, the workspace's own "
                    f"module, not the program its rule describes"
                )
    if not checked or project.environ.get("PYTHONPATH"):
        return False  # it may find the module where nothing was looked at
    before = len(walk.unknown)
    apply_rule(walk, rule, args, cwds)
    # Where it runs holds no module of that name: the reason `-m` gave is taken back.
    own = f"{rule.name}: "
    for at in range(before, len(walk.unknown)):
        if walk.unknown[at].startswith(own):
            del walk.unknown[at]
            break
    return True

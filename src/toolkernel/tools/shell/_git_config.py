"""Does a repository's own configuration name programs that reading git commands would run?

Read-only git commands run with ``core.fsmonitor``, hooks and the pager switched off through the
environment (``_confine.GIT_READ_ONLY_CONFIG``). Some programs can't be switched off that way
without breaking the command: ``diff.external``, a diff driver's ``textconv`` or ``command`` and
a filter's ``clean``, ``smudge`` or ``process`` (set to nothing, git fails trying to run ""),
and ``gpg.program`` when ``log.showSignature`` is on. ``git diff``, ``log -p``, ``show``,
``blame`` and even ``status`` run them, so a command whose repository configures any of them
is not read-only: it holds the workspace exclusively, like any command that may do anything.

The check is textual and errs towards "yes": any diff or filter driver section, any
``external`` or ``showSignature`` key, and any ``include``/``includeIf`` (which could pull in
another file) counts. Only the repository's own configuration is read (``.git/config`` and
``config.worktree``), not the user's global or system files, which are the user's, not the
repository's.
"""

from __future__ import annotations

import os
import re
from typing import Final

__all__ = ["repository_programs"]

_PROGRAM_NAMING: Final = re.compile(
    r"""\[\s*(?:diff|filter)\s*(?:"|\.)   # a diff or filter driver: [diff "x"], [filter.x]
      | \[\s*include(?:if)?\b             # another file's settings
      | ^\s*(?:external|showsignature)\b  # diff.external, log.showSignature
      | \]\s*(?:external|showsignature)\b # ... on the header's line
    """,
    re.IGNORECASE | re.MULTILINE | re.VERBOSE,
)
_CONFIG_LIMIT: Final = 1 << 20
"""Bytes of a configuration file read; a larger one counts as naming programs."""


def repository_programs(root: str | os.PathLike[str]) -> str | None:
    """Why git commands in ``root`` may run programs the repository names (the configuration
    file that says so), or None. Looks at the repository holding ``root`` or any directory
    above it, as git would find it."""
    directory = os.path.abspath(os.fspath(root))
    while True:
        git_dir = _git_dir(directory)
        if git_dir is not None:
            for name in ("config", "config.worktree"):
                file = os.path.join(git_dir, name)
                if _names_programs(file):
                    return f"{file} names programs git runs (a diff or filter driver, ...)"
            common = _common_dir(git_dir)
            if common is not None and _names_programs(os.path.join(common, "config")):
                return f"{os.path.join(common, 'config')} names programs git runs"
            return None
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _git_dir(directory: str) -> str | None:
    dot_git = os.path.join(directory, ".git")
    if os.path.isdir(dot_git):
        return dot_git
    if os.path.isfile(dot_git):  # a worktree or submodule: "gitdir: <path>"
        text = _read(dot_git) or ""
        if text.startswith("gitdir:"):
            target = text[len("gitdir:") :].strip()
            return os.path.normpath(os.path.join(directory, target))
    return None


def _common_dir(git_dir: str) -> str | None:
    text = _read(os.path.join(git_dir, "commondir"))
    if text is None:
        return None
    return os.path.normpath(os.path.join(git_dir, text.strip()))


def _names_programs(file: str) -> bool:
    try:
        if os.path.getsize(file) > _CONFIG_LIMIT:
            return True
    except OSError:
        return False  # no such file: nothing configured there
    text = _read(file)
    return text is None or _PROGRAM_NAMING.search(text) is not None


def _read(file: str) -> str | None:
    try:
        with open(file, "rb") as handle:
            return handle.read(_CONFIG_LIMIT).decode("utf-8", errors="replace")
    except OSError:
        return None

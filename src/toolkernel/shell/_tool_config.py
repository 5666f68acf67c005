"""Does a project's configuration make ruff, mypy or pytest write where their rules don't claim?

The rules claim each tool's cache where the tool puts it by default (``.ruff_cache``,
``.mypy_cache``, ``.pytest_cache``). A project's configuration can move it (``cache-dir``,
``cache_dir``), or add reports and logs (mypy's ``*_report``, pytest's ``log_file`` and
``addopts = --junitxml=... --cov``), and so can variables of the environment (``RUFF_CACHE_DIR``,
``MYPY_CACHE_DIR``, ``PYTEST_ADDOPTS``). Landlock would refuse those writes, but some tools then
fail without naming the path (mypy reports an internal error), and without Landlock the writes
would go through under a shared lease. So the Bash tool makes such a command a barrier.

The check is textual and errs towards "yes": the key anywhere in a file the tool reads its
configuration from, in the workspace root or any directory the command names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Final

__all__ = ["moved_writes", "tools_of"]

_RULES: Final = {
    "ruff": "ruff",
    "ruff check": "ruff",
    "ruff format": "ruff",
    "mypy": "mypy",
    "pytest": "pytest",
    "py.test": "pytest",
}
_FILES: Final = {
    "ruff": ("pyproject.toml", "ruff.toml", ".ruff.toml"),
    "mypy": ("pyproject.toml", "mypy.ini", ".mypy.ini", "setup.cfg"),
    "pytest": ("pyproject.toml", "pytest.ini", ".pytest.ini", "setup.cfg", "tox.ini"),
}
_MOVING: Final = {
    "ruff": re.compile(r"^\s*cache-dir\s*=", re.MULTILINE),
    "mypy": re.compile(r"^\s*(?:cache_dir|junit_xml|\w+_report)\s*=", re.MULTILINE),
    "pytest": re.compile(
        r"^\s*(?:cache_dir|log_file)\s*="
        r"|--(?:basetemp|junit|log-file|cov|debug|result-?log|report-log|html|json-report|"
        r"benchmark|lf-cache|override-ini)"
        r"|(?<![\w-])-o\s",
        re.MULTILINE,
    ),
}
_VARIABLES: Final = {
    "ruff": ("RUFF_CACHE_DIR",),
    "mypy": ("MYPY_CACHE_DIR",),
    "pytest": ("PYTEST_ADDOPTS",),
}
_CONFIG_LIMIT: Final = 1 << 20
"""Bytes of a configuration file read; a larger one counts as moving writes."""


def tools_of(rules: Iterable[str]) -> frozenset[str]:
    """The tools whose configuration matters, among the rules a command matched."""
    return frozenset(_RULES[rule] for rule in rules if rule in _RULES)


def moved_writes(
    tools: Iterable[str], directories: Iterable[str], environ: Mapping[str, str]
) -> str | None:
    """Why one of ``tools`` may write where its rule does not claim, or None.

    ``directories`` are absolute paths: where the tools may find their configuration.
    """
    for tool in sorted(set(tools)):
        for name in _VARIABLES[tool]:
            if environ.get(name):
                return f"{name} is set, which changes what {tool} writes"
        for directory in dict.fromkeys(directories):
            for name in _FILES[tool]:
                file = os.path.join(directory, name)
                if _moves(file, _MOVING[tool]):
                    return f"{file} changes where {tool} writes (its cache, reports or logs)"
    return None


def _moves(file: str, pattern: re.Pattern[str]) -> bool:
    try:
        with open(file, "rb") as handle:
            data = handle.read(_CONFIG_LIMIT + 1)
    except OSError:
        return False  # no such file: nothing configured there
    if len(data) > _CONFIG_LIMIT:
        return True
    return pattern.search(data.decode("utf-8", errors="replace")) is not None

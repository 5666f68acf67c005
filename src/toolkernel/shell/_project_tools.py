"""Tools' configuration and the environment: what moves a tool's writes.

ruff, mypy and pytest writing where their configuration moves their caches or reports
(``_tool_config``); variables of the environment moving a toolchain's writes into the workspace
(``CARGO_TARGET_DIR``, ``MIX_BUILD_PATH``, ``UV_PROJECT_ENVIRONMENT``, ``GOFLAGS=-mod=mod``...):
barriers.
"""

from __future__ import annotations

import os
import pathlib
from typing import TYPE_CHECKING, Final

from ._project_files import ProjectFiles
from ._tool_config import moved_writes, tools_of

if TYPE_CHECKING:
    from ._analysis import Analysis

__all__ = ["tool_barrier"]

# Variables of the environment (the Bash tool's own) that move what a program writes: into the
# workspace, where no claim is, they make the command a barrier; outside it they are policy.
_MOVING_VARIABLES: Final = {
    "go": ("GOFLAGS", "GOCACHE", "GOMODCACHE", "GOPATH", "GOBIN", "GOTMPDIR"),
    "cargo": ("CARGO_TARGET_DIR", "CARGO_BUILD_TARGET_DIR", "CARGO_HOME"),
    "mix": ("MIX_BUILD_PATH", "MIX_BUILD_ROOT", "MIX_DEPS_PATH", "MIX_HOME", "HEX_HOME"),
    "uv": ("UV_PROJECT_ENVIRONMENT", "UV_CACHE_DIR"),
    "npm": ("npm_config_cache", "NPM_CONFIG_CACHE", "npm_config_prefix"),
    "pnpm": ("npm_config_store_dir", "PNPM_HOME"),
    "gradle": ("GRADLE_USER_HOME",),
    "mvn": ("MAVEN_OPTS",),
}


def tool_barrier(project: ProjectFiles, analysis: Analysis) -> str | None:
    """Why the environment or a tool's configuration moves what it writes."""
    for rule in analysis.rules:
        for name in _MOVING_VARIABLES.get(rule.split(" ")[0], ()):
            value = project.environ.get(name)
            if not value:
                continue
            if name == "GOFLAGS":
                if "-mod" in value or "-modfile" in value or "-toolexec" in value:
                    return f"GOFLAGS={value} changes what go writes and runs"
                continue
            moved = pathlib.Path(os.path.expanduser(value))
            if not moved.is_absolute() or project.place(str(moved)) is not None:
                return f"{name}={value} makes {rule} write in the workspace, unclaimed"
    tools = tools_of(analysis.rules)
    if not tools:
        return None
    directories = [str(project.root)]
    for access in analysis.accesses:
        if access.path is None:
            continue
        where = project.place(access.path)
        while where is not None and where != project.root:
            if where.is_dir():
                directories.append(str(where))
            where = where.parent
    return moved_writes(tools, directories, project.environ)

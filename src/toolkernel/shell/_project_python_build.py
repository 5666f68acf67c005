"""pyproject build backends: what building a Python project runs.

``uv run``, ``uv sync`` and ``python -m build`` build the project; a backend that writes only
its output (hatchling without build hooks, flit, pdm, poetry-core, uv_build) runs no code of the
project, so their effects are known; setuptools or a ``setup.py`` (``*.egg-info`` and ``build/``
beside the sources, and ``setup.py`` is code) is a barrier; no ``[build-system]`` builds nothing.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

from ._access import Cwds
from ._programs import apply_rule
from ._project_files import ProjectFiles, parse_toml
from ._rules import Rule
from ._words import Word

if TYPE_CHECKING:
    from ._walk import Walk

__all__ = ["python_build"]

_STATIC_BACKENDS: Final = frozenset(
    {
        "hatchling.build",
        "flit_core.buildapi",
        "pdm.backend",
        "poetry.core.masonry.api",
        "uv_build",
    }
)


def python_build(
    project: ProjectFiles, walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds
) -> bool:
    """``uv run``, ``uv sync``, ``python -m build``: what building the project runs."""
    apply_rule(walk, rule, args, cwds)
    for cwd in sorted(cwds):
        pyproject = project.nearest(cwd, "pyproject.toml")
        if pyproject is None:
            continue
        why = _backend_runs_code(project, walk, pyproject)
        if why is not None:
            raise walk.fail(why)
    walk.unknown[:] = [u for u in walk.unknown if not u.startswith(f"{rule.name}: ")]
    return True


def _backend_runs_code(project: ProjectFiles, walk: Walk, pyproject: pathlib.Path) -> str | None:
    shown = project.shown(pyproject)
    if (pyproject.parent / "setup.py").exists():
        return f"{project.shown(pyproject.parent / 'setup.py')} builds the project (it is code)"
    table = parse_toml(project.text(walk, pyproject) or "")
    system = table.get("build-system")
    if system is None:
        return None  # nothing to build (uv: a virtual project)
    backend = system.get("build-backend") if isinstance(system, Mapping) else None
    if backend not in _STATIC_BACKENDS:
        return f"{shown}: its build backend ({backend or 'setuptools'}) runs the project's code"
    hatch = table.get("tool", {}).get("hatch", {})
    if "hooks" in json.dumps(hatch):
        return f"{shown}: its build hooks are the project's code"
    if isinstance(system.get("backend-path"), list):
        return f"{shown}: its build backend is in the project (backend-path)"
    return None

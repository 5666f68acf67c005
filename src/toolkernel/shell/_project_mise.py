"""mise tasks: what ``mise run TASK`` runs.

``mise run TASK`` runs the task's ``run`` scripts (after its ``depends``) from the nearest
``mise.toml``; a file task or a template is a barrier.
"""

from __future__ import annotations

import functools
import json
import pathlib
import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ._access import Cwds
from ._project_files import ProjectFiles, parse_toml
from ._rules import Rule
from ._words import Word

if TYPE_CHECKING:
    from ._walk import Walk

__all__ = ["mise"]

_MISE_FILES: Final = (
    "mise.toml",
    ".mise.toml",
    "mise.local.toml",
    ".config/mise.toml",
    "mise/config.toml",
)


def mise(project: ProjectFiles, walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds) -> bool:
    """``mise run TASK``: the task's ``run`` scripts (after its ``depends``), from the
    nearest ``mise.toml``, in the directory that holds it (or the task's ``dir``)."""
    words = [w for w in args if w.text != "--"]
    if not words or words[0].text is None or words[0].text.startswith("-"):
        return False
    task = words[0].text
    extra = [w.text or "" for w in words[1:]]
    walk.matched.append(rule.name)
    walk.outside.extend(rule.outside_writes)
    for cwd in sorted(cwds):
        tasks, root = _tasks(project, walk, cwd)
        _task(project, walk, tasks, root, task, extra, set())
    return True


def _tasks(
    project: ProjectFiles, walk: Walk, cwd: str
) -> tuple[dict[str, Any], pathlib.Path | None]:
    where = project.place(cwd)
    while where is not None:
        for name in _MISE_FILES:
            file = where / name
            text = project.text(walk, file)
            if text is not None:
                walk.touch("read", project.spelled(file), frozenset({"."}), "mise")
                tasks = parse_toml(text).get("tasks", {})
                if not isinstance(tasks, dict):
                    raise walk.fail(f"{project.shown(file)}: its tasks are not a table")
                return tasks, where
        if where == project.root:
            break
        where = where.parent
    return {}, None


def _task(
    project: ProjectFiles,
    walk: Walk,
    tasks: Mapping[str, Any],
    root: pathlib.Path | None,
    name: str,
    extra: Sequence[str],
    seen: set[str],
) -> None:
    if name in seen:
        raise walk.fail(f"mise task {name} depends on itself")
    seen.add(name)
    task = tasks.get(name)
    if root is None or task is None:
        raise walk.fail(f"mise task {name} is not in a mise.toml the walk reads (a file task?)")
    if isinstance(task, str):
        task = {"run": task}
    if not isinstance(task, Mapping) or "file" in task:
        raise walk.fail(f"mise task {name} runs a script file")
    depends = task.get("depends", [])
    for other in [depends] if isinstance(depends, str) else depends:
        _task(project, walk, tasks, root, str(other).split()[0], (), seen)
    runs = task.get("run", [])
    here = root
    if "dir" in task:
        here = root / str(task["dir"])
    if project.place(str(here)) is None or "{{" in json.dumps(task):
        raise walk.fail(f"mise task {name} runs where, or what, a template says")
    cwd = frozenset({project.spelled(here)})
    scripts = [runs] if isinstance(runs, str) else list(runs)
    for index, script in enumerate(scripts):
        if not isinstance(script, str):
            raise walk.fail(f"mise task {name}: a run step that is not text")
        if index == len(scripts) - 1 and extra:
            script = f"{script} {shlex.join(extra)}"
        source = script.encode("utf-8", errors="surrogateescape")
        walk.nested(functools.partial(walk.script, source, cwd))

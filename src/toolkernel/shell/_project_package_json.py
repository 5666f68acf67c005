"""package.json scripts: what ``npm test`` and ``npm run NAME`` run.

``npm test``, ``npm run NAME`` (``pnpm``, ``yarn``, ``bun``) run the script of the nearest
``package.json`` (and its ``pre``/``post`` scripts) in that package's directory, so the script's
text is walked as a command; a missing script runs nothing; a ``.npmrc`` naming a shell or node
options is a barrier.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from ._access import Cwds
from ._project_files import ProjectFiles
from ._rules import Rule
from ._words import Word

if TYPE_CHECKING:
    from ._walk import Walk

__all__ = ["SCRIPT_RUNNERS", "package_script"]

SCRIPT_RUNNERS: Final = {
    "npm test": "test",
    "pnpm test": "test",
    "yarn test": "test",
    "bun test": None,  # bun's own test runner, not a script
    "pnpm lint": "lint",
    "yarn lint": "lint",
    "npm run": "",
    "npm run-script": "",
    "pnpm run": "",
    "yarn run": "",
    "bun run": "",
}
"""The rules that run a package.json script, and the script each runs ("": the one named)."""
_NPMRC_PROGRAMS: Final = re.compile(
    r"^\s*(?:script-shell|shell|node-options|onload-script|ignore-scripts)\s*=", re.MULTILINE
)


def package_script(
    project: ProjectFiles, walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds
) -> bool:
    fixed = SCRIPT_RUNNERS[rule.name]
    if fixed is None:
        return False
    words = list(args)
    for word in words:
        if word.text is None:
            raise walk.fail(f"{rule.name}: a word not known from the text")
        if word.text in ("-w", "--workspace", "--workspaces", "-ws", "--filter", "-r"):
            raise walk.fail(f"{rule.name} {word.text} runs the scripts of other packages")
        if word.text.startswith(("--prefix", "-C", "--dir", "--cwd")):
            return False  # the rule's cd-options say where (and the rule what it claims)
    name = fixed
    if not name:
        while words and (words[0].text or "").startswith("-"):
            words.pop(0)  # npm's own flags (--silent, --if-present)
        if not words:
            return False  # `npm run` alone lists the scripts
        name = words.pop(0).text or ""
    extra = [w.text or "" for w in words if w.text != "--"]
    walk.matched.append(rule.name)
    walk.outside.extend(rule.outside_writes)
    for cwd in sorted(cwds):
        package = project.nearest(cwd, "package.json")
        if package is None:
            continue  # npm fails: no package.json
        npmrc = project.text(walk, package.parent / ".npmrc") or ""
        if _NPMRC_PROGRAMS.search(npmrc):
            raise walk.fail(f"{project.shown(package.parent / '.npmrc')} changes how scripts run")
        text = project.text(walk, package)
        try:
            scripts = json.loads(text or "{}").get("scripts", {})
        except (ValueError, AttributeError):
            raise walk.fail(f"{project.shown(package)} is not JSON that npm reads") from None
        if not isinstance(scripts, dict):
            raise walk.fail(f"{project.shown(package)}: its scripts are not a table")
        here = frozenset({project.spelled(package.parent)})
        walk.touch("read", project.spelled(package), frozenset({"."}), rule.name)
        for step in (f"pre{name}", name, f"post{name}"):
            script = scripts.get(step)
            if script is None:
                continue
            if not isinstance(script, str):
                raise walk.fail(f"{project.shown(package)}: script {step} is not text")
            if step == name and extra:
                script = f"{script} {shlex.join(extra)}"
            source = script.encode("utf-8", errors="surrogateescape")
            walk.nested(functools.partial(walk.script, source, here))
    return True

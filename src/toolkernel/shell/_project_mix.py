"""mix: what ``mix TASK`` runs and reads in the project.

An alias in ``mix.exs`` for the task runs its steps, all in the environment of the task asked
for (a function among them is a barrier); each environment builds into its own ``_build/ENV``
(``preferred_envs``, ``MIX_ENV``); compilers beyond Mix's own (``:elixir_make`` runs a Makefile)
are a barrier for tasks that compile; tasks that start the application (``test``, ``run``,
``ecto.*``, ``ash.*``...) open the SQLite databases the configuration names
(``_project_databases``); and a project in the default layout reads mix.exs, config, lib, test,
priv, deps... but not the other environments' ``_build`` (``{mix-sources}``, read by
:func:`places_read`), so ``mix test`` and ``mix credo`` run side by side.
"""

from __future__ import annotations

import functools
import pathlib
import re
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from ._access import Cwds
from ._programs import apply_rule
from ._project_databases import database, mix_databases
from ._project_files import ProjectFiles, TooLarge
from ._rules import Rule
from ._words import Word

if TYPE_CHECKING:
    from ._walk import Walk

__all__ = ["mix", "places_read"]

# What a mix project reads in its default layout (its own _build/ENV is claimed apart).
_MIX_READS: Final = (
    "mix.exs mix.lock .formatter.exs .credo.exs .dialyzer_ignore.exs .iex.exs config lib test "
    "priv deps rel include src".split()
)
_MIX_MOVED: Final = re.compile(
    r"\b(?:config_path|deps_path|build_path|lockfile|test_paths|erlc_paths|erlc_include_path|"
    r"apps_path|in_umbrella|test_load_filters)\b"
)
_ELIXIRC_PATHS: Final = re.compile(r"\belixirc_paths\b[^\n]*(?:\n\s+(?:do:)?[^\n]*)?")
# Configuration reading files (dotenv and the like) reads more than the layout says.
_READS_FILES: Final = re.compile(
    r"\bFile\.(?:read|stream|open|ls)|\bDotenv|\bsource!|\bimport_config\s+\"\.\."
    r"|Path\.wildcard"
)

# Tasks that compile the project (and so run its compilers) or start its application.
_MIX_COMPILING: Final = frozenset(
    "test compile run app.start phx.server phx.routes ecto.create ecto.migrate ecto.rollback "
    "ecto.drop ecto.reset ecto.setup ecto.load ecto.dump credo dialyzer escript.build "
    "release ash.setup ash.migrate ash.codegen".split()
)
# Tasks of Mix and Hex themselves, which compile nothing of the project.
_MIX_OWN_TASKS: Final = frozenset(
    "format help deps.get deps.unlock deps.update deps.tree hex.info hex.outdated local.hex "
    "local.rebar archive.install new".split()
)
_MIX_DATABASE: Final = frozenset(
    "test run app.start phx.server ecto.create ecto.migrate ecto.rollback ecto.drop ecto.reset "
    "ecto.setup ecto.load ecto.dump ash.setup ash.migrate ash.reset".split()
)
_ALIASES: Final = re.compile(r"\bdefp?\s+aliases\b[^\n]*\bdo\b(?P<body>.*?)^\s*end\b", re.S | re.M)
_ALIAS_ENTRY: Final = re.compile(
    r'(?:^|[\[,\s])(?:"(?P<quoted>[\w.\-]+)"|(?P<name>[\w.]+))\s*:\s*(?P<value>\[[^\]]*\]|"[^"]*"|&[^,\n\]]+)'
)
_MIX_COMPILERS: Final = re.compile(r"\bcompilers\s*:|:elixir_make\b|\bmake_targets\b")
_SQLITE_ADAPTER: Final = re.compile(r"sqlite", re.IGNORECASE)  # ecto_sqlite3, ash_sqlite, exqlite


def places_read(project: ProjectFiles, cwd: str) -> list[str] | None:
    """The places a mix project in ``cwd`` reads (spelled from the root), or None if they
    are not known: mix.exs moves its layout (``build_path``, ``deps_path``, an umbrella),
    or its configuration reads other files."""
    where = project.place(cwd)
    if where is None:
        return None
    try:
        text = project.read(where / "mix.exs")
        configs = [project.read(c) or "" for c in sorted((where / "config").glob("*.exs"))]
    except TooLarge:
        return None
    if text is None or _MIX_MOVED.search(text) or any(_READS_FILES.search(c) for c in configs):
        return None
    places = set(_MIX_READS)
    for paths in _ELIXIRC_PATHS.finditer(text):
        for quoted in re.findall(r'"([^"]+)"', paths.group(0)):
            head = quoted.strip("/").split("/")[0]
            if head in ("", ".", ".."):
                return None
            places.add(head)
    return [project.spelled(where / name) for name in sorted(places)]


def mix(project: ProjectFiles, walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds) -> bool:
    """``mix TASK``: an alias's steps, the project's compilers, its databases."""
    words = list(args)
    task = words[0].text if words else None
    if words and task is None:
        raise walk.fail("mix runs a task not known from the text")
    if task is not None and task.startswith("-"):
        return False
    for cwd in sorted(cwds):
        where = project.place(cwd)
        mix_exs = None if where is None else where / "mix.exs"
        text = None if mix_exs is None else project.text(walk, mix_exs)
        if mix_exs is None or text is None:
            # No project here (mix runs only its own tasks, or fails): the rule alone says.
            apply_rule(walk, rule, words, frozenset({cwd}))
            continue
        walk.touch("read", project.spelled(mix_exs), frozenset({"."}), "mix")
        compiles = task is None or task in _MIX_COMPILING or task not in _MIX_OWN_TASKS
        if compiles and _MIX_COMPILERS.search(text):
            shown = project.shown(mix_exs)
            raise walk.fail(f"{shown} adds compilers (elixir_make runs a Makefile)")
        env = _preferred_env(walk, text, task or "")
        aliases = _aliases(walk, project, mix_exs, text)
        here = frozenset({cwd})
        steps = aliases.get(task or "")
        expanding = f"mix {task}"
        if steps is not None and expanding not in walk.expanding:
            # Every step runs in the environment of the task mix was asked for.
            outer = walk.scoped.get("MIX_ENV", "")
            if "MIX_ENV" not in walk.scoped:
                walk.scoped["MIX_ENV"] = env
            walk.expanding.add(expanding)  # the alias's own name in its steps is the task
            try:
                for index, step in enumerate(steps):
                    try:
                        step_words = shlex.split(step)
                    except ValueError:
                        raise walk.fail(f"mix alias {task}: a step not read here") from None
                    if index == len(steps) - 1:
                        step_words += [w.text or "" for w in words[1:]]
                    command = [Word.known("mix"), *map(Word.known, step_words)]
                    walk.nested(functools.partial(walk.run, command, here))
            finally:
                walk.expanding.discard(expanding)
                if outer == "":
                    walk.scoped.pop("MIX_ENV", None)
        else:
            apply_rule(walk, rule, words, here)
        if task in _MIX_DATABASE and _SQLITE_ADAPTER.search(text):
            for found in mix_databases(project, walk, where):
                database(walk, found, "mix")
    return True


_PREFERRED: Final = re.compile(
    r"\b(?:preferred_envs|preferred_cli_env)\s*:\s*(?P<value>\[[^\]]*\]|\S+)"
)
_ENV_PAIR: Final = re.compile(r'"?(?P<task>[\w.\-]+)"?\s*:\s*:(?P<env>\w+)')


def _preferred_env(walk: Walk, text: str, task: str) -> str | None:
    """The environment ``task`` runs in (``test`` for ``mix test``, else ``dev``, unless
    mix.exs prefers another: it builds into that one's ``_build/ENV``); None if mix.exs says
    in a way not read here (then all of ``_build`` is claimed)."""
    env: str | None = "test" if task == "test" else "dev"
    for found in _PREFERRED.finditer(text):
        value = found.group("value")
        if not value.startswith("["):
            env = None
            continue
        for pair in _ENV_PAIR.finditer(value):
            if pair.group("task") == task:
                env = pair.group("env")
    if env not in ("test", "dev"):
        walk.variables.setdefault("MIX_ENV", set()).add(env)
    return env


def _aliases(
    walk: Walk, project: ProjectFiles, mix_exs: pathlib.Path, text: str
) -> dict[str, list[str]]:
    found = _ALIASES.search(text)
    if found is None:
        if re.search(r"\baliases\s*:", text) and "aliases()" not in text:
            raise walk.fail(f"{project.shown(mix_exs)} names its aliases in a way not read here")
        return {}
    aliases: dict[str, list[str]] = {}
    for entry in _ALIAS_ENTRY.finditer(found.group("body")):
        name = entry.group("quoted") or entry.group("name") or ""
        value = entry.group("value")
        if value.startswith("&") or "&" in value or "fn" in value:
            aliases[name] = []
            raise walk.fail(f"mix alias {name} runs a function of {project.shown(mix_exs)}")
        aliases[name] = re.findall(r'"([^"]*)"', value)
    return aliases

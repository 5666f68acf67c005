"""The project's own configuration, where it decides what a command does.

The rules describe programs; a project decides what some of them run. With a workspace to read
(``analyse(command, rules, root=...)``, which the Bash tool uses), the walk reads:

- **its rules file**: ``.toolkernel/shell.toml`` in the workspace root, and the
  ``[tool.toolkernel.shell]`` table of its ``pyproject.toml``, merged over the given rules
  (``.toolkernel/shell.toml`` last), in the rule format of ``_rules``;
- **package.json scripts**: ``npm test``, ``npm run NAME`` (``pnpm``, ``yarn``, ``bun``)
  run the script of the nearest ``package.json`` (and its ``pre``/``post`` scripts) in that
  package's directory, so the script's text is walked as a command; a missing script runs
  nothing; a ``.npmrc`` naming a shell or node options is a barrier;
- **mise tasks**: ``mise run TASK`` runs the task's ``run`` scripts (after its ``depends``)
  from the nearest ``mise.toml``; a file task or a template is a barrier;
- **mix**: an alias in ``mix.exs`` for the task runs its steps, all in the environment of the
  task asked for (a function among them is a barrier); each environment builds into its own
  ``_build/ENV`` (``preferred_envs``, ``MIX_ENV``); compilers beyond Mix's own
  (``:elixir_make`` runs a Makefile) are a barrier for tasks that compile; tasks that start
  the application (``test``, ``run``, ``ecto.*``, ``ash.*``...) open the SQLite databases
  ``config/config.exs``, ``dev.exs`` and ``test.exs`` name, each with its ``-wal``, ``-shm``
  and ``-journal`` beside it (a database named in a way not read here is a barrier); and a
  project in the default layout reads mix.exs, config, lib, test, priv, deps... but not the
  other environments' ``_build`` (``{mix-sources}``), so ``mix test`` and ``mix credo`` run
  side by side;
- **Rails**: ``rspec``, ``rails``, ``rake`` open the SQLite databases ``config/database.yml``
  names (``<%= %>`` in it: a barrier);
- **pyproject build backends**: ``uv run``, ``uv sync`` and ``python -m build`` build the
  project; a backend that writes only its output (hatchling without build hooks, flit,
  pdm, poetry-core, uv_build) runs no code of the project, so their effects are known;
  setuptools or a ``setup.py`` (``*.egg-info`` and ``build/`` beside the sources, and
  ``setup.py`` is code) is a barrier; no ``[build-system]`` builds nothing;
- **the repository**: for every git command, the repository of each directory it runs in (a
  nested one too, and the submodules under ``.git/modules``): a configuration naming
  programs git may run (drivers, filters, ``core.hooksPath``, ``core.editor``,
  ``man.viewer``, ``remote.*.uploadpack``, includes...) is a barrier; for one that writes,
  so is any hook installed; with neither, its ``unknown-effects`` ("it runs the repository's
  hooks") are taken back. A ``.git`` file (a linked worktree, a submodule) is followed: the
  directory it points to is claimed where the command writes ``.git``;
- **workspace programs**: a program of the workspace that the rules describe by name
  (``.venv/bin/pytest``, an activated virtualenv's ``pytest`` on ``PATH``,
  ``node_modules/.bin/eslint``, ``./gradlew``) must be what installs it (a console-script
  shim, a link to an interpreter, the wrapper's script), or the command is a barrier;
  ``python -m NAME`` with a ``NAME.py`` or ``NAME/`` where it runs runs that instead: a
  barrier;
- **tools' configuration and the environment**: ruff, mypy and pytest writing where their
  configuration moves their caches or reports (``_tool_config``); variables of the
  environment moving a toolchain's writes into the workspace (``CARGO_TARGET_DIR``,
  ``MIX_BUILD_PATH``, ``UV_PROJECT_ENVIRONMENT``, ``GOFLAGS=-mod=mod``...): barriers.

What was read must still be what the command's later steps see: a command that writes a file
the analysis read to decide what its own programs do (``echo ... > package.json && npm
test``) is a barrier.

Every file is read at most :data:`FILE_LIMIT` bytes; a larger one counts as saying anything.
Reading is textual and errs towards more claims: what is not understood is a barrier.
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
import re
import shlex
import shutil
import tomllib
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from ._access import Access, Cwds, join
from ._analysis import Analysis, Walk, _analyse, walk_command
from ._rules import Rule, ShellRules
from ._tool_config import moved_writes, tools_of
from ._words import Word

__all__ = ["Project", "analyse", "analyse_in_project", "project_rules"]

FILE_LIMIT: Final = 1 << 20
"""Bytes of a configuration file read."""
SQLITE_SIDES: Final = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database it opens."""

_RULES_FILE: Final = ".toolkernel/shell.toml"


class _TooLarge(Exception):
    pass


_TOO_LARGE: Final = "\0too large"  # a read's memo for a file past FILE_LIMIT


def analyse_in_project(
    command: str, rules: ShellRules, root: str | os.PathLike[str], environ: Mapping[str, str]
) -> Analysis:
    """:func:`analyse` with the project in ``root`` read where it decides what runs."""
    project = Project(pathlib.Path(os.path.abspath(root)), environ)
    walk = Walk(project.rules(rules), project)
    analysis = walk_command(walk, command)
    if analysis.barrier is not None:
        return analysis
    why = project.stale(analysis) or project.git_barrier(analysis) or project.tool_barrier(analysis)
    if why is not None:
        return attrs.evolve(analysis, accesses=(), barrier=why)
    return project.with_repository(analysis)


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
class Project:
    """The workspace in ``root``, read as the programs run in it would read it."""

    root: pathlib.Path
    environ: Mapping[str, str]
    consulted: set[pathlib.Path] = attrs.field(factory=set)
    """Every file read (or looked for) to decide what the command does."""
    _texts: dict[pathlib.Path, str | None] = attrs.field(factory=dict, init=False)
    _sources: dict[str, list[str] | None] = attrs.field(factory=dict, init=False)

    # -- files -------------------------------------------------------------------------------

    def place(self, spelled: str) -> pathlib.Path | None:
        """The directory or file ``spelled`` (as the walk spells paths) names, if it is in the
        workspace; None if not (or not known)."""
        if spelled.startswith("~"):
            spelled = os.path.expanduser(spelled)
            if spelled.startswith("~"):
                return None
        where = pathlib.Path(os.path.normpath(self.root / spelled))
        if where != self.root and self.root not in where.parents:
            return None
        return where

    def read(self, file: pathlib.Path) -> str | None:
        """The text of ``file``, or None if there is none; raises :class:`_TooLarge` past
        :data:`FILE_LIMIT` bytes."""
        self.consulted.add(file)
        if file in self._texts:  # one analysis reads a file once
            text = self._texts[file]
        else:
            try:
                with open(file, "rb") as handle:
                    data = handle.read(FILE_LIMIT + 1)
            except OSError:
                data = None
            text = None if data is None else data.decode("utf-8", errors="replace")
            if data is not None and len(data) > FILE_LIMIT:
                text = _TOO_LARGE
            self._texts[file] = text
        if text is _TOO_LARGE:
            raise _TooLarge(str(file))
        return text

    def text(self, walk: Walk, file: pathlib.Path) -> str | None:
        try:
            return self.read(file)
        except _TooLarge:
            raise walk.fail(f"{self.shown(file)} is too large to read") from None

    def shown(self, file: pathlib.Path) -> str:
        try:
            return file.relative_to(self.root).as_posix() or "."
        except ValueError:
            return str(file)

    def spelled(self, file: pathlib.Path) -> str:
        """``file`` spelled as the walk spells paths (relative to the root)."""
        return self.shown(file)

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
        pyproject = _toml(self.read(files[0]) or "")
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

    # -- what a program does, where the project decides it ----------------------------------

    def apply(self, walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds) -> bool:
        """Record what ``rule``'s program does in this project, if the project decides it;
        False to let the rule alone say."""
        reader = _READERS.get(rule.name)
        if reader is None:
            return False
        return reader(self, walk, rule, args, cwds)

    def check_program(self, walk: Walk, name: str, cwds: Cwds) -> None:
        """Refuse a workspace program that is not what the rule of its name describes."""
        for cwd in sorted(cwds):
            if "/" in name:
                where = self.place(join(cwd, name))
            else:
                found = shutil.which(name, path=self.environ.get("PATH", os.defpath))
                where = None if found is None else self.place(os.path.abspath(found))
            if where is None:
                continue
            program = where.name
            if _installed_as(self, where, program):
                continue
            raise walk.fail(
                f"{self.shown(where)} is the workspace's own program, not the {program} "
                f"its rule describes"
            )

    # -- what a mix project reads ------------------------------------------------------------

    def mix_sources(self, cwd: str) -> list[str] | None:
        """The places a mix project in ``cwd`` reads (spelled from the root), or None if they
        are not known: mix.exs moves its layout (``build_path``, ``deps_path``, an umbrella),
        or its configuration reads other files."""
        if cwd not in self._sources:
            self._sources[cwd] = self._mix_sources(cwd)
        return self._sources[cwd]

    def _mix_sources(self, cwd: str) -> list[str] | None:
        where = self.place(cwd)
        if where is None:
            return None
        try:
            text = self.read(where / "mix.exs")
            configs = [self.read(c) or "" for c in sorted((where / "config").glob("*.exs"))]
        except _TooLarge:
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
        return [self.spelled(where / name) for name in sorted(places)]

    # -- git ---------------------------------------------------------------------------------

    def repository(self, spelled: str) -> tuple[pathlib.Path, pathlib.Path] | None:
        """(work tree, git directory) of the repository git finds from ``spelled``."""
        start = self.place(spelled)
        if start is None:
            outside = os.path.expanduser(spelled)
            if not os.path.isabs(outside):
                return None
            start = pathlib.Path(outside)
        directory = start
        while True:
            git_dir = _git_dir(self, directory)
            if git_dir is not None:
                return directory, git_dir
            if directory.parent == directory:
                return None
            directory = directory.parent

    def repositories(self, analysis: Analysis) -> list[tuple[pathlib.Path, pathlib.Path]]:
        """(work tree, git directory) of each repository the git commands run in."""
        found = (self.repository(spelled) for spelled in analysis.git_directories)
        return list(dict.fromkeys(f for f in found if f is not None))

    def git_barrier(self, analysis: Analysis) -> str | None:
        """Why the repositories' configuration or hooks make the git commands unknown, as a
        barrier; None if they run no program of the repository's."""
        if not analysis.git_directories:
            return None
        writes = analysis.git == "write"
        for _tree, git_dir in self.repositories(analysis):
            for config in _configs(self, git_dir):
                why = _names_programs(self, config, writes=writes)
                if why is not None:
                    return why
            if writes:
                hook = _installed_hook(self, git_dir)
                if hook is not None:
                    return f"the repository's hook {hook} runs with its git commands"
        return None

    def with_repository(self, analysis: Analysis) -> Analysis:
        """``analysis`` with the places a ``.git`` file points to claimed where ``.git`` is
        written, and the hooks' unknown effects taken back (there are none)."""
        unknown = analysis.unknown_effects
        repositories = self.repositories(analysis)
        every = [self.repository(spelled) for spelled in analysis.git_directories]
        if every and None not in every:
            # Every repository its git commands run in was read: none runs a hook or a program.
            unknown = tuple(u for u in unknown if not _git_rule(u))
        extra: list[Access] = []
        written = {a.path for a in analysis.accesses if a.kind == "write" and a.path}
        for tree, git_dir in repositories:
            dot_git = tree / ".git"
            if not dot_git.is_file() or self.spelled(dot_git) not in written:
                continue
            for place in (git_dir, _common_dir(self, git_dir)):
                if place is None:
                    continue
                spelled = self.spelled(place) if self.place(str(place)) else str(place)
                extra.append(Access("write", spelled, "git", optional=True))
        if not extra and unknown == analysis.unknown_effects:
            return analysis
        accesses = tuple(dict.fromkeys((*analysis.accesses, *extra)))
        return attrs.evolve(analysis, accesses=accesses, unknown_effects=unknown)

    # -- tools' configuration ----------------------------------------------------------------

    def tool_barrier(self, analysis: Analysis) -> str | None:
        """Why the environment or a tool's configuration moves what it writes."""
        for rule in analysis.rules:
            for name in _MOVING_VARIABLES.get(rule.split(" ")[0], ()):
                value = self.environ.get(name)
                if not value:
                    continue
                if name == "GOFLAGS":
                    if "-mod" in value or "-modfile" in value or "-toolexec" in value:
                        return f"GOFLAGS={value} changes what go writes and runs"
                    continue
                moved = pathlib.Path(os.path.expanduser(value))
                if not moved.is_absolute() or self.place(str(moved)) is not None:
                    return f"{name}={value} makes {rule} write in the workspace, unclaimed"
        tools = tools_of(analysis.rules)
        if not tools:
            return None
        directories = [str(self.root)]
        for access in analysis.accesses:
            if access.path is None:
                continue
            where = self.place(access.path)
            while where is not None and where != self.root:
                if where.is_dir():
                    directories.append(str(where))
                where = where.parent
        return moved_writes(tools, directories, self.environ)


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


# -- package.json scripts ------------------------------------------------------------------------

_SCRIPT_RUNNERS: Final = {
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
_NPMRC_PROGRAMS: Final = re.compile(
    r"^\s*(?:script-shell|shell|node-options|onload-script|ignore-scripts)\s*=", re.MULTILINE
)


def _package_script(
    project: Project, walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds
) -> bool:
    fixed = _SCRIPT_RUNNERS[rule.name]
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
        package = _nearest(project, cwd, "package.json")
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


def _nearest(project: Project, cwd: str, name: str) -> pathlib.Path | None:
    """``name`` in ``cwd`` or the nearest directory above it, within the workspace."""
    where = project.place(cwd)
    while where is not None:
        project.consulted.add(where / name)
        if (where / name).is_file():
            return where / name
        if where == project.root:
            return None
        where = where.parent
    return None


# -- mix -----------------------------------------------------------------------------------------

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
_DATABASE: Final = re.compile(
    r"\bdatabase\s*:\s*(?P<value>Path\.(?:expand|join)\((?:[^()\n]|\([^()\n]*\))*\)"
    r'|"(?:[^"\n#]|#\{[^}\n]*\})*"|[^\n,]+)'
)
_EXPANDED: Final = re.compile(
    r'^Path\.(?:expand\(\s*"(?P<path>[^"]+)"\s*,\s*__DIR__\s*\)'
    r'|join\(\s*__DIR__\s*,\s*"(?P<joined>[^"]+)"\s*\))\s*$'
)
_STRING: Final = re.compile(r'^"(?P<path>[^"]+)"\s*$')
# `#{System.get_env("MIX_TEST_PARTITION")}` in a database's name: the variable's value.
_INTERPOLATED_ENV: Final = re.compile(r'#\{System\.get_env\("(?P<name>\w+)"\)\}')


def _mix(project: Project, walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds) -> bool:
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
            _apply_rule(walk, rule, words, frozenset({cwd}))
            continue
        walk.touch("read", project.spelled(mix_exs), frozenset({"."}), "mix")
        compiles = task is None or task in _MIX_COMPILING or task not in _MIX_OWN_TASKS
        if compiles and _MIX_COMPILERS.search(text):
            shown = project.shown(mix_exs)
            raise walk.fail(f"{shown} adds compilers (elixir_make runs a Makefile)")
        env = _mix_preferred_env(walk, text, task or "")
        aliases = _mix_aliases(walk, project, mix_exs, text)
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
            _apply_rule(walk, rule, words, here)
        if task in _MIX_DATABASE and _SQLITE_ADAPTER.search(text):
            for database in _mix_databases(project, walk, where):
                _database(walk, database, "mix")
    return True


_PREFERRED: Final = re.compile(
    r"\b(?:preferred_envs|preferred_cli_env)\s*:\s*(?P<value>\[[^\]]*\]|\S+)"
)
_ENV_PAIR: Final = re.compile(r'"?(?P<task>[\w.\-]+)"?\s*:\s*:(?P<env>\w+)')


def _mix_preferred_env(walk: Walk, text: str, task: str) -> str | None:
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


def _mix_aliases(
    walk: Walk, project: Project, mix_exs: pathlib.Path, text: str
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


def _mix_databases(project: Project, walk: Walk, where: pathlib.Path | None) -> list[str]:
    if where is None:
        return []
    found = []
    for name in ("config.exs", "dev.exs", "test.exs"):
        config = where / "config" / name
        text = project.text(walk, config)
        if text is None:
            continue
        for match in _DATABASE.finditer(text):
            value = _INTERPOLATED_ENV.sub(
                lambda m: project.environ.get(m.group("name"), ""), match.group("value").strip()
            )
            expanded = _EXPANDED.match(value)
            plain = _STRING.match(value)
            if "#{" in value:
                expanded = plain = None  # a name computed another way
            if expanded is not None:
                relative = expanded.group("path") or expanded.group("joined")
                file = pathlib.Path(os.path.normpath(config.parent / relative))
            elif plain is not None:
                file = pathlib.Path(os.path.normpath(where / plain.group("path")))
            else:
                raise walk.fail(
                    f"{project.shown(config)} names a database in a way not read here ({value})"
                )
            found.append(project.spelled(file) if project.place(str(file)) else str(file))
    return found


def _database(walk: Walk, spelled: str, rule: str) -> None:
    """A SQLite database a program opens, with the files SQLite keeps beside it."""
    for side in ("", *SQLITE_SIDES):
        walk.touch("write", spelled + side, frozenset({"."}), rule, optional=True)


# -- mise tasks --------------------------------------------------------------------------------

_MISE_FILES: Final = (
    "mise.toml",
    ".mise.toml",
    "mise.local.toml",
    ".config/mise.toml",
    "mise/config.toml",
)


def _mise(project: Project, walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds) -> bool:
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
        tasks, root = _mise_tasks(project, walk, cwd)
        _mise_task(project, walk, tasks, root, task, extra, set())
    return True


def _mise_tasks(
    project: Project, walk: Walk, cwd: str
) -> tuple[dict[str, Any], pathlib.Path | None]:
    where = project.place(cwd)
    while where is not None:
        for name in _MISE_FILES:
            file = where / name
            text = project.text(walk, file)
            if text is not None:
                walk.touch("read", project.spelled(file), frozenset({"."}), "mise")
                tasks = _toml(text).get("tasks", {})
                if not isinstance(tasks, dict):
                    raise walk.fail(f"{project.shown(file)}: its tasks are not a table")
                return tasks, where
        if where == project.root:
            break
        where = where.parent
    return {}, None


def _mise_task(
    project: Project,
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
        _mise_task(project, walk, tasks, root, str(other).split()[0], (), seen)
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


# -- Rails ---------------------------------------------------------------------------------------

_YAML_DATABASE: Final = re.compile(r"^\s*database\s*:\s*(?P<value>\S+)\s*$", re.MULTILINE)


def _rails(project: Project, walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds) -> bool:
    _apply_rule(walk, rule, args, cwds)
    for cwd in sorted(cwds):
        where = project.place(cwd)
        if where is None:
            continue
        config = where / "config" / "database.yml"
        text = project.text(walk, config)
        if text is None or "sqlite3" not in text:
            continue
        if "<%" in text:
            raise walk.fail(f"{project.shown(config)} computes its databases (ERB)")
        for match in _YAML_DATABASE.finditer(text):
            value = match.group("value").strip("\"'")
            file = pathlib.Path(os.path.normpath(where / value))
            if project.place(str(file)) is not None:
                _database(walk, project.spelled(file), rule.name)
    return True


# -- Python builds -------------------------------------------------------------------------------

_STATIC_BACKENDS: Final = frozenset(
    {
        "hatchling.build",
        "flit_core.buildapi",
        "pdm.backend",
        "poetry.core.masonry.api",
        "uv_build",
    }
)


def _python_build(
    project: Project, walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds
) -> bool:
    """``uv run``, ``uv sync``, ``python -m build``: what building the project runs."""
    _apply_rule(walk, rule, args, cwds)
    for cwd in sorted(cwds):
        pyproject = _nearest(project, cwd, "pyproject.toml")
        if pyproject is None:
            continue
        why = _backend_runs_code(project, walk, pyproject)
        if why is not None:
            raise walk.fail(why)
    walk.unknown[:] = [u for u in walk.unknown if not u.startswith(f"{rule.name}: ")]
    return True


def _backend_runs_code(project: Project, walk: Walk, pyproject: pathlib.Path) -> str | None:
    shown = project.shown(pyproject)
    if (pyproject.parent / "setup.py").exists():
        return f"{project.shown(pyproject.parent / 'setup.py')} builds the project (it is code)"
    table = _toml(project.text(walk, pyproject) or "")
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


def _python_module(
    project: Project, walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds
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
    if module:
        top = module.split(".")[0]
        for cwd in sorted(cwds):
            where = project.place(cwd)
            if where is None:
                continue
            for shadow in (where / f"{top}.py", where / top):
                if shadow.exists():
                    raise walk.fail(
                        f"python -m {module} runs {project.shown(shadow)}, the workspace's own "
                        f"module, not the program its rule describes"
                    )
    return False


# -- workspace programs --------------------------------------------------------------------------

_SHIM: Final = re.compile(
    r"\A#![^\n]*python[^\n]*\n(?:#[^\n]*\n)*import (?:re|sys)\n"
    r"(?:import (?:re|sys)\n)?from [\w.]+ import \w+\n",
)
_WRAPPERS: Final = {
    "gradlew": "Gradle start up script",
    "mvnw": "Apache Maven Wrapper",
}


def _installed_as(project: Project, where: pathlib.Path, program: str) -> bool:
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
    except _TooLarge:
        return False
    head = head[:4096]
    if head.startswith("\x7fELF"):
        return True  # a program a wheel or a package installed, built for this machine
    if program in _WRAPPERS:
        return _WRAPPERS[program] in head
    return _SHIM.match(head) is not None


# -- the repository ------------------------------------------------------------------------------

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


def _git_dir(project: Project, directory: pathlib.Path) -> pathlib.Path | None:
    dot_git = directory / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():  # a linked worktree or a submodule: "gitdir: <path>"
        try:
            text = project.read(dot_git) or ""
        except _TooLarge:
            return None
        if text.startswith("gitdir:"):
            target = text[len("gitdir:") :].strip()
            return pathlib.Path(os.path.normpath(directory / target))
    return None


def _common_dir(project: Project, git_dir: pathlib.Path) -> pathlib.Path | None:
    try:
        text = project.read(git_dir / "commondir")
    except _TooLarge:
        return None
    if text is None:
        return None
    return pathlib.Path(os.path.normpath(git_dir / text.strip()))


def _configs(project: Project, git_dir: pathlib.Path) -> list[pathlib.Path]:
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


def _names_programs(project: Project, config: pathlib.Path, *, writes: bool) -> str | None:
    shown = project.shown(config)
    try:
        text = project.read(config)
    except _TooLarge:
        return f"{shown} is too large to read"
    if text is None:
        return None
    pattern = _PROGRAMS_WRITING if writes else _PROGRAMS_READING
    if pattern.search(text) is not None:
        return f"{shown} names programs git runs (a driver, a hook path, an editor, ...)"
    return None


def _installed_hook(project: Project, git_dir: pathlib.Path) -> str | None:
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


# -- helpers -------------------------------------------------------------------------------------


def _toml(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def _apply_rule(walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds) -> None:
    from ._programs import apply_rule

    apply_rule(walk, rule, args, cwds)


Reader = Callable[[Project, Walk, Rule, Sequence[Word], Cwds], bool]
_READERS: Final[dict[str, Reader]] = {
    **dict.fromkeys(_SCRIPT_RUNNERS, _package_script),
    "mix": _mix,
    "mise run": _mise,
    **dict.fromkeys(("rspec", "rails", "rake"), _rails),
    **dict.fromkeys(("uv run", "uv sync", "uv tool install", "build"), _python_build),
    **dict.fromkeys(("python", "python3"), _python_module),
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

"""Shell rules: what a program (and each of its subcommands) reads, writes and runs, as data.

A rule table maps program names to :class:`Rule` objects. Rules are written in TOML (the
built-in ones are in ``rules.toml`` beside this module); one table per program, and nested
tables for subcommands::

    [cat]
    operands = "read..."               # every operand is a path it reads

    [sed]
    value-options = ["-l", "--line-length"]
    text-options = ["-e", "--expression", "-f", "--file"]
    operands = ["text", "read..."]     # a script, then files
    [sed.when."-i"]                    # with -i, the files are rewritten in place
    operands = ["text", "parent..."]

    [bd.show]                          # `bd show ...`: reads the issue database
    reads = [".beads/"]
    [bd.create]
    writes = [".beads/"]

Fields of a rule (all optional):

``operands``
    The role of each operand (a word that is not an option), in order: a string or a list. The
    last role may end in ``...`` to cover every further operand. Roles:

    - ``read``: a path it reads (a shared claim on it and everything under it);
    - ``write``: a path it writes in place or creates as a regular file (an exclusive claim);
    - ``dir``: a directory it creates if missing and writes beneath (``mkdir -p``);
    - ``parent``: a path whose *entry* it creates, removes, renames or replaces through a new
      file (``mv``, ``rm``, ``mkdir``, ``sed -i``): an exclusive claim on the directory holding
      it, because that is what the change is visible in, and what Landlock can enforce;
    - ``database``: a SQLite database it opens: the file, and the ``-wal``, ``-shm`` and
      ``-journal`` files SQLite keeps beside it (exclusive claims, even to read: opening a
      database in WAL mode writes its ``-shm``);
    - ``text``: not a path (a pattern, a script, a message, a number);
    - ``command``: this operand and every word after it are a command that is run (wrappers:
      ``timeout 10 pytest``); ``command+input``: the same, and the command also gets operands
      from its input (``xargs``), which are unknown;
    - ``script``: a shell script that is run (``bash -c``);
    - ``barrier``: any operand here makes the command one this table does not understand.

    One role in the middle of the list may end in ``...`` too: it takes every operand the
    roles after it leave (``cp``: ``["read...", "write"]``, the last operand is the copy).
    A command with more operands than its roles cover is not understood.
``min-operands``
    Fewer operands make the command one that is not understood (``ln`` with one operand makes
    the link in the current directory, which its roles don't describe).
``default``
    Operands to assume when there are none (``"."`` for ``ls``); ``default-when`` lists options
    of which one must be present for the default to apply (``grep -r``).
``flag-options``
    Options without a value, named so that an abbreviation of another option is not taken for
    them (``pytest --co``: a flag of its own, not ``--color``).
``optional-value-options``
    Options whose value, if any, is attached (``sed -i.bak``, ``--in-place=.bak``): the rest of
    a short-option cluster, never the next word.
``value-options``, ``read-options``, ``write-options``, ``parent-options``, ``dir-options``,
``database-options``, ``cd-options``, ``command-options``, ``script-options``
    Options that take a value (the next word, ``--name=value``, or the rest of a short-option
    cluster such as ``-n20``): plain text, a path read, written, or changed as an entry, a
    directory made and written beneath (``cmake -B build``), a SQLite database opened, a
    directory the program works in (``git -C``), the start of a command that is run
    (``python -m pytest`` runs the ``pytest`` rule), or a shell script (``bash -c``).
``text-options``
    Options that supply the leading ``text`` operand (``grep -e PATTERN``): when one is given,
    the operands start at the next role.
``barrier-options``
    Options that make the program run other programs or do what the rule does not describe:
    the command is then not understood (``rg --pre``, ``find -exec`` is handled by ``find``).
``reads``, ``writes``
    Fixed paths it reads or writes, relative to the directory it runs in (a program's own apply
    when no subcommand is named: ``git stash`` but not ``git stash list``). A path it writes is
    claimed in each parent of that directory too, up to the workspace root, since tools find
    their project's root upward (``cd sub && pytest`` writes the root's ``.pytest_cache`` when
    the root holds pytest's configuration). A path ending in
    ``/`` is a directory (``.pytest_cache/``); the Bash tool creates a missing one before the
    command runs, so that it can be confined to it. ``{workspace}`` is the whole workspace;
    ``{git-dir}`` is ``.git`` in the directory it runs in and in each parent up to the root.
    ``${NAME:-default}`` is a variable's value: each the command gives it, or the
    environment's, or the default (``_build/${MIX_ENV:-dev}``).
``outside-writes``
    Places outside the workspace it may write (caches: ``~/.cache/uv``, ``$UV_CACHE_DIR``).
    They are not claims (the kernel does not lease what is outside the workspace); the Bash
    tool lets a confined command write there.
``barrier``
    A reason: the command is never understood (``make``, ``npm install``: they run whatever the
    project says).
``unknown-effects``
    A reason: the program runs code or reads configuration that the text and the rules don't
    show (the project's tests, build scripts, hooks, a configuration file that is a program),
    so what it reads and writes beyond its claims is not known: ``pytest``, ``cargo build``,
    ``mix test``, ``git commit``. Its claims are still the best prediction (what the command
    waits for); :attr:`Analysis.effects_known` is False for it, and where no sandbox can
    observe what a command really does, the Bash tool makes such a command a barrier. An empty
    string in a ``when`` table takes it back (``tsc --noEmit`` runs nothing of the project).
``effects-beyond``
    A reason: the program changes something beyond the sandbox, which throwing a run of it
    away does not undo: it sends data over the network (``curl -d``, ``git push``), changes a
    database server, a container daemon or a device, publishes something, or installs
    programs outside the workspace (``docker build``, ``gh pr create``, ``go install``). The
    Bash tool's sandbox never runs such a command twice (:attr:`Analysis.confined`); its
    claims are what they are either way. An empty string in a ``when`` table takes it back.
    Fetching (``git fetch``, ``curl`` without data, ``docker ps``) and the toolchains' caches
    are not beyond.
``makes-links``
    ``true`` for a program that makes links (``ln``, ``cp -s``): the rest of the command could
    reach other paths through them than the ones its claims name, so a command that makes
    links and touches anything else is not understood.
``git``
    ``"read"`` for git subcommands that only read (``"write"``, the default, undoes it in a
    ``when`` table): the command then runs with
    ``GIT_OPTIONAL_LOCKS=0`` and the programs a repository can name (fsmonitor, hooks, pager,
    external diff) disabled, if every git command in it only reads. In a repository whose own
    configuration names diff or filter drivers (programs git would run even to read), the
    analysis with the project read makes it a barrier instead (``_project``).
``when``
    A table of option name to a partial rule: with that option present, its fields replace the
    rule's (``[ruff.check.when."--fix"] operands = "write..."``).
any other table
    A subcommand: ``[git.status]`` is the rule for ``git status``. The program's options are
    parsed before the subcommand's name. A subcommand not in the table is not understood, and
    so is the program run without one, unless its own rule has ``reads`` or ``writes`` (what
    ``git stash`` does alone: ``yarn`` alone installs, ``mix`` alone runs the default task).

``command-names``
    The programs its ``command`` operand or option may run (``python -m`` runs a module, and
    only a module named here is the program of that name); another is not understood.

Options not named anywhere are taken as flags without a value. A long option that is not named
but begins the name of one that is (``--out`` for ``--output``) is read as that one, as GNU
``getopt_long`` and git read unambiguous abbreviations; one that begins several is not
understood. Every rule also understands
``--help`` and ``--version`` given alone.

Extending: ``ShellRules.default().extended(text)`` (or ``.extended(mapping)``) returns a table
in which each program's rule from ``text`` is merged over the built-in one: subcommands are
merged one by one, other fields replaced. A project describes its own programs in
``.toolkernel/shell.toml`` at the workspace root, or in the ``[tool.toolkernel.shell]`` table
of its ``pyproject.toml`` (the same format, one table a program): an analysis given the
workspace (``analyse(command, rules, root=...)``, ``shell_claims(command, root=...)``, the Bash
tool's) merges both over its rules, the TOML file last, and reads them again when they change
(``project_rules(root)`` in ``_project``). A table can also be passed whole:
``ShellRules.from_file(path)`` (built-in rules plus the file's) to ``builtin_tools(bash=True,
shell_rules=...)`` or to ``shell_claims``::

    # .toolkernel/shell.toml
    [deploy-preview]
    reads = ["{workspace}"]
    writes = ["dist/"]
    unknown-effects = "it runs the site's build script"
    effects-beyond = "it uploads the site to the preview server"

A project's rules are trusted as its Makefile is: a rule that says less than its program does
makes claims that miss writes (a sandbox reports them; without one they race).
"""

from __future__ import annotations

import functools
import importlib.resources
import os
import tomllib
from collections.abc import Mapping
from typing import Any, Final

import attrs

from .._errors import ShellRulesError

__all__ = ["Rule", "ShellRules", "ROLES"]

ROLES: Final = frozenset(
    {
        "read",
        "write",
        "dir",
        "parent",
        "database",
        "text",
        "command",
        "command+input",
        "script",
        "barrier",
    }
)
_OPTION_LISTS: Final = {
    "flag-options": "flag",
    "value-options": "value",
    "optional-value-options": "optional",
    "read-options": "read",
    "write-options": "write",
    "parent-options": "parent",
    "dir-options": "dir",
    "database-options": "database",
    "cd-options": "cd",
    "command-options": "command",
    "script-options": "script",
    "barrier-options": "barrier",
}
_FIELDS: Final = frozenset(
    {
        "operands",
        "min-operands",
        "default",
        "default-when",
        "reads",
        "writes",
        "outside-writes",
        "barrier",
        "unknown-effects",
        "effects-beyond",
        "makes-links",
        "git",
        "when",
        "text-options",
        "command-names",
        *_OPTION_LISTS,
    }
)


@attrs.frozen
class Rule:
    """The rule of one program or subcommand (see the module's docstring for each field)."""

    name: str
    """``git status``: the words that select it."""
    operands: tuple[str, ...] = ()
    """The roles of the operands; the one at ``repeat`` (if any) takes every operand the
    others leave."""
    repeat: int | None = None
    min_operands: int = 0
    default: tuple[str, ...] = ()
    default_when: frozenset[str] = frozenset()
    options: Mapping[str, str] = attrs.field(factory=dict)
    """Option name (``-n``, ``--lines``) to its kind: value, read, write, parent, cd, command,
    script or barrier."""
    text_options: frozenset[str] = frozenset()
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    outside_writes: tuple[str, ...] = ()
    barrier: str | None = None
    unknown_effects: str | None = None
    """Why what it touches is not fully known from the text (it runs the project's code)."""
    effects_beyond: str | None = None
    """What it changes beyond the sandbox (the network, a database server, a daemon...)."""
    makes_links: bool = False
    git: str | None = None
    command_names: frozenset[str] | None = None
    """The programs its ``command`` operand or option may name (None: any in the table)."""
    when: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    subcommands: Mapping[str, Rule] = attrs.field(factory=dict)
    source: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
    """The table it was read from (so it can be merged and re-read with ``when`` applied)."""

    @property
    def describes_itself(self) -> bool:
        """True if the rule says what its program does when no subcommand is named."""
        return bool(self.reads or self.writes)

    def roles(self, count: int, *, text_given: bool = False) -> list[str | None]:
        """The role of each of ``count`` operands (None: more than the rule expects).

        ``text_given``: an option supplied the leading ``text`` operand (``grep -e``).
        """
        return [self.role(i, count, text_given=text_given) for i in range(count)]

    def role(self, index: int, count: int, *, text_given: bool = False) -> str | None:
        """The role of operand ``index`` of ``count`` (in constant time: a command may have
        hundreds of thousands of operands)."""
        roles = self.operands
        repeat = self.repeat
        if text_given and roles and roles[0] == "text" and repeat != 0:
            roles = roles[1:]
            repeat = None if repeat is None else repeat - 1
        if repeat is None:
            return roles[index] if index < len(roles) else None
        after = len(roles) - repeat - 1
        if index < repeat:
            return roles[index]
        if index >= count - after:
            return roles[len(roles) - (count - index)]
        return roles[repeat]

    def with_options(self, present: set[str]) -> Rule:
        """This rule with the ``when`` tables of the options in ``present`` applied."""
        chosen = [table for option, table in self.when.items() if option in present]
        if not chosen:
            return self
        merged = dict(self.source)
        merged.pop("when", None)
        for table in chosen:
            merged.update(table)
        return _rule(self.name, merged)


def _strings(name: str, field: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ShellRulesError(f"shell rule {name!r}: {field} must be a string or a list of strings")


def _rule(name: str, table: Mapping[str, Any]) -> Rule:
    if not isinstance(table, Mapping):
        raise ShellRulesError(f"shell rule {name!r} must be a table, not {table!r}")
    roles = _strings(name, "operands", table.get("operands", []))
    repeats = [i for i, r in enumerate(roles) if r.endswith("...")]
    if len(repeats) > 1:
        raise ShellRulesError(f"shell rule {name!r}: only one operand role may end in '...'")
    repeat = repeats[0] if repeats else None
    roles = tuple(r.removesuffix("...") for r in roles)
    minimum = table.get("min-operands", 0)
    if isinstance(minimum, bool) or not isinstance(minimum, int) or minimum < 0:
        raise ShellRulesError(f"shell rule {name!r}: min-operands must be a whole number")
    for role in roles:
        if role not in ROLES:
            raise ShellRulesError(
                f"shell rule {name!r}: operand role {role!r} is not one of "
                f"{', '.join(sorted(ROLES))}"
            )
    options: dict[str, str] = {}
    text_options = frozenset(_strings(name, "text-options", table.get("text-options", [])))
    for option in text_options:
        options[option] = "value"
    for field, kind in _OPTION_LISTS.items():
        for option in _strings(name, field, table.get(field, [])):
            if not option.startswith(("-", "+")):
                raise ShellRulesError(
                    f"shell rule {name!r}: {field} names options, which start with '-': "
                    f"not {option!r}"
                )
            options[option] = kind
    barrier = table.get("barrier")
    if barrier is not None and not isinstance(barrier, str):
        raise ShellRulesError(f"shell rule {name!r}: barrier must be a reason (a string)")
    unknown_effects = table.get("unknown-effects")
    if unknown_effects is not None and not isinstance(unknown_effects, str):
        raise ShellRulesError(f"shell rule {name!r}: unknown-effects must be a reason (a string)")
    effects_beyond = table.get("effects-beyond")
    if effects_beyond is not None and not isinstance(effects_beyond, str):
        raise ShellRulesError(f"shell rule {name!r}: effects-beyond must be a reason (a string)")
    makes_links = table.get("makes-links", False)
    if not isinstance(makes_links, bool):
        raise ShellRulesError(f"shell rule {name!r}: makes-links must be true or false")
    git = table.get("git")
    if git not in (None, "read", "write"):
        raise ShellRulesError(
            f'shell rule {name!r}: git may only be "read" or "write", not {git!r}'
        )
    when = table.get("when", {})
    if not isinstance(when, Mapping) or not all(isinstance(v, Mapping) for v in when.values()):
        raise ShellRulesError(f"shell rule {name!r}: when must map option names to tables")
    subcommands = {
        key: _rule(f"{name} {key}", value)
        for key, value in table.items()
        if key not in _FIELDS and isinstance(value, Mapping)
    }
    unknown = [k for k in table if k not in _FIELDS and k not in subcommands]
    if unknown:
        raise ShellRulesError(
            f"shell rule {name!r} has unknown field {unknown[0]!r}; its fields are "
            f"{', '.join(sorted(_FIELDS))}, and tables for subcommands"
        )
    return Rule(
        name=name,
        operands=roles,
        repeat=repeat,
        min_operands=minimum,
        default=_strings(name, "default", table.get("default", [])),
        default_when=frozenset(_strings(name, "default-when", table.get("default-when", []))),
        options=options,
        text_options=text_options,
        reads=_strings(name, "reads", table.get("reads", [])),
        writes=_strings(name, "writes", table.get("writes", [])),
        outside_writes=_strings(name, "outside-writes", table.get("outside-writes", [])),
        barrier=barrier,
        unknown_effects=unknown_effects or None,
        effects_beyond=effects_beyond or None,
        makes_links=makes_links,
        git=git,
        command_names=(
            None
            if "command-names" not in table
            else frozenset(_strings(name, "command-names", table["command-names"]))
        ),
        when=dict(when),
        subcommands=subcommands,
        source=dict(table),
    )


def _merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``extra`` over ``base``: subcommand tables merged one by one, other fields replaced."""
    merged = dict(base)
    for key, value in extra.items():
        old = merged.get(key)
        if key not in _FIELDS and isinstance(value, Mapping) and isinstance(old, Mapping):
            merged[key] = _merge(old, value)
        else:
            merged[key] = value
    return merged


@attrs.frozen(eq=False)
class ShellRules:
    """A table of shell rules: what each program reads, writes and runs.

    ::

        rules = ShellRules.default().extended('''
            [bd.show]
            reads = [".beads/"]
            [bd.create]
            writes = [".beads/"]
        ''')
        shell_claims("bd create 'fix the parser'", rules)   # [exclusive .beads]

    ``ShellRules.default()`` is the built-in table; ``ShellRules.from_file(path)`` is the
    built-in table extended with a TOML file's; ``ShellRules.empty()`` knows no program.
    """

    tables: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict, repr=False)
    rules: Mapping[str, Rule] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(
            self, "rules", {name: _rule(name, table) for name, table in self.tables.items()}
        )

    @classmethod
    def empty(cls) -> ShellRules:
        """A table that knows no program: every command is a barrier."""
        return cls({})

    @classmethod
    def default(cls) -> ShellRules:
        """The built-in rules (``rules.toml`` beside this module)."""
        return _default()

    @classmethod
    def from_toml(cls, text: str) -> ShellRules:
        """Only the rules in ``text`` (TOML), without the built-in ones."""
        try:
            return cls(tomllib.loads(text))
        except tomllib.TOMLDecodeError as error:
            raise ShellRulesError(f"shell rules are not valid TOML: {error}") from None

    @classmethod
    def from_file(cls, file: str | os.PathLike[str]) -> ShellRules:
        """The built-in rules extended with those of a TOML file."""
        with open(file, encoding="utf-8") as stream:
            return cls.default().extended(stream.read())

    def extended(self, extra: str | Mapping[str, Any] | ShellRules) -> ShellRules:
        """This table with the rules of ``extra`` (TOML text, a mapping, or a table) merged
        over it, program by program and subcommand by subcommand."""
        if isinstance(extra, str):
            extra = ShellRules.from_toml(extra)
        tables = extra.tables if isinstance(extra, ShellRules) else extra
        merged = dict(self.tables)
        for name, table in tables.items():
            old = merged.get(name)
            merged[name] = _merge(old, table) if isinstance(old, Mapping) else dict(table)
        return ShellRules(merged)

    def get(self, program: str) -> Rule | None:
        """The rule of ``program``, or None if the table does not know it."""
        return self.rules.get(program)


@functools.cache
def _default() -> ShellRules:
    text = importlib.resources.files(__package__).joinpath("rules.toml").read_text("utf-8")
    return ShellRules.from_toml(text)

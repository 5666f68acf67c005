"""Applying a rule to a program's words: options, operands, subcommands, wrapped commands.

Options are read the way GNU ``getopt_long`` reads them: ``--name=value`` or ``--name value``
for long options that take a value, clusters of short options (``-rn``) where a letter that
takes a value takes the rest of the cluster or the next word (``-n20``, ``-n 20``), ``--`` ends
the options, and options may follow operands. Parsing stops where a command starts (a wrapper's
``command`` operand, a ``command`` option such as ``python -m``), and at a subcommand's name.

What curl, wget and ``gh api`` send beyond the sandbox (a POST, an upload) is read from their
options' values by :func:`~._requests.sends`.

What a rule's data can't say is code, registered per rule name by the module that implements
it (:mod:`._coded`): :class:`_Invocation` runs the handler of its rule once the options are
read, and a program with a grammar of its own is read by its own reader instead. This module
registers the small ones (``go build``, ``sqlite3``, ``env``, ``git init``, the C compilers).

``find`` has its own expression language, read by :func:`find`: its start paths are read, and
``-exec``/``-execdir``/``-ok``/``-okdir`` run a command in which ``{}`` stands for a start path
(each found file lies beneath one); ``-delete`` changes entries beneath a start path.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import attrs

from ._access import Access, Cwds, join, parent_of, path_text
from ._coded import Invocation, coded, handler_for, own_reader_for, reads_own_words
from ._requests import sends
from ._rules import Rule
from ._words import Word

if TYPE_CHECKING:
    from ._walk import Walk

__all__ = ["apply", "apply_rule"]

_VALUE_KINDS: Final = frozenset(
    {"value", "read", "write", "parent", "dir", "database", "cd", "command", "script", "text"}
)
_PATH_ROLES: Final = frozenset({"read", "write", "dir", "parent", "database"})
_FIND_PREFIX_FLAGS: Final = frozenset({"-H", "-L", "-P"})
_FIND_EXEC: Final = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_FIND_IN_DIRECTORY: Final = frozenset({"-execdir", "-okdir"})
_FOUND_DIRECTORY: Final = "\0found"
"""Stands, while its command is walked, for the directory ``-execdir`` runs a command in."""
_FIND_WRITES: Final = {"-fprint": 1, "-fprint0": 1, "-fls": 1, "-fprintf": 2}
_FIND_READS: Final = frozenset({"-newer", "-anewer", "-cnewer", "-samefile"})


def apply(walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds) -> None:
    """Record what the program of ``rule`` does when run with ``args`` in any of ``cwds``.

    Where the walk reads a project and the project's configuration decides what this program
    does (a package.json script, a mix alias), the project's reader says it instead."""
    if walk.project is not None and walk.project.apply(walk, rule, args, cwds):
        return
    apply_rule(walk, rule, args, cwds)


def apply_rule(walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds) -> None:
    """:func:`apply` as the rule alone says."""
    walk.matched.append(rule.name)
    if rule.barrier is not None and not (
        args and args[0].text is not None and args[0].text in rule.subcommands
    ):
        # A barrier with subcommands (`npm run`) still knows those (`npm run lint`).
        raise walk.fail(f"{rule.name}: {rule.barrier}")
    own_reader = own_reader_for(rule.name)
    if own_reader is not None:
        own_reader(walk, rule, args, cwds)
        return
    if len(args) == 1 and args[0].text in ("--help", "--version"):
        return
    _Invocation(walk, rule, args, cwds).run()


class _Invocation:
    """One program run: its options are read, then its operands and fixed paths recorded."""

    def __init__(self, walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds) -> None:
        self.walk = walk
        self.rule = rule
        self.args = list(args)
        self.cwds = cwds
        self.present: set[str] = set()
        self.operands: list[Word] = []
        self.values: list[tuple[str, str, Word]] = []  # (kind, option, value)
        self.rest: list[Word] | None = None  # a command that starts here, and its kind
        self.rest_kind = ""
        self.subcommand: tuple[Word, list[Word]] | None = None
        self.applied: tuple[frozenset[str], Rule] = (frozenset(), rule)

    def fail(self, why: str) -> Exception:
        return self.walk.fail(f"{self.rule.name}: {why}")

    def run(self) -> None:
        self.read_words()
        if self.rule.subcommands and self.subcommand is None and not self.rule.describes_itself:
            # `yarn` installs, `mix` runs the project's default task: what a program does without
            # its subcommand is not what any of its subcommands' rules say, unless its own rule
            # says what it reads or writes (`git stash` pushes, `git remote` lists).
            raise self.fail("without a subcommand it is not described")
        handler = handler_for(self.rule.name)  # what the rule's data can't say (see _coded)
        if handler is not None:
            handler(self)
        sent = sends(self.rule.name, self.present, self.values, self.operands)
        if sent is not None:
            self.walk.beyond.append(f"{self.rule.name}: {sent}")
        rule = self.rule.with_options(self.present)
        if rule.barrier is not None and rule.barrier != self.rule.barrier:
            raise self.fail(rule.barrier)  # an option's `when` table says it is not described
        if rule.unknown_effects is not None:
            self.walk.unknown.append(f"{rule.name}: {rule.unknown_effects}")
        if rule.effects_beyond is not None:
            self.walk.beyond.append(f"{rule.name}: {rule.effects_beyond}")
        if rule.makes_links:
            self.walk.links.append(rule.name)
        cwds = self.cwds
        for kind, option, value in self.values:
            if kind == "cd":
                if value.text is None:
                    raise self.fail(f"{option} names a directory not known from the text")
                cwds = frozenset(join(cwd, value.text) for cwd in cwds)
                self.walk.accesses.extend(_cd(cwd, rule.name) for cwd in cwds)
        for kind, option, value in self.values:
            if kind in _PATH_ROLES:
                self.path(kind, value, cwds, f"{rule.name} {option}")
            elif kind == "script":
                self.script(value, cwds)
        self.operand_roles(rule, cwds)
        if self.subcommand is None:  # a program's own paths are for when no subcommand is named
            self.fixed(rule, cwds)
        self.walk.outside.extend(rule.outside_writes)
        if rule.git is not None or (rule.name.split(" ")[0] == "git" and self.subcommand is None):
            self.walk.git.append(rule.git or "write")
        if rule.name.split(" ")[0] == "git":
            self.walk.git_directories.extend(sorted(cwds))
        if self.subcommand is not None:
            name, words = self.subcommand
            sub = rule.subcommands.get(name.text or "")
            if sub is None:
                raise self.walk.fail(f"{rule.name} {name.raw} is not in the shell rules")
            if rule.name == "git" and "--bare" in self.present:
                # The directory it runs in is the repository (GIT_DIR=.), not its .git.
                if sub.name != "git init":
                    raise self.fail(
                        "--bare makes the directory it runs in the repository, which only "
                        "git init's rule describes"
                    )
                words = [Word.known("--bare"), *words]
            self.walk.nested(lambda: apply(self.walk, sub, words, cwds))
        if self.rest is not None:
            self.command(self.rest, cwds)

    # -- reading the words -------------------------------------------------------------------

    def role_at(self, index: int) -> str | None:
        """The role of operand ``index`` as far as the words read so far tell."""
        # The `when` tables of the options read so far apply (`command -v git` runs nothing).
        present = frozenset(self.present)
        if self.applied[0] != present:
            self.applied = (present, self.rule.with_options(self.present))
        return self.applied[1].role(index, index + 1, text_given=self.text_given())

    def text_given(self) -> bool:
        return not self.rule.text_options.isdisjoint(self.present)

    def read_words(self) -> None:
        args, options = self.args, self.rule.options
        at = 0
        ended = False
        while at < len(args):
            word = args[at]
            text = word.text
            if ended or text is None or not text.startswith("-") or text == "-":
                if self.rule.subcommands and not self.operands:
                    self.subcommand = (word, args[at + 1 :])
                    return
                role = self.role_at(len(self.operands))
                if role in ("command", "command+input"):
                    self.rest, self.rest_kind = args[at:], role
                    return
                if role == "script":
                    self.values.append(("script", "operand", word))
                    self.operands.append(Word.known(""))  # holds the script's place
                    at += 1
                    continue
                self.operands.append(word)
                at += 1
                continue
            if text == "--":
                ended = True
                at += 1
                continue
            name, equals, inline = text.partition("=")
            if text.startswith("--") or text in options or (len(name) > 2 and name in options):
                # `--name[=value]`, and a long option of one dash (`go test -count=1`).
                name = self.long_name(name, inline if equals else None)
                at = self.option(name, Word.known(inline) if equals else None, at)
                if self.rest is not None:
                    return
                continue
            letters = text[1:]
            for index, letter in enumerate(letters):
                name = f"-{letter}"
                kind = options.get(name)
                if kind == "optional":
                    # An attached value or none (`sed -i.bak`): never the next word.
                    self.present.add(name)
                    self.values.append(("optional", name, Word.known(letters[index + 1 :])))
                    at += 1
                    break
                if kind in _VALUE_KINDS and kind != "script":
                    remainder = letters[index + 1 :]
                    if remainder.startswith("=") and kind in _PATH_ROLES:
                        # `-o=x`: GNU programs read `=x`, Go's flag package `x`; claim both.
                        self.values.append((kind, name, Word.known(remainder[1:])))
                    at = self.option(name, Word.known(remainder) if remainder else None, at)
                    break
                if kind == "script":
                    self.present.update(f"-{rest}" for rest in letters[index + 1 :])
                    at = self.option(name, None, at)
                    break
                self.option_flag(name)
            else:
                at += 1
            if self.rest is not None:
                return

    def long_name(self, name: str, inline: str | None) -> str:
        """The option a long option names: itself, or the one it abbreviates.

        GNU ``getopt_long`` and git take any unambiguous beginning of a long option for it
        (``sort --out=f`` is ``--output=f``). A name the rule does not know that begins one it
        knows is read as that one; where that can't be done safely, the command is a barrier.
        """
        rule = self.rule
        known = {*rule.options, *rule.when, *rule.default_when}
        if name in known or not name.startswith("--"):
            return name
        matches = sorted(option for option in known if option.startswith(name))
        if not matches:
            return name
        if len(matches) > 1:
            raise self.fail(f"option {name} may abbreviate any of {', '.join(matches)}")
        full = matches[0]
        kind = rule.options.get(full, "flag")
        if kind in ("flag", "optional") or (kind == "value" and inline is None):
            # A flag; or a value that, if the option is one, is then read as an operand too
            # (more claims, never fewer).
            self.present.add(full)
            return name if kind == "value" else full
        if inline is None or kind in ("barrier", "command", "script"):
            raise self.fail(
                f"option {name} may abbreviate {full}, which the rule follows only whole"
            )
        return full

    def option_flag(self, name: str) -> None:
        self.present.add(name)
        if self.rule.options.get(name) == "barrier":
            raise self.fail(f"option {name} is not understood by its rule")

    def option(self, name: str, value: Word | None, at: int) -> int:
        """Read option ``name`` at word ``at``; the index of the next word to read."""
        kind = self.rule.options.get(name)
        self.present.add(name)
        if kind == "barrier":
            raise self.fail(f"option {name} is not understood by its rule")
        if kind == "optional":
            self.values.append(("optional", name, Word.known("") if value is None else value))
            return at + 1
        if kind not in _VALUE_KINDS:
            return at + 1
        if value is None:
            if at + 1 >= len(self.args):
                return at + 1  # the program will refuse it: it does nothing
            value = self.args[at + 1]
            at += 1
        if kind == "command":
            self.rest, self.rest_kind = [value, *self.args[at + 1 :]], "command"
            return len(self.args)
        self.values.append((kind, name, value))
        return at + 1

    # -- what it touches ---------------------------------------------------------------------

    def path(self, role: str, word: Word, cwds: Cwds, rule: str) -> None:
        if role == "read":
            self.walk.touch("read", word, cwds, rule)
        elif role == "write":
            self.walk.touch("write", word, cwds, rule, create="file")
        elif role == "dir":
            self.walk.touch("write", word, cwds, rule, create="dir")
        elif role == "parent":
            self.walk.touch("write", word, cwds, rule, entry=True)
        elif role == "database":
            # SQLite keeps -wal, -shm and -journal beside a database it opens, even to read.
            self.walk.touch("write", word, cwds, rule, create="file")
            if word.text is not None:
                for side in ("-wal", "-shm", "-journal"):
                    self.walk.touch("write", word.text + side, cwds, rule)

    def operand_roles(self, rule: Rule, cwds: Cwds) -> None:
        self.rule = rule  # the rule with its `when` tables applied
        operands = self.operands
        text_given = self.text_given()
        if rule.default and (not rule.default_when or rule.default_when & self.present):
            roles = rule.roles(len(operands), text_given=text_given)
            if not any(role in _PATH_ROLES for role in roles):
                # No path among the operands (`grep -r TODO`, `ls`): the default ones.
                operands = [*operands, *(Word.known(text) for text in rule.default)]
        if len(operands) < rule.min_operands:
            raise self.fail(f"fewer than {rule.min_operands} operands are not described")
        roles = rule.roles(len(operands), text_given=text_given)
        for word, role in zip(operands, roles, strict=True):
            if role is None:
                raise self.fail(f"operand {word.raw or word.text!r} is more than the rule expects")
            if role == "barrier":
                raise self.fail(f"operand {word.raw or word.text!r} is not understood")
            self.path(role, word, cwds, rule.name)

    def fixed(self, rule: Rule, cwds: Cwds) -> None:
        for kind, paths in (("read", rule.reads), ("write", rule.writes)):
            for text in (t for given in paths for t in _expanded(self.walk, given)):
                if text == "{workspace}":
                    self.walk.touch(kind, ".", frozenset({"."}), rule.name)
                elif text == "{mix-sources}":
                    for cwd in cwds:
                        found = (
                            None
                            if self.walk.project is None
                            else self.walk.project.mix_sources(cwd)
                        )
                        for place in found or ["."]:
                            self.walk.touch(kind, place, frozenset({"."}), rule.name)
                elif text == "{git-dir}":
                    for cwd in cwds:
                        for place in _git_dirs(cwd):
                            self.walk.touch(kind, place, frozenset({"."}), rule.name, optional=True)
                else:
                    create = "dir" if text.endswith("/") and kind == "write" else None
                    place = text.rstrip("/") or "."
                    self.walk.touch(kind, place, cwds, rule.name, create=create)
                    if kind == "write" and place != ".":
                        # Tools find their project's root upward (`cd sub && pytest` writes the
                        # root's .pytest_cache when the root holds the configuration, `uv run`
                        # the root's .venv): the same place in each parent is claimed too.
                        above = frozenset(a for cwd in cwds for a in _ancestors(cwd))
                        self.walk.touch(kind, place, above, rule.name, optional=True)

    def script(self, value: Word, cwds: Cwds) -> None:
        if value.text is None:
            raise self.fail("it runs a script not known from the text")
        source = value.text.encode("utf-8", errors="surrogateescape")
        self.walk.nested(lambda: self.walk.script(source, cwds))

    def command(self, words: list[Word], cwds: Cwds) -> None:
        names = self.rule.command_names
        if names is not None and words and words[0].text not in names:
            shown = words[0].raw or words[0].text
            raise self.fail(f"{shown!r} is not one of the programs its rule says it runs")
        if self.rest_kind == "command+input":
            words = _with_input(words, self.values)
        self.walk.nested(lambda: self.walk.run(words, cwds))


@coded("go build")
def _go_build_rule(run: Invocation) -> None:
    if "-o" not in run.present:
        _go_build(run.walk, run.operands, run.cwds)


@coded("env")
def _env(run: Invocation) -> None:
    for _, option, value in run.values:
        if option in ("-u", "--unset"):  # unsetting is setting it to nothing
            if value.text is None:
                raise run.fail(f"{option} unsets a variable not known from the text")
            run.walk.check_name(value.text)


@coded("git init")
def _git_init_rule(run: Invocation) -> None:
    _git_init(run.walk, run.present, run.operands, run.cwds)


def _go_build(walk: Walk, operands: Sequence[Word], cwds: Cwds) -> None:
    """``go build`` without ``-o`` writes the program of one main package where it runs, named
    after the package's directory or its first file (``go build ./cmd/app`` writes ``app``);
    for ``./...`` it writes nothing. Which package is a main one is not known from the text."""
    names = []
    for word in operands or [Word.known(".")]:
        text = word.text
        if text is not None and text.endswith("..."):
            continue
        if text is not None and text.endswith(".go"):
            names.append(text.rpartition("/")[2].removesuffix(".go"))
            break  # files make one package, named after the first
        name = None if text is None else text.rstrip("/").rpartition("/")[2]
        if name in (None, "", ".", ".."):
            walk.touch("write", ".", cwds, "go build")  # named after a directory not known
            return
        names.append(name)
    for name in names:
        walk.touch("write", name, cwds, "go build", create="file")


def _git_init(walk: Walk, present: set[str], operands: Sequence[Word], cwds: Cwds) -> None:
    """``git init`` without a directory makes the repository where it runs: ``.git`` there
    (a file with ``--separate-git-dir``), or, with ``--bare``, the directory itself (``HEAD``,
    ``config``, ``objects/``, ``refs/``... as that version of git makes them). A directory
    named is claimed by its role, and holds either."""
    if operands:
        return
    if "--bare" in present:
        walk.touch("write", ".", cwds, "git init --bare")
    else:
        walk.touch("write", ".git", cwds, "git init")


# Dot-commands of the sqlite3 shell that only print or set how it prints.
_SQLITE_PRINTING: Final = frozenset(
    ".tables .table .schema .fullschema .indexes .indices .headers .header .mode .dump .help "
    ".show .databases .width .timer .eqp .explain .nullvalue .separator .print .quit .exit "
    ".dbinfo .stats .changes .echo .bail .lint .count".split()
)
_SQLITE_REACHING: Final = re.compile(
    r"\battach\b|\bvacuum\s+into\b|\bload_extension\b|\bwritefile\b|\breadfile\b|\bedit\s*\("
    r"|\bfts3_tokenizer\b|\bzipfile\b|\bfsdir\b|\bsqlar",
    re.IGNORECASE,
)


@coded("sqlite3")
def _sqlite_rule(run: Invocation) -> None:
    _sqlite(run.walk, run.operands)


def _sqlite(walk: Walk, operands: Sequence[Word]) -> None:
    """Refuse SQL given to ``sqlite3`` that reaches other files or programs."""
    for word in operands[1:]:
        text = word.text
        if text is None:
            raise walk.fail("sqlite3 runs SQL not known from the text")
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith(".") and stripped.split()[0].lower() not in _SQLITE_PRINTING:
                raise walk.fail(f"sqlite3 {stripped.split()[0]} reaches other files or programs")
        if _SQLITE_REACHING.search(text):
            raise walk.fail("sqlite3 SQL that attaches, writes or reads other files")


_COMPILERS: Final = frozenset({"gcc", "cc", "g++", "c++", "clang", "clang++"})
_SOURCE: Final = (".c", ".cc", ".cpp", ".cxx", ".c++", ".C", ".m", ".mm", ".s", ".S", ".i", ".ii")


@coded(*sorted(_COMPILERS))
def _compiler(run: Invocation) -> None:
    if "-o" not in run.present:
        _compiled(run.walk, run.rule.name, run.present, run.operands, run.cwds)


def _compiled(
    walk: Walk, rule: str, present: set[str], operands: Sequence[Word], cwds: Cwds
) -> None:
    """A C compiler without ``-o``: ``a.out`` where it runs when it links; with ``-c`` (or
    ``-S``) a ``.o`` (``.s``) named after each source, where it runs; with ``-E`` or
    ``-fsyntax-only``, nothing."""
    if present & {"-E", "-fsyntax-only", "-M", "-MM"}:
        return
    suffix = ".s" if "-S" in present else ".o" if "-c" in present else None
    if suffix is None:
        walk.touch("write", "a.out", cwds, rule, create="file")
        return
    for word in operands:
        text = word.text
        if text is None:
            walk.touch("write", ".", cwds, rule)  # named after a source not known
            return
        name = text.rpartition("/")[2]
        if name.endswith(_SOURCE):
            stem = name.rpartition(".")[0]
            walk.touch("write", stem + suffix, cwds, rule, create="file")


_VARIABLE: Final = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*):-(?P<default>[^}]*)\}")


def _expanded(walk: Walk, text: str) -> list[str]:
    """``text`` with each ``${NAME:-default}`` replaced by every value the variable may have:
    one the command gives it, the environment's (where the walk reads a project), else the
    default. A value not known from the text cuts the path there (its directory is claimed)."""
    found = _VARIABLE.search(text)
    if found is None:
        return [text]
    name = found.group("name")
    values = set(walk.variables.get(name, set()))
    environ = None if walk.project is None else walk.project.environ.get(name)
    if environ:
        values.add(environ)  # the environment's value wins over a default or a preference
    if name in walk.scoped:
        values.add(walk.scoped[name])
    elif not environ:
        values.add(found.group("default"))
    places = []
    for value in sorted(values, key=str):
        if value is None or "/" in value or value in ("", ".", ".."):
            places.append(text[: found.start()].rstrip("/") or ".")
            continue
        places.extend(_expanded(walk, text[: found.start()] + value + text[found.end() :]))
    return places


def _cd(cwd: str, rule: str) -> Access:
    return Access("cd", cwd, rule)


def _ancestors(cwd: str) -> list[str]:
    """Each directory above ``cwd``, up to the workspace root (or ``/``)."""
    found = []
    while cwd not in (".", "/", "~", ""):
        head, _, _ = cwd.rpartition("/")
        cwd = head or ("/" if cwd.startswith("/") else ".")
        found.append(cwd)
    return found


def _git_dirs(cwd: str) -> list[str]:
    """``.git`` in ``cwd`` and in each parent of it up to the workspace root."""
    if cwd.startswith(("/", "~")):
        return [f"{cwd}/.git"]
    parts = [] if cwd == "." else cwd.split("/")
    return [".git", *("/".join([*parts[: n + 1], ".git"]) for n in range(len(parts)))]


def _with_input(words: list[Word], values: list[tuple[str, str, Word]]) -> list[Word]:
    """An ``xargs`` command: the words its input fills in are unknown."""
    replace = [v.text for kind, option, v in values if option in ("-I", "--replace", "-i")]
    if replace:
        marker = replace[0] or "{}"
        return [Word(None, "") if w.text is None or marker in w.text else w for w in words]
    return [*words, Word(None, "")]


def _found(word: Word, start: Word) -> Word:
    """A word of a ``find -exec`` command, with ``{}`` standing for a found path.

    A found path is ``start`` or lies beneath it, so ``{}`` alone is claimed as ``start``. Within
    a longer word (``{}.bak``, ``{}/../x``) it makes a path that need not lie beneath ``start``:
    unknown.
    """
    if word.text == "{}":
        return start
    if "{}" in word.raw or (word.text is not None and "{}" in word.text):
        return Word(None, "", raw=word.raw)
    return word


def _run_in_found_directories(walk: Walk, inner: Sequence[Word], start: Word, cwds: Cwds) -> None:
    """``find START -execdir CMD``: CMD runs in the directory of each file found, which is
    START's own directory or one beneath START, with ``{}`` naming the file there. So each
    path CMD names relative to where it runs is claimed as the whole of that place (one that
    climbs with ``..`` is not understood); absolute ones stay as they are."""
    text = path_text(start)
    if text is None:
        raise walk.fail("find -execdir starts from a directory not known from the text")
    place = text if text.rstrip("/") in (".", "") else parent_of(text)
    found = frozenset({_FOUND_DIRECTORY})
    before = len(walk.accesses)
    command = [Word.known(".") if w.text == "{}" else _found(w, start) for w in inner]
    walk.nested(functools.partial(walk.run, command, found))
    for index in range(before, len(walk.accesses)):
        access = walk.accesses[index]
        spelled = access.path
        if spelled is None or not spelled.startswith(_FOUND_DIRECTORY):
            continue
        rest = spelled[len(_FOUND_DIRECTORY) :].lstrip("/")
        if ".." in rest.split("/"):
            raise walk.fail("find -execdir runs a command that climbs out of where it runs")
        where = frozenset(join(cwd, place) for cwd in cwds)
        walk.accesses[index] = attrs.evolve(access, path=min(where), create=None)
        walk.accesses.extend(attrs.evolve(access, path=p, create=None) for p in sorted(where))


@reads_own_words("find")
def find(walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds) -> None:
    """``find``: start paths are read; actions that write or run are followed."""
    words = list(args)
    at = 0
    while at < len(words) and (words[at].text or "") in _FIND_PREFIX_FLAGS:
        if words[at].text == "-L":  # following links reads wherever they lead
            walk.touch("read", ".", frozenset({"."}), "find -L")
        at += 1
    starts: list[Word] = []
    while at < len(words):
        text = words[at].text
        if text is not None and (text.startswith("-") or text in ("(", "!", ")", ",")):
            break
        starts.append(words[at])
        at += 1
    if not starts:
        starts = [Word.known(".")]
    for start in starts:
        walk.touch("read", start, cwds, rule.name)
    expression = words[at:]
    at = 0
    while at < len(expression):
        text = expression[at].text
        if text in _FIND_EXEC:
            end = at + 1
            while end < len(expression) and expression[end].text not in (";", "+"):
                end += 1
            if end == len(expression):
                raise walk.fail(f"find {text} has no terminating ';' or '+'")
            inner = expression[at + 1 : end]
            if not inner:
                raise walk.fail(f"find {text} names no command")
            for start in starts:
                if text in _FIND_IN_DIRECTORY:
                    _run_in_found_directories(walk, inner, start, cwds)
                    continue
                command = [_found(w, start) for w in inner]
                walk.nested(functools.partial(walk.run, command, cwds))
            at = end + 1
            continue
        if text == "-delete":
            for start in starts:
                if start.text in (".", "./"):
                    walk.touch("write", start, cwds, "find -delete")
                else:
                    walk.touch("write", start, cwds, "find -delete", entry=True)
        elif text in _FIND_WRITES and at + 1 < len(expression):
            walk.touch("write", expression[at + 1], cwds, f"find {text}", create="file")
            at += _FIND_WRITES[text]
        elif text in _FIND_READS and at + 1 < len(expression):
            walk.touch("read", expression[at + 1], cwds, f"find {text}")
            at += 1
        elif text is not None and text in rule.options and rule.options[text] == "barrier":
            raise walk.fail(f"find {text} is not understood by its rule")
        at += 1

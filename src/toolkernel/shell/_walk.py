"""The walk over a parsed shell command: what it reads, writes and runs.

A :class:`Walk` follows the tree-sitter-bash tree of a command: redirections, command and
process substitutions, heredocs, subshells, pipelines, lists and the control structures. Each
simple command it meets is handed to the walk's *dispatch* (``_programs.apply``: the program
rules, and the project's readers where the walk reads a project), which records what the
program touches on the walk. The dispatch and the project are given to the walk, not imported:
the rule modules depend on this module (for the type of what they are handed), never the other
way round.
"""

from __future__ import annotations

import itertools
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, Protocol

from ._access import Access, Cwds, join, parent_of, path_text
from ._rules import Rule, ShellRules
from ._syntax import parse, split_by_newline
from ._words import Word, word_of

if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = ["Barrier", "Dispatch", "ProjectReader", "Walk"]

MAX_DEPTH: Final = 8
"""How deeply commands may nest (wrappers, ``bash -c``, substitutions) before the walk gives up."""

# Assigning these changes which program runs, what it loads, or how later words are read.
_DANGEROUS_NAMES: Final = frozenset(
    "PATH LD_PRELOAD LD_LIBRARY_PATH LD_AUDIT BASH_ENV ENV IFS SHELLOPTS BASHOPTS CDPATH "
    "GLOBIGNORE PS4 PROMPT_COMMAND HOME XDG_CONFIG_HOME NODE_OPTIONS PYTHONHOME PYTHONSTARTUP "
    "PYTHONINSPECT PERL5OPT PERL5LIB RUBYOPT TMPDIR".split()
)
# BASH_CMDS and BASH_ALIASES rename programs; BASH_XTRACEFD writes the trace to a descriptor.
# PYTHON*: PYTHONPYCACHEPREFIX moves bytecode, PYTHONUSERBASE installs, PYTHONBREAKPOINT runs
# a function (the harmless ones are listed below).
_DANGEROUS_PREFIXES: Final = ("GIT_", "DYLD_", "LD_", "BASH_", "PYTHON")
# Variables (upper case: what programs read) through which tools take where to write, what to
# run, or more options, which a program's rule can't see (`PYTEST_ADDOPTS=--basetemp=x`,
# `CARGO_TARGET_DIR`, `RUSTC_WRAPPER`, `LESSOPEN`, `RIPGREP_CONFIG_PATH`, `npm_config_cache`).
_CONFIGURING: Final = re.compile(
    r"(?:^|_)(?:PATH|HOME|DIR|DIRS|OPTIONS|OPTS|ADDOPTS|FLAGS|CONFIG|CONFIG_FILE|RCFILE|RC|"
    r"WRAPPER|PAGER|EDITOR|VISUAL|PLUGINS|TOOLCHAIN|CACHE|PREFIX|ENVIRONMENT|FILE|SHELL|OPEN|"
    r"CLOSE|EXEC|PROGRAM|COMMAND|LINKER|TARGET)$"
    r"|^(?:npm_config_|NPM_CONFIG_|CARGO_|RUSTC|UV_|PIP_|PYTEST_|COVERAGE_|GO[A-Z]|LESS|XDG_)"
)
# Set often, and only change what a program prints or how fast.
_HARMLESS: Final = frozenset(
    "PYTHONUNBUFFERED PYTHONDONTWRITEBYTECODE PYTHONHASHSEED PYTHONWARNINGS "
    "PYTHONIOENCODING PYTHONUTF8 PYTHONFAULTHANDLER PYTHONDEVMODE CARGO_TERM_COLOR "
    "CARGO_INCREMENTAL GOOS GOARCH GOMAXPROCS".split()
)
_ASSIGNMENT: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# Files that are not in any workspace and need no claim.
_SPECIAL_FILES: Final = frozenset(
    "/dev/null /dev/stdin /dev/stdout /dev/stderr /dev/tty /dev/zero /dev/random "
    "/dev/urandom /dev/full".split()
)
# Builtins that change nothing a claim could describe.
_QUIET_BUILTINS: Final = frozenset(
    ": true false exit return wait read shift break continue getopts ulimit umask type times "
    "jobs".split()
)
# Options of `set` that change how later commands are read: -k puts every `NAME=value` word
# into the environment (`cmd PATH=/x`), -P makes `cd` physical (`cd link/..` is then not `.`).
_SET_LETTERS: Final = frozenset("abefhmnptuvxBCEHT")
_SET_NAMES: Final = frozenset(
    "allexport braceexpand emacs errexit errtrace functrace hashall histexpand history "
    "ignoreeof monitor noclobber noexec noglob nolog notify nounset onecmd pipefail posix "
    "privileged verbose vi xtrace".split()
)
# shopt options that only change how globs match or what is printed (cdable_vars makes `cd x`
# go to $x, lastpipe runs a pipeline's last stage in the shell itself, expand_aliases...).
_SHOPT_NAMES: Final = frozenset(
    "checkwinsize dotglob extglob failglob globasciiranges globstar histappend nocaseglob "
    "nocasematch nullglob xpg_echo".split()
)
# Builtins that change how the rest is run, or run text as code: never understood.
_OPAQUE_BUILTINS: Final = frozenset(
    "eval exec trap alias unalias builtin enable pushd popd coproc kill fc bind complete "
    "compgen disown declare-f mapfile-C".split()
)
_STRUCTURES: Final = frozenset(
    {
        "if_statement",
        "elif_clause",
        "else_clause",
        "while_statement",
        "for_statement",
        "c_style_for_statement",
        "case_statement",
        "case_item",
        "do_group",
    }
)
_REDIRECTS: Final = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
# Where a bare variable name is an arithmetic operand, which may be assigned (`$((PATH=1))`).
_ARITHMETIC: Final = frozenset(
    {
        "arithmetic_expansion",
        "binary_expression",
        "unary_expression",
        "postfix_expression",
        "parenthesized_expression",
        "ternary_expression",
        "c_style_for_statement",
        "subscript",
    }
)
_ARITHMETIC_TESTS: Final = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
# Builtins whose operands name variables they set (`read PATH`, `getopts o PATH`).
_SETS_NAMES: Final = frozenset({"read", "getopts"})
_SUBSTITUTIONS: Final = frozenset({"command_substitution", "process_substitution"})


class Barrier(Exception):
    """Raised inside the walk: the command is not understood (the message says why)."""


Dispatch = Callable[["Walk", Rule, Sequence[Word], Cwds], None]
"""What runs a program's rule on the walk: records what the program of the rule does when run
with the words in any of the directories (``_programs.apply``)."""


class ProjectReader(Protocol):
    """What the walk and the rules ask of the workspace's own configuration, where it decides
    what a program does (``_project.Project``)."""

    @property
    def environ(self) -> Mapping[str, str]:
        """The environment the command runs with."""
        ...

    def apply(self, walk: Walk, rule: Rule, args: Sequence[Word], cwds: Cwds) -> bool:
        """Record what ``rule``'s program does in this project, if the project decides it;
        False to let the rule alone say."""
        ...

    def check_program(self, walk: Walk, name: str, cwds: Cwds) -> None:
        """Refuse a workspace program that is not what the rule of its name describes."""
        ...

    def mix_sources(self, cwd: str) -> list[str] | None:
        """The places a mix project in ``cwd`` reads, or None if they are not known."""
        ...


class Walk:
    """One walk over one command (and the scripts it runs), collecting what it touches."""

    def __init__(
        self, rules: ShellRules, dispatch: Dispatch, project: ProjectReader | None = None
    ) -> None:
        self.rules = rules
        self.dispatch = dispatch
        """What runs a program's rule on the walk (``_programs.apply``)."""
        self.project = project
        """The workspace's own configuration, read where it decides what a program does."""
        self.accesses: list[Access] = []
        self.matched: list[str] = []
        self.outside: list[str] = []
        self.git: list[str] = []
        self.unknown: list[str] = []
        self.beyond: list[str] = []
        """What it changes beyond the sandbox, one reason a rule or construct."""
        self.git_directories: list[str] = []
        self.links: list[str] = []  # the rules that made links
        self.expanding: set[str] = set()  # project aliases being expanded (`mix test`)
        self.variables: dict[str, set[str | None]] = {}
        """Values the command may give a variable (None: one not known from the text)."""
        self.scoped: dict[str, str | None] = {}
        """Values a project's reader sets while it walks a step (a mix alias's environment)."""
        self.depth = 0
        self.fixed_cwd = 0  # > 0 inside loops and conditions, where a cd can't be followed
        self.last_started: Cwds = frozenset({"."})

    # -- results -----------------------------------------------------------------------------

    def fail(self, reason: str) -> Barrier:
        return Barrier(reason)

    def touch(
        self,
        kind: str,
        word: Word | str | None,
        cwds: Cwds,
        rule: str,
        *,
        create: str | None = None,
        entry: bool = False,
        optional: bool = False,
    ) -> None:
        """Record that ``rule`` touches ``word`` (a path as seen from each of ``cwds``)."""
        text = word if isinstance(word, str) or word is None else path_text(word)
        if kind == "write":
            known = text if isinstance(word, str) or word is None else word.prefix
            self.device(known or "", exact=text is not None and text == known, rule=rule)
        if text is None:
            self.accesses.append(Access(kind, None, rule))
            return
        # `-` is standard input or output to some programs, a file to others (`echo > -`, `cp a
        # -`): claimed as a file, which costs nothing where it is a stream.
        if text == "" or text in _SPECIAL_FILES or text.startswith("/dev/fd/"):
            return
        exact = isinstance(word, str) or (word is not None and word.text is not None)
        for cwd in sorted(cwds):
            spelled = join(cwd, text)
            if entry:
                spelled, made = parent_of(spelled), None
            else:
                made = create if exact and not text.endswith("/") else None
            self.accesses.append(Access(kind, spelled, rule, made, optional))

    def device(self, spelled: str, *, exact: bool, rule: str) -> None:
        """Record a write to a device or to shared memory (beyond the sandbox): ``spelled`` is
        the path written, or (not ``exact``) the known beginning of it."""
        if not spelled.startswith("/dev/") or (exact and spelled in _SPECIAL_FILES):
            return
        if spelled.startswith(("/dev/fd/", "/dev/tcp/", "/dev/udp/")):
            return  # a descriptor; bash's connections are recorded by `redirect`
        place = spelled if exact else f"{spelled}..."
        if spelled.startswith("/dev/shm/") or spelled == "/dev/shm":
            self.beyond.append(f"{rule}: it writes {place}, shared memory outside the sandbox")
        else:
            self.beyond.append(f"{rule}: it writes the device {place}")

    # -- statements --------------------------------------------------------------------------

    def script(self, source: bytes, cwds: Cwds) -> tuple[Cwds, Cwds]:
        """Walk a whole script; its outcome (the directories after success and after failure)."""
        tree, problem = parse(source)
        if problem is not None:
            raise self.fail(problem)
        return self.sequence(tree.root_node.named_children, cwds)

    def sequence(self, nodes: Iterable[Node], cwds: Cwds) -> tuple[Cwds, Cwds]:
        ok, failed = cwds, frozenset[str]()
        current = cwds
        for node in nodes:
            if node.type == "comment":
                continue
            ok, failed = self.statement(node, current)
            current = ok | failed
        return ok, failed

    def statement(self, node: Node, cwds: Cwds) -> tuple[Cwds, Cwds]:
        kind = node.type
        if kind == "command":
            return self.command(node, cwds)
        if kind == "redirected_statement":
            body = node.child_by_field_name("body")
            ok, failed = (cwds, cwds) if body is None else self.statement(body, cwds)
            # The grammar hangs `a && b > out` on the list; bash binds it to `b`, so it is
            # opened where `b` starts (and for a pipeline, where its last stage starts).
            lists = body is not None and body.type in ("list", "pipeline")
            opened = self.last_started if lists else cwds
            backgrounded = False
            for child in node.children:
                if child.type in _REDIRECTS:
                    # dash (the Bash tool's shell where there is no bash) reads `a && b &> f` as
                    # `a && b & > f`: f is opened where the whole statement began.
                    dash = child.type == "file_redirect" and _operator(child) in ("&>", "&>>")
                    backgrounded = backgrounded or dash
                    self.redirect(child, opened | cwds if dash else opened)
            if backgrounded:
                # ... and what follows runs there too: `a && b` ran in the background, so a
                # `cd` in it moved nothing after it.
                return ok | cwds, failed | cwds
            return ok, failed
        if kind == "list":
            return self.list(node, cwds)
        if kind == "pipeline":
            return self.pipeline(node, cwds)
        if kind == "subshell":
            self.sequence(node.named_children, cwds)
            return cwds, cwds
        if kind == "compound_statement":
            return self.sequence(node.named_children, cwds)
        if kind == "negated_command":
            ok, failed = self.sequence(node.named_children, cwds)
            return failed, ok
        if kind in _STRUCTURES:
            self.structure(node, cwds)
            return cwds, cwds
        if kind in ("variable_assignment", "variable_assignments"):
            self.assignments([node] if kind == "variable_assignment" else node.named_children)
            self.substitutions(node, cwds)
            return cwds, cwds
        if kind in ("declaration_command", "unset_command"):
            # `unset PATH` too: bash then searches `.` for programs.
            self.declaration(node)
            self.substitutions(node, cwds)
            return cwds, cwds
        if kind == "test_command":
            self.substitutions(node, cwds)
            return cwds, cwds
        if kind == "function_definition":
            raise self.fail("it defines a function")
        raise self.fail(f"the shell construct {kind!r} is not understood")

    def declaration(self, node: Node) -> None:
        """Check the names ``export``, ``declare``, ``local``, ``readonly``, ``unset`` set."""
        children = [c for c in node.named_children if c.type != "comment"]
        for before, after in itertools.pairwise(children):
            if before.end_byte == after.start_byte:
                # `export P$x=1`: one word to bash, split by the grammar.
                raise self.fail("a variable it sets is named by a word not known from the text")
        for child in children:
            text = _text(child)
            if child.type == "variable_assignment":
                self.assignments([child])
            elif child.type == "variable_name":
                self.check_name(text)
            elif child.type == "word" and text[:1] in ("-", "+"):
                if text.startswith("-f"):
                    raise self.fail("declare -f defines functions")
                if "n" in text:
                    raise self.fail("a name reference (-n) assigns variables by another name")
            else:
                word = word_of(child)  # `export "PATH=/tmp"`
                if word.text is None:
                    raise self.fail("a variable it sets is named by a word not known from the text")
                self.check_name(word.text.split("=", 1)[0])

    def list(self, node: Node, cwds: Cwds) -> tuple[Cwds, Cwds]:
        """``a && b``, ``a || b``, ``a; b``; sets ``last_started`` to where the last began."""
        ok, failed = cwds, frozenset[str]()
        operator = None
        started = cwds
        first = True
        for child in node.children:
            if not child.is_named:
                operator = child.type
                continue
            if child.type == "comment":
                continue
            if first:
                started = cwds
                ok, failed = self.statement(child, cwds)
                first = False
            elif operator == "&&":
                started = ok
                more_ok, more_failed = self.statement(child, ok)
                ok, failed = more_ok, failed | more_failed
            elif operator == "||":
                started = failed
                more_ok, more_failed = self.statement(child, failed)
                ok, failed = ok | more_ok, more_failed
            else:
                started = ok | failed
                ok, failed = self.statement(child, started)
        self.last_started = started
        return ok, failed

    def pipeline(self, node: Node, cwds: Cwds) -> tuple[Cwds, Cwds]:
        """``a | b``: each stage runs in a subshell, so none changes the directory.

        The grammar gets the precedence of ``|`` and ``&&`` wrong in places: it reads
        ``cd sub && a | b`` as ``(cd sub && a) | b`` where bash runs ``cd sub && (a | b)``. So a
        stage after one that holds a list also runs where that list's last command started,
        and the outcome is every directory any stage may end in: more claims, never fewer.
        """
        current = cwds
        outcome = cwds
        started = cwds
        for child in node.named_children:
            if child.type == "comment":
                continue
            started = current
            self.last_started = current
            ok, failed = self.statement(child, current)
            outcome = outcome | ok | failed
            current = current | self.last_started
        self.last_started = started
        return outcome, outcome

    def structure(self, node: Node, cwds: Cwds) -> None:
        """Loops and conditions: every part runs in ``cwds``, and none may change it."""
        self.fixed_cwd += 1
        try:
            if node.type == "c_style_for_statement":
                for child in node.named_children:
                    if child.type != "do_group":
                        _check_arithmetic(child, self.fail)
            for child in node.named_children:
                if child.type in _STRUCTURES:
                    self.structure(child, cwds)
                elif child.type == "variable_name":
                    self.check_name(_text(child))  # `for PATH in ...` sets it
                elif child.type == "comment":
                    continue
                elif _is_statement(child):
                    self.statement(child, cwds)
                else:
                    self.substitutions(child, cwds)
        finally:
            self.fixed_cwd -= 1

    # -- words -------------------------------------------------------------------------------

    def substitutions(self, node: Node, cwds: Cwds) -> None:
        """Walk the commands of every substitution in ``node`` (they run too)."""
        if node.type in _SUBSTITUTIONS:
            self.nested(lambda: self.sequence(node.named_children, cwds))
            return
        if node.type in ("arithmetic_expansion", "subscript", "c_style_for_statement"):
            _check_arithmetic(node, self.fail)
        elif node.type == "test_command" and node.children and node.children[0].type == "[[":
            # `[[ a -eq b ]]` evaluates a and b as arithmetic; `[ a -eq b ]` only compares.
            for child in node.named_children:
                if child.type == "binary_expression" and any(
                    c.type == "test_operator" and _text(c) in _ARITHMETIC_TESTS
                    for c in child.children
                ):
                    _check_arithmetic(child, self.fail)
        if node.type == "variable_name":
            parent = node.parent
            if parent is not None and parent.type in _ARITHMETIC:
                self.check_name(_text(node))
        elif node.type == "expansion" and any(
            c.type in ("=", ":=") for c in node.children if not c.is_named
        ):
            for name in node.named_children:  # `${PATH:=x}` assigns it
                if name.type == "variable_name":
                    self.check_name(_text(name))
        elif node.type == "variable_assignment":
            self.assignments([node])
        for child in node.named_children:
            self.substitutions(child, cwds)

    def nested(self, walk: Callable[[], object]) -> None:
        """Run ``walk`` one level deeper (a wrapped command, a script, a substitution)."""
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise self.fail(f"commands nest more than {MAX_DEPTH} deep")
            walk()
        finally:
            self.depth -= 1

    def check_name(self, name: str) -> None:
        if name in _HARMLESS:
            return
        if name == "PYTHONPATH":
            self.unknown.append("PYTHONPATH: Python programs import modules from where it says")
            return
        if (
            name in _DANGEROUS_NAMES
            or name.startswith(_DANGEROUS_PREFIXES)
            or _CONFIGURING.search(name)
        ):
            raise self.fail(f"it sets {name}, which changes what runs and how")

    def assignments(self, nodes: Iterable[Node]) -> None:
        for node in nodes:
            name = node.child_by_field_name("name")
            if name is not None:
                self.check_name(_text(name))
                value = node.child_by_field_name("value")
                text: str | None = "" if value is None else word_of(value).text
                self.variables.setdefault(_text(name), set()).add(text)

    def redirect(self, node: Node, cwds: Cwds) -> None:
        if node.type == "heredoc_redirect":
            quoted = any(
                c.type == "heredoc_start" and any(q in _text(c) for q in "'\"\\")
                for c in node.children
            )
            for child in node.named_children:
                if child.type in _REDIRECTS:
                    self.redirect(child, cwds)
                elif child.type == "heredoc_body" and not quoted:
                    _check_heredoc_body(child, self.fail)
                    self.substitutions(child, cwds)  # an unquoted heredoc's body runs them
                else:
                    self.substitutions(child, cwds)
            return
        self.substitutions(node, cwds)
        if node.type != "file_redirect":
            return  # a here-string: only its substitutions run
        operator = _operator(node)
        for target in node.children_by_field_name("destination"):
            word = word_of(target)
            if operator in (">&", "<&", ">&-", "<&-") and (
                word.text is None or word.text.isdigit() or word.text == "-"
            ):
                if word.text is None:
                    raise self.fail(f"redirection {operator} to a target not known from the text")
                continue  # duplicates or closes a descriptor
            kind = "read" if operator in ("<", "<&") else "write"
            if word.prefix.startswith(("/dev/tcp/", "/dev/udp/")):
                # bash itself opens a network connection for these, reading or writing.
                self.beyond.append(
                    f"redirection {operator}: it opens a network connection "
                    f"({word.raw or word.prefix})"
                )
                continue
            self.touch(kind, word, cwds, f"redirection {operator}", create="file")

    # -- simple commands ---------------------------------------------------------------------

    def command(self, node: Node, cwds: Cwds) -> tuple[Cwds, Cwds]:
        if split_by_newline(node):
            raise self.fail("a newline splits the words of one command (a known misparse)")
        words: list[Word] = []
        for child in node.named_children:
            kind = child.type
            if kind in _REDIRECTS:
                self.redirect(child, cwds)
                continue
            self.substitutions(child, cwds)
            if kind == "variable_assignment":
                self.assignments([child])
            elif kind == "command_name":
                words.append(word_of(child.named_children[0] if child.named_children else child))
            elif kind != "comment":
                words.append(word_of(child))
        if not words:
            return cwds, cwds
        name = words[0].text
        if name == "cd":
            return self.cd(words[1:], cwds)
        self.run(words, cwds)
        return cwds, cwds

    def cd(self, args: Sequence[Word], cwds: Cwds) -> tuple[Cwds, Cwds]:
        if self.fixed_cwd:
            raise self.fail("cd inside a loop or a condition")
        if any(a.text is not None and a.text.startswith("-P") for a in args):
            raise self.fail("cd -P follows links, and later `..` then climb from their targets")
        targets = [a for a in args if a.text not in ("-L", "-e", "-@")]
        if len(targets) != 1 or targets[0].text is None or targets[0].text == "-":
            raise self.fail("cd to a directory not known from the text")
        target = targets[0].text
        # bash's cd is logical: `cd link/..` is where the command started, not the parent of
        # the link's target; where that fails, bash tries the path as the system resolves it.
        # Both are claimed.
        moved = frozenset(
            place for cwd in cwds for place in (join(cwd, target), _logical(join(cwd, target)))
        )
        for place in moved:
            self.accesses.append(Access("cd", place, "cd"))
        return moved, cwds

    def run(self, words: Sequence[Word], cwds: Cwds) -> None:
        """Run one program (or builtin) with its words, as the rules say."""
        words = list(words)
        while words and words[0].text is not None and _ASSIGNMENT.match(words[0].text):
            variable, _, value = words[0].text.partition("=")
            self.check_name(variable)  # `env A=1 cmd` reaches here
            self.variables.setdefault(variable, set()).add(value)
            words.pop(0)
        if not words:
            return
        name = words[0].text
        if name is None:
            raise self.fail(f"the program to run is not known from the text ({words[0].raw})")
        if name in _SETS_NAMES or name == "printf":
            self.set_names(name, words[1:])
        if name == "set":
            self.set_options(words[1:])
            return
        if name == "shopt":
            self.shopt(words[1:])
            return
        if name in _QUIET_BUILTINS:
            return
        if name in _OPAQUE_BUILTINS:
            raise self.fail(f"{name} runs or rewires commands in ways no rule describes")
        if name in ("source", "."):
            if len(words) == 2 and words[1].text is not None and _is_activate(words[1].text):
                self.touch("read", words[1], cwds, "source")
                # It is the workspace's own file (whatever made the virtualenv wrote it).
                self.unknown.append(
                    f"source: it runs {words[1].text}, a script of the workspace, which may "
                    f"do anything"
                )
                return
            raise self.fail(f"{name} runs a script (only a virtualenv's bin/activate is known)")
        if name == "cd":
            raise self.fail("cd run as a program")
        rule = self.rule_for(name, words[0], cwds)
        self.nested(lambda: self.dispatch(self, rule, words[1:], cwds))

    def set_options(self, args: Sequence[Word]) -> None:
        """``set``: only options that leave how later commands are read as the walk reads
        them; ``set -- a b`` and ``set`` alone are fine."""
        at = 0
        while at < len(args):
            text = args[at].text
            if text is None:
                raise self.fail("set takes an option not known from the text")
            if text in ("--", "-") or not text.startswith(("-", "+")):
                return  # the rest are positional parameters
            if text in ("-o", "+o"):
                name = args[at + 1].text if at + 1 < len(args) else ""
                if name is None or (name and name not in _SET_NAMES):
                    raise self.fail(f"set -o {name or '...'} changes how commands are read")
                at += 2
                continue
            letters = set(text[1:])
            if "o" in letters:  # `set -euo pipefail`: the next word names an option
                letters.discard("o")
                name = args[at + 1].text if at + 1 < len(args) else ""
                if name is None or (name and name not in _SET_NAMES):
                    raise self.fail(f"set -o {name or '...'} changes how commands are read")
                at += 1
            if not letters <= _SET_LETTERS:
                raise self.fail(f"set {text} changes how commands are read")
            at += 1

    def shopt(self, args: Sequence[Word]) -> None:
        """``shopt``: printing, or setting options that only change how globs match."""
        texts = [a.text for a in args]
        if None in texts:
            raise self.fail("shopt takes an option not known from the text")
        flags = {t for t in texts if t is not None and t.startswith("-")}
        if not flags & {"-s", "-u"}:
            return  # printing or querying (-p, -q)
        names = [t for t in texts if t is not None and not t.startswith("-")]
        allowed = _SET_NAMES if "-o" in flags else _SHOPT_NAMES
        for name in names:
            if name not in allowed:
                raise self.fail(f"shopt {name} changes how commands are read")

    def set_names(self, program: str, args: Sequence[Word]) -> None:
        """Check the variables ``read``, ``getopts`` and ``printf -v`` set."""
        for at, word in enumerate(args):
            text = word.text
            if program == "printf":
                if text is not None and text.startswith("-v") and len(text) > 2:
                    self.check_name(text[2:])
                elif text == "-v" and at + 1 < len(args):
                    name = args[at + 1].text
                    if name is None:
                        raise self.fail("printf -v sets a variable not known from the text")
                    self.check_name(name)
                continue
            if text is None:
                raise self.fail(f"{program} sets a variable not known from the text")
            self.check_name(text.lstrip("-").removeprefix("a") if text.startswith("-") else text)

    def rule_for(self, name: str, word: Word, cwds: Cwds) -> Rule:
        program = name
        if "/" in name:
            installed = _installed_program(name)
            if installed is None:
                raise self.fail(
                    f"{name} is a program named by its path, which the rules can't know (only "
                    f"programs found on PATH are described by the rule of their name)"
                )
            program = installed
            if name.rpartition("/")[0] not in _SYSTEM_BIN:
                if self.project is not None:
                    self.project.check_program(self, name, cwds)
                self.touch("read", word, cwds, name)
                self.unknown.append(
                    f"{name}: a program in the workspace, which need not be the {program} "
                    f"its rule describes"
                )
        elif self.project is not None:
            self.project.check_program(self, name, cwds)
        rule = self.rules.get(program)
        if rule is None:
            raise self.fail(f"{program} is not in the shell rules")
        return rule


def _installed_program(name: str) -> str | None:
    """The rule a program named by its path runs under, or None if no rule may describe it.

    A path into the workspace (``bin/x``, ``./x``, ``scripts/build``) names the repository's own
    program, which may do anything: it is not the program of the same name that the rules
    describe. Only a system directory's program (``/usr/bin/grep``), or a well-known tool that a
    package manager installs into a virtualenv or ``node_modules`` (``.venv/bin/pytest``,
    ``node_modules/.bin/eslint``: the same programs an activated environment puts on PATH), has
    the rule of its name.
    """
    head, _, program = name.rpartition("/")
    if head in _SYSTEM_BIN:
        return program
    parts = head.split("/")
    if ".." in parts or "" in parts[1:]:
        return None
    for place, programs in _INSTALLED_TOOLS.items():
        tail = tuple(place.split("/"))
        if tuple(parts[-len(tail) :]) == tail and program in programs:
            return program
    return None


_SYSTEM_BIN: Final = frozenset(
    "/bin /usr/bin /usr/local/bin /sbin /usr/sbin /usr/local/sbin".split()
)
# Programs that pip, uv and npm install, by where they install them.
_INSTALLED_TOOLS: Final = {
    ".venv/bin": frozenset(
        "python python3 pytest py.test mypy ruff black isort pyright basedpyright ty pip "
        "pip3".split()
    ),
    "venv/bin": frozenset(
        "python python3 pytest py.test mypy ruff black isort pyright basedpyright ty pip "
        "pip3".split()
    ),
    "node_modules/.bin": frozenset("eslint prettier tsc jest vitest mocha biome".split()),
    # Build wrappers a project keeps at its root, and the binstubs Rails and Bundler write.
    ".": frozenset("gradlew mvnw".split()),
    "bin": frozenset("rails rake rspec bundle".split()),
}


_UNESCAPED_DOLLAR: Final = re.compile(r"(?<!\\)(?:\\\\)*\$([({\[])")


def _check_heredoc_body(body: Node, fail: Callable[[str], Barrier]) -> None:
    """Refuse an unquoted heredoc's body whose substitutions the grammar did not all parse.

    The body runs its ``$(...)``, backquotes and ``${...}``, but tree-sitter-bash leaves some of
    them as plain text (backquotes always; ``$(...)`` after a tab in a ``<<-`` heredoc).
    """
    text = _text(body)
    if "`" in text:
        raise fail("a heredoc's body runs backquoted commands the parser does not read")
    written = {"(": 0, "{": 0, "[": 0}
    for match in _UNESCAPED_DOLLAR.finditer(text):
        written[match.group(1)] += 1
    parsed = {"(": 0, "{": 0, "[": 0}
    kinds = {
        "command_substitution": "(",
        "arithmetic_expansion": "(",
        "expansion": "{",
    }
    stack = [body]
    while stack:
        node = stack.pop()
        opener = kinds.get(node.type)
        if opener is not None:
            first = node.children[0].type if node.children else ""
            parsed["[" if first == "$[" else opener] += 1
        stack.extend(node.children)
    if any(parsed[k] < written[k] for k in written):
        raise fail("a heredoc's body runs substitutions the parser does not read")


def _check_arithmetic(node: Node, fail: Callable[[str], Barrier]) -> None:
    """Refuse arithmetic on a variable's value: bash evaluates the value as an expression, and
    one such as ``a[$(rm -rf x)]`` runs a command (a file's content read into a variable is
    enough). Numbers and ``$?``, ``$#``, ``$$``, ``$!`` are known to be numbers."""
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type in ("variable_name", "simple_expansion", "expansion"):
            if (
                current.type == "variable_name"
                and current.parent is not None
                and (current.parent.type == "subscript" and current == current.parent.children[0])
            ):
                pass  # the array's name in `a[i]`, not a value
            elif not any(c.type == "special_variable_name" for c in current.children):
                raise fail("arithmetic on a variable's value runs what the value says")
        stack.extend(current.children)


def _logical(path: str) -> str:
    """``path`` with ``.`` and ``name/..`` taken away as text, as bash's logical ``cd`` does."""
    if path.startswith("~"):
        head, slash, rest = path.partition("/")
        return head + slash + posixpath.normpath(rest) if rest else path
    return posixpath.normpath(path)


def _operator(redirect: Node) -> str:
    return next((c.type for c in redirect.children if not c.is_named), "")


def _is_activate(path: str) -> bool:
    """A virtualenv's activate script, where tools make one (``.venv/bin/activate``); another
    ``bin/activate`` is the repository's own script."""
    head, _, name = path.rpartition("/")
    return name == "activate" and _installed_program(f"{head}/python") is not None


def _is_statement(node: Node) -> bool:
    return (
        node.type
        in (
            "command",
            "redirected_statement",
            "list",
            "pipeline",
            "subshell",
            "compound_statement",
            "negated_command",
            "variable_assignment",
            "variable_assignments",
            "declaration_command",
            "unset_command",
            "test_command",
            "function_definition",
        )
        or node.type in _STRUCTURES
    )


def _text(node: Node) -> str:
    raw = node.text
    return raw.decode("utf-8", errors="surrogateescape") if raw is not None else ""

"""What the Bash tool sets up around one command, in either mode: :class:`Launch`.

**In the sandbox** (``toolkernel.sandbox``, where the system gives user, mount and PID namespaces
and overlayfs) the workspace is an overlay, so the command may write anywhere in it (what it
changed is committed under leases afterwards, ``tools._shell_commit``). **Without it** the
command runs on the workspace itself, with the claims its rules give; a command whose effects
the rules can't fully know holds the whole workspace (``tools._bash``). In both, the launcher
supervises it (nothing it starts outlives it), and outside the workspace Landlock lets it write
only its private temporary directory (``TMPDIR``), the toolchains' caches
(:data:`TOOLCHAIN_CACHES`), the places its rules name, the git directory a ``.git`` file points
to, ``/dev/null`` and ``/dev/shm``: what a command writes outside the workspace is policy, not
ordering (``builtin_tools(bash=True, shell_writable=[...])`` allows more). A refused write is
named in the error, with that option: Landlock reports nothing to the process that set it up,
so it is recognised in the command's output ("Permission denied" beside a path outside what it
could write, or a few lines below one, in any of the ways shells, coreutils, Python, Node and
Rust quote it), where this process could write it itself.

Inside the workspace nothing is refused, in either mode: a write its rules missed is committed
under leases taken afterwards in the sandbox, and happens as in a plain shell without it (where
holding a command to its claims would make a working command fail, or, worse, succeed with the
wrong result, as a refused hook's write makes ``git commit`` commit stale data). Where Landlock
is missing too, nothing outside is refused either, and the tool says so once per process.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path as FilePath
from typing import Final

import attrs

from .._beneath import remove_tree
from ..sandbox import _launcher as _sandbox
from ._analysis import Analysis
from ._environment import command_environment

__all__ = ["Launch", "landlock_abi", "unenforced_note"]

SANDBOX: Final = FilePath(_sandbox.__file__).resolve()
SHELL: Final = shutil.which("bash") or "/bin/sh"
"""The shell that runs commands: bash, whose grammar the claims are read with. (``/bin/sh`` is
often dash, which reads ``a &> f`` as ``a & > f``: a redirection opened elsewhere.) Where there
is no bash, ``/bin/sh``, and the analysis claims what either shell would do where they differ."""
_LAUNCHER: Final = (sys.executable, "-I", "-S", str(SANDBOX))
# Inherited variables that make bash run code before the command, or change how it is read.
_SHELL_STARTUP: Final = (
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PROMPT_COMMAND",
    "CDPATH",  # `cd sub` would go wherever it says
)
GIT_READ_ONLY_CONFIG: Final = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
)
# Where toolchains keep what they download and build, outside any project: a sandboxed command
# may write there (what it writes is not ordered: no workspace file is there).
TOOLCHAIN_CACHES: Final = (
    "~/.cache",
    "~/.cargo",
    "~/.rustup",
    "~/go",
    "~/.npm",
    "~/.yarn",
    "~/.pnpm-store",
    "~/.local/share/pnpm",
    "~/.m2",
    "~/.gradle",
    "~/.mix",
    "~/.hex",
    "~/.gem",
    "~/.bundle",
    "~/.deno",
    "~/.nuget",
    "$GOPATH",
    "$GOCACHE",
    "$GOMODCACHE",
    "$CARGO_HOME",
    "$RUSTUP_HOME",
    "$npm_config_cache",
    "$XDG_CACHE_HOME",
)
# The caches a toolchain makes on its first use, by the programs that use it: made before such a
# command runs in the sandbox, since Landlock can only let a command write where something is.
_CACHES_OF: Final = {
    **dict.fromkeys(("go", "gofmt"), ("~/go",)),
    **dict.fromkeys(("cargo", "rustc", "rustup", "rustfmt"), ("~/.cargo", "~/.rustup")),
    **dict.fromkeys(("npm", "npx", "node", "yarn", "pnpm", "corepack"), ("~/.npm",)),
    **dict.fromkeys(("mvn", "mvnw"), ("~/.m2",)),
    **dict.fromkeys(("gradle", "gradlew"), ("~/.gradle",)),
    **dict.fromkeys(("mix", "elixir", "iex", "erl", "rebar3"), ("~/.mix", "~/.hex")),
    **dict.fromkeys(("gem", "bundle", "bundler", "rake", "ruby"), ("~/.gem", "~/.bundle")),
    "deno": ("~/.deno",),
    "dotnet": ("~/.nuget",),
}
_ALWAYS_WRITABLE_FILES: Final = ("/dev/null",)
_ALWAYS_WRITABLE_DIRS: Final = ("/dev/shm",)
_DENIED: Final = re.compile(r"permission denied|operation not permitted", re.IGNORECASE)
# A quoted name, each kind of quote closed by its own: 'x', "x", \u2018x\u2019 (coreutils in a
# UTF-8 locale), `x` (cargo) and `x' (GNU's old style). A quote right after a letter is an
# apostrophe ("couldn't"), which opens nothing.
_QUOTED: Final = re.compile(
    r"""(?<!\w)(?:'([^'\n]+)'|"([^"\n]+)"|\u2018([^\u2019\n]+)\u2019|`([^`'\n]+)[`'])"""
)
# `PROGRAM: [line N: ]PATH: Permission denied` (bash, tee, cat...): PATH whole, spaces and all.
_BEFORE_DENIED: Final = re.compile(
    r"(?:^\s*|:\s)((?:/|\.{1,2}/|~/)[^:\n]*?):\s*(?:permission denied|operation not permitted)",
    re.IGNORECASE,
)
_UNQUOTED: Final = re.compile(r"(?:^|[\s:(=])((?:\.{0,2}/)?[\w.\-]+(?:/[\w.\-]+)*)(?=[:\s,;)]|$)")
_PROGRAM: Final = re.compile(r"^[^\s:'\"]+:(?:\s*(?:line\s+)?\d+:)?")
_LINES_BEFORE: Final = 6
"""How many lines above a refusal naming no path may name it (Rust's chain of causes)."""
_noted = False


@functools.cache
def landlock_abi() -> int:
    """This kernel's Landlock ABI (0: none), asked once."""
    return _sandbox.abi_version()


def unenforced_note(why_no_sandbox: str) -> str | None:
    """The line to show once, the first time a command runs without the sandbox (saying why,
    and whether Landlock holds it to its claims); then None."""
    global _noted
    if _noted:
        return None
    _noted = True
    outside = (
        "outside the workspace, Landlock lets them write only their temporary directory and "
        "the toolchains' caches"
        if landlock_abi() > 0
        else "this system has no Landlock either, so nothing limits where they write outside "
        "the workspace"
    )
    return (
        f"note: no sandbox ({why_no_sandbox}): commands run on the workspace itself with the "
        f"claims the shell rules give them, and a command whose effects the rules can't fully "
        f"know holds the whole workspace; {outside}"
    )


@attrs.define
class Launch:
    """How a command starts: its launcher line, with the workspace an overlay (in the sandbox)
    and Landlock on the rest of the file system, and its environment. Built by :meth:`prepare`
    (synchronous: run it in a worker thread), undone by :meth:`finish`."""

    argv: list[str]
    env: dict[str, str]
    allowed: list[str]
    """Absolute paths outside the workspace the command may write (beneath), for messages."""
    temporary: str
    rules: tuple[str, ...] = ()

    @classmethod
    def prepare(
        cls, command: str, analysis: Analysis, root: str, overlay_options: Sequence[str] = ()
    ) -> Launch:
        """The launch of ``command`` on the overlay ``overlay_options`` describes, over
        ``root`` (none: on the workspace itself). In the workspace it may write anything;
        outside it, its own temporary directory, the toolchains' caches, what its rules name,
        and the git directory a ``.git`` file points to."""
        env = _git_env(analysis) if analysis.git == "read" else _plain_env()
        temporary = tempfile.mkdtemp(prefix="toolkernel-bash-")
        _make_caches(analysis.rules)
        dirs = [root, temporary]
        dirs.extend(_outside(TOOLCHAIN_CACHES))
        dirs.extend(_outside(analysis.outside_writes))
        dot_git = os.path.join(root, ".git")
        if os.path.isfile(dot_git):
            dirs.extend(_git_dirs_of(dot_git))
        dirs.extend(d for d in _ALWAYS_WRITABLE_DIRS if os.path.isdir(d))
        files = [f for f in _ALWAYS_WRITABLE_FILES if os.path.exists(f)]
        dirs = list(dict.fromkeys(dirs))
        # The command dies with this process, even one killed with SIGKILL.
        argv = [*_LAUNCHER, "--parent", str(os.getpid()), *overlay_options]
        if landlock_abi() > 0:
            for option, paths in (("--dir", dirs), ("--file", files)):
                for place in paths:
                    argv += [option, place]
        env = {**env, **command_environment(env)}
        env = {**env, "TMPDIR": temporary, "TMP": temporary, "TEMP": temporary}
        return cls(
            [*argv, "--", SHELL, "-c", command],
            env,
            allowed=[d for d in dirs if d != root],
            temporary=temporary,
            rules=analysis.rules,
        )

    def allow(self, places: Iterable[str]) -> None:
        """Let the command write beneath ``places`` too (existing directories outside the
        workspace), as ``builtin_tools(bash=True, shell_writable=...)`` asks."""
        found = [place for place in _outside(places) if place not in self.allowed]
        if not found or landlock_abi() <= 0:
            return
        at = self.argv.index("--")
        extra = [word for place in found for word in ("--dir", place)]
        self.argv[at:at] = extra
        self.allowed.extend(found)

    def finish(self) -> None:
        """Remove the command's temporary directory, whatever the command left in it (a tree
        of any depth, directories it may not enter). Synchronous."""
        parent, name = os.path.split(self.temporary)
        with contextlib.suppress(OSError):
            parent_fd = os.open(parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                remove_tree(parent_fd, name, force=True)
            finally:
                os.close(parent_fd)

    def explain(self, output: str, root: str) -> str | None:
        """If ``output`` shows a write outside the workspace was refused, a message naming
        the path, where the command may write, and how to let it write more.

        The refusal is recognised in what programs print ("Permission denied" beside a path,
        or a line or a few above it), for a path outside the workspace and outside every place
        it may write, which this process could write itself (else its permissions refused
        it, not the sandbox)."""
        places = [
            p
            for p in _denied_places(output.splitlines(), root, [root, *self.allowed])
            if os.path.isabs(p)
        ]
        if not places:
            return None
        allowed = ", ".join(
            "$TMPDIR" if p == self.temporary else p for p in _shown(self.allowed, root)
        )
        refusing = "the sandbox" if "--overlay" in self.argv else "Landlock"
        return (
            f"{refusing} refused writing {', '.join(places)}: outside the workspace a command "
            f"may write only its temporary directory and the toolchains' caches ({allowed}); "
            f"toolkernel.tools.builtin_tools(bash=True, shell_writable=[...]) lets it write "
            f"more places"
        )


def _make_caches(rules: Iterable[str]) -> None:
    """Make ``~/.cache`` (the XDG cache, which most tools use), and the caches of the
    toolchains ``rules`` name, where they are missing."""
    wanted = ["~/.cache"]
    for rule in rules:
        wanted.extend(_CACHES_OF.get(rule.split()[0].split(".")[0], ()))
    for place in wanted:
        with contextlib.suppress(OSError):  # a home we may not write: the command will say
            os.makedirs(os.path.expanduser(place), exist_ok=True)


def _git_dirs_of(dot_git: str) -> list[str]:
    """The git directory a ``.git`` file points to, and its common directory."""
    try:
        with open(dot_git, encoding="utf-8") as stream:
            line = stream.readline().strip()
    except (OSError, UnicodeDecodeError):
        return []
    if not line.startswith("gitdir:"):
        return []
    git_dir = os.path.join(os.path.dirname(dot_git), line[len("gitdir:") :].strip())
    found = [git_dir] if os.path.isdir(git_dir) else []
    with contextlib.suppress(OSError, UnicodeDecodeError):
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as stream:
            common = os.path.join(git_dir, stream.readline().strip())
        if os.path.isdir(common):
            found.append(os.path.normpath(common))
    return found


def _outside(places: Iterable[str]) -> list[str]:
    found = []
    for place in places:
        expanded = os.path.expanduser(os.path.expandvars(place))
        if "$" in expanded or expanded.startswith("~") or not os.path.isabs(expanded):
            continue  # a variable that is not set
        if os.path.isdir(expanded):
            found.append(expanded)
    return found


def _plain_env() -> dict[str, str]:
    """This process's environment without what would make the shell run code of its own:
    a startup file (``BASH_ENV``), options, or exported functions that shadow programs."""
    return {
        name: value
        for name, value in os.environ.items()
        if name not in _SHELL_STARTUP and not name.startswith("BASH_FUNC_")
    }


def _git_env(analysis: Analysis) -> dict[str, str]:
    """The environment for a command whose git commands only read."""
    env = _plain_env()
    env.pop("GIT_EXTERNAL_DIFF", None)
    count = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
    for offset, (key, value) in enumerate(GIT_READ_ONLY_CONFIG):
        env[f"GIT_CONFIG_KEY_{count + offset}"] = key
        env[f"GIT_CONFIG_VALUE_{count + offset}"] = value
    env["GIT_CONFIG_COUNT"] = str(count + len(GIT_READ_ONLY_CONFIG))
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_PAGER"] = "cat"
    return env


def _denied_places(lines: Sequence[str], root: str, allowed: Sequence[str]) -> list[str]:
    """The places outside ``allowed`` that ``lines`` (a command's output) say a write to was
    refused, as shown in a message."""
    places: dict[str, None] = {}
    for at, whole in enumerate(lines):
        if not _DENIED.search(whole):
            continue
        found = _places_in(whole, root, quoted_only=False)
        if not found and _DENIED.match(whole.strip()):
            # The line only says why ("Permission denied (os error 13)"): a cause of what a
            # line above says was being done, with its path.
            for before in range(at - 1, max(at - _LINES_BEFORE, 0) - 1, -1):
                found = _places_in(lines[before], root, quoted_only=True)
                if found:
                    break
        for real in found:
            if any(real == a or real.startswith(a.rstrip("/") + "/") for a in allowed):
                continue
            if not _writable_here(real):
                continue  # this process may not write there either: not the sandbox's doing
            places[_shown([real], root)[0]] = None
    return list(places)


def _places_in(whole: str, root: str, *, quoted_only: bool) -> list[str]:
    """The paths one line of output names (absolute, normalised), the likeliest first."""
    line = _PROGRAM.sub("", whole, count=1)  # `tee: a.txt: ...`: not the program's name
    candidates = [(next(g for g in groups if g), True) for groups in _QUOTED.findall(line)]
    if not quoted_only:
        candidates += [(c, True) for c in _BEFORE_DENIED.findall(line)]
        candidates += [(c, False) for c in _UNQUOTED.findall(line)]
    found: list[str] = []
    for candidate, was_quoted in candidates:
        candidate = candidate.strip()
        if not candidate:
            continue
        real = os.path.normpath(os.path.join(root, os.path.expanduser(candidate)))
        # A word names a path if it exists, or if it looks like one (quoted, with a slash or
        # an extension) and its directory exists (a file the command was refused to create).
        plausible = was_quoted or "/" in candidate or "." in candidate.strip(".")
        exists = os.path.lexists(real)
        named = exists or (plausible and os.path.isdir(os.path.dirname(real)))
        if named and real not in found:
            found.append(real)
    # `/opt/my file` read unquoted also gives `/opt/my`: the longer name is the one meant.
    return [f for f in found if not any(o != f and o.startswith(f + " ") for o in found)]


def _writable_here(real: str) -> bool:
    """True if this process, which no sandbox confines, may write ``real`` (or make it)."""
    if os.path.lexists(real) and os.access(real, os.W_OK):
        return True
    parent = os.path.dirname(real)
    while parent and not os.path.isdir(parent):
        parent = os.path.dirname(parent)
    return bool(parent) and os.access(parent, os.W_OK | os.X_OK)


def _shown(paths: Iterable[str], root: str) -> list[str]:
    shown = []
    for place in paths:
        relative = os.path.relpath(place, root)
        shown.append(place if relative.startswith("..") else relative)
    return shown

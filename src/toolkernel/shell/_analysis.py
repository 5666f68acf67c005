"""What a shell command reads, writes and runs, from its parse and the rule table.

:func:`analyse` walks the tree-sitter-bash tree of a command (:class:`~._walk.Walk`), which
follows redirections, command and process substitutions, heredocs, subshells, pipelines, lists
and the control structures, and hands every simple command to the rules (``_programs.apply``).
The result is an :class:`Analysis`: the paths read and written, as spelled (relative to the
workspace root once joined with the directory the command runs in), what runs code the rules
can't see (``unknown_effects``) and what reaches beyond the sandbox (``effects_beyond``: the
rules' ``effects-beyond``, what curl, wget and ``gh api`` send, bash's ``/dev/tcp`` and writes
to devices), or the reason the command is not understood.

The directory a command runs in is tracked as the *set* of directories it may be in, because
``cd`` can fail: after ``cd sub; ls`` the ``ls`` may list ``sub`` or the root, and both are
claimed. ``cd sub && ls`` lists only ``sub``, and ``cd sub || ls`` only the root. A ``cd`` inside
a loop or a condition, to a directory not known from the text, or out of the workspace makes the
command a barrier.

Anything the walk does not know (a node type, a builtin that changes how later words are read,
``eval``, a function definition, ``source`` of anything but ``.venv/bin/activate``, an
assignment to ``PATH``, ``LD_PRELOAD``, a ``GIT_`` variable, a program named by a path into the
workspace such as ``./build`` or ``bin/test``...) makes the command a barrier. Sourcing
``.venv/bin/activate`` reads it, and has unknown effects: it is the workspace's own script.
"""

from __future__ import annotations

import functools

import attrs

from . import _coded_rules  # noqa: F401 (its modules register the rules that need code)
from ._access import Access
from ._programs import apply
from ._rules import ShellRules
from ._walk import Barrier, Walk

__all__ = ["Access", "Analysis", "walk_command"]


@attrs.frozen
class Analysis:
    """What a command touches, or why it is not understood."""

    accesses: tuple[Access, ...] = ()
    barrier: str | None = None
    """Why the command is not understood (then it holds the workspace exclusively)."""
    rules: tuple[str, ...] = ()
    """The rules that matched, in order."""
    outside_writes: tuple[str, ...] = ()
    """Places outside the workspace the rules allow it to write (``~/.cache/uv``)."""
    git: str | None = None
    """``read`` if it runs git and every git command in it only reads; ``write`` if some git
    command writes; None without git."""
    git_directories: tuple[str, ...] = ()
    """The directories its git commands run in (spelled as :attr:`Access.path` is): whose
    repository's configuration and hooks decide what they run."""
    unknown_effects: tuple[str, ...] = ()
    """Why what it touches is not fully known from the text and the rules, one reason a rule
    or construct (``"pytest: it runs the project's tests"``): it runs the project's own code
    (tests, build scripts, hooks, an interpreter on a workspace file), or configuration that
    is a program decides what it does. Empty for a command whose effects the rules describe
    whole. The claims are the same either way: the best prediction of what it touches."""
    effects_beyond: tuple[str, ...] = ()
    """What it changes beyond the sandbox, one reason a rule or construct (``"git push: it
    sends commits to a remote repository"``): data sent over the network (beyond fetching), a
    database server, a container daemon, a device, something published, programs installed
    outside the workspace. Throwing a run of it away does not undo those."""

    @property
    def effects_known(self) -> bool:
        """True if the command is understood and everything it may touch is known from its
        text and the rules: no barrier, no :attr:`unknown_effects`.

        Where no sandbox can observe what a command really changes, the Bash tool makes every
        command whose effects are not known a barrier; with one, its claims are what it waits
        for, and the sandbox commits what it really changed. :func:`shell_claims` is the same
        in both modes.
        """
        return self.barrier is None and not self.unknown_effects

    @property
    def confined(self) -> bool:
        """True if everything the command does happens inside the sandbox: it is understood,
        its effects are known (:attr:`effects_known`) and nothing in it has
        :attr:`effects_beyond`. Running it again after throwing a run of it away then leaves
        nothing behind of that run but what its discarded changes were.

        This is what the Bash tool's sandbox uses to decide whether a command may run again
        (after a path it changed was changed underneath it): one that is not confined (a
        ``git push``, a ``curl -d``, a test suite, which may do anything) is never run twice.
        """
        return self.effects_known and not self.effects_beyond


@functools.lru_cache(maxsize=1024)
def _analyse(command: str, rules: ShellRules) -> Analysis:
    return walk_command(Walk(rules, apply), command)


def walk_command(walk: Walk, command: str) -> Analysis:
    """Walk ``command`` with ``walk``; what it found."""
    try:
        if not command.strip():
            raise walk.fail("the command is empty")
        walk.script(command.encode("utf-8", errors="surrogateescape"), frozenset({"."}))
    except Barrier as barrier:
        return Analysis(
            barrier=str(barrier),
            rules=tuple(walk.matched),
            unknown_effects=tuple(dict.fromkeys(walk.unknown)),
            effects_beyond=tuple(dict.fromkeys(walk.beyond)),
        )
    except RecursionError:
        return Analysis(barrier="the command nests too deeply", rules=tuple(walk.matched))
    except UnicodeError:  # a lone surrogate that is no undecodable byte: not a command line
        return Analysis(barrier="the command is not valid text", rules=tuple(walk.matched))
    if walk.links and any(a.rule not in walk.links for a in walk.accesses):
        return Analysis(
            barrier=(
                f"{walk.links[0]} makes links, and the rest of the command may go through them "
                f"(its claims name the links, not where they lead)"
            ),
            rules=tuple(dict.fromkeys(walk.matched)),
            unknown_effects=tuple(dict.fromkeys(walk.unknown)),
            effects_beyond=tuple(dict.fromkeys(walk.beyond)),
        )
    git = None
    if walk.git:
        git = "read" if all(mode == "read" for mode in walk.git) else "write"
    return Analysis(
        accesses=tuple(dict.fromkeys(walk.accesses)),
        rules=tuple(dict.fromkeys(walk.matched)),
        outside_writes=tuple(dict.fromkeys(walk.outside)),
        git=git,
        git_directories=tuple(dict.fromkeys(walk.git_directories)),
        unknown_effects=tuple(dict.fromkeys(walk.unknown)),
        effects_beyond=tuple(dict.fromkeys(walk.beyond)),
    )

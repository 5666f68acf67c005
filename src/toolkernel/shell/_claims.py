"""From what a command touches to the claims it declares.

Every path read becomes a shared claim on it (and so on everything under it), every path
written an exclusive one. A path that can't be keyed in the workspace errs towards more
conflicts, never fewer:

- a read of a path not known from the text, or outside the workspace, or (without a workspace
  to resolve it against) absolute or under ``~``, is a shared claim on the whole workspace;
- a write there, or a ``cd`` out of the workspace, makes the command a barrier;
- a command that is not understood at all is a barrier: an exclusive claim on the workspace.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from .._errors import InvalidClaimError
from ..locks import Claim, Mode, Path, canonical_claims, exclusive, path, shared
from ._analysis import Analysis
from ._project import analyse
from ._rules import ShellRules

__all__ = ["barrier_claims", "claim_sources", "describe_miss", "keyed_claims", "shell_claims"]

Key = Callable[[str], Path]


def barrier_claims() -> list[Claim]:
    """What a command that is not understood declares: the workspace, exclusively."""
    return [exclusive(path())]


def shell_claims(
    command: str,
    rules: ShellRules | None = None,
    *,
    root: str | os.PathLike[str] | None = None,
) -> list[Claim]:
    """The claims the Bash tool declares for ``command``, computed without running it.

    ::

        shell_claims("cat src/a.py | grep def")   # [shared src/a.py]
        shell_claims("pytest -q")                 # [shared ., exclusive .pytest_cache]
        shell_claims("make")                      # [exclusive .]: make runs what the project says

    Paths are workspace-relative keys (``path("src/a.py")``); a command the rules do not
    understand returns the exclusive workspace claim; ``[]`` means it touches no file
    (``echo hi``). ``rules`` defaults to the built-in table (see :class:`ShellRules` for how to
    extend it).

    Paths are keyed *by their spelling*, with no workspace to resolve them against: ``cat
    link/a`` claims ``link/a`` even where ``link`` is a symbolic link to ``src``, and an
    absolute path or one under ``~`` is a shared claim on the whole workspace (a write there,
    a barrier). The Bash tool keys the same analysis through its kernel's workspace
    (``Workspace.key``), which resolves links and absolute paths inside the workspace, so its
    claims can differ (a reading git command in a repository whose configuration names
    programs is a barrier there, too). For the claims a call will really hold, ask the tool::

        bash = next(t for t in builtin_tools(bash=True) if t.name == "Bash")
        bash.claims({"command": "cat link/a"}, Workspace(root).key)   # [shared src/a]

    With ``root``, the project there is read where its configuration decides what the
    command does (its rules file, package.json scripts, mix aliases and databases, the
    repository's hooks...: see ``analyse``); paths are still keyed by their spelling.

    The prediction is the same whether or not a sandbox will observe what the command really
    does: ``analyse(command).effects_known`` says whether it can be trusted alone.
    """
    return keyed_claims(analyse(command, rules, root=root), path)


def keyed_claims(analysis: Analysis, key: Key) -> list[Claim]:
    """The claims of ``analysis``, with each path made a lease key by ``key``."""
    if analysis.barrier is not None:
        return barrier_claims()
    claims: list[Claim] = []
    everything = path()
    for access in analysis.accesses:
        resource = _key(access.path, key)
        if access.kind == "read":
            claims.append(shared(everything if resource is None else resource))
        elif resource is not None:
            if access.kind == "write":
                claims.append(exclusive(resource))
        elif not access.optional:
            return barrier_claims()  # a write, or a cd, out of what the workspace can key
    return _without_covered_reads(canonical_claims(claims))


def claim_sources(analysis: Analysis, key: Key = path) -> dict[Claim, tuple[str, ...]]:
    """Each claim of ``keyed_claims(analysis, key)`` and the rules (or shell constructs) it
    comes from, in the order they matched::

        claim_sources(analyse("pytest -q > out.txt"))
        # {shared .: ('pytest',), exclusive .pytest_cache: ('pytest',),
        #  exclusive out.txt: ('redirection >',)}

    A barrier's one claim comes from the reason the command is not understood. A claim that
    covers another's path (``exclusive src`` over ``shared src/a.py``) takes its rules too.
    """
    claims = keyed_claims(analysis, key)
    if analysis.barrier is not None:
        return {claim: (analysis.barrier,) for claim in claims}
    found: dict[Claim, list[str]] = {claim: [] for claim in claims}
    for access in analysis.accesses:
        if access.kind not in ("read", "write"):
            continue  # where it runs: no claim of its own
        resource = _key(access.path, key) or path()
        for claim in claims:
            held = claim.resource
            if (
                isinstance(held, Path)
                and isinstance(resource, Path)
                and resource.parts[: len(held.parts)] == held.parts
                and (access.kind != "write" or claim.mode is Mode.EXCLUSIVE)
                and access.rule not in found[claim]
            ):
                found[claim].append(access.rule)
    return {claim: tuple(rules) for claim, rules in found.items()}


def describe_miss(command: str, analysis: Analysis, paths: Sequence[str]) -> str:
    """What to tell a user when ``command`` changed ``paths`` (workspace-relative) that its
    claims did not cover: which rules it ran under, and the rule to add to the project's
    ``.toolkernel/shell.toml`` so the next prediction covers them::

        `pytest -q` changed reports/junit.xml, which its claims did not cover (it ran under
        the rules pytest). To predict it, add to .toolkernel/shell.toml:
            [pytest]
            writes = ["reports/junit.xml"]
    """
    shown = ", ".join(paths) or "nothing"
    rules = analysis.rules or ("no rule",)
    # The rule to extend: the one whose program runs the project's code, or the last matched
    # (the innermost program: `uv run pytest` ran pytest).
    unknown = [reason.split(": ", 1)[0] for reason in analysis.unknown_effects]
    target = next((r for r in reversed(rules) if r in unknown), rules[-1])
    table = ".".join(
        part if part.replace("-", "").replace("_", "").isalnum() else f'"{part}"'
        for part in target.split(" ")
    )
    written = ", ".join(f'"{p}"' for p in paths)
    return (
        f"`{command}` changed {shown}, which its claims did not cover (it ran under the rules "
        f"{', '.join(rules)}). To predict it, add to .toolkernel/shell.toml:\n"
        f"    [{table}]\n    writes = [{written}]"
    )


def _without_covered_reads(claims: tuple[Claim, ...]) -> list[Claim]:
    """Drop a shared path claim under another path claim of the set: it adds nothing."""
    paths = {c.resource.parts for c in claims if isinstance(c.resource, Path)}
    kept = []
    for claim in claims:
        resource = claim.resource
        if claim.mode is Mode.SHARED and isinstance(resource, Path):
            parts = resource.parts
            if any(parts[:n] in paths for n in range(len(parts))):
                continue
        kept.append(claim)
    return kept


def _key(spelled: str | None, key: Key) -> Path | None:
    if spelled is None:
        return None
    if spelled.startswith("~"):
        if key is path:
            return None
        spelled = os.path.expanduser(spelled)
        if spelled.startswith("~"):
            return None
    try:
        return key(spelled)
    except (InvalidClaimError, OSError):
        return None

"""A shell command whose effects hold by construction: run on a copy-on-write view of the
workspace (``toolkernel.sandbox``), its changes committed under leases.

The prediction (``shell_claims``) decides what a call waits for up front; what the command
really changed decides what is committed, and how:

1. The command runs with the workspace an overlay. Nothing it does is visible to anyone yet,
   so it may run before its call's leases are granted (``BashTool.ahead``; the kernel decides
   when: ``toolkernel.kernel._ahead``): beside earlier calls that read what it writes, and, if
   it is *confined* (below), beside earlier commands that have not committed. It then waits for
   its grant (``ctx.wait_granted``), and looks at what the calls that finished meanwhile
   changed: if any of it is under its claims (or anything at all, for a command that is not
   confined: only earlier pure readers can let such a command start early, so this is a
   change made by a tool's nested call, which overtakes), the run is thrown away, unseen and
   unsaid (:attr:`ShellStatistics.ahead_thrown_away`, and the kernel's, through
   ``ctx.report_thrown_away``), and a confined command runs again
   now, holding its leases: a second run never runs ahead. A confined command hears of each
   such call while it runs (``ctx.wait_changed``), so a run one spoils is stopped then
   (``_run_unless_spoilt``), not finished first. Any other command never runs twice: it fails
   as in 3. below. Its commit comes after the grant, so after every earlier
   conflicting call's, in emission order; what it changed it reports
   (``ctx.report_changes``), for the commands running ahead after it to check against.
2. Its change set is read from the upper layer. Changes inside what its call holds exclusively
   are its own. A change outside them is a *miss* of the prediction: it is reported (a
   ``CallProgress`` event whose data has ``unpredicted``, and :attr:`ShellStatistics.misses`),
   and the call takes leases on those paths too (a nested step of its own: it keeps its leases,
   and waits behind conflicting calls emitted before it, not behind later ones).
3. Holding everything it changed, it checks nothing else changed those paths since it started
   (another agent, a person, a process outside the kernel). If none did, the changes are
   applied, in one shielded step (a file by one rename), and the call's result is the output.
   If some did, nothing of the attempt becomes visible. A command that is *confined*
   (``Analysis.confined``: everything it does is known and stays in the sandbox) runs again:
   the call takes the whole workspace (keeping its place), and its result says so; after
   :data:`MAX_ATTEMPTS` runs (only a process outside the kernel can go on changing what it
   changes) it fails, saying which paths kept changing. Any other command (one that sends
   data over the network, talks to a database or a daemon, publishes, or runs code the rules
   can't see, which may do any of that) never runs twice: it fails, saying what changed
   underneath, that nothing it changed in the workspace was kept (and what that was), why it
   was not run again, and its output. Discarding is chosen over keeping its changes beside
   the other writer's: the workspace is then as if it had not run, a state the batch can be
   in, where a mix of the two would be no state any order of them gives.

A command that times out, or whose call is cancelled, commits nothing, and says so. What it
writes outside the workspace is policy, not ordering: its temporary directory and the
toolchains' caches (``shell._confine``).

Running ahead changes nothing of this. What is promised: where the claims cover what each
command reads, and nothing outside the kernel changes the tree meanwhile, the batch ends exactly
as its calls run one at a time in emission order end, every file and every call's result (a
command that ran ahead commits after every earlier call it conflicts with, and its run is thrown
away if one of them changed what it claims). Missed writes are included: a command whose
effects the rules can't know whole holds the whole workspace in the kernel's own lease table
(``Ahead.commits_beyond``, from ``BashTool.ahead``), so later calls are validated against what
its commit really changed (:func:`_changed_claims`, reported) or wait for it; a command the
rules know whole is trusted to write only what they say. The files a commit brings in carry its
time (``Overlay.commit``), so the times follow the commits' order. A command reads the
workspace as it is while it runs: a file it did not claim may change under
it, which the overlay may or may not show (overlayfs leaves that undefined); what it changes is
checked, what it only reads is not.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, Final

import anyio
import anyio.to_thread
import attrs

from .._errors import CallEndedError, HoldMore, ToolError
from ..kernel import ChangedMeanwhile, ToolContext
from ..locks import Claim, Mode, Path, claims_conflict, covers, exclusive
from ..sandbox import Change, ChangeKind, Overlay
from ..shell import describe_miss
from ..shell._analysis import Analysis
from ..shell._confine import Launch
from ._file_tools import fs_of
from ._workspace import Workspace

__all__ = ["MAX_ATTEMPTS", "ShellStatistics", "run_and_commit", "with_notes"]

MAX_ATTEMPTS: Final = 3
"""Runs of one command, at most, when what it changed keeps changing underneath it."""


def with_notes(text: str, notes: Sequence[str]) -> str:
    """``text`` (a command's output, or what its failure says) and then ``notes``, after a blank
    line, one a line. After, never before: whatever reads the result (the model, or a program
    parsing what the command printed) finds the command's own bytes first, and all of them."""
    if not notes:
        return text
    if not text:
        return "\n".join(notes)
    return text + ("\n" if text.endswith("\n") else "\n\n") + "\n".join(notes)


@attrs.define
class ShellStatistics:
    """What the Bash tool's sandbox has seen, since the tool was made (cheap counts)."""

    commands: int = 0
    """Commands run in the sandbox."""
    committed: int = 0
    """Of those, commands whose changes were committed."""
    misses: int = 0
    """Commands that changed a path their prediction did not claim exclusively."""
    missed_paths: int = 0
    """Paths changed outside the prediction, over all commands."""
    reruns: int = 0
    """Commands run again because a path they changed was changed underneath them."""
    discarded: int = 0
    """Commands whose changes were thrown away: they timed out or were cancelled."""
    ran_ahead: int = 0
    """Commands started before their call's leases were granted (``toolkernel.kernel.Ahead``):
    beside earlier calls that read what they write, and, when confined, beside earlier
    commands whose changes were not committed yet."""
    ahead_thrown_away: int = 0
    """Of those, runs thrown away (and the command run again, holding its leases) because an
    earlier call committed a change to what the command may have read while it ran: the cost
    of speculation (``ahead_thrown_away / ran_ahead`` is the share)."""


RunProcess = Any
"""``_bash._run``: runs an argv, returns (exit status or None on a timeout, output)."""


def _held(claims: Sequence[Claim]) -> list[Claim]:
    return [claim for claim in claims if claim.mode is Mode.EXCLUSIVE]


def _uncovered(
    changes: Sequence[Change], held: Sequence[Claim], workspace: Workspace
) -> list[tuple[str, Path]]:
    """The paths of ``changes`` that no claim of ``held`` covers exclusively, with their keys.

    A change's key is its entry's, as the commit changes it: its components from the root,
    named as the workspace names them, none followed as a link (a link the command removed or
    replaced is changed itself, wherever it pointed). A directory the command made on the way
    to a path it holds (``_build`` for ``_build/dev``) is covered, as a file tool writing a
    held path makes its missing parents. Below a path that is covered, or a directory the
    command made or replaced that is not (holding it covers everything in it), nothing more
    is listed: a tree of any size costs one claim."""
    found = []
    inside: tuple[str, ...] | None = None  # the last change whose whole tree is accounted for
    for change in changes:
        parts = change.parts
        if inside is not None and parts[: len(inside)] == inside:
            continue
        key = workspace._entry_key(parts)
        wanted = exclusive(key)
        if any(covers(claim, wanted) for claim in held):
            inside = parts
            continue
        made = change.kind is ChangeKind.DIRECTORY and not change.metadata_only
        if made and not change.replaces and any(_below(claim.resource, key) for claim in held):
            continue
        found.append((change.path, key))
        if made:
            inside = parts
    return found


def _below(resource: object, directory: Path) -> bool:
    """Whether ``resource`` is a path strictly inside ``directory``."""
    if not isinstance(resource, Path):
        return False
    parts = resource.parts
    return len(parts) > len(directory.parts) and parts[: len(directory.parts)] == directory.parts


@attrs.frozen
class _Run:
    """One run of the command, done: its overlay, what it changed, its output, its exit
    status and why it failed (None if it exited 0)."""

    overlay: Overlay
    changes: list[Change]
    text: str
    failure: str | None
    number: int
    status: int


@attrs.frozen
class _Again:
    """The state of a call that must run its command again, holding the whole workspace: a
    path it changed was changed underneath it."""

    number: int
    notes: list[str]


class _Pending:
    """A run waiting for the leases on what it changed outside its claims (``HoldMore``'s
    state). Its overlay is removed when it is dropped, whether or not the call runs again (a
    call cancelled while it waited never does)."""

    def __init__(self, run: _Run, notes: list[str]) -> None:
        self.run = run
        self.notes = notes
        self._cleanup = weakref.finalize(self, run.overlay.discard_later)

    def close(self) -> None:
        self._cleanup()


async def run_and_commit(
    ctx: ToolContext,
    command: str,
    analysis: Analysis,
    seconds: float,
    run_process: RunProcess,
    statistics: ShellStatistics,
    writable: Sequence[str] = (),
) -> str:
    """Run ``command`` in the sandbox and commit what it changed (see the module docstring);
    its output, with notes on what happened beyond the plain run. Raises :class:`ToolError`
    for a command that failed (after committing what it changed, as a shell would have), timed
    out, or whose changes could not be committed; raises ``HoldMore`` for the leases on what it
    changed outside its claims (the kernel runs it again holding them, and it goes on here)."""
    workspace: Workspace = fs_of(ctx).workspace
    root = str(workspace.root)
    held = _held(ctx.claims)
    pending = ctx.resumed if isinstance(ctx.resumed, _Pending) else None
    again = ctx.resumed if isinstance(ctx.resumed, _Again) else None

    async def once(number: int) -> _Run:
        return await _run_once(
            command, analysis, root, seconds, run_process, statistics, writable, number
        )

    notes: list[str] = pending.notes if pending else again.notes if again else []
    owned: _Run | None = None  # the run whose overlay this call discards at the end
    try:
        if pending is not None:
            run = owned = pending.run
        else:
            ahead = pending is None and again is None and ctx.ran_ahead
            if ahead:
                statistics.ran_ahead += 1
            if ahead and analysis.confined:
                found = await _run_unless_spoilt(ctx, once, analysis)
                if found is None:  # spoilt while it ran: stopped, thrown away, run again
                    statistics.discarded -= 1  # counted as thrown away, not as cancelled
                    statistics.ahead_thrown_away += 1
                    ctx.report_thrown_away()
                    await ctx.wait_granted()
                    found = await once(1)
                    ahead = False
                run = owned = found
            else:
                run = owned = await once(again.number if again else 1)
            if ahead:
                changed = _changed_meanwhile(await ctx.wait_granted(), analysis, ctx.claims)
                if changed:
                    # An earlier call committed a change to what it may have read while it ran
                    # ahead: that run is as if it never happened (nothing of it is visible, and
                    # nothing is said of it), and the command runs now, holding its leases.
                    run.overlay.discard_later()
                    owned = None
                    if not analysis.confined:
                        statistics.discarded += 1
                        raise ToolError(_not_run_again(analysis, _listed(changed), run, notes))
                    statistics.ahead_thrown_away += 1
                    ctx.report_thrown_away()
                    run = owned = await once(1)
        fs = fs_of(ctx)  # made again at the grant if it holds shared leases: with their fence
        while True:
            uncovered = _uncovered(run.changes, held, workspace)
            if uncovered:
                outside = [path for path, _ in uncovered]
                _report_miss(ctx, command, analysis, outside, statistics, notes)
                more = [exclusive(key) for _, key in uncovered]
                owned = None  # the state owns it now
                raise HoldMore(more, _Pending(run, notes))
            underneath = await anyio.to_thread.run_sync(run.overlay.changed_underneath, run.changes)
            if not underneath:
                break
            shown = _listed(underneath)
            if not analysis.confined:
                statistics.discarded += 1
                raise ToolError(_not_run_again(analysis, shown, run, notes))
            statistics.reruns += 1
            if run.number >= MAX_ATTEMPTS:
                raise ToolError(
                    f"{shown} kept changing while the command ran ({run.number} runs); nothing "
                    f"it changed was kept"
                )
            notes.append(
                f"note: {shown} changed while the command ran, so nothing of that run was kept "
                f"and the command ran again, holding the whole workspace"
            )
            run.overlay.discard_later()
            owned = None
            whole = exclusive(workspace.key("."))
            if not any(covers(claim, whole) for claim in held):
                raise HoldMore([whole], _Again(run.number + 1, notes))
            run = owned = await once(run.number + 1)
        with anyio.CancelScope(shield=True):  # a commit is whole or not at all
            commit = partial(run.overlay.commit, run.changes, fence=fs.fence)
            await anyio.to_thread.run_sync(commit)
        statistics.committed += 1
        ctx.report_changes(_changed_claims(run.changes, workspace))
        if run.failure is not None:
            raise ToolError(with_notes(run.failure, notes))
        return with_notes(run.text, notes)
    finally:
        if owned is not None:
            owned.overlay.discard_later()
        if pending is not None:
            pending.close()


async def _run_unless_spoilt(
    ctx: ToolContext, once: Callable[[int], Awaitable[_Run]], analysis: Analysis
) -> _Run | None:
    """Run a confined command ahead of its grant, stopped (its overlay discarded) the moment an
    earlier call commits a change to what it may have read: that run would be thrown away at
    the grant anyway, and running it on only delays the run that counts. None if it was."""
    found: _Run | None = None
    failure: BaseException | None = None

    async def run() -> None:
        nonlocal found, failure
        try:
            found = await once(1)
        except Exception as exc:  # given to the caller as it is, not in a group
            failure = exc
        group.cancel_scope.cancel()  # the watch ends with it

    async def watch() -> None:
        seen: tuple[ChangedMeanwhile, ...] = ()
        try:
            while not _changed_meanwhile(seen, analysis, ctx.claims):
                seen = await ctx.wait_changed(len(seen))
        except CallEndedError:
            return  # the call is ending: its run is cancelled with it
        group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        group.start_soon(watch)
    if failure is not None:
        raise failure
    return found


def _changed_meanwhile(
    meanwhile: Sequence[ChangedMeanwhile], analysis: Analysis, claims: Sequence[Claim]
) -> list[str]:
    """What the calls that finished while the command ran ahead changed that it may have read:
    anything of its claims if it is confined (everything it does is known), else anything."""
    found: list[str] = []
    for earlier in meanwhile:
        for change in earlier.changed:
            if not isinstance(change.resource, Path):
                continue
            if not analysis.confined or any(claims_conflict(change, mine) for mine in claims):
                spelled = str(change.resource)
                if spelled not in found:
                    found.append(spelled)
    return found


def _changed_claims(changes: Sequence[Change], workspace: Workspace) -> list[Claim]:
    """Exclusive claims on what ``changes`` changed, for the calls running ahead to check:
    a directory the command made or replaced stands for everything in it."""
    found: list[Claim] = []
    inside: tuple[str, ...] | None = None
    for change in changes:
        parts = change.parts
        if inside is not None and parts[: len(inside)] == inside:
            continue
        found.append(exclusive(workspace._entry_key(parts)))
        if change.kind is ChangeKind.DIRECTORY and not change.metadata_only:
            inside = parts
    return found


def _report_miss(
    ctx: ToolContext,
    command: str,
    analysis: Analysis,
    outside: list[str],
    statistics: ShellStatistics,
    notes: list[str],
) -> None:
    statistics.misses += 1
    statistics.missed_paths += len(outside)
    shown = _listed(outside)
    with contextlib.suppress(Exception):  # a listener's failure is not the command's
        ctx.progress(
            describe_miss(command, analysis, outside),
            {"unpredicted": outside, "rules": list(analysis.rules)},
        )
    notes.append(
        f"note: the command also changed {shown}, which its claims did not cover; those "
        f"changes were committed once their leases were taken (nothing else it changed was "
        f"visible before)"
    )


async def _run_once(
    command: str,
    analysis: Analysis,
    root: str,
    seconds: float,
    run_process: RunProcess,
    statistics: ShellStatistics,
    writable: Sequence[str],
    number: int,
) -> _Run:
    """Run the command once on a fresh overlay; its run (the caller discards its overlay).
    Raises :class:`ToolError` if it timed out (its overlay discarded: nothing is kept)."""

    def prepare() -> tuple[Overlay, Launch]:
        overlay = Overlay.create(root)
        try:
            launch = Launch.prepare(command, analysis, root, overlay.launcher_options())
        except BaseException:
            overlay.discard()
            raise
        return overlay, launch

    def finish() -> list[Change]:
        launch.finish()
        return overlay.changes()

    overlay, launch = await anyio.to_thread.run_sync(prepare)  # one hop: a command's cost
    try:
        launch.allow(writable)
        statistics.commands += 1
        try:
            status, output = await run_process(launch.argv, root, seconds, launch.env)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(launch.finish)
            raise
        changes = await anyio.to_thread.run_sync(finish)
        text = output.text()
        if status is None:
            raise ToolError(
                f"command timed out after {round(seconds * 1000)} ms and was killed; nothing "
                f"it changed in the workspace was kept: {command}\n{text}".rstrip()
            )
        failure = None
        if status != 0:
            refused = launch.explain(text, root)
            failure = f"exit code {status}\n{text}".rstrip()
            failure = f"{failure}\n{refused}" if refused else failure
    except BaseException:
        statistics.discarded += 1
        overlay.discard_later()
        raise
    return _Run(overlay, changes, text, failure, number, status)


def _not_run_again(analysis: Analysis, shown: str, run: _Run, notes: list[str]) -> str:
    """Why a command whose run was thrown away is not run again, and what it did."""
    if analysis.effects_beyond:
        why = f"what it does reaches beyond the workspace ({'; '.join(analysis.effects_beyond)})"
    else:
        reasons = "; ".join(analysis.unknown_effects) or analysis.barrier or "not understood"
        why = f"what it does is not known whole, and may reach beyond the workspace ({reasons})"
    changed = _listed([change.path for change in run.changes])
    outcome = f"exit code {run.status}" if run.status else "it succeeded"
    return "\n".join(
        [
            *notes,
            f"{shown} changed while the command ran (another agent, a command or a person), "
            f"so nothing it changed in the workspace was kept (it had changed {changed}); it "
            f"was not run again, since {why}: its run ({outcome}) happened once. Check what it "
            f"did and run it again if it is still wanted. Its output:",
            run.text,
        ]
    ).rstrip()


def _listed(paths: Sequence[str]) -> str:
    return ", ".join(paths[:10]) + (f" and {len(paths) - 10} more" if len(paths) > 10 else "")

"""Running ahead of the grant: what a tool declares about its calls, and what one learns when
its leases are granted. Pure data.

A tool whose calls' writes become visible only at a commit it makes itself (the Bash tool in
the sandbox: a command's writes stay in its overlay until its change set is committed) may let
a call *run* before its leases are granted, as long as it *commits* under them: its request
waits in the lease table at its place as any other (so every later conflicting call still
queues behind it, and emission order is still kept by the table), while its tool does the work
whose effects nobody can see yet. Before it makes them visible, the tool awaits
``ctx.wait_granted()``, which returns once the leases are held, with the calls that
conflicted with it and finished while it ran ahead (:class:`ChangedMeanwhile`): what they
changed, the tool checks against what it read, and runs again if it must. Such a call is told
each of them as it finishes, too (``ctx.wait_changed()``, woken by the scheduler's ``CHANGED``
action): a tool whose run one of them spoils may stop that run then, rather than finish work it
will throw away at the grant.

A tool that only reads has nothing to commit but its result: the built-in Read, ListDir, Grep
and Glob (and a tool declared ``@tool(ahead=True)``, ``toolkernel.tools._declare``) answer
``Ahead(speculative=True)``, so a read emitted after a command that writes what it reads starts
at once, beside it, instead of waiting for it. Its run reads what the command has not
committed yet: its result (or what it raised) is held until its grant, and if a call that
finished meanwhile changed anything overlapping its claims (``ChangedMeanwhile.changed``), the
run is thrown away and made again, holding the leases; so it returns what a run in emission
order returns. Its claims are exactly what it may read, since ``ctx.fs`` lets it read nothing
else, and, taken before the grant, write nothing at all. It passes no earlier call that writes
directly (a ``Write``, an ``Edit``: their changes are visible as they run), only calls that run
ahead themselves.

When a queued call may start ahead is the scheduler's to decide (``_scheduler.may_run_ahead``):
a slot must be free, no earlier call may wait for one, and every earlier unfinished call whose
claims conflict with its own must be one it can't be invalidated by: a reader of what it
writes (it commits after that reader), or, for a *speculative* call (:attr:`Ahead.speculative`),
a call that itself runs ahead (its writes land at its commit, which the later call validates
against). Only path claims can be passed that way: a call claiming anything else (a device, a
pool) never runs ahead.

**What a commit may change beyond the claims.** A tool that commits what a run really changed
(the Bash tool: a command's change set, whatever its prediction said) may commit more than its
call claimed. It says so with :attr:`Ahead.commits_beyond` (the Bash tool: the workspace,
exclusively), which the kernel holds in its own lease table beside the call's claims, until the
call ends: every later call of the kernel that may read or write any of it is ordered after that
commit, as any conflicting call is. A later call that runs ahead itself (a read, another
command) still starts at once, and is validated at its grant against what the commit *really*
changed (``ChangedMeanwhile.changed``: what the tool reported), so a change the prediction
missed throws its run away, and one it predicted or made nowhere near costs nothing; a later
call that can't be validated (a ``Write``, an ``Edit``, a tool that does not run ahead) waits
for the commit. These are the kernel's own leases: a lease service shared with other processes
(``leases=``), whose calls have no emission order with this kernel's, is asked for the claims
only; and a call made inside a running call (nested, or in a batch a running call awaits,
which runs inside that call's leases) holds its claims only.

What it promises: with commits in emission order and that validation, a batch ends exactly as
if its calls had run one at a time in emission order (every file, every call's result), as long
as each call's claims cover what it reads, each write they miss is inside what its tool's
``commits_beyond`` says, and nothing outside the kernel changes the tree meanwhile. A call that
is not speculative is never run twice; a speculative one runs at most twice (a run ahead thrown
away, then one holding its leases) (``docs/design/sandbox.md``, "What is promised").
"""

from __future__ import annotations

import attrs

from ..locks import Claim

__all__ = ["Ahead", "ChangedMeanwhile"]


@attrs.frozen
class Ahead:
    """A tool's answer to ``ahead(arguments, key)``: this call may run before its leases are
    granted, committing under them.

    ``speculative``: it may also start while an earlier call that runs ahead itself (whose
    writes it would then read only at that call's commit) conflicts with it; its tool then
    checks, once granted, what those calls changed, and runs again if that touched what it
    read. False for work that must happen once: the call then starts ahead only past earlier
    readers of what it writes, which can't change anything it reads.
    """

    speculative: bool = False
    commits_beyond: tuple[Claim, ...] = ()
    """What its commit may change besides its claims, exclusively: held in the kernel's own
    lease table beside them (see above), so every later call that may read or write it is
    ordered after the commit."""


@attrs.frozen
class ChangedMeanwhile:
    """A call that conflicted with a call running ahead and finished after that call started
    and before its leases were granted: ``changed`` is what it reported it changed
    (``ctx.report_changes``), or else every exclusive claim it held."""

    call_id: str
    name: str
    changed: tuple[Claim, ...]

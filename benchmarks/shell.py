"""Shell commands with their own claims: the recorded turns replayed, and Landlock's cost.

Part 1 takes each set of recorded sessions (``src/toolkernel/_replay/sample-traces/claude-code-
log.jsonl``, and every ``*.jsonl`` in ``--sessions DIR``, default ``benchmarks/data/``: see its
README for the sets and how ``normalize_sessions.py`` makes them) and reports, on each set
separately:

i. **barrier rate**: the share of its distinct Bash commands whose claims hold the whole
   workspace exclusively (target <= 30%); also without the commands the recording cut
   (``...<truncated N chars>``: not what ran), and in the **fallback mode** (no sandbox: a
   command whose effects are not known whole, ``Analysis.effects_known``, is a barrier);
ii. **replay** of its turns with several calls (the inputs and the claims of the other tools
   are those of ``scheduling.py``), each Bash call declaring
   ``toolkernel.tools.shell_claims(command)``:

   a. **kernel, shell claims** — measured: ``open_kernel`` with fake tools sleeping each call's
      duration on ``MockClock``; its makespan must equal the critical path, and no two
      conflicting calls may overlap;
   b. **all-serial**;
   c. **kernel, fallback mode** — the same with every command whose effects are not known a
      barrier (what the Bash tool declares where no sandbox can be had);
   d. **Claude Code's scheme** — consecutive read-only calls run together (at most 10), every
      other call alone; a Bash call is read-only if it is on the read-only list
      (``is_read_only_command``, or ``git status|log|diff|show``);
   e. **coarse, every shell command alone**;
   f. **kernel, old barrier scheme** — a command holds the whole workspace (shared if the
      read-only list calls it read-only, else exclusive).

   Targets (multi-call turns, durations capped at 30 s): (a) >= 1.3x faster than (b) and
   >= 1.15x faster than (d), with no conflicting overlap.

With ``--project SET=DIR`` a set's commands are analysed with the project in DIR read
(``shell_claims(command, root=DIR)``: its mise tasks, mix aliases, package.json scripts...),
as the Bash tool would read a checkout of the project the sessions worked on; and the set is
replayed once more with each Bash call's claims asked of the Bash tool itself
(``BashTool.claims``, with the workspace key wrapped as a kernel wraps it for a batch of
several calls: what a real multi-call turn holds).

iii. **unsound predictions**: each class of effect the prediction must cover (the project's
   configuration, hooks, caches beside the sources, shadowing programs, bash corners, fresh
   cargo projects, SQLite's files...) has a representative command that is cheap and safe to
   run for real: each runs in a scratch project made for it, and every path it changed must be
   covered by an exclusive claim of the Bash tool's prediction (keyed through the workspace,
   with the project read), or the prediction must be a barrier. Each recorded set is told how
   many of its distinct commands fall under each class. Representatives whose program is not
   installed here are reported as skipped.

iv. With ``--project``, each distinct recorded command whose effects are known (the ones the
   prediction alone must get right where there is no sandbox) runs for real in a scratch copy
   of the set's project, and every path it changed must be covered by an exclusive claim.

Part 2 runs a few commands through the real Bash tool, confined by Landlock and unconfined, in
one run, interleaved, and reports the cost per command.

Speculation's cost, in the same run (where the sandbox can be had): a few commands that write
run through the real Bash tool ahead of their grant (beside an earlier call reading the whole
workspace, which ends once the command has started: on its overlay, then validated against
what changed meanwhile, then committed in order) and plain (beside a call that claims nothing),
interleaved; the ratio of their times from start to end, per command and the median; and,
beside it, each recorded set's runs thrown away in row g (of all runs of Bash commands, and of
the runs ahead: an upper bound, as row g says) with the work a command run ahead then takes
against a plain run (the ratio, plus one run for the share thrown away).

Measured (2 shared cores; the sets of ``data/README.md``, each project a ``git archive HEAD``
of its repository)::

    .venv/bin/python benchmarks/shell.py --recorded 0 --project claude-code-log=DIR \
        --project entire-go=DIR --project spotter-elixir=DIR

a run ahead, validated and committed in order, cost x1.00 a plain sandboxed run (median of four
commands' ratios, x0.95 to x1.14, 36-42 ms a command; 160 runs ahead, none thrown away; x0.90
to x1.11 in ``--quick`` runs, 5 of each). Runs thrown away (row g, the Bash tool's own claims
with the project read): claude-code-log 2 of 52 Bash runs (3.8%; 2 of 9 runs ahead), entire-go
48 of 552 (8.7%; 48 of 100), spotter-elixir 22 of 145 (15.2%; 22 of 27): the work of a command
run ahead is then x1.22, x1.47 and x1.81 a plain run's (counting a stopped run as a whole
one). Row g against Claude Code's scheme: x1.188, x1.296 and x1.031 (x1.25 the three together);
its makespans against row a's: 0.5% shorter on claude-code-log, 2.5% shorter on entire-go,
21.0% longer on spotter-elixir. A confined command whose run an earlier commit spoils stops
then (``ctx.wait_changed``), as the Bash tool's does: that gives 4.7 s on entire-go and 8.6 s
on spotter-elixir. A command
whose effects the rules can't know whole (``mix test``, ``make``) holds the workspace in the
kernel's table until its commit (``Ahead.commits_beyond``), so a later Write, Edit or command
that can't be speculated waits for it, as one at a time. On spotter-elixir that is nearly all
of the difference (135 s of 14 turns): ``mix test`` then ``mix credo`` in one turn, and credo,
whose effects are not known whole either (it evaluates ``mix.exs`` and ``config/*.exs`` and may
build the dev dependencies), is never run twice, so it waits for the test run's commit instead
of running beside it. Before ``commits_beyond`` (when a write the rules missed kept only a
one-at-a-time order) spotter-elixir's row g was x1.233 Claude Code's and the three together
x1.28. The fake Read, Grep, Glob, LS and ListDir run ahead as the built-in ones do.

Run from the repository root::

    .venv/bin/python benchmarks/shell.py            # full run
    .venv/bin/python benchmarks/shell.py --quick    # smoke run: fewer Landlock repetitions

Prints PASS or MISS beside each target; never fails on a figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import pathlib
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import trio
import trio.testing

import toolkernel as tk
from toolkernel import sandbox
from toolkernel._replay import is_read_only_command
from toolkernel.kernel._admission import KeyLog
from toolkernel.locks import Claim, Mode, Path, canonical_claims
from toolkernel.shell import _confine, analyse, command_environment
from toolkernel.shell._claims import keyed_claims
from toolkernel.tools import Workspace, builtin_tools
from toolkernel.tools._bash import make_bash_tool

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import scheduling

WORKSPACE = tk.path()
OLD_SHARED = (tk.shared(WORKSPACE),)
OLD_EXCLUSIVE = (tk.exclusive(WORKSPACE),)
BARRIER = (tk.exclusive(WORKSPACE),)
DEFAULT_SESSIONS = pathlib.Path(__file__).resolve().parent / "data"
TRUNCATED = "<truncated "


# -- claims of each scheme ---------------------------------------------------------------------


def is_barrier(claims: Sequence[Claim]) -> bool:
    """True if ``claims`` hold the whole workspace (or everything) exclusively."""
    return any(
        c.mode is Mode.EXCLUSIVE and (not isinstance(c.resource, Path) or c.resource == WORKSPACE)
        for c in claims
    )


def only_reads(claims: Sequence[Claim]) -> bool:
    return all(c.mode is Mode.SHARED for c in claims)


def session_key(cwd: str | None) -> Callable[[str], Path]:
    """Keys paths as the Bash tool of a workspace rooted at ``cwd`` would: an absolute path
    inside it is the path from the root (``/home/u/app/src`` is ``src`` in ``/home/u/app``)."""
    base = (cwd or "").rstrip("/")

    def key(spelled: str) -> Path:
        if base and (spelled == base or spelled.startswith(base + "/")):
            spelled = spelled[len(base) :].lstrip("/") or "."
        return tk.path(spelled)

    return key


class Prediction:
    """A set's Bash claims: from the text alone, or with a project read (``root``); paths
    keyed from the recorded session's working directory when the set records it."""

    def __init__(self, root: pathlib.Path | None = None) -> None:
        self.root = root
        self.cache: dict[tuple[str, str | None], tuple[tuple[Claim, ...], bool]] = {}

    def __call__(self, command: str, cwd: str | None = None) -> tuple[tuple[Claim, ...], bool]:
        """The claims of ``command``, and whether its effects are known whole."""
        found = self.cache.get((command, cwd))
        if found is None:
            root, _, sub = (cwd or "").partition("\0")
            # A command recorded in a directory beneath the root ran there.
            text = f"cd {shlex.quote(sub)} && {command}" if sub else command
            analysis = analyse(text, root=self.root)
            claims = canonical_claims(keyed_claims(analysis, session_key(root or None)))
            found = self.cache[(command, cwd)] = (claims, analysis.effects_known)
        return found


class ToolPrediction(Prediction):
    """A set's Bash claims as the Bash tool itself declares them in a batch of several calls,
    in a kernel whose workspace is the project in ``root``: ``BashTool.claims`` asked with
    the workspace's key wrapped as the kernel wraps it for a batch (``KeyLog``). The
    session's working directory is spelled as the project's in the command, as if the session
    had run there."""

    def __init__(self, root: pathlib.Path) -> None:
        super().__init__(root)
        self.workspace = Workspace(root)
        self.tool = make_bash_tool()

    def __call__(self, command: str, cwd: str | None = None) -> tuple[tuple[Claim, ...], bool]:
        found = self.cache.get((command, cwd))
        if found is None:
            session, _, sub = (cwd or "").partition("\0")
            text = f"cd {shlex.quote(sub)} && {command}" if sub else command
            if session:
                text = re.sub(re.escape(session.rstrip("/")) + r"(?![\w.-])", str(self.root), text)
            claims = self.tool.claims({"command": text}, KeyLog(self.workspace.key, once=True))
            assert claims is not None
            known = analyse(text, root=self.root).effects_known
            found = self.cache[(command, cwd)] = (canonical_claims(claims), known)
        return found


def with_shell_claims(
    batch: scheduling.Batch,
    old: bool,
    predict: Prediction | None = None,
    fallback: bool = False,
    cwd: str | None = None,
) -> scheduling.Batch:
    """``batch`` with each Bash call declaring its shell claims (or the old scheme's, or the
    fallback mode's)."""
    predict = predict or Prediction()
    calls = []
    for call in batch.calls:
        if call.tool == "Bash":
            command = str(call.args.get("command", ""))
            if old:
                claims = OLD_SHARED if is_read_only_command(command) else OLD_EXCLUSIVE
            else:
                claims, known = predict(command, cwd)
                if fallback and not known:
                    claims = BARRIER
            call = call._replace(claims=claims, read_only=only_reads(claims))
        calls.append(call)
    return batch._replace(calls=tuple(calls))


def shell_alone(batch: scheduling.Batch) -> scheduling.Batch:
    """Coarse split (e): every Bash call counts as a write."""
    calls = tuple(c._replace(read_only=False) if c.tool == "Bash" else c for c in batch.calls)
    return batch._replace(calls=calls)


# -- the kernel --------------------------------------------------------------------------------


def fake_tools(names: Sequence[str], table: Mapping[str, Sequence[Claim]]) -> list[tk.Tool]:
    tools = []
    for name in names:

        async def run(ctx: tk.ToolContext, ms: float, key: str) -> None:
            await trio.sleep(ms)

        def claims(args: Mapping[str, Any]) -> Sequence[Claim]:
            return table[args["key"]]

        tools.append(tk.tool(name=name, claims=claims)(run))
    return tools


class Run(NamedTuple):
    makespan: float
    starts: list[float]
    finishes: list[float]


class Ahead(NamedTuple):
    """What running commands ahead of their grants cost, counted as ``BashTool.statistics``
    counts them: runs ahead (``ran_ahead``), runs thrown away (``ahead_thrown_away``), and
    every run of a command (``commands``: each call once, and again if its run was thrown
    away)."""

    ran: int
    thrown_away: int
    runs: int


def ahead_tools(
    names: Sequence[str],
    table: Mapping[str, Sequence[Claim]],
    confined: Mapping[str, bool],
    counts: dict[str, int],
    known: Mapping[str, bool],
) -> list[tk.Tool]:
    """``fake_tools``, with Bash run as the sandboxed Bash tool runs it: ahead of its grant
    (``BashTool.ahead``: speculative if confined), then, once granted, run again if a call
    that finished meanwhile changed one of its claims (a confined command; any other, which
    passes only pure readers, never is). What an earlier call changed is taken to be every
    exclusive claim it held: more than a real command changes, so the share thrown away is an
    upper bound."""
    # As the built-in Read, ListDir, Grep and Glob (``ahead=True``): a read runs ahead of its
    # grant, its result held until then and made again if a call that finished meanwhile
    # changed what it claims.
    readers = {"Read", "LS", "ListDir", "Grep", "Glob"}
    tools = fake_tools([n for n in names if n != "Bash" and n not in readers], table)
    for name in sorted(readers.intersection(names)):

        async def read(ctx: tk.ToolContext, ms: float, key: str) -> None:
            await trio.sleep(ms)

        tools.append(tk.tool(name=name, claims=lambda args: table[args["key"]], ahead=True)(read))
    if "Bash" not in names:
        return tools

    async def run(ctx: tk.ToolContext, ms: float, key: str) -> None:
        counts["runs"] += 1
        mine = table[key]
        # What it commits: its exclusive claims (the real tool reports its change set).
        changes = [c for c in mine if c.mode is Mode.EXCLUSIVE]
        if not ctx.ran_ahead:
            await trio.sleep(ms)
            ctx.report_changes(changes)
            return
        counts["ran"] += 1

        def spoils(meanwhile: Sequence[tk.kernel.ChangedMeanwhile]) -> bool:
            for earlier in meanwhile:
                changed = [c for c in earlier.changed if isinstance(c.resource, Path)]
                if (not confined[key] and changed) or any(
                    tk.locks.claims_conflict(c, m) for c in changed for m in mine
                ):
                    return True
            return False

        spoilt = False
        if confined[key]:  # as the Bash tool: its run stops the moment a commit spoils it
            with trio.move_on_after(ms):
                seen: tuple[tk.kernel.ChangedMeanwhile, ...] = ()
                while not spoils(seen):
                    seen = await ctx.wait_changed(len(seen))
                spoilt = True
        else:
            await trio.sleep(ms)
        meanwhile = await ctx.wait_granted()
        if spoilt or spoils(meanwhile):
            counts["thrown_away"] += 1
            counts["runs"] += 1
            await trio.sleep(ms)  # the run again, holding its leases
        ctx.report_changes(changes)

    def claims(args: Mapping[str, Any]) -> Sequence[Claim]:
        return table[args["key"]]

    bash = tk.tool(name="Bash", claims=claims)(run)
    # As the Bash tool: a command whose effects the rules can't know whole commits whatever
    # it really changed in the workspace.
    beyond = (tk.writes("."),)
    bash.ahead = lambda args, key: tk.kernel.Ahead(  # type: ignore[attr-defined]
        speculative=confined[args["key"]],
        commits_beyond=() if known[args["key"]] else beyond,
    )
    return [*tools, bash]


def run_kernel(
    batches: Sequence[scheduling.Batch],
    confined: Mapping[str, bool] | None = None,
    counts: dict[str, int] | None = None,
    known: Mapping[str, bool] | None = None,
) -> list[Run]:
    """Run ``batches`` through the kernel on fake tools; with ``confined`` (each call's, by
    its key), Bash runs ahead of its grants as in the sandbox, counted in ``counts``."""
    table = {
        f"{b}/{c}": call.claims
        for b, batch in enumerate(batches)
        for c, call in enumerate(batch.calls)
    }
    names = sorted({call.tool for batch in batches for call in batch.calls})
    if confined is None:
        tools = fake_tools(names, table)
    else:
        assert counts is not None and known is not None
        tools = ahead_tools(names, table, confined, counts, known)

    async def main() -> list[Run]:
        runs = []
        async with tk.open_kernel(tools=tools) as kernel:
            for b, batch in enumerate(batches):
                calls = [
                    tk.ToolCall(call.id, call.tool, {"ms": call.ms, "key": f"{b}/{c}"})
                    for c, call in enumerate(batch.calls)
                ]
                begin = trio.current_time()
                results = await kernel.run(calls)
                assert all(r.ok for r in results), [r.error for r in results if not r.ok]
                starts = [
                    math.nan if r.started_at is None else r.started_at - begin for r in results
                ]
                finishes = [r.finished_at - begin for r in results]
                runs.append(Run(max(finishes, default=0.0), starts, finishes))
        return runs

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def ends(calls: Sequence[Any], starts: Sequence[float]) -> list[float]:
    """When each call ends, given when it starts."""
    return [start + call.ms for call, start in zip(calls, starts, strict=True)]


class Figures(NamedTuple):
    totals: dict[str, float]
    misses: int
    overlaps: int
    ahead: Ahead


def overlapping(calls: Sequence[Any], run: Run) -> int:
    """Conflicting pairs of ``calls`` that overlapped in ``run``."""
    conflicts = scheduling.conflict_matrix(calls)
    return sum(
        1
        for i in range(len(calls))
        for j in range(i)
        if conflicts[i][j] and run.starts[i] < run.finishes[j] and run.starts[j] < run.finishes[i]
    )


def load_cwds(traces: pathlib.Path) -> dict[str, str]:
    """Each turn's working directory (by its label), where the set records it, as
    ``ROOT`` or ``ROOT\0SUB``: the session's first directory is its workspace root, and a
    later turn that ran in a directory beneath it (Claude Code's shell keeps a ``cd``) ran
    there."""
    found = {}
    roots: dict[str, str] = {}
    with open(traces, encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                turn = json.loads(line)
                cwd = turn.get("cwd")
                if not cwd:
                    continue
                root = roots.setdefault(str(turn["session"]), str(cwd))
                sub = os.path.relpath(cwd, root)
                where = root if sub == "." or sub.startswith("..") else f"{root}\0{sub}"
                found[f"{turn['session']} turn {turn['turn']}"] = where
    return found


def replay(
    batches: Sequence[scheduling.Batch], predict: Prediction, cwds: Mapping[str, str]
) -> Figures:
    """Makespans of each scheme, summed over ``batches``."""
    new = [with_shell_claims(b, False, predict, cwd=cwds.get(b.label)) for b in batches]
    fallback = [
        with_shell_claims(b, False, predict, fallback=True, cwd=cwds.get(b.label)) for b in batches
    ]
    old = [with_shell_claims(b, old=True) for b in batches]
    runs = run_kernel(new)
    fallback_runs = run_kernel(fallback)
    analyses = {
        f"{b}/{c}": analysis_of(call, cwds.get(batch.label), predict.root)
        for b, batch in enumerate(new)
        for c, call in enumerate(batch.calls)
        if call.tool == "Bash"
    }
    confined = {key: analysis.confined for key, analysis in analyses.items()}
    known = {key: analysis.effects_known for key, analysis in analyses.items()}
    counts = {"ran": 0, "thrown_away": 0, "runs": 0}
    ahead_runs = run_kernel(new, confined, counts, known)
    keys = ("kernel", "cp", "serial", "fallback", "cc", "alone", "old", "ahead")
    totals = dict.fromkeys(keys, 0.0)
    misses = overlaps = 0
    for batch, new_batch, fallback_batch, old_batch, run, fallback_run, ahead_run in zip(
        batches, new, fallback, old, runs, fallback_runs, ahead_runs, strict=True
    ):
        totals["ahead"] += ahead_run.makespan
        calls = new_batch.calls
        conflicts = scheduling.conflict_matrix(calls)
        finish = ends(calls, scheduling.critical_path(calls, conflicts))
        old_finish = ends(
            old_batch.calls,
            scheduling.critical_path(old_batch.calls, scheduling.conflict_matrix(old_batch.calls)),
        )
        totals["kernel"] += run.makespan
        totals["cp"] += max(finish, default=0.0)
        totals["serial"] += sum(c.ms for c in calls)
        totals["fallback"] += fallback_run.makespan
        totals["cc"] += scheduling.coarse(batch.calls)  # read_only as loaded: the list
        totals["alone"] += scheduling.coarse(shell_alone(new_batch).calls)
        totals["old"] += max(old_finish, default=0.0)
        misses += run.makespan != max(finish, default=0.0)
        overlaps += overlapping(calls, run) + overlapping(fallback_batch.calls, fallback_run)
    ahead = Ahead(counts["ran"], counts["thrown_away"], counts["runs"])
    return Figures(totals, misses, overlaps, ahead)


def analysis_of(call: Any, cwd: str | None, root: pathlib.Path | None) -> Any:
    """What the Bash tool's analysis makes of ``call``'s command (``Analysis.confined``,
    ``Analysis.effects_known``)."""
    _, _, sub = (cwd or "").partition("\0")
    command = str(call.args.get("command", ""))
    return analyse(f"cd {shlex.quote(sub)} && {command}" if sub else command, root=root)


class Rates(NamedTuple):
    commands: int
    barriers: int
    cut: int  # commands the recording cut
    cut_barriers: int
    unknown: int  # barriers in the fallback mode


def rates(
    batches: Sequence[scheduling.Batch], predict: Prediction, cwds: Mapping[str, str]
) -> Rates:
    """The barrier rates on the distinct Bash commands of ``batches`` (a command recorded in
    several working directories counts once, a barrier if it is one in any)."""
    where: dict[str, set[str | None]] = {}
    for b in batches:
        for c in b.calls:
            if c.tool == "Bash":
                where.setdefault(str(c.args.get("command", "")), set()).add(cwds.get(b.label))
    commands = sorted(where)
    barriers = cut = cut_barriers = unknown = 0
    for command in commands:
        found = [predict(command, cwd) for cwd in sorted(where[command], key=str)]
        claims = next((c for c, _ in found if is_barrier(c)), found[0][0])
        known = all(k for _, k in found)
        barrier = is_barrier(claims)
        barriers += barrier
        unknown += barrier or not known
        if TRUNCATED in command:
            cut += 1
            cut_barriers += barrier
    return Rates(len(commands), barriers, cut, cut_barriers, unknown)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def report_set(
    name: str, traces: pathlib.Path, root: pathlib.Path | None, *, tool: bool = False
) -> None:
    loaded = scheduling.load_traces(traces)
    capped = scheduling.capped(loaded)
    multi = [b for b in capped if len(b.calls) > 1]
    predict = ToolPrediction(root) if tool and root is not None else Prediction(root)
    cwds = load_cwds(traces)
    found = rates(loaded, predict, cwds)
    sessions = len({b.label.split(" ")[0] for b in loaded})
    read = f", the project read from {root}" if root is not None else ""
    if tool:
        read += ", each command's claims the Bash tool's own in a batch"
    print(
        f"\n== {name}: {traces.name}: {len(loaded)} turns of {sessions} sessions, {len(multi)} "
        f"with several calls{read}"
    )
    share = found.barriers / found.commands if found.commands else 0.0
    print(
        f"  distinct Bash commands: {found.commands}; barriers: {found.barriers} ({share:.0%}) "
        f"target <= 30%: {verdict(share <= 0.30)}"
    )
    if found.cut:
        whole = found.commands - found.cut
        kept = found.barriers - found.cut_barriers
        print(
            f"  without the {found.cut} commands the recording cut (not what ran): {kept} of "
            f"{whole} ({kept / whole:.0%})"
        )
    print(
        f"  fallback mode (no sandbox; effects not known whole is a barrier): {found.unknown} "
        f"({found.unknown / found.commands:.0%})"
    )
    figures = replay(multi, predict, cwds)
    t = figures.totals
    print("  multi-call turns, durations capped at 30 s: makespan (s), the kernel's speed-up")
    rows = (
        ("a. kernel, shell claims", "kernel"),
        ("   critical path", "cp"),
        ("b. all-serial", "serial"),
        ("c. kernel, fallback mode", "fallback"),
        ("d. Claude Code's scheme", "cc"),
        ("e. coarse, every shell command alone", "alone"),
        ("f. kernel, old barrier scheme", "old"),
        ("g. kernel, sandboxed Bash runs ahead", "ahead"),
    )
    for label, key in rows:
        speed = t[key] / t["kernel"] if t["kernel"] else math.nan
        print(f"    {label:<40}{t[key] / 1000:>10.1f} s   x{speed:.3f}")
    serial = t["serial"] / t["kernel"] if t["kernel"] else math.nan
    cc = t["cc"] / t["kernel"] if t["kernel"] else math.nan
    fallback = t["serial"] / t["fallback"] if t["fallback"] else math.nan
    fallback_cc = t["cc"] / t["fallback"] if t["fallback"] else math.nan
    print(f"    target >= 1.3x over all-serial: x{serial:.3f} {verdict(serial >= 1.3)}")
    print(f"    target >= 1.15x over Claude Code's scheme: x{cc:.3f} {verdict(cc >= 1.15)}")
    print(
        f"    fallback mode: x{fallback:.3f} over all-serial, x{fallback_cc:.3f} over Claude Code's"
    )
    print(
        f"    conflicting calls overlapping: {figures.overlaps} "
        f"{verdict(figures.overlaps == 0)}; makespan != critical path on {figures.misses} turns "
        f"{verdict(figures.misses == 0)}"
    )
    ahead = figures.ahead
    thrown = ahead.thrown_away / ahead.ran if ahead.ran else 0.0
    print(
        f"    g: x{t['serial'] / t['ahead']:.3f} over all-serial, x{t['cc'] / t['ahead']:.3f} "
        f"over Claude Code's; {ahead.ran} commands ran ahead of their grants, "
        f"{ahead.thrown_away} of those runs thrown away ({thrown:.0%}, an upper bound), of "
        f"{ahead.runs} runs of Bash commands"
    )
    if tool or root is None:
        THROWN_AWAY.append((f"{name}{', the project read' if root is not None else ''}", ahead))
    counts = class_counts(loaded)
    if counts:
        shown = ", ".join(f"{name} {count}" for name, count in counts.items() if count)
        print(f"  distinct commands in the classes of iii: {shown or 'none'}")


THROWN_AWAY: list[tuple[str, Ahead]] = []
"""Each set's runs ahead and runs thrown away in row g (with the project read: the Bash tool's
own claims), for the summary of speculation's cost."""


def sets(sessions: pathlib.Path, traces: pathlib.Path) -> list[tuple[str, pathlib.Path]]:
    found = []
    if traces.exists():
        found.append(("claude-code-log", traces))
    else:  # --traces named a file that is not there
        print(f"Traces: none at {traces} (pass --traces FILE).")
    if sessions.is_dir():
        found.extend((f.stem, f) for f in sorted(sessions.glob("*.jsonl")))
    return found


def report_replay(
    traces: pathlib.Path, sessions: pathlib.Path, projects: Mapping[str, pathlib.Path]
) -> None:
    found = sets(sessions, traces)
    if not found:
        print("No recorded sessions: no replay.")
    for name, file in found:
        report_set(name, file, None)
        if name in projects:
            report_set(name, file, projects[name])
            report_set(name, file, projects[name], tool=True)


# -- unsound predictions: each class's representative, run for real ----------------------------


class Case(NamedTuple):
    name: str
    """The class of effect."""
    files: Mapping[str, str]
    """The scratch project (path: text; a text starting with "->" makes a symbolic link)."""
    command: str
    needs: tuple[str, ...] = ()
    """Programs it needs; without them it is skipped."""
    setup: tuple[str, ...] = ()
    """Shell commands that finish the scratch project (git init...), run before the snapshot."""
    matches: Callable[[str], bool] | None = None
    """Which recorded commands fall under this class."""


HOOK = "#!/bin/sh\nsed -i 's/old/new/' a.txt\ngit add a.txt\n"
GIT = ("git init -q -b main .", "git config user.email d@example.org", "git config user.name D")
COMMIT = (*GIT, "git add -A", "git commit -qm start")
MIX_EXS = (
    "defmodule D.MixProject do\n  use Mix.Project\n  def project, do: [app: :d, aliases: aliases()]"
    '\n  defp deps, do: [{:ecto_sqlite3, "~> 0.17"}]\n  defp aliases do\n    [test: '
    '["ecto.create --quiet", "ecto.migrate --quiet", "test"]]\n  end\nend\n'
)


def _starts(*words: str) -> Callable[[str], bool]:
    return lambda command: any(f" {w}" in f" {command}" for w in words)


CASES: tuple[Case, ...] = (
    Case(
        "pre-commit hook rewriting and staging",
        {"a.txt": "old\n", ".git-hooks/pre-commit": HOOK},
        "echo more >> b.txt && git add b.txt && git commit -qm x",
        ("git",),
        (*COMMIT, "cp .git-hooks/pre-commit .git/hooks/ && chmod +x .git/hooks/pre-commit"),
        _starts("git commit", "git push"),
    ),
    Case(
        "core.hooksPath (husky)",
        {"a.txt": "old\n", ".husky/_/pre-commit": HOOK},
        "touch c.txt && git add c.txt && git commit -qm x",
        ("git",),
        (*COMMIT, "chmod +x .husky/_/pre-commit", "git config core.hooksPath .husky/_"),
    ),
    Case(
        "git diff refreshing the index",
        {"a.txt": "a\n"},
        "git diff --stat",
        ("git",),
        (*COMMIT, "sleep 1", "touch a.txt"),
        _starts("git diff"),
    ),
    Case(
        "git describe --dirty",
        {"a.txt": "a\n"},
        "git describe --tags --always --dirty",
        ("git",),
        (*COMMIT, "git tag v1", "sleep 1", "touch a.txt"),
        _starts("git describe"),
    ),
    Case(
        "git config --file (its lock file)",
        {"conf/x.cfg": "[a]\n\tb = 1\n"},
        "git config --file conf/x.cfg a.c 2",
        ("git",),
        matches=_starts("git config"),
    ),
    Case(
        "git init --bare", {}, "git init -q --bare store.git", ("git",), matches=_starts("git init")
    ),
    Case(
        "git init --separate-git-dir",
        {"store/.keep": ""},
        "git init -q --separate-git-dir store/r.git repo",
        ("git",),
    ),
    Case(
        ".git file pointing elsewhere (linked worktree)",
        {"a.txt": "a\n"},
        "cd wt && echo x > n.txt && git add n.txt && git commit -qm n",
        ("git",),
        (*COMMIT, "git worktree add -q -b side wt"),
    ),
    Case(
        "nested repository's driver",
        {"lib/a.txt": "a\n", "lib/.gitattributes": "*.txt diff=x\n"},
        "cd lib && git log -p -1",
        ("git",),
        (
            "cd lib && git init -q -b main . && git config user.email d@e && git config "
            "user.name D && git config diff.x.textconv 'sh -c \"touch ../written; cat $0\"' "
            "&& git add -A && git commit -qm s",
        ),
    ),
    Case(
        "package.json test script",
        {"package.json": '{"scripts": {"test": "echo ok > out/result.txt"}}', "out/.keep": ""},
        "npm test --silent",
        ("npm",),
        matches=_starts("npm test", "npm run", "pnpm", "yarn", "bun run"),
    ),
    Case(
        "npm install (package-lock.json, node_modules)",
        {"package.json": '{"name": "x", "version": "1.0.0"}'},
        "npm install --offline --no-audit --no-fund",
        ("npm",),
        matches=_starts("npm install", "npm ci", "pnpm install", "yarn install"),
    ),
    Case(
        "pytest: caches and bytecode beside the sources",
        {
            "pkg/__init__.py": "def f():\n    return 1\n",
            "tests/test_f.py": "from pkg import f\n\ndef test_f():\n    assert f() == 1\n",
            "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
        },
        "python3 -m pytest -q -p no:randomly",
        ("python3",),
        matches=_starts("pytest", "python -m pytest", "python3 -m pytest"),
    ),
    Case(
        "python -m finding ./pip.py",
        {"pip.py": "open('pwned.txt', 'w').write('x')\n"},
        "python3 -m pip --version",
        ("python3",),
        matches=_starts("python -m", "python3 -m"),
    ),
    Case(
        ".venv/bin/* that is not what installs it",
        {".venv/bin/pytest": "#!/bin/sh\necho x > src.txt\n"},
        ".venv/bin/pytest -q",
        setup=("chmod +x .venv/bin/pytest",),
        matches=_starts(".venv/bin/"),
    ),
    Case(
        "setuptools build backend (*.egg-info)",
        {
            "pyproject.toml": (
                '[project]\nname = "demo"\nversion = "0"\n[build-system]\n'
                'requires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
            ),
            "demo/__init__.py": "",
        },
        "python3 -m build --no-isolation --sdist",
        ("python3",),
        matches=_starts("pip install", "python -m build", "uv run", "uv sync"),
    ),
    Case(
        "core.editor run by git commit",
        {"a.txt": "a\n"},
        "echo b >> a.txt && git commit -qa",
        ("git",),
        (*COMMIT, 'git config core.editor "sh -c \'echo msg > \\"\\$1\\"; touch edited\' --"'),
    ),
    Case(
        "man.viewer run by git help",
        {},
        "git help log > /dev/null",
        ("git",),
        (*GIT, "git config man.viewer v", "git config man.v.cmd 'touch viewed; true'"),
        lambda command: "git help" in command or ("git " in command and "--help" in command),
    ),
    Case(
        "remote.*.uploadpack run by git fetch",
        {"up/a.txt": "a\n"},
        "git fetch -q origin",
        ("git",),
        (
            "cd up && git init -q -b main . && git -c user.email=d@e -c user.name=D commit -qm s "
            "--allow-empty",
            *GIT,
            "git remote add origin ./up",
            "git config remote.origin.uploadpack 'touch fetched.txt; git-upload-pack'",
        ),
        _starts("git fetch", "git pull"),
    ),
    Case(
        "PYTHONPYCACHEPREFIX set by the command",
        {"pkg/__init__.py": "", "tests/test_a.py": "import pkg\n\ndef test_a():\n    pass\n"},
        "PYTHONPYCACHEPREFIX=pyc python3 -m pytest -q -p no:randomly -p no:cacheprovider",
        ("python3",),
        matches=lambda c: "PYTHONPYCACHEPREFIX" in c,
    ),
    Case("BASH_CMDS", {}, "BASH_CMDS[ls]=/usr/bin/touch; ls made.txt", matches=_starts("BASH_")),
    Case(
        "shopt -s cdable_vars",
        {"sub/.keep": ""},
        "shopt -s cdable_vars; d=sub; cd d && touch made.txt",
        matches=_starts("shopt"),
    ),
    Case("a file named -", {}, "echo hi > -", matches=lambda c: "> -" in c),
    Case(
        "cd .. through a link",
        {"real/sub/.keep": "", "link": "->real/sub"},
        "cd link && cd .. && touch made.txt",
    ),
    Case("find -execdir", {"src/deep/a.py": ""}, "find src -name '*.py' -execdir touch seen \\;"),
    Case(
        "links the command makes",
        {"src/a.txt": "a\n"},
        "ln -s src l && echo b >> l/a.txt",
        matches=_starts("ln "),
    ),
    Case(
        "sed --follow-symlinks",
        {"data/a.txt": "a\n", "link.txt": "->data/a.txt"},
        "sed -i --follow-symlinks s/a/b/ link.txt",
        ("sed",),
        matches=_starts("sed -i"),
    ),
    Case("set -k", {}, "set -k; env OUT=x.txt true", matches=_starts("set -")),
    Case(
        "cargo build in a fresh cargo new project",
        {},
        "cd demo && cargo build --offline -q",
        ("cargo",),
        ("cargo new -q --vcs none demo",),
        _starts("cargo build", "cargo test", "cargo check", "cargo clippy"),
    ),
    Case(
        "cargo new inside a workspace",
        {"Cargo.toml": '[workspace]\nmembers = []\nresolver = "2"\n'},
        "cargo new -q --vcs none crates/demo",
        ("cargo",),
        matches=_starts("cargo new", "cargo init"),
    ),
    Case(
        "sqlite3: -wal, -shm, -journal",
        {},
        "sqlite3 app.db 'PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1);'",
        ("sqlite3",),
        matches=_starts("sqlite3"),
    ),
    Case(
        "C compiler without -o",
        {"src/a.c": "int f(void) { return 1; }\n"},
        "cc -c src/a.c",
        ("cc",),
        matches=_starts("gcc", "cc ", "clang"),
    ),
    Case(
        "cmake configure and build",
        {
            "CMakeLists.txt": "cmake_minimum_required(VERSION 3.10)\nproject(d C)\n"
            "add_library(d a.c)\n",
            "a.c": "int f(void) { return 1; }\n",
        },
        "cmake -S . -B build -G Ninja > /dev/null && cmake --build build > /dev/null",
        ("cmake", "ninja", "cc"),
        matches=_starts("cmake", "ninja"),
    ),
    Case(
        "make", {"Makefile": "all:\n\ttouch built\n"}, "make -s", ("make",), matches=_starts("make")
    ),
    Case(
        "mix alias and config database (read only: mix is not installed here)",
        {"mix.exs": MIX_EXS, "config/test.exs": 'config :d, D.Repo, database: "d_test.db"\n'},
        "mix test",
        ("mix",),
        matches=_starts("mix "),
    ),
)


def class_counts(batches: Sequence[scheduling.Batch]) -> dict[str, int]:
    commands = {
        str(c.args.get("command", "")) for b in batches for c in b.calls if c.tool == "Bash"
    }
    return {
        case.name: sum(1 for command in commands if case.matches(command))
        for case in CASES
        if case.matches is not None
    }


def _make(root: pathlib.Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        place = root / name
        place.parent.mkdir(parents=True, exist_ok=True)
        if text.startswith("->"):
            place.symlink_to(root / text[2:])
        else:
            place.write_text(text)


def _snapshot(root: pathlib.Path) -> dict[str, tuple[int, int, int, int]]:
    """Every path under ``root`` and its status (mode, size, modification time, inode): a
    write, a replacement, a creation or a removal changes it."""
    found = {}
    for directory, names, files in os.walk(root):
        for name in [*names, *files]:
            place = os.path.join(directory, name)
            status = os.lstat(place)
            key = os.path.relpath(place, root).replace(os.sep, "/")
            found[key] = (status.st_mode, status.st_size, status.st_mtime_ns, status.st_ino)
    return found


def bash_environment(analysis: Any, base: Mapping[str, str]) -> dict[str, str]:
    """``base`` with what the Bash tool adds for a command whose git commands only read."""
    environment = dict(base)
    if analysis.git == "read":
        count = int(environment.get("GIT_CONFIG_COUNT", "0") or 0)
        for offset, (key, value) in enumerate(_confine.GIT_READ_ONLY_CONFIG):
            environment[f"GIT_CONFIG_KEY_{count + offset}"] = key
            environment[f"GIT_CONFIG_VALUE_{count + offset}"] = value
        environment["GIT_CONFIG_COUNT"] = str(count + len(_confine.GIT_READ_ONLY_CONFIG))
        environment["GIT_OPTIONAL_LOCKS"] = "0"
    return environment


def check_case(case: Case) -> tuple[str, str]:
    """(verdict, detail) of one representative: ``covered``, ``UNSOUND`` or ``skipped``."""
    missing = [p for p in case.needs if shutil.which(p) is None]
    if missing:
        return "skipped", f"needs {', '.join(missing)}"
    with tempfile.TemporaryDirectory() as directory:
        root = pathlib.Path(directory).resolve()
        _make(root, case.files)
        environment = {
            **os.environ,
            **command_environment(cache=pathlib.Path(directory + "-cache")),
        }
        environment.pop("PYTHONDONTWRITEBYTECODE", None)
        # This environment's programs (pytest, build) first, as in an activated virtualenv.
        bin_dir = str(pathlib.Path(sys.executable).parent)
        environment["PATH"] = f"{bin_dir}:{environment.get('PATH', os.defpath)}"
        for step in case.setup:
            subprocess.run(
                step, shell=True, cwd=root, env=environment, check=True, capture_output=True
            )
        workspace = Workspace(root)
        analysis = analyse(case.command, root=root, environ=environment)
        claims = keyed_claims(analysis, workspace.key)
        before = _snapshot(root)
        done = subprocess.run(
            ["bash", "-c", case.command],
            cwd=root,
            env=bash_environment(analysis, environment),
            capture_output=True,
            timeout=300,
        )
        after = _snapshot(root)
        changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
        shutil.rmtree(directory + "-cache", ignore_errors=True)
        if is_barrier(claims):
            return "covered", f"barrier ({analysis.barrier or 'claims hold the workspace'})"
        held = [
            c.resource.parts
            for c in claims
            if c.mode is Mode.EXCLUSIVE and isinstance(c.resource, Path)
        ]
        # Directories made on the way to a claimed path are part of making it (as for Write).
        uncovered = [
            p
            for p in changed
            if not any(tuple(p.split("/"))[: len(h)] == h for h in held)
            and not any(h[: len(p.split("/"))] == tuple(p.split("/")) for h in held)
        ]
        status = f"exit {done.returncode}"
        if uncovered:
            return (
                "UNSOUND",
                f"{status}; changed {len(uncovered)} paths outside {[str(c) for c in claims]}: "
                f"{', '.join(uncovered[:5])}{', ...' if len(uncovered) > 5 else ''}",
            )
        return "covered", f"{status}; changed {len(changed)} paths, all claimed"


def report_classes() -> None:
    print("\n== iii. unsound predictions: each class's representative, run for real")
    unsound = ran = 0
    for case in CASES:
        verdict_, detail = check_case(case)
        ran += verdict_ != "skipped"
        unsound += verdict_ == "UNSOUND"
        print(f"  {verdict_:<8} {case.name}: `{case.command}`: {detail}")
    print(f"  unsound: {unsound} of {ran} run; target 0: {verdict(unsound == 0)}")


def _uncovered(
    root: pathlib.Path, before: Mapping[str, Any], after: Mapping[str, Any], claims: Sequence[Claim]
) -> list[str]:
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    held = [
        c.resource.parts
        for c in claims
        if c.mode is Mode.EXCLUSIVE and isinstance(c.resource, Path)
    ]
    return [
        p
        for p in changed
        if not any(tuple(p.split("/"))[: len(h)] == h for h in held)
        and not any(h[: len(p.split("/"))] == tuple(p.split("/")) for h in held)
    ]


def report_recorded(name: str, traces: pathlib.Path, project: pathlib.Path, limit: int) -> None:
    """iv. Each distinct recorded command whose effects are known, run for real in a scratch
    copy of the set's project (a git repository of it, HOME a scratch directory too, no
    network), against the Bash tool's prediction there. Commands that are barriers, or whose
    effects are not known whole (they run the project's code: the sandbox's business), are not
    run; nor are those whose programs are not installed here."""
    loaded = scheduling.load_traces(traces)
    commands = sorted(
        {str(c.args.get("command", "")) for b in loaded for c in b.calls if c.tool == "Bash"}
    )
    print(f"\n== iv. {name}: recorded commands with known effects, run for real in {project.name}")
    with tempfile.TemporaryDirectory() as directory:
        template = pathlib.Path(directory) / "template"
        shutil.copytree(project, template, symlinks=True)
        environment = {**os.environ, "HOME": str(pathlib.Path(directory) / "home")}
        environment.update(command_environment(cache=pathlib.Path(directory) / "pycache"))
        (pathlib.Path(directory) / "home").mkdir()
        for step in (
            *COMMIT,
            "git gc -q",
            "git config core.trustctime false",
            "git config core.checkStat minimal",
        ):
            subprocess.run(step, shell=True, cwd=template, env=environment, capture_output=True)
        objects = str(template / ".git" / "objects")

        def copy(source: str, target: str) -> None:
            # Git's objects are never changed in place: linked, not copied. The rest is copied
            # with its times, so git needs not read every file again to know it is unchanged.
            if source.startswith(objects):
                os.link(source, target)
            else:
                shutil.copy2(source, target)

        ran = unsound = skipped = 0
        examples = []
        for command in commands:
            if ran >= limit:
                break
            analysis = analyse(command, root=template, environ=environment)
            if not analysis.effects_known or TRUNCATED in command:
                continue
            programs = [r.split(" ")[0] for r in analysis.rules]
            if any(shutil.which(p) is None for p in programs if "/" not in p):
                skipped += 1
                continue
            scratch = pathlib.Path(directory) / "scratch"
            shutil.copytree(template, scratch, symlinks=True, copy_function=copy)
            try:
                claims = keyed_claims(
                    analyse(command, root=scratch, environ=environment), Workspace(scratch).key
                )
                if is_barrier(claims):
                    continue
                before = _snapshot(scratch)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    subprocess.run(
                        ["bash", "-c", command],
                        cwd=scratch,
                        env=bash_environment(analysis, environment),
                        capture_output=True,
                        timeout=20,
                        stdin=subprocess.DEVNULL,
                    )
                ran += 1
                missed = _uncovered(scratch, before, _snapshot(scratch), claims)
                if missed:
                    unsound += 1
                    examples.append(f"    `{command[:100]}`: {', '.join(missed[:4])}")
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        print(
            f"  run: {ran} (of {len(commands)} distinct; {skipped} need programs not installed "
            f"here); unsound: {unsound} {verdict(unsound == 0)}"
        )
        for line in examples[:10]:
            print(line)


# -- Landlock's cost ---------------------------------------------------------------------------

COMMANDS = (
    "true",
    "cat a.txt",
    "ls -la",
    "grep -n x a.txt > found.txt",
    "mkdir -p build && cp a.txt build/",
)


def time_commands(repetitions: int) -> dict[tuple[str, bool], list[float]]:
    """Seconds per Bash call of each command, confined and not, interleaved in one run."""
    found: dict[tuple[str, bool], list[float]] = {}
    real_abi = _confine.landlock_abi

    async def main(root: pathlib.Path) -> None:
        async with tk.open_kernel(builtin_tools(bash=True), root=root) as kernel:
            for _ in range(repetitions):
                for command in COMMANDS:
                    for confined in (True, False):
                        _confine.landlock_abi = real_abi if confined else (lambda: 0)
                        call = tk.ToolCall("b", "Bash", {"command": command})
                        began = time.perf_counter()
                        (result,) = await kernel.run([call])
                        elapsed = time.perf_counter() - began
                        assert result.ok, result.error
                        found.setdefault((command, confined), []).append(elapsed)
        _confine.landlock_abi = real_abi

    _confine._noted = True  # the once-only note about unconfined commands is not measured
    with tempfile.TemporaryDirectory() as directory:
        root = pathlib.Path(directory)
        (root / "a.txt").write_text("a\nx\n" * 100)
        trio.run(main, root)
    return found


def report_landlock(repetitions: int) -> None:
    abi = _confine.landlock_abi()
    print(f"\nLandlock: ABI {abi} on this kernel; {repetitions} runs of each command, interleaved")
    if abi <= 0:
        print("  no Landlock here: nothing to measure")
        return
    found = time_commands(repetitions)
    extra = []
    for command in COMMANDS:
        confined = statistics.median(found[(command, True)]) * 1000
        free = statistics.median(found[(command, False)]) * 1000
        extra.append(confined - free)
        print(
            f"  {command:<34} confined {confined:7.2f} ms   unconfined {free:7.2f} ms   "
            f"+{confined - free:.2f} ms  x{confined / free:.2f}"
        )
    cost = statistics.median(extra)
    print(f"  Landlock's cost per command (median of the differences): {cost:.2f} ms")


# -- speculation's cost -------------------------------------------------------------------------

AHEAD_COMMANDS = (
    "echo 1 >> log",
    "grep -n x a.txt > found.txt",
    "sed -i s/x/x/ a.txt",
    "mkdir -p build && cp a.txt build/",
)


def time_ahead(repetitions: int) -> tuple[dict[tuple[str, bool], list[float]], Any]:
    """Seconds from a Bash call's start to its end, run ahead of its grant and plain,
    interleaved in one run, and the Bash tool's statistics.

    Each command is the second call of a batch of two; the first reads a path and ends as
    soon as the command has started. Ahead, it reads the whole workspace, which the command
    writes: the command starts beside it (``BashTool.ahead``), runs on its overlay, then
    waits for its grant (there already), checks what changed meanwhile (nothing) and commits.
    Plain, it claims nothing: the command is granted at once and runs in the sandbox as any
    command does."""
    found: dict[tuple[str, bool], list[float]] = {}
    began = trio.Event()

    async def wait(ctx: tk.ToolContext, path: str) -> str:
        """End once the command has started."""
        with trio.fail_after(10):
            await began.wait()
        return ""

    look = tk.tool(name="look", reads=["path"])(wait)
    idle = tk.tool(name="idle", claims=lambda arguments: [])(wait)

    def listen(event: Any) -> None:
        if isinstance(event, tk.kernel.CallStarted) and event.call_id == "b":
            began.set()

    tools = [*builtin_tools(bash=True), look, idle]

    async def main(root: pathlib.Path) -> None:
        nonlocal began
        async with tk.open_kernel(tools, root=root) as kernel:
            kernel.add_listener(listen)
            for _ in range(repetitions):
                for command in AHEAD_COMMANDS:
                    for ahead in (False, True):
                        began = trio.Event()
                        first = tk.ToolCall("r", "look" if ahead else "idle", {"path": "."})
                        call = tk.ToolCall("b", "Bash", {"command": command})
                        _, result = await kernel.run([first, call])
                        assert result.ok and result.started_at is not None, result.error
                        elapsed = result.finished_at - result.started_at
                        found.setdefault((command, ahead), []).append(elapsed)

    with tempfile.TemporaryDirectory() as directory:
        root = pathlib.Path(directory)
        (root / "a.txt").write_text("a\nx\n" * 100)
        trio.run(main, root)
    (bash,) = [t for t in tools if t.name == "Bash"]
    return found, bash.statistics


def report_ahead(repetitions: int) -> None:
    """The per-command cost of running ahead against a plain sandboxed run, and, beside it, the
    share of runs thrown away on the recorded sets (row g of Part 1)."""
    print(
        f"\nSpeculation's cost: {repetitions} runs of each command, ahead of its grant and "
        f"plain, interleaved"
    )
    why_not = sandbox.unavailable()
    if why_not is not None:
        print(f"  no sandbox here ({why_not}): nothing to measure")
        return
    found, counted = time_ahead(repetitions)
    expected = repetitions * len(AHEAD_COMMANDS)
    assert (counted.ran_ahead, counted.ahead_thrown_away) == (expected, 0), counted
    ratios = []
    for command in AHEAD_COMMANDS:
        ahead = statistics.median(found[(command, True)]) * 1000
        plain = statistics.median(found[(command, False)]) * 1000
        ratios.append(ahead / plain)
        print(
            f"  {command:<34} ahead {ahead:7.2f} ms   plain {plain:7.2f} ms   "
            f"{ahead - plain:+.2f} ms  x{ahead / plain:.2f}"
        )
    cost = statistics.median(ratios)
    print(
        f"  a run ahead, validated and committed in order: x{cost:.2f} a plain sandboxed run "
        f"(median of the ratios; {counted.ran_ahead} runs ahead, none thrown away)"
    )
    if not THROWN_AWAY:
        return
    print(
        "  runs thrown away on the recorded multi-call turns (row g: an upper bound), and the "
        "work a command run ahead takes then (its run, and one run more if it was thrown away):"
    )
    for name, ahead in THROWN_AWAY:
        of_runs = ahead.thrown_away / ahead.runs if ahead.runs else 0.0
        of_ahead = ahead.thrown_away / ahead.ran if ahead.ran else 0.0
        print(
            f"    {name:<34} {ahead.thrown_away:>3} of {ahead.runs:>4} Bash runs "
            f"({of_runs:.1%}); of {ahead.ran:>3} runs ahead {of_ahead:.0%}: "
            f"x{cost + of_ahead:.2f} a plain run's work"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: few Landlock runs")
    parser.add_argument("--traces", type=pathlib.Path, default=scheduling.DEFAULT_TRACES)
    parser.add_argument("--sessions", type=pathlib.Path, default=DEFAULT_SESSIONS)
    parser.add_argument(
        "--project",
        action="append",
        default=[],
        metavar="SET=DIR",
        help="also analyse SET's commands with the project in DIR read",
    )
    parser.add_argument("--no-landlock", action="store_true", help="no Landlock timing")
    parser.add_argument(
        "--recorded",
        type=int,
        default=200,
        metavar="N",
        help="with --project, run at most N recorded commands of each set for real (iv)",
    )
    options = parser.parse_args(argv)
    projects = {}
    for item in options.project:
        name, _, directory = item.partition("=")
        projects[name] = pathlib.Path(directory).resolve()
    report_replay(options.traces, options.sessions, projects)
    report_classes()
    for name, file in sets(options.sessions, options.traces):
        if name in projects:
            report_recorded(name, file, projects[name], options.recorded)
    report_ahead(5 if options.quick else 40)
    if options.no_landlock:
        return 0
    report_landlock(5 if options.quick else 40)
    return 0


if __name__ == "__main__":
    sys.exit(main())

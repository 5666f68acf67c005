"""The scheduler alone, driven at random through the harness: batches of reads and writes on a
few paths (some ``after=`` earlier calls, some with limits or a higher priority), granted calls
started and ended in any order, calls cancelled, time passing. After every step:

- no two calls holding leases (running, or granted and waiting for a slot) conflict;
- among conflicting calls of one batch, none starts before an earlier one started or finished;
- no spurious waits: a call waiting for leases conflicts with a call holding them or ahead of
  it in line (asking earlier, or at a higher priority from another batch); one waiting for a
  slot waits while every slot is taken; a ready call that has not asked is held back by an
  earlier pending call of its batch it conflicts with; a pending one waits for an unfinished
  ``after=`` call;
- at most ``max_concurrency`` calls run;

and once everything is run to the end, every call has finished and every lease is back.
"""

from __future__ import annotations

import itertools

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from toolkernel.kernel._call import CallState, Status
from toolkernel.kernel._record import CallRecord, Stage
from toolkernel.locks import claims_conflict

from .transcripts import Harness, call

PATHS = ["a", "a/b", "b", "c"]
HOLDING = (Stage.HELD, Stage.FOR_SLOT)  # granted their leases, waiting for a slot

one_call = st.fixed_dictionaries(
    {
        "path": st.sampled_from(PATHS),
        "mode": st.sampled_from("rw"),
        "after": st.none() | st.integers(0, 1000),  # an earlier call, picked by index
        "wait_timeout": st.none() | st.sampled_from([1.0, 3.0]),
        "run_timeout": st.none() | st.sampled_from([2.0]),
    }
)


def conflict(one: CallRecord, other: CallRecord) -> bool:
    return any(claims_conflict(a, b) for a in one.claims or () for b in other.claims or ())


def holds_leases(record: CallRecord) -> bool:
    return record.state is CallState.RUNNING or record.stage in HOLDING


class SchedulerMachine(RuleBasedStateMachine):
    """One scheduler (through the harness) and every call submitted to it; see the module."""

    def __init__(self) -> None:
        super().__init__()
        self.h = Harness()
        self.limit: int | None = None
        self.all: list[CallRecord] = []
        self.ids = itertools.count()
        self.step = 0
        self.asked_at: dict[CallRecord, int] = {}  # the step a call left PENDING in
        self.seen = 0  # how much of the harness's log was read
        self.done: set[str] = set()  # calls started

    @initialize(limit=st.none() | st.integers(1, 3))
    def open(self, limit: int | None) -> None:
        self.limit = limit
        self.h.open(max_concurrency=limit)

    # -- rules -----------------------------------------------------------------------------------

    @rule(batch=st.lists(one_call, min_size=1, max_size=5), priority=st.sampled_from([0, 0, 5]))
    def submit(self, batch: list[dict], priority: int) -> None:
        """A batch, at one priority (within a batch, priorities can't reorder conflicting
        calls: ``test_a_higher_priority_never_overtakes_an_earlier_call_of_its_own_batch``)."""
        calls, earlier = [], [r.call.id for r in self.all]
        for spec in batch:
            after = spec["after"]
            deps = [] if after is None or not earlier else [earlier[after % len(earlier)]]
            call_id = f"c{next(self.ids)}"
            limits = {"wait_timeout": spec["wait_timeout"], "run_timeout": spec["run_timeout"]}
            calls.append(
                call(call_id, spec["path"], spec["mode"], after=deps, priority=priority, **limits)
            )
            earlier.append(call_id)
        self.all.extend(self.h.submit(*calls).values())

    @rule(pick=st.integers(0, 1000))
    def begin(self, pick: int) -> None:
        """A granted call's task gets to run (or finds it finished)."""
        waiting = [r for r in self.all if r.stage in (Stage.FRESH, Stage.GRANTED)]
        if waiting:
            self.h.begin(waiting[pick % len(waiting)])

    @rule(pick=st.integers(0, 1000), status=st.sampled_from([Status.OK, Status.ERROR]))
    def end(self, pick: int, status: Status) -> None:
        """A running tool returns."""
        tools = sorted(self.h.scopes, key=lambda r: r.uid)
        if tools:
            self.h.end(tools[pick % len(tools)], status)

    @rule(pick=st.integers(0, 1000))
    def cancel(self, pick: int) -> None:
        live = [r for r in self.all if r.stage is not Stage.FINISHED]
        if live:
            self.h.cancel(live[pick % len(live)])

    @rule()
    def settle(self) -> None:
        self.h.settle()

    @rule(seconds=st.sampled_from([0.5, 1.0, 2.5]))
    def advance(self, seconds: float) -> None:
        self.h.advance(self.h.now + seconds)

    # -- invariants: one, so that they are checked in this order --------------------------------

    @invariant()
    def check(self) -> None:
        self.step += 1
        live = [r for r in self.all if r.stage is not Stage.FINISHED]
        for record in live:
            if record.state is not CallState.PENDING and record not in self.asked_at:
                self.asked_at[record] = self.step
        self.read_log()
        holders = [r for r in live if holds_leases(r)]
        for one, other in itertools.combinations(holders, 2):
            assert not conflict(one, other), f"{one.call.id} and {other.call.id} conflict"
        if self.limit is not None:
            assert sum(r.state is CallState.RUNNING for r in live) <= self.limit
        self.no_spurious_waits(live)

    def read_log(self) -> None:
        """Check each call started since the last step against the earlier calls of its batch:
        those it conflicts with started before it, or finished (in this step at the latest:
        a call's end is written down after the starts its release decided)."""
        log = self.h.log
        for entry in log[self.seen :]:
            act, _, call_id = entry.partition(" ")
            if act == "start":
                record = self.h.records[call_id]
                for earlier in self.all:
                    if earlier.batch is not record.batch or earlier.uid >= record.uid:
                        continue
                    if conflict(earlier, record) and earlier.call.id not in self.done:
                        assert earlier.stage is Stage.FINISHED, (earlier.call.id, call_id)
                        assert f"start {earlier.call.id}" not in log[self.seen :]
                self.done.add(call_id)
        self.seen = len(log)

    def ahead(self, other: CallRecord, record: CallRecord) -> bool:
        """Whether ``other`` may be ahead of ``record`` in line: it asked no later, or at a
        higher priority (which passes waiting calls of other batches)."""
        if self.asked_at[other] <= self.asked_at[record]:
            return True
        return other.batch is not record.batch and other.call.priority > record.call.priority

    def no_spurious_waits(self, live: list[CallRecord]) -> None:
        by_id = self.h.records
        for record in live:
            if record.stage is Stage.PENDING:
                deps = [by_id[i] for i in record.call.after]
                assert any(d.stage is not Stage.FINISHED for d in deps), record.call.id
            elif record.stage is Stage.READY:
                assert any(
                    e.batch is record.batch
                    and e.uid < record.uid
                    and e.state is CallState.PENDING
                    and conflict(e, record)
                    for e in live
                ), record.call.id
            elif record.stage is Stage.QUEUED:
                assert any(
                    other is not record
                    and conflict(other, record)
                    and (
                        holds_leases(other)
                        or (other.stage is Stage.QUEUED and self.ahead(other, record))
                    )
                    for other in live
                ), f"{record.call.id} waits behind nobody"
            elif record.stage in HOLDING:
                assert self.limit is not None
                running = sum(r.state is CallState.RUNNING for r in live)
                assert running == self.limit, f"{record.call.id} waits for a free slot"

    # -- the end ---------------------------------------------------------------------------------

    def teardown(self) -> None:
        """Run everything to the end: every call finishes and every lease returns."""
        h = self.h
        if not hasattr(h, "scheduler"):
            return
        for _ in range(10 * len(self.all) + 10):
            h.settle()
            for record in [r for r in self.all if r.stage in (Stage.FRESH, Stage.GRANTED)]:
                h.begin(record)
            for record in sorted(h.scopes, key=lambda r: r.uid):
                h.end(record)
            if all(r.stage is Stage.FINISHED for r in self.all):
                break
        unfinished = [r.call.id for r in self.all if r.stage is not Stage.FINISHED]
        assert not unfinished, f"never finished: {unfinished}"
        statistics = h.scheduler.lease_statistics()
        assert (statistics.held, statistics.waiting) == (0, 0)
        snapshot = h.scheduler.snapshot()
        assert snapshot.running == snapshot.queued == snapshot.pending == ()
        assert h.scheduler.statistics().finished == len(self.all)


# The loaded profile's examples (``tests/conftest.py``), each a story of at most 30 steps.
SchedulerMachine.TestCase.settings = settings(stateful_step_count=30)
test_the_scheduler_at_random = SchedulerMachine.TestCase

"""Transcripts of calls made from inside running calls: nested calls (``ctx.call``) inside
their parent's leases or outside them at a raised priority, batches a tool runs on its own
kernel, handles a tool awaits; wait cycles broken with a ``DeadlockError``, slots lent to
awaited calls. No event loop: see ``transcripts``; each mirrors a test of ``test_nested``."""

from __future__ import annotations

import pytest

from toolkernel.kernel._call import Status
from toolkernel.kernel._record import Stage
from toolkernel.locks import writes

from .transcripts import Harness, call

OK, ERROR, CANCELLED, TIMEOUT = Status.OK, Status.ERROR, Status.CANCELLED, Status.TIMEOUT


def running(h: Harness, *calls) -> list:
    """Submit ``calls`` and start each one's tool; their records."""
    records = list(h.submit(*calls).values())
    for record in records:
        h.begin(record)
    return records


def test_a_child_covered_by_its_parent_runs_inside_the_parent_lease() -> None:
    h = Harness().open()
    parent = running(h, call("p1", "pkg", "w"))[0]
    outsider = h.submit(call("r1", "pkg/a.py"))["r1"]
    child = h.nested(parent, "pkg/a.py", "w")
    assert child.call.id == "p1.1" and child.stage is Stage.RUNNING  # at once, inside p1's lease
    h.end(child)
    assert h.result("p1.1").status is OK and outsider.stage is Stage.QUEUED
    h.end(parent)
    assert h.spawned == ["p1", "r1"]  # the reader waited for the whole parent


def test_two_children_on_one_covered_file_still_exclude_each_other() -> None:
    h = Harness().open()
    parent = running(h, call("p", "pkg", "w"))[0]
    first, second, beside = (h.nested(parent, f"pkg/{f}", "w") for f in ("a", "a", "b"))
    assert [first.stage, second.stage, beside.stage] == [Stage.RUNNING, Stage.QUEUED, Stage.RUNNING]
    h.clear()
    h.end(first)
    assert second.stage is Stage.RUNNING  # its parent's task was woken, and went on
    assert h.log == ["revoke p.1", "wake p.2", "wake p.1"]  # granted inside the release


def test_a_child_outside_its_parent_lease_waits_for_the_holder_at_a_raised_priority() -> None:
    h = Harness().open()
    holder, parent = running(h, call("holder", "other", "w"), call("p", "a", "w"))
    h.submit(call("waiting", "other", "w"))  # asked first, at the usual priority
    child = h.nested(parent, "other", "w")
    assert child.stage is Stage.QUEUED
    h.end(holder)
    assert child.stage is Stage.RUNNING, "the nested call goes ahead of top-level waiters"
    assert h.spawned == ["holder", "p"]
    h.end(child)
    h.end(parent)
    assert h.spawned[-1] == "waiting"


def test_children_waiting_for_each_others_parents_give_a_deadlock_error() -> None:
    h = Harness().open()
    p1, p2 = running(h, call("p1", "a", "w"), call("p2", "b", "w"))
    wants_b = h.nested(p1, "b", "w")
    assert wants_b.stage is Stage.QUEUED
    wants_a = h.nested(p2, "a", "w")  # closes the cycle: refused at once
    refused = h.result("p2.1")
    assert (refused.status, refused.error_type) == (ERROR, "DeadlockError")
    assert "p1" in (refused.error or "") and "p2" in (refused.error or "")
    assert "declare the resources on the outer call" in (refused.error or "")
    assert wants_a.stage is Stage.FINISHED and wants_b.stage is Stage.QUEUED
    h.end(p2)
    assert wants_b.stage is Stage.RUNNING  # the other goes on once its holder is done


def test_a_child_that_declares_nothing_inside_a_declared_parent_is_a_deadlock() -> None:
    h = Harness().open()
    parent = running(h, call("w", "a", "w"))[0]
    h.nested(parent)
    assert h.result("w.1").error_type == "DeadlockError"


def test_nesting_deeper_than_max_depth_is_an_error() -> None:
    h = Harness().open(max_depth=2)
    record = running(h, call("d", "a", "w"))[0]
    for _ in range(3):
        record = h.nested(record, "a", "w")
    assert record.call.id == "d.1.1.1"
    assert h.result("d.1.1.1").error == (
        "NestingDepthError: calls nested more than 2 deep; d.1.1 (t) can't call t"
    )


def test_a_nested_call_with_bad_arguments_or_an_unknown_tool_is_an_error_result() -> None:
    h = Harness().open()
    parent = running(h, call("s", claims=""))[0]
    h.nested(parent, "a", arguments={"bad": 1})
    assert h.result("s.1").error_type == "InvalidArgumentsError"
    record, actions = h.scheduler.admit_nested(parent, "no_such_tool", {})
    h.do(actions)
    h.do(h.scheduler.end_nested(record))
    assert record.result is not None and record.result.error_type == "UnknownToolError"


def test_nested_calls_are_events_and_in_the_snapshot_with_their_parent() -> None:
    h = Harness().open(listen=True)
    parent = running(h, call("p1", "pkg", "w"))[0]
    first = h.nested(parent, "pkg/a", "w")
    h.nested(parent, "pkg/a", "w")
    snap = h.scheduler.snapshot()
    assert {i.call_id: i.parent for i in snap.running} == {"p1": None, "p1.1": "p1"}
    assert {i.call_id: (i.parent, i.waits_for) for i in snap.queued} == {"p1.2": ("p1", ("p1.1",))}
    queued = [e for e in h.heard if type(e).__name__ == "CallQueued"]
    assert [(e.call_id, e.parent) for e in queued] == [("p1", None), ("p1.1", "p1"), ("p1.2", "p1")]
    h.clear()
    h.end(first)
    assert h.log == [
        "revoke p1.1",
        "wake p1.2",  # granted in the release: its parent's task goes on after this step
        "tell CallFinished p1.1",
        "wake p1.1",
        "tell CallStarted p1.2",
    ]


def test_cancelling_a_parent_cancels_its_children_running_and_waiting() -> None:
    h = Harness().open()
    parent = running(h, call("p1", "pkg", "w"))[0]
    inner = h.nested(parent, "pkg/a", "w")
    behind = h.nested(parent, "pkg/a", "w")
    h.cancel(parent)
    assert h.status("p1.2") == [CANCELLED]  # waiting: no task runs it, it ends at once
    assert sorted(h.interrupted) == ["p1", "p1.1"]
    h.settle()
    assert h.status("p1", "p1.1", "p1.2") == [CANCELLED] * 3
    assert h.result("p1.1").error == "cancelled with its parent call p1"
    assert inner.stage is behind.stage is Stage.FINISHED
    assert h.scheduler.lease_statistics().held == 0


def test_a_parent_holding_a_whole_pool_lends_its_units_to_its_children() -> None:
    h = Harness().open(pools={"android": 2})
    fleet = running(h, call("f", claims="pool:android"))[0]
    lanes = [h.nested(fleet, claims="pool:android:1") for _ in range(3)]
    outsider = h.submit(call("l", claims="pool:android:1"))["l"]
    assert [lane.stage for lane in lanes] == [Stage.RUNNING, Stage.RUNNING, Stage.QUEUED]
    h.end(lanes[0])
    assert lanes[2].stage is Stage.RUNNING and outsider.stage is Stage.QUEUED
    for lane in lanes[1:]:
        h.end(lane)
    h.end(fleet)
    assert h.spawned == ["f", "l"]


def test_a_parent_run_timeout_cancels_its_running_child() -> None:
    h = Harness().open()
    parent = running(h, call("p1", "pkg", "w", run_timeout=1))[0]
    h.now = 0.5
    h.nested(parent, "pkg/a", "w")
    h.advance(1)
    assert h.status("p1", "p1.1") == [TIMEOUT, CANCELLED]
    assert (h.result("p1.1").started_at, h.result("p1.1").finished_at) == (0.5, 1)


def test_a_child_waiting_outside_its_parent_times_out() -> None:
    h = Harness().open(wait_timeout=2)
    running(h, call("holder", "b", "w"))
    parent = running(h, call("p", "a", "w"))[0]
    child = h.nested(parent, "b", "w")
    h.advance(2)
    assert h.result("p.1").error == (
        "timed out after waiting 2 s for its leases behind holder (t) on b; try again later"
    )
    assert child.stage is Stage.FINISHED and h.scheduler.lease_statistics().waiting == 0


@pytest.mark.parametrize("where", ["inside", "outside"])
def test_a_child_in_flight_when_its_parent_returns_ends_before_the_parents_leases(where) -> None:
    h = Harness().open()
    running(h, call("blocker", "elsewhere", "w"))
    parent = running(h, call("p", "a", "w"))[0]
    after = h.submit(call("c2", "a", "w"))["c2"]
    h.nested(parent, "a" if where == "inside" else "elsewhere", "w")
    h.now = 1
    h.end(parent)  # returns without awaiting it
    child = h.result("p.1")
    assert (child.status, child.finished_at) == (CANCELLED, 1)
    assert "its parent call p (t) ended first" in (child.error or "")
    assert h.log.index("wake p.1") < h.log.index("start c2")  # before the leases went
    assert after.stage is Stage.FRESH or after.stage is Stage.GRANTED
    if where == "inside":
        h.settle()  # its tool unwinds, and finds it finished
    assert h.scheduler.lease_statistics().held == 2  # the blocker's, and c2's
    assert h.status("p.1") == [CANCELLED]


# -- a tool awaiting calls of its own kernel: a batch, or handles ---------------------------------


@pytest.mark.parametrize("limit", [None, 1])
def test_calls_a_running_tool_awaits_run_inside_its_leases_when_they_cover_them(limit) -> None:
    # As an agent used as a tool runs its own calls: what o's lease on a covers runs inside it
    # (in emission order among themselves), in o's slot; what it doesn't cover runs as usual.
    h = Harness().open(max_concurrency=limit)
    outer = running(h, call("o", "a", "w"))[0]
    records = h.submit(
        call("i1", "a", "w"), call("i2", "a"), call("free", "other", "w"), awaited_by=outer
    )
    assert h.spawned == ["o", "i1", "free"]
    h.run_to_end(records["i1"])
    assert h.spawned[-1] == "i2" and h.status("i1") == [Status.OK]


@pytest.mark.parametrize("limit", [None, 1])
def test_a_tool_running_calls_its_leases_do_not_cover_gets_a_deadlock_error_not_a_hang(
    limit,
) -> None:
    h = Harness().open(max_concurrency=limit)
    outer = running(h, call("o", "a"))[0]  # it reads a: a write of a waits for it
    h.submit(call("inner", "a", "w"), call("free", "other", "w"), awaited_by=outer)
    inner = h.result("inner")
    assert inner.error is not None and inner.error.startswith(
        "DeadlockError: waiting for its leases would deadlock: inner (t) -> o (t) -> inner"
    )
    assert h.spawned == ["o", "free"]  # in o's slot, even with a single one


def test_a_call_inside_an_awaiting_calls_leases_can_not_ask_to_hold_more_than_they_cover() -> None:
    h = Harness().open()
    outer = running(h, call("o", "a", "w"))[0]
    records = h.submit(call("inner", "a", "w"), awaited_by=outer)
    h.begin(records["inner"])
    h.hold_more(records["inner"], [writes("b")])
    inner = h.result("inner")
    assert (inner.status, inner.error_type) == (Status.ERROR, "InvalidCallError")
    assert "needs more than the leases of o" in (inner.error or "")


@pytest.mark.parametrize("limit", [1, 2])
def test_a_call_waiting_for_a_slot_with_leases_an_awaited_call_needs_runs_in_its_slot(
    limit,
) -> None:
    h = Harness().open(max_concurrency=limit)
    calls = [call("p", "a", "w"), call("q", "b", "w")]
    if limit == 2:
        calls.insert(0, call("long", "z", "w"))
    records = h.submit(*calls)
    h.begin(records["p"])
    assert records["q"].stage is Stage.HELD  # granted b, waiting for a slot
    child = h.nested(records["p"], "b", "w")  # waits for q's lease; q for p's slot
    assert h.spawned[-1] == "q" and records["q"].stage is Stage.FRESH
    h.run_to_end(records["q"])
    assert child.stage is Stage.RUNNING
    h.end(child)
    h.end(records["p"])
    assert h.scheduler.statistics().running == (1 if limit == 2 else 0)


def test_a_tool_awaiting_the_handle_of_a_call_behind_its_own_lease_gets_a_deadlock_error() -> None:
    h = Harness().open()
    outer = running(h, call("o", "a", "w"))[0]
    h.submit(call("after", "a", "w"))  # submitted from o's tool, not awaited
    inner = h.submit(call("inner", "a", "w"))["inner"]
    h.await_handle(outer, inner)
    assert (h.result("inner").error or "").startswith(
        "DeadlockError: waiting for its leases would deadlock: "
        "inner (t) -> after (t) -> o (t) -> inner (t) wait for each other; it was not run."
    )
    h.end(outer)
    assert h.spawned == ["o", "after"]


@pytest.mark.parametrize("limit", [None, 1])
def test_a_tool_awaiting_a_handle_runs_it_in_its_own_slot_and_cancelling_leaves_it(limit) -> None:
    h = Harness().open(max_concurrency=limit)
    watcher = running(h, call("o", "a", "w"))[0]
    other = h.submit(call("other", "b", "w"))["other"]
    h.await_handle(watcher, other)
    assert h.spawned == ["o", "other"]  # in o's slot if it has to
    h.cancel(watcher)
    h.settle()
    assert h.status("o", "other") == [CANCELLED, None]  # o only watched it
    h.run_to_end(other)
    assert h.status("other") == [OK]


def test_a_call_inside_an_awaiting_calls_leases_ends_before_they_go() -> None:
    # Its tool returned without awaiting it (the batch was run from a task it left behind): the
    # call ran inside leases that are going, so it ends first, as a nested call does.
    h = Harness().open()
    outer = running(h, call("o", "a", "w"))[0]
    records = h.submit(call("inner", "a", "w"), awaited_by=outer)
    h.begin(records["inner"])
    later = h.submit(call("next", "a", "w"))["next"]
    h.run_to_end(outer)
    assert h.status("inner") == [Status.CANCELLED]
    assert "ended" in (h.result("inner").error or "")
    assert later.stage is not Stage.FINISHED and h.spawned[-1] == "next"

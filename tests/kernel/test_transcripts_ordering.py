"""Transcripts of the scheduler deciding who runs when: admission, emission order, ``after=``,
leases (shared, exclusive, pools), slots and priorities. No event loop: see ``transcripts``.

Each mirrors an async test (named in its comment) and says what the scheduler decided, as the
actions it returned and the stages and results of the calls."""

from __future__ import annotations

import pytest

from toolkernel.kernel._call import CallState, Status
from toolkernel.kernel._record import Stage

from .transcripts import Harness, PlainTool, call

OK, ERROR, SKIPPED = Status.OK, Status.ERROR, Status.SKIPPED

# -- admission: every refusal is a result, and the others run (test_admission) --------------------


@pytest.mark.parametrize(
    ("bad", "error_type", "message"),
    [
        (call("x", tool="nope"), "UnknownToolError", "there is no tool named 'nope'"),
        (call("x", "a", arguments={"bad": 1}), "InvalidArgumentsError", "t takes no argument"),
        (call("x", claims="boom"), "InvalidClaimError", "can't compute the claims of t"),
        (call("x", claims="pool:gpu"), "UnknownPoolError", "t claims pool 'gpu'"),
        (call("x", claims="pool:net:3"), "CapacityError", "t claims 3 units of pool 'net'"),
    ],
    ids=["unknown tool", "bad arguments", "claims raise", "unknown pool", "too many"],
)
def test_a_bad_call_is_an_error_result_at_admission_and_the_others_run(
    bad, error_type, message
) -> None:
    h = Harness().open(listen=True, pools={"net": 2})
    h.submit(call("c1", "a", "w"), bad, call("c3", "a"))
    result = h.result("x")
    assert (result.status, result.error_type) == (ERROR, error_type), result.error
    assert message in (result.error or "")
    assert (result.queued_at, result.started_at, result.finished_at) == (0, None, 0)
    assert h.spawned == ["c1"]  # x started nothing, and c3 still waits for c1
    assert h.told[:4] == [("CallQueued", i) for i in ("c1", "x", "c3")] + [("CallFinished", "x")]
    (queued,) = [e for e in h.heard if e.call_id == "x" and type(e).__name__ == "CallQueued"]
    assert queued.claims == ()


def test_every_call_is_queued_before_a_bad_one_finishes() -> None:
    # test_results_events: every CallQueued before the first CallFinished, whatever fails.
    h = Harness().open(listen=True)
    h.submit(call("bad1", tool="nope"), call("ok", "a"), call("bad2", tool="nope"))
    names = [name for name, _ in h.told]
    assert names[:3] == ["CallQueued"] * 3 and "CallQueued" not in names[3:]
    assert h.status("bad1", "ok", "bad2") == [ERROR, None, ERROR]


def test_a_duplicate_id_in_a_batch_is_an_error_of_the_second() -> None:
    h = Harness().open()
    h.submit(call("c", "a"), call("c", "b"))
    assert h.spawned == ["c"]
    (first,) = h.scheduler.snapshot().running
    assert [str(c.resource) for c in first.claims] == ["a"]
    second = h.records["c"].result  # the latest with that id
    assert second is not None and second.error_type == "InvalidCallError"


def test_a_batch_brings_its_own_tools_found_before_the_kernels() -> None:
    # test_batch_tools: tools= of one batch; the next batch does not see them.
    h = Harness().open()
    h.submit(call("x", "a", tool="extra"), tools=[PlainTool("extra")])
    assert h.spawned == ["x"] and h.records["x"].call.name == "extra"
    h.submit(call("y", "a", tool="extra"))
    assert h.result("y").error_type == "UnknownToolError"


def test_a_closed_scheduler_refuses_new_calls() -> None:
    h = Harness().open()
    h.close()
    with pytest.raises(RuntimeError, match="can't submit calls: the kernel is closed"):
        h.submit(call("c", "a"))


# -- emission order among conflicting calls (test_ordering) ---------------------------------------


def test_a_read_then_an_edit_of_one_file_run_in_that_order() -> None:
    h = Harness().open()
    records = h.submit(call("r", "a"), call("w", "a", "w"))
    assert h.spawned == ["r"] and records["w"].stage is Stage.QUEUED
    h.run_to_end(records["r"])
    assert h.spawned == ["r", "w"]


def test_an_edit_then_a_read_of_one_file_run_in_that_order() -> None:
    h = Harness().open()
    records = h.submit(call("w", "a", "w"), call("r", "a"))
    assert h.spawned == ["w"]
    h.run_to_end(records["w"])
    assert h.spawned == ["w", "r"]


def test_edits_of_one_file_run_one_after_another_in_emission_order() -> None:
    h = Harness().open()
    records = h.submit(*(call(f"e{i}", "a", "w") for i in range(4)))
    for i in range(4):
        assert h.spawned == [f"e{j}" for j in range(i + 1)]
        h.run_to_end(records[f"e{i}"])
    assert h.status("e0", "e1", "e2", "e3") == [OK] * 4


def test_reads_of_one_path_run_together_and_a_later_write_waits_for_all() -> None:
    h = Harness().open()
    records = h.submit(call("r1", "a"), call("r2", "a"), call("w", "a", "w"), call("r3", "a"))
    assert h.spawned == ["r1", "r2"]  # r3 may not pass the waiting writer
    h.run_to_end(records["r2"])
    assert h.spawned == ["r1", "r2"]
    h.run_to_end(records["r1"])
    assert h.spawned == ["r1", "r2", "w"]
    h.run_to_end(records["w"])
    assert h.spawned[-1] == "r3"


def test_a_directory_edit_excludes_edits_inside_it_but_not_beside_it() -> None:
    h = Harness().open()
    h.submit(call("dir", "pkg", "w"), call("in", "pkg/a", "w"), call("beside", "pkgx/a", "w"))
    assert h.spawned == ["dir", "beside"]
    assert h.stages("in") == [Stage.QUEUED]


def test_spellings_of_one_path_are_one_resource() -> None:
    h = Harness().open()
    h.submit(call("w1", "a/b", "w"), call("w2", "./a//b/", "w"))
    assert h.spawned == ["w1"]


def test_an_undeclared_call_waits_for_everything_before_it_and_holds_back_everything_after() -> (
    None
):
    # test_a_tool_that_declares_nothing_is_a_barrier, with a call that claims nothing at all.
    h = Harness().open()
    records = h.submit(call("r", "a"), call("barrier"), call("after", "b"), call("free", claims=""))
    assert h.spawned == ["r", "free"]  # claiming nothing, it conflicts with nothing
    h.run_to_end(records["r"])
    assert h.spawned == ["r", "free", "barrier"]
    h.run_to_end(records["barrier"])
    assert h.spawned[-1] == "after"


def test_conflicting_calls_of_two_batches_run_in_submission_order() -> None:
    # test_batches_from_different_tasks_share_the_lease_table.
    h = Harness().open()
    first = h.submit(call("a1", "a", "w"))
    h.submit(call("b1", "a", "w"), call("b2", "b", "w"))
    assert h.spawned == ["a1", "b2"]
    h.run_to_end(first["a1"])
    assert h.spawned == ["a1", "b2", "b1"]


# -- after= (test_dependencies) --------------------------------------------------------------------


def test_a_dependent_waits_for_its_dependency_to_finish() -> None:
    h = Harness().open()
    records = h.submit(call("a", "x"), call("b", "y", after=["a"]))
    assert h.spawned == ["a"] and records["b"].stage is Stage.PENDING
    h.run_to_end(records["a"])
    assert h.spawned == ["a", "b"]


def test_a_long_chain_behind_a_failed_call_is_skipped_whole_naming_the_root() -> None:
    h = Harness().open()
    chain = [call("c0", "x")] + [call(f"c{i}", "x", after=[f"c{i - 1}"]) for i in range(1, 50)]
    records = h.submit(*chain)
    h.run_to_end(records["c0"], ERROR)
    last = h.result("c49")
    assert (last.status, last.error_type) == (SKIPPED, "DependencyFailedError")
    assert "c0" in (last.error or "")
    assert h.spawned == ["c0"]


def test_a_dependency_that_failed_at_admission_skips_its_dependents() -> None:
    h = Harness().open()
    h.submit(call("bad", tool="nope"), call("d", "a", after=["bad"]))
    assert h.status("bad", "d") == [ERROR, SKIPPED] and h.spawned == []


def test_an_unknown_or_self_dependency_is_an_error_and_the_call_runs_not() -> None:
    h = Harness().open()
    h.submit(call("ghostly", "a", after=["ghost"]), call("me", "b", after=["me"]))
    assert [h.result(i).error_type for i in ("ghostly", "me")] == ["InvalidCallError"] * 2
    assert "ghost" in (h.result("ghostly").error or "") and h.spawned == []


def test_a_dependency_cycle_is_refused_with_an_error_for_each_call_in_it() -> None:
    h = Harness().open()
    h.submit(call("a", "x", after=["b"]), call("b", "y", after=["a"]), call("c", "z"))
    assert [h.result(i).error_type for i in ("a", "b")] == ["DependencyCycleError"] * 2
    assert h.spawned == ["c"]


def test_a_dependency_from_an_earlier_batch_counts() -> None:
    h = Harness().open()
    first = h.submit(call("a", "x"))
    h.submit(call("b", "y", after=["a"]))
    assert h.spawned == ["a"]
    h.run_to_end(first["a"])
    assert h.spawned == ["a", "b"]


def test_a_later_call_may_be_a_dependency_of_an_earlier_one_on_the_same_file() -> None:
    # after= wins over emission order: [edit(a, after=c2), c2: edit(a)] runs c2 first.
    h = Harness().open()
    records = h.submit(call("c1", "a", "w", after=["c2"]), call("c2", "a", "w"))
    assert h.spawned == ["c2"]
    h.run_to_end(records["c2"])
    assert h.spawned == ["c2", "c1"]


def test_a_call_waiting_for_after_holds_back_a_later_conflicting_call() -> None:
    # Emission order holds while an earlier call is pending (not requested yet).
    h = Harness().open()
    records = h.submit(call("d", "x"), call("e", "a", "w", after=["d"]), call("late", "a"))
    assert h.spawned == ["d"] and records["late"].stage is Stage.READY
    h.run_to_end(records["d"])
    assert h.spawned == ["d", "e"]
    h.run_to_end(records["e"])
    assert h.spawned[-1] == "late"


# -- leases: grants at release, shared vs exclusive, devices and pools (test_ordering) ------------


def test_a_release_grants_the_next_in_line_inside_the_release() -> None:
    h = Harness().open()
    records = h.submit(call("w", "a", "w"), call("r", "a"))
    w = records["w"]
    h.begin(w)
    h.clear()
    h.do(h.scheduler.release(w))
    assert h.log == ["revoke w", "start r"]  # w's context goes before r may run
    assert w.stage is Stage.RUNNING  # released, not finished: its result comes next
    h.do(h.scheduler.finish(w, h.scheduler.make_result(w, OK, "done")))
    assert h.log[2:] == ["wake w"] and h.result("w").output == "done"


def test_an_exclusive_device_serializes_its_calls_while_others_overlap() -> None:
    h = Harness().open()
    records = h.submit(
        call("t1", claims="dev:phone"), call("t2", claims="dev:phone"), call("r", "a")
    )
    assert h.spawned == ["t1", "r"]
    h.run_to_end(records["t1"])
    assert h.spawned[-1] == "t2"


@pytest.mark.parametrize("capacity", [1, 2])
def test_a_pool_runs_as_many_at_once_as_it_has_units(capacity) -> None:
    h = Harness().open(pools={"net": capacity})
    records = h.submit(*(call(f"n{i}", claims="pool:net:1") for i in range(3)), call("r", "a"))
    assert h.spawned == [f"n{i}" for i in range(capacity)] + ["r"]
    h.run_to_end(records["n0"])
    assert h.spawned[-1] == f"n{capacity}"


def test_a_whole_pool_claim_waits_for_every_unit() -> None:
    h = Harness().open(pools={"net": 2})
    records = h.submit(call("one", claims="pool:net:1"), call("all", claims="pool:net"))
    assert h.spawned == ["one"]
    h.run_to_end(records["one"])
    assert h.spawned == ["one", "all"]


# -- slots: max_concurrency, priorities (test_ordering, test_priorities_observe) -----------------


def test_max_concurrency_is_never_exceeded_and_a_freed_slot_goes_in_order() -> None:
    h = Harness().open(max_concurrency=2)
    records = h.submit(*(call(f"c{i}", f"f{i}", "w") for i in range(5)))
    assert h.spawned == ["c0", "c1"]
    assert h.stages("c2", "c3", "c4") == [Stage.HELD] * 3  # granted, waiting for a slot
    assert h.scheduler.statistics().running == 2
    h.begin(records["c0"])
    h.run_to_end(records["c1"])
    h.end(records["c0"])
    assert h.spawned == ["c0", "c1", "c2", "c3"]
    assert h.scheduler.statistics().peak_running == 2


def test_a_call_waiting_for_a_slot_says_so_in_its_blocked_event() -> None:
    h = Harness().open(max_concurrency=1, listen=True)
    h.submit(call("e1", "a", "w"), call("e2", "a", "w"), call("t1", claims="dev:phone"))
    blocked = {e.call_id: e for e in h.heard if type(e).__name__ == "CallBlocked"}
    assert blocked["e2"].waits_for == ("e1",) and blocked["e2"].resources[0] == "a"
    assert "one of 1 concurrency slots" in blocked["t1"].resources


def test_a_higher_priority_call_overtakes_a_waiting_call_of_another_batch() -> None:
    h = Harness().open()
    holder = h.submit(call("holder", "a", "w"))["holder"]
    h.submit(call("low", "a", "w"))
    high = h.submit(call("high", "a", "w", priority=10))["high"]
    h.run_to_end(holder)
    assert h.spawned == ["holder", "high"]
    h.run_to_end(high)
    assert h.spawned == ["holder", "high", "low"]


def test_a_higher_priority_never_overtakes_an_earlier_call_of_its_own_batch() -> None:
    h = Harness().open()
    holder = h.submit(call("holder", "a", "w"))["holder"]
    other = h.submit(call("other", "a", "w", priority=5))["other"]
    mine = h.submit(call("first", "a", "w"), call("urgent", "a", "w", priority=10))
    for record in (holder, other, mine["first"]):
        h.run_to_end(record)
    assert h.spawned == ["holder", "other", "first", "urgent"]


def test_a_high_priority_call_does_not_hold_back_an_unrelated_one() -> None:
    h = Harness().open()
    h.submit(call("holder", "a", "w"))
    h.submit(call("high", "a", "w", priority=10))
    h.submit(call("low", "b", "w"))
    assert h.spawned == ["holder", "low"]


def test_a_higher_priority_call_takes_the_next_free_slot() -> None:
    h = Harness().open(max_concurrency=1)
    running = h.submit(call("r", "a", "w"))["r"]
    h.submit(call("low", "b", "w"))
    h.submit(call("high", "c", "w", priority=10))
    assert h.stages("low", "high") == [Stage.HELD] * 2
    h.run_to_end(running)
    assert h.spawned == ["r", "high"], "slots should go by priority"


def test_waiting_for_leases_and_then_for_a_slot_is_one_wait() -> None:
    # test_statistics: waiting for a slot counts as contention for slots.
    h = Harness().open(max_concurrency=1)
    records = h.submit(call("w1", "a", "w"), call("w2", "a", "w"), call("x", "b"))
    h.now = 2
    h.run_to_end(records["w1"])  # w2 gets the leases, x the slot
    assert records["w2"].state is CallState.QUEUED and records["w2"].stage is Stage.FOR_SLOT
    h.now = 3
    h.run_to_end(records["x"])
    h.run_to_end(records["w2"])
    assert h.result("w2").wait_time == 3
    contention = {c.resource: c.waits for c in h.scheduler.statistics().contention}
    assert contention == {"a": 1, "one of 1 concurrency slots": 1}


def test_a_call_asking_behind_its_batch_keeps_the_priority_it_was_capped_at() -> None:
    # The lease table's rule 8: r3's priority is capped at that of w2, of its batch, waiting
    # when r3 asks; w4 (5, another batch) overtakes both, and r3 stays behind it once w2 goes.
    # (Found by test_scheduler_machine when priorities were given call by call.)
    h = Harness().open()
    records = h.submit(call("r1", "a"), call("w2", "a", "w"), call("r3", "a", priority=5))
    h.submit(call("w4", "a", "w", priority=5))
    h.cancel(records["w2"])
    assert {i.call_id: i.waits_for for i in h.scheduler.snapshot().queued} == {
        "r3": ("w4",),
        "w4": ("r1",),
    }
    h.run_to_end(records["r1"])
    assert h.spawned == ["r1", "w4"]

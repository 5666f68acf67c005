"""Transcripts of a call's way through the scheduler besides its turn: hooks and the policy,
deadlines, cancellation in every stage, closing, going back in line, events, and what
``snapshot()`` and ``statistics()`` say. No event loop: see ``transcripts``.

Each mirrors an async test (named in its comment) and says what the scheduler decided."""

from __future__ import annotations

import math

import pytest

import toolkernel as tk
from toolkernel.kernel import Block, RewriteArguments, SupplyResult
from toolkernel.kernel._call import CallState, Status
from toolkernel.kernel._messages import CancelReason, Why
from toolkernel.kernel._record import Stage
from toolkernel.locks import path, writes

from .transcripts import Harness, call

OK, ERROR, DENIED = Status.OK, Status.ERROR, Status.DENIED
TIMEOUT, CANCELLED, SKIPPED = Status.TIMEOUT, Status.CANCELLED, Status.SKIPPED


def hooked(**options) -> Harness:
    """A scheduler with a before-hook (whose answers the tests give: ``Harness.prephase``)."""
    return Harness().open(before_hooks=[lambda c: None], **options)


def ask_for(*call_ids: str):
    def policy(c: tk.ToolCall) -> tk.Decision:
        return tk.Decision.ask("check") if c.id in call_ids else tk.Decision.allow()

    return policy


# -- hooks and the policy (test_policy_hooks) -----------------------------------------------------


def test_a_denied_call_is_denied_at_once_and_never_requests_its_leases() -> None:
    h = Harness().open(
        policy=lambda c: tk.Decision.deny("no") if c.id == "d" else tk.Decision.allow()
    )
    h.submit(call("d", "a", "w"), call("r", "a"))
    denied = h.result("d")
    assert (denied.status, denied.error_type) == (DENIED, "PermissionDeniedError")
    assert h.prephases == [] and h.spawned == ["r"]  # no task was needed to decide


def test_a_policy_that_raises_denies_the_call() -> None:
    h = Harness().open(policy=lambda c: 1 / 0)
    h.submit(call("c", "a"))
    assert h.result("c").status is DENIED and "ZeroDivisionError" in (h.result("c").error or "")


def test_no_lease_is_held_while_the_approver_decides_and_later_conflicting_calls_wait() -> None:
    h = Harness().open(policy=ask_for("c1"))
    records = h.submit(call("c1", "a", "w"), call("c2", "a"), call("c3", "b"))
    h.prephase(records["c1"])
    assert records["c1"] in h.asking and h.spawned == ["c3"]
    assert h.scheduler.lease_statistics().held == 1  # c3's alone
    h.approve(records["c1"], True)
    assert h.spawned == ["c3", "c1"]
    h.run_to_end(records["c1"])
    assert h.spawned[-1] == "c2"


@pytest.mark.parametrize(
    ("answer", "status", "error"),
    [(False, DENIED, "PermissionDeniedError"), ("yes", ERROR, "HookError")],
)
def test_an_approver_refusing_or_answering_nonsense_ends_the_call(answer, status, error) -> None:
    h = Harness().open(policy=ask_for("c1"))
    records = h.submit(call("c1", "a", "w"), call("c2", "a"))
    h.prephase(records["c1"])
    h.approve(records["c1"], answer)
    assert (h.result("c1").status, h.result("c1").error_type) == (status, error)
    assert h.spawned == ["c2"]  # the next in line goes on


def test_a_call_rewritten_onto_a_later_calls_file_still_runs_first() -> None:
    # Until its hook answers, c1 may claim anything: c2 waits for it; c3 only for the hook.
    h = hooked(policy=ask_for("c1"))
    records = h.submit(call("c1", "a", "w"), call("c2", "b", "w"), call("c3", "c", "w"))
    c1, c2, c3 = records.values()
    h.prephase(c2)
    h.prephase(c3)
    assert h.spawned == [] and c1.stage is Stage.HOOKED
    h.prephase(c1, RewriteArguments({"path": "b", "mode": "w"}))
    assert h.spawned == ["c3"]  # c1's claims are known: c3 conflicts with nothing pending
    h.approve(c1)
    assert h.spawned == ["c3", "c1"] and c1.arguments["path"] == "b"
    h.run_to_end(c1)
    assert h.spawned[-1] == "c2"


def test_rewritten_arguments_are_admitted_again() -> None:
    h = hooked()
    records = h.submit(call("c", "a"), call("next", "a", "w"))
    h.prephase(records["c"], RewriteArguments({"bad": 3}))
    assert h.result("c").error_type == "InvalidArgumentsError"
    h.prephase(records["next"])
    assert h.spawned == ["next"]


def test_block_denies_and_supply_result_answers_without_running() -> None:
    h = hooked()
    records = h.submit(call("blocked", "a", "w"), call("cached", "a"), call("run", "a", "w"))
    h.prephase(records["blocked"], Block("secrets"))
    h.prephase(records["cached"], SupplyResult("from cache"))
    h.prephase(records["run"])
    blocked, cached = h.result("blocked"), h.result("cached")
    assert (blocked.status, blocked.error) == (DENIED, "blocked: secrets")
    assert (cached.status, cached.output, cached.started_at) == (OK, "from cache", None)
    assert h.spawned == ["run"]


def test_a_hook_answering_nonsense_fails_only_its_call() -> None:
    h = hooked()
    records = h.submit(call("c1", "a"), call("c2", "a", "w"))
    h.prephase(records["c1"], 42)
    h.prephase(records["c2"])
    assert (h.result("c1").status, h.result("c1").error_type) == (ERROR, "HookError")
    assert h.spawned == ["c2"]


# -- lease-wait limits (test_timeouts) -------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "own", "limit"),
    [({"tool_wait": 2}, None, 2), ({"tool_wait": 2}, 4, 4), ({"wait_timeout": 3}, None, 3)],
    ids=["the tool's", "the call's own", "the kernel's"],
)
def test_a_lease_wait_times_out_on_the_nearest_limit(options, own, limit) -> None:
    h = Harness().open(**options)
    holder = h.submit(call("c1", "a.txt", "w"))["c1"]
    h.begin(holder)
    h.submit(call("c2", "a.txt", wait_timeout=own))
    assert h.deadlines == [limit]
    h.advance(limit - 0.5)
    assert h.status("c2") == [None]
    h.advance(limit)
    result = h.result("c2")
    assert (result.status, result.queued_at, result.started_at, result.finished_at) == (
        TIMEOUT,
        0,
        None,
        limit,
    )
    assert result.error == (
        f"timed out after waiting {limit} s for its leases behind c1 (t) on a.txt; try again later"
    )
    assert h.scheduler.snapshot().queued == () and h.scheduler.next_deadline() == math.inf


def test_the_timer_moves_only_when_the_earliest_deadline_comes_earlier() -> None:
    h = Harness().open()
    h.submit(call("w", "a", "w"), call("five", "a", wait_timeout=5))
    h.submit(call("ten", "a", wait_timeout=10))
    h.submit(call("two", "a", wait_timeout=2))
    assert [e for e in h.log if e.startswith("timer")] == ["timer 5", "timer 2"]
    h.advance(2)
    assert h.status("two", "five", "ten") == [TIMEOUT, None, None]
    assert h.scheduler.next_deadline() == 5


def test_a_timed_out_waiter_leaves_the_line_and_the_next_goes_in_its_place() -> None:
    h = Harness().open()
    records = h.submit(call("w", "a", "w"), call("r", "a", wait_timeout=1), call("r2", "a"))
    h.advance(1)
    assert h.status("r", "r2") == [TIMEOUT, None]
    h.run_to_end(records["w"])
    assert h.spawned == ["w", "r2"]


def test_waiting_for_a_slot_counts_against_the_wait_limit() -> None:
    h = Harness().open(max_concurrency=1, wait_timeout=2)
    h.submit(call("busy", "a", "w"), call("x", "b"))
    assert h.stages("x") == [Stage.HELD] and h.deadlines == [2]
    h.advance(2)
    assert h.result("x").error_type == "LeaseWaitTimeoutError"
    assert h.spawned == ["busy"]


def test_a_call_timed_out_waiting_for_a_slot_is_told_so() -> None:
    h = Harness().open(max_concurrency=1, wait_timeout=2)
    h.submit(call("busy", "a", "w"), call("x", "b"))
    h.advance(2)
    result = h.result("x")
    assert (result.status, result.error_type) == (TIMEOUT, "LeaseWaitTimeoutError")
    assert "its leases were granted, but all 1 of the kernel's concurrency slots" in (
        result.error or ""
    )


def test_a_batch_cut_short_says_a_call_waited_for_a_slot() -> None:
    h = Harness().open(max_concurrency=1)
    records = h.submit(call("busy", "a", "w"), call("x", "b"))
    h.begin(records["busy"])
    h.time_out(records, 3)
    h.settle()
    assert "while it waited for one of the kernel's 1 concurrency slots" in (
        h.result("x").error or ""
    )


# -- run limits (test_timeouts) ------------------------------------------------------------------


def test_a_run_timeout_gives_timeout_and_hands_the_lease_on() -> None:
    h = Harness().open()
    records = h.submit(call("c1", "a", "w", run_timeout=2), call("c2", "a", "w", run_timeout=2))
    h.begin(records["c1"])
    assert h.scopes[records["c1"]] == 2  # the deadline its scope carries
    h.advance(2)
    slow = h.result("c1")
    assert (slow.status, slow.started_at, slow.finished_at) == (TIMEOUT, 0, 2)
    assert slow.error == (
        "timed out after running for 2 s; try a smaller piece of work or a longer timeout"
    )
    assert h.spawned == ["c1", "c2"]
    h.begin(records["c2"])
    assert h.scopes[records["c2"]] == 4  # from its start, not its admission


@pytest.mark.parametrize(
    ("options", "own", "deadline"),
    [
        ({"tool_run": 5}, None, 5),
        ({"tool_run": 5, "run_timeout": 9}, None, 5),
        ({}, None, math.inf),
    ],
    ids=["the tool's", "the tool's over the kernel's", "none"],
)
def test_run_timeouts_per_tool_and_per_kernel(options, own, deadline) -> None:
    h = Harness().open(**options)
    record = h.submit(call("c", "a", run_timeout=own))["c"]
    h.begin(record)
    assert h.scopes[record] == deadline


# -- a batch's time limit (test_run_timeout) -------------------------------------------------------


def test_finished_calls_keep_their_results_and_the_others_time_out() -> None:
    h = Harness().open()
    records = h.submit(
        call("c1", "a", "w"), call("c2", "a", "w"), call("c3", "b"), call("c4", "a", "w")
    )
    h.now = 1
    h.run_to_end(records["c1"])
    h.begin(records["c2"])
    h.begin(records["c3"])
    h.now = 3
    h.time_out(records, 3)
    assert h.status("c1", "c2", "c3", "c4") == [OK, None, None, TIMEOUT]  # c4 had no task
    assert sorted(h.interrupted) == ["c2", "c3"]
    h.settle()
    assert h.status("c2", "c3") == [TIMEOUT] * 2
    assert h.result("c2").error == (
        "timed out: the batch's limit of 3 s ran out after it had run for 2 s; it was stopped "
        "unfinished. Try a smaller piece of work, or a longer limit"
    )
    assert h.result("c4").error == (
        "timed out: the batch's limit of 3 s ran out while it waited for its leases behind "
        "c2 (t) on a; it was not run. Try it again on its own, or with a longer limit"
    )
    assert h.result("c2").error_type == "CallTimeoutError"


def test_dependents_of_a_call_cut_short_time_out_too_and_cancelled_calls_stay_cancelled() -> None:
    h = Harness().open()
    records = h.submit(call("c1", "a"), call("c2", "b", after=["c1"]), call("c3", "c"))
    h.begin(records["c1"])
    h.cancel(records["c3"])
    h.time_out(records, 4)
    h.settle()
    assert h.status("c1", "c2", "c3") == [TIMEOUT, TIMEOUT, CANCELLED]
    assert "ran out while it waited to start" in (h.result("c2").error or "")


def test_a_dependent_of_a_call_cut_short_while_queued_times_out_too() -> None:
    h = Harness().open()
    records = h.submit(call("c0", "a", "w"), call("c1", "a", "w"), call("c2", "b", after=["c1"]))
    h.begin(records["c0"])
    h.time_out(records, 4)
    h.settle()
    assert h.status("c0", "c1", "c2") == [TIMEOUT, TIMEOUT, TIMEOUT]


# -- cancellation in every stage (test_cancellation) ----------------------------------------------


def test_cancelling_a_pending_call_finishes_it_and_skips_nothing_else() -> None:
    h = Harness().open()
    records = h.submit(call("a", "x"), call("b", "y", after=["a"]), call("c", "z"))
    h.cancel(records["b"])
    assert h.status("b") == [CANCELLED] and h.log[-2:] == ["interrupt b", "wake b"]
    h.run_to_end(records["a"])
    assert h.spawned == ["a", "c"]


def test_cancelling_a_call_waiting_for_its_approval_cancels_the_question() -> None:
    h = Harness().open(policy=ask_for("c1"))
    records = h.submit(call("c1", "a", "w"), call("c2", "a"))
    h.prephase(records["c1"])
    h.cancel(records["c1"])
    assert h.status("c1") == [None] and h.interrupted == ["c1"]  # its prephase task unwinds
    h.settle()
    assert h.status("c1") == [CANCELLED] and h.spawned == ["c2"]


def test_cancelling_a_call_held_back_by_emission_order_lets_no_one_pass_early() -> None:
    h = Harness().open(policy=ask_for("c1"))
    records = h.submit(call("c1", "a", "w"), call("c2", "a"), call("c3", "a", "w"))
    h.cancel(records["c2"])
    assert records["c2"].result is not None and h.spawned == []
    h.prephase(records["c1"])
    h.approve(records["c1"])
    h.run_to_end(records["c1"])
    assert h.spawned == ["c1", "c3"]


def test_cancelling_a_queued_call_keeps_the_line() -> None:
    h = Harness().open()
    records = h.submit(call("w1", "a", "w"), call("w2", "a", "w"), call("r", "a"))
    h.cancel(records["w2"])
    assert h.result("w2").error == "cancelled" and h.log[-1] == "wake w2"
    h.run_to_end(records["w1"])
    assert h.spawned == ["w1", "r"]


def test_cancelling_a_call_holding_its_leases_for_a_slot_hands_them_on() -> None:
    h = Harness().open(max_concurrency=1)
    records = h.submit(call("busy", "x", "w"), call("held", "a", "w"), call("next", "a", "w"))
    assert h.stages("held", "next") == [Stage.HELD, Stage.QUEUED]
    h.cancel(records["held"])
    assert h.stages("held", "next") == [Stage.FINISHED, Stage.FOR_SLOT]
    h.run_to_end(records["busy"])
    assert h.spawned == ["busy", "next"]


def test_a_call_cancelled_between_its_grant_and_its_start_never_runs() -> None:
    h = Harness().open()
    records = h.submit(call("c", "a", "w"), call("next", "a", "w"))
    assert h.spawned == ["c"]  # its task is spawned, not begun
    h.cancel(records["c"])
    assert h.status("c") == [CANCELLED] and h.spawned == ["c", "next"]
    h.begin(records["c"])  # its task begins, finds it finished, and does nothing
    assert h.runs == []


def test_cancelling_a_running_call_hands_its_lease_on_once_its_task_unwinds() -> None:
    h = Harness().open()
    records = h.submit(call("c", "a", "w"), call("next", "a", "w"))
    h.begin(records["c"])
    h.cancel(records["c"])
    assert records["c"].stage is Stage.RUNNING and h.spawned == ["c"]  # still on its leases
    h.settle()
    assert h.status("c") == [CANCELLED] and h.spawned == ["c", "next"]
    assert h.log[-3:] == ["revoke c", "start next", "wake c"]


def test_cancelling_a_finished_call_changes_nothing() -> None:
    h = Harness().open()
    record = h.submit(call("c", "a"))["c"]
    h.run_to_end(record)
    h.clear()
    h.cancel(record)
    assert h.log == [] and h.result("c").status is OK


def test_cancel_all_cancels_every_call_of_every_batch_in_admission_order() -> None:
    h = Harness().open()
    first = h.submit(call("a1", "a", "w"), call("a2", "a", "w"))
    h.submit(call("b1", "b", "w", after=["a2"]))
    h.begin(first["a1"])
    h.cancel_all()
    # b1 was pending on a2, which no task ran: a2 ends at once, and b1 is skipped saying so.
    assert h.interrupted == ["a1"] and h.status("a2", "b1") == [CANCELLED, SKIPPED]
    h.settle()
    assert h.status("a1") == [CANCELLED] and h.scheduler.lease_statistics().held == 0


def test_closing_cancels_what_runs_and_refuses_what_comes() -> None:
    h = Harness().open(policy=ask_for("asked"))
    records = h.submit(call("run", "a", "w"), call("wait", "a", "w"), call("asked", "b"))
    h.begin(records["run"])
    h.prephase(records["asked"])
    h.close()
    h.settle()
    assert h.status("run", "wait", "asked") == [CANCELLED] * 3
    assert {h.result(i).error for i in ("run", "wait", "asked")} == {
        "cancelled: the kernel is closing"
    }
    with pytest.raises(tk.errors.KernelClosedError):
        h.submit(call("late", "c"))


def test_a_listener_may_cancel_a_call_as_it_blocks() -> None:
    # test_a_listener_may_cancel_a_call_when_it_blocks: the cancel is an operation of its own,
    # on a settled scheduler, once the one that blocked it has returned.
    h = Harness().open(policy=ask_for("c1"))

    def cancel_on_block(event: tk.CallEvent) -> None:
        if isinstance(event, tk.kernel.CallBlocked) and event.call_id == "c2":
            h.cancel(h.records["c2"])

    h.scheduler.add_listener(cancel_on_block)
    records = h.submit(call("c1", "a", "w"), call("c2", "a", "w"), call("c3", "a", "w"))
    h.submit(call("c4", "b"))
    h.prephase(records["c1"])
    h.approve(records["c1"])  # c2 and c3 request behind c1: c2 blocks, and is cancelled
    assert h.status("c2") == [CANCELLED]
    h.run_to_end(records["c1"])
    assert h.spawned == ["c4", "c1", "c3"]


# -- going back in line: keys that changed meaning, hold_more (test_hold_more) --------------------


def test_a_call_whose_path_changed_meaning_while_it_waited_goes_back_in_its_place() -> None:
    h = Harness(links={"link": "b"}).open()
    records = h.submit(call("holder", "b", "w"), call("l", "link", "w"), call("later", "c", "w"))
    h.begin(records["later"])  # c is taken now: a later call, behind which l must not fall
    h.submit(call("latest", "c", "w"))
    h.links["link"] = "c"  # renamed meanwhile
    h.run_to_end(records["holder"])
    h.begin(records["l"])  # granted b; its keys are looked at again: it claims c now
    assert records["l"].stage is Stage.QUEUED and records["l"].claims == (writes(path("c")),)
    h.run_to_end(records["later"])
    assert h.spawned[-1] == "l", "it keeps its place ahead of latest"
    h.run_to_end(records["l"])
    assert h.spawned[-1] == "latest"


def test_a_call_whose_paths_keep_changing_fails_after_a_few_tries() -> None:
    h = Harness(links={"link": "p0"}).open()
    holders = [h.submit(call(f"h{i}", f"p{i}", "w"))[f"h{i}"] for i in range(5)]
    for holder in holders:
        h.begin(holder)
    link = h.submit(call("l", "link", "w"))["l"]
    for i in range(1, 5):
        h.links["link"] = f"p{i}"  # each time it is granted, its path names another file
        h.run_to_end(holders[i - 1])
        h.begin(link)
        assert link.stage is (Stage.QUEUED if i < 4 else Stage.FINISHED)
    assert h.result("l").error_type == "PathChangedError"
    assert ("l", None) not in h.runs


def test_the_tool_runs_again_holding_more_with_what_its_last_run_left() -> None:
    h = Harness().open()
    g = h.submit(call("g", "a", "w"))["g"]
    h.begin(g)
    h.hold_more(g, [writes(path("b"))], state=1)
    assert h.runs == [("g", None), ("g", 1)] and g.state is CallState.RUNNING
    assert h.revoked == ["g"]  # the context of its first run, before it runs again
    h.end(g)
    assert h.result("g").status is OK


def test_holding_more_waits_behind_earlier_calls_but_ahead_of_later_ones() -> None:
    h = Harness().open()
    records = h.submit(call("e1", "b", "w"), call("g", "a", "w"), call("e2", "b", "w"))
    e1, g, _ = records.values()
    h.begin(e1)
    h.begin(g)
    h.hold_more(g, [writes(path("b"))], state="step")
    assert g.stage is Stage.QUEUED and h.scheduler.lease_statistics().held == 1  # e1's
    h.run_to_end(e1)
    assert h.spawned[-1] == "g"
    h.begin(g)
    assert h.runs[-1] == ("g", "step")
    h.end(g)
    assert h.spawned[-1] == "e2"


def test_a_call_cancelled_while_it_waits_to_hold_more_runs_no_more() -> None:
    h = Harness().open()
    records = h.submit(call("e1", "b", "w"), call("g", "a", "w"))
    h.begin(records["e1"])
    h.begin(records["g"])
    h.hold_more(records["g"], [writes(path("b"))])
    h.cancel(records["g"])
    assert h.status("g") == [CANCELLED]
    h.run_to_end(records["e1"])
    assert [c for c, _ in h.runs] == ["e1", "g"]


def test_asking_to_hold_more_again_and_again_is_bounded() -> None:
    h = Harness().open()
    g = h.submit(call("g", "a", "w"))["g"]
    h.begin(g)
    for i in range(4):
        h.hold_more(g, [writes(path(f"more{i}"))])
    assert h.result("g").status is ERROR
    assert "asked to hold more than it claimed" in (h.result("g").error or "")
    assert len(h.runs) == 4


def test_asking_to_hold_what_is_not_a_list_of_claims_fails_the_call() -> None:
    h = Harness().open()
    g = h.submit(call("g", "a", "w"))["g"]
    h.begin(g)
    h.hold_more(g, writes(path("b")))  # type: ignore[arg-type]
    assert h.result("g").error_type == "InvalidClaimError"
    assert h.scheduler.lease_statistics().held == 0


# -- events: what the listeners are told, and when (test_results_events) --------------------------


def test_a_call_tells_its_whole_story_in_order() -> None:
    h = Harness().open(listen=True)
    records = h.submit(call("w", "a", "w"), call("r", "a"))
    h.begin(records["w"])
    h.progress(records["w"], "half", 50)
    h.end(records["w"])
    h.run_to_end(records["r"])
    assert h.told == [
        ("CallQueued", "w"),
        ("CallQueued", "r"),
        ("CallBlocked", "r"),
        ("CallStarted", "w"),
        ("CallProgress", "w"),
        ("CallFinished", "w"),
        ("CallStarted", "r"),
        ("CallFinished", "r"),
    ]
    progress = h.heard[4]
    assert (progress.message, progress.data) == ("half", 50)
    assert h.heard[-1].result is records["r"].result


def test_nobody_listening_no_event_is_built() -> None:
    h = Harness().open()
    records = h.submit(call("w", "a", "w"), call("r", "a"))
    h.run_to_end(records["w"])
    h.progress(records["r"], "x")
    assert h.told == []


def test_a_stream_hears_only_its_own_batch() -> None:
    h = Harness().open()
    mine: list[tk.CallEvent] = []
    h.submit(call("c", "a"), sink=mine.append)
    other = h.submit(call("c", "b"))["c"]
    h.run_to_end(other)
    assert [(type(e).__name__, e.call_id) for e in mine] == [("CallQueued", "c")]


def test_a_listener_submitting_calls_as_one_is_queued_keeps_every_queued_first() -> None:
    h = Harness().open()

    def submit_on_queued(event: tk.CallEvent) -> None:
        if isinstance(event, tk.kernel.CallQueued) and event.call_id == "c1":
            h.submit(call("extra", "z"))

    h.scheduler.add_listener(submit_on_queued)
    h.submit(call("c1", tool="nope"), call("c2", "a"))
    assert h.told[:3] == [("CallQueued", "c1"), ("CallQueued", "c2"), ("CallFinished", "c1")]
    assert h.told[3] == ("CallQueued", "extra")


def test_a_listener_that_raises_is_dropped_and_breaks_nothing() -> None:
    h = Harness().open(listen=True)
    calls: list[tk.CallEvent] = []

    def broken(event: tk.CallEvent) -> None:
        calls.append(event)
        raise RuntimeError("listener bug")

    h.scheduler.add_listener(broken)
    records = h.submit(call("c", "a"))
    h.run_to_end(records["c"])
    assert h.result("c").status is OK and len(h.heard) == 3
    assert len(calls) == 1  # dropped after its first event


# -- snapshot and statistics (test_priorities_observe, test_statistics) ---------------------------


def test_the_snapshot_names_what_runs_and_what_each_waiter_waits_behind() -> None:
    h = Harness().open()
    h.submit(
        call("r1", "a"),
        call("r2", "a/b"),
        call("w1", "a", "w"),
        call("r3", "a/b/c"),
        call("t1", claims="dev:phone"),
        call("d1", "z", after=["w1"]),
    )
    snap = h.scheduler.snapshot()
    assert [i.call_id for i in snap.running] == ["r1", "r2", "t1"]
    assert {i.call_id: i.waits_for for i in snap.queued} == {"w1": ("r1", "r2"), "r3": ("w1",)}
    assert {i.call_id: i.waits_for for i in snap.pending} == {"d1": ("w1",)}
    (w1,) = [i for i in snap.queued if i.call_id == "w1"]
    assert (w1.name, w1.state, w1.since, w1.parent) == ("t", CallState.QUEUED, 0, None)
    assert h.scheduler.snapshot() == snap  # a value


def test_statistics_count_calls_by_state_and_errors_by_type_per_tool() -> None:
    h = Harness().open()
    records = h.submit(
        call("e1", "a", "w"),
        call("e2", "a", "w"),
        call("e3", "a", "w"),
        call("r1", "b"),
        call("x", tool="nope"),
        call("d", "c", after=["e3"]),
    )
    h.begin(records["e1"])
    h.now = 1
    during = h.scheduler.statistics()
    assert (during.running, during.queued, during.pending, during.finished) == (2, 2, 1, 1)
    h.end(records["e1"])
    h.now = 3
    h.begin(records["e2"])
    h.raise_in(records["e2"], ValueError("boom"))
    h.cancel(records["e3"])
    after = h.scheduler.statistics()
    (tool,) = [t for t in after.tools if t.name == "t"]
    assert (tool.count, tool.errors) == (4, 3)  # e1, e2 (ERROR), e3 (cancelled), d (skipped)
    assert dict(tool.errors_by_type) == {
        "ValueError": 1,
        "CallCancelledError": 1,
        "DependencyFailedError": 1,
    }
    assert h.result("e2").error == "ValueError: boom"
    assert (tool.run_p50, tool.run_p99, tool.wait_p99) == (0, 1, 3)
    assert [t.count for t in after.tools if t.name == "(unknown tool)"] == [1]


def test_a_call_cancelled_while_waiting_counts_its_wait_as_contention() -> None:
    h = Harness().open()
    records = h.submit(call("w", "a", "w"), call("r", "a"))
    h.now = 4
    h.cancel(records["r"])
    (hot,) = h.scheduler.statistics().contention
    assert (hot.resource, hot.waits, hot.total_wait, hot.max_wait) == ("a", 1, 4, 4)


def test_why_a_call_was_cancelled_is_carried_into_its_result() -> None:
    h = Harness().open()
    record = h.submit(call("c", "a"))["c"]
    h.cancel(record, CancelReason(Why.STREAM_LEFT))
    assert h.result("c").error == "cancelled: the stream was left early"
    assert record.cancel_reason == CancelReason(Why.STREAM_LEFT)

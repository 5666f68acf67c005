"""Transcripts of calls running ahead of their lease grant (``_ahead``): when the scheduler
starts one before its leases are granted, what it is told at its grant, its slot while it waits
for it, and every way out returning what it held. No event loop: see ``transcripts``.

The tool ``b`` (``AheadTool``) lets a call run ahead when its arguments say so: ``"once"``
(not speculative: it passes only earlier readers of what it writes) or ``"speculative"`` (it
passes earlier calls that run ahead themselves too); ``t`` never runs ahead."""

from __future__ import annotations

from typing import Any

from toolkernel.kernel._ahead import ChangedMeanwhile
from toolkernel.kernel._call import CallState, Status
from toolkernel.kernel._record import Stage
from toolkernel.locks import path, writes

from .transcripts import AheadTool, Harness, call

OK, CANCELLED, TIMEOUT = Status.OK, Status.CANCELLED, Status.TIMEOUT


def b(call_id: str, claims: str, ahead: str = "speculative", **options: Any) -> Any:
    """A call of ``b`` that may run ahead (``ahead``: ``"once"`` or ``"speculative"``)."""
    return call(call_id, claims=claims, tool="b", arguments={"ahead": ahead}, **options)


def opened(**options: Any) -> Harness:
    return Harness().open(tools=[AheadTool("b")], **options)


def returned_everything(h: Harness) -> bool:
    """No lease is held or waited for, and no call holds a slot."""
    stats = h.scheduler.lease_statistics()
    slots = h.scheduler.slots
    return (stats.held, stats.waiting) == (0, 0) and slots._free == slots.limit


def test_a_call_starts_ahead_past_an_earlier_reader_of_what_it_writes_and_commits_after() -> None:
    h = opened(listen=True)
    rs = h.submit(call("r1", claims="r:a"), b("b2", "w:a", "once"))
    r1, b2 = rs["r1"], rs["b2"]
    assert h.spawned == ["r1", "b2"]  # b2 started while r1 still reads a
    assert b2.stage is Stage.AHEAD and b2.state is CallState.RUNNING
    assert b2.hold.waiting_in is not None  # its request still waits behind r1's
    h.begin(r1)
    h.begin(b2)
    started = [e for e in h.heard if type(e).__name__ == "CallStarted" and e.call_id == "b2"]
    assert [e.ahead for e in started] == [True]
    (info,) = [i for i in h.scheduler.snapshot().running if i.call_id == "b2"]
    assert info.ahead and info.waits_for == ("r1",)
    assert not h.wait_granted(b2)  # its tool must wait for r1 to finish
    assert b2.stage is Stage.AWAITING
    h.end(r1)
    assert b2.stage is Stage.RUNNING and "b2" in h.woken
    # r1 read a and changed nothing: b2 is told of it, with nothing changed.
    assert h.scheduler.changed_meanwhile(b2) == (ChangedMeanwhile("r1", "t", ()),)
    h.end(b2)
    assert h.status("r1", "b2") == [OK, OK]
    assert h.scheduler.statistics().ran_ahead == 1
    assert returned_everything(h)


def test_a_call_never_starts_ahead_of_an_earlier_direct_writer_of_what_it_reads_or_writes() -> None:
    for claims in ("r:a", "w:a"):
        h = opened()
        rs = h.submit(call("w1", claims="w:a"), b("b2", claims, "speculative"))
        assert h.spawned == ["w1"]
        assert rs["b2"].stage is Stage.QUEUED
        h.run_to_end(rs["w1"])
        assert h.spawned == ["w1", "b2"] and rs["b2"].stage is Stage.GRANTED  # as ever
        assert h.scheduler.statistics().ran_ahead == 0


def test_a_reader_never_starts_ahead_of_an_earlier_writer_even_a_command() -> None:
    # A reader passes an earlier writer only when speculative, and only a call that runs ahead.
    h = opened()
    rs = h.submit(b("b1", "w:a"), b("b2", "r:a", "once"))
    assert h.spawned == ["b1"] and rs["b2"].stage is Stage.QUEUED


def test_a_call_that_runs_once_passes_only_an_earlier_reader_that_writes_no_path() -> None:
    # What a call that can't run again may have read is the whole workspace: an earlier call
    # that reads what it writes but writes elsewhere could change that; a speculative call,
    # checked against its own claims, passes it.
    h = opened()
    rs = h.submit(call("r1", claims="r:a w:z"), b("b2", "w:a", "once"), b("b3", "w:a"))
    assert rs["b2"].stage is Stage.QUEUED
    h = opened()
    rs = h.submit(call("r1", claims="r:a w:z"), b("b3", "w:a"))
    assert rs["b3"].stage is Stage.AHEAD


def test_a_speculative_call_starts_ahead_of_an_earlier_call_that_runs_ahead_itself() -> None:
    h = opened()
    rs = h.submit(b("b1", "w:log"), b("b2", "w:log"), b("b3", "w:log", "once"))
    b1, b2, b3 = rs["b1"], rs["b2"], rs["b3"]
    # b1 holds its leases; b2 (speculative) runs beside it; b3 runs only once, so waits.
    assert h.spawned == ["b1", "b2"]
    assert b1.stage is Stage.FRESH and b2.stage is Stage.AHEAD and b3.stage is Stage.QUEUED
    h.begin(b1)
    h.begin(b2)
    h.scheduler.report_changes(b1, [writes(path("log"))])
    h.end(b1)
    # b2 was granted while its tool ran: it goes on at once, told what b1 changed, and its
    # tool woken to hear it (``ctx.wait_changed``).
    assert b2.stage is Stage.RUNNING
    assert h.changed == ["b2"]
    assert h.wait_granted(b2)
    (meanwhile,) = h.scheduler.changed_meanwhile(b2)
    assert (meanwhile.call_id, meanwhile.changed) == ("b1", (writes(path("log")),))
    assert b3.stage is Stage.QUEUED  # b3 conflicts with b2, a writer, and may not speculate
    h.end(b2)
    assert b3.stage is Stage.GRANTED
    h.run_to_end(b3)
    assert h.status("b1", "b2", "b3") == [OK, OK, OK]
    assert returned_everything(h)


def test_a_call_that_reports_nothing_changed_every_exclusive_claim_it_held() -> None:
    h = opened()
    rs = h.submit(call("w1", claims="w:log r:x"), b("b2", "w:log"))
    # w1 writes directly: b2 may not pass it, even speculative.
    assert rs["b2"].stage is Stage.QUEUED
    h = opened()
    rs = h.submit(b("b1", "w:log r:x"), b("b2", "w:log"))
    h.begin(rs["b1"])
    h.begin(rs["b2"])
    h.end(rs["b1"])
    (meanwhile,) = h.scheduler.changed_meanwhile(rs["b2"])
    assert meanwhile.changed == (writes(path("log")),)


def test_a_call_waiting_for_its_grant_gives_its_slot_back_and_takes_one_again() -> None:
    h = opened(max_concurrency=2)
    rs = h.submit(call("w0", claims="w:q"), call("r1", claims="r:q r:a"), b("b2", "w:a", "once"))
    w0, r1, b2 = rs["w0"], rs["r1"], rs["b2"]
    assert h.spawned == ["w0", "b2"]  # r1 waits for w0; b2 commits after r1, so starts now
    h.begin(w0)
    h.begin(b2)
    assert not h.wait_granted(b2)  # its slot goes back
    later = h.submit(call("s3", claims="w:s"), call("s4", claims="w:t"))
    assert h.spawned == ["w0", "b2", "s3"]  # s3 runs in b2's slot; s4 waits for one
    h.run_to_end(w0)  # its slot goes to s4 (in line first); r1 is granted and waits for one
    assert later["s4"].stage is Stage.FRESH and r1.stage is Stage.FOR_SLOT
    h.run_to_end(later["s3"])
    assert r1.stage is Stage.GRANTED
    h.run_to_end(r1)  # b2 is granted and takes the slot r1 leaves
    assert b2.stage is Stage.RUNNING and "b2" in h.woken
    h.run_to_end(later["s4"])
    h.end(b2)
    assert h.status("w0", "r1", "b2", "s3", "s4") == [OK] * 5
    assert returned_everything(h)


def _waiting_for_its_grant_behind_a_reader(max_concurrency: int) -> tuple[Harness, Any, Any]:
    """A reader of ``a`` running, and a command writing ``a`` that ran ahead and waits for its
    grant (holding no slot)."""
    h = opened(max_concurrency=max_concurrency)
    rs = h.submit(call("r1", claims="r:a"), b("b2", "w:a", "once"))
    r1, b2 = rs["r1"], rs["b2"]
    h.begin(r1)
    h.begin(b2)
    assert not h.wait_granted(b2)
    return h, r1, b2


def test_granted_with_a_slot_free_it_takes_that_slot_and_goes_on() -> None:
    h, r1, b2 = _waiting_for_its_grant_behind_a_reader(max_concurrency=2)
    s = h.submit(call("s3", claims="w:s"))["s3"]
    h.begin(s)
    h.end(r1)  # its slot went to nobody in line; b2 is granted and takes it
    assert b2.stage is Stage.RUNNING


def test_granted_while_every_slot_is_busy_it_waits_for_one_then_goes_on() -> None:
    h, r1, b2 = _waiting_for_its_grant_behind_a_reader(max_concurrency=2)
    s3, s4 = h.submit(call("s3", claims="w:s"), call("s4", claims="w:t")).values()
    assert s3.stage is Stage.FRESH and s4.stage is Stage.HELD
    h.end(r1)  # its slot goes to s4, in line; b2 is granted and lines up for one
    assert s4.stage is Stage.FRESH and b2.stage is Stage.AWAITING_SLOT
    assert b2.state is CallState.RUNNING
    h.run_to_end(s3)
    assert b2.stage is Stage.RUNNING and "b2" in h.woken


def test_with_one_slot_nothing_deadlocks() -> None:
    # With one slot a call starts ahead only when no call runs, and one waiting for its grant
    # holds none: an earlier call granted meanwhile always finds one.
    h = opened(max_concurrency=1)
    rs = h.submit(
        call("r1", claims="r:a"), b("b2", "w:a", "once"), b("b3", "w:a"), call("r4", claims="r:a")
    )
    for _ in range(20):
        for record in rs.values():
            if record.stage in (Stage.FRESH, Stage.GRANTED, Stage.AHEAD):
                h.begin(record)
                if record.name == "b" and not h.wait_granted(record):
                    continue  # woken (RUNNING) once granted with a slot
            if record in h.scopes and record.stage is Stage.RUNNING:
                h.end(record)
    assert h.status(*rs) == [OK] * 4
    assert returned_everything(h)


def test_cancelled_while_running_ahead_it_returns_its_slot_and_withdraws_its_request() -> None:
    h = opened(max_concurrency=4)
    rs = h.submit(call("r1", claims="r:a"), b("b2", "w:a", "once"), call("w3", claims="w:a"))
    r1, b2, w3 = rs["r1"], rs["b2"], rs["w3"]
    h.begin(r1)
    h.begin(b2)
    h.cancel(b2)
    assert h.interrupted == ["b2"]
    h.settle()
    assert h.status("b2") == [CANCELLED]
    h.run_to_end(r1)
    h.run_to_end(w3)  # w3, behind b2's request, goes on once it is withdrawn
    assert h.status("r1", "w3") == [OK, OK]
    assert returned_everything(h)


def test_cancelled_while_waiting_for_its_grant_it_returns_everything() -> None:
    h, r1, b2 = _waiting_for_its_grant_behind_a_reader(max_concurrency=4)
    h.cancel(b2)
    h.settle()
    assert h.status("b2") == [CANCELLED]
    h.run_to_end(r1)
    assert returned_everything(h)


def test_its_wait_for_the_grant_is_bounded_by_its_lease_wait_limit() -> None:
    h = opened()
    rs = h.submit(call("r1", claims="r:a"), b("b2", "w:a", "once", wait_timeout=5))
    r1, b2 = rs["r1"], rs["b2"]
    h.begin(r1)
    h.advance(10)  # running ahead is no wait: no limit runs
    assert b2.stage is Stage.AHEAD
    h.begin(b2)
    assert not h.wait_granted(b2)
    h.advance(14)
    assert b2.stage is Stage.AWAITING
    h.advance(15)
    result = h.result("b2")
    assert result.status is TIMEOUT and "waiting 5 s for its leases behind r1" in (
        result.error or ""
    )
    h.run_to_end(r1)
    assert returned_everything(h)


def test_asking_to_hold_more_before_the_grant_fails_the_call() -> None:
    h = opened()
    rs = h.submit(call("r1", claims="r:a"), b("b2", "w:a", "once"))
    h.begin(rs["r1"])
    h.begin(rs["b2"])
    h.hold_more(rs["b2"], [writes(path("z"))])
    result = h.result("b2")
    assert result.status is Status.ERROR and "before its leases were granted" in (
        result.error or ""
    )
    h.run_to_end(rs["r1"])
    assert returned_everything(h)


def test_a_later_call_of_a_higher_priority_counts_as_earlier() -> None:
    # It queues ahead of the call in the table: a direct writer of what the call writes, it
    # keeps it from starting.
    for priority, started in ((0, True), (5, False)):
        h = opened(max_concurrency=2)
        rs = h.submit(call("r1", claims="r:a"), call("y", claims="w:y"), b("b2", "w:a", "once"))
        assert rs["b2"].stage is Stage.QUEUED  # no slot is free
        h.submit(call("w9", claims="w:a", priority=priority))
        h.run_to_end(rs["y"])  # a slot is free now
        assert (rs["b2"].stage is Stage.AHEAD) is started


def test_a_call_claiming_more_than_paths_never_runs_ahead() -> None:
    h = opened()
    rs = h.submit(call("r1", claims="r:a"), b("b2", "w:a dev:phone", "once"))
    assert rs["b2"].stage is Stage.QUEUED and h.spawned == ["r1"]

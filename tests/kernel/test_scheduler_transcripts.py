"""The scheduler and its pure helpers, driven synchronously: no event loop, no tasks. Each test
is a transcript: submit, grant, finish, expire, cancel, and what the scheduler decided."""

from __future__ import annotations

import ast
import math
from pathlib import Path as FilePath

import attrs
import pytest

import toolkernel
import toolkernel as tk
from toolkernel.kernel import _scheduler
from toolkernel.kernel._actions import Act
from toolkernel.kernel._call import CallState, Status, ToolCall
from toolkernel.kernel._leasing import Deadlines
from toolkernel.kernel._messages import CancelReason, Why
from toolkernel.kernel._record import Stage
from toolkernel.locks import Path, path

from .transcripts import Harness, call


def test_a_batch_runs_what_it_can_and_hands_the_rest_on_at_release() -> None:
    h = Harness().open()
    records = h.submit(call("w1", "a", "w"), call("r1", "a"), call("r2", "b"), call("w2", "a", "w"))
    assert h.spawned == ["w1", "r2"]
    assert [records[i].state for i in ("r1", "w2")] == [CallState.QUEUED] * 2
    h.run_to_end(records["w1"])
    assert h.spawned == ["w1", "r2", "r1"]  # the read, not the later write
    h.run_to_end(records["r1"])
    assert h.spawned[-1] == "w2"
    assert records["w1"].result is not None and records["w1"].result.status is Status.OK


def test_a_call_waiting_for_approval_keeps_later_conflicting_calls_back() -> None:
    def policy(c: ToolCall) -> tk.Decision:
        return tk.Decision.ask("why") if c.id == "asked" else tk.Decision.allow()

    h = Harness().open(policy=policy)
    records = h.submit(call("asked", "a", "w"), call("same", "a"), call("other", "b"))
    assert (h.prephases, h.spawned) == (["asked"], ["other"])
    assert records["same"].state is CallState.PENDING  # not even requested yet
    h.prephase(records["asked"])
    h.approve(records["asked"], True)
    assert h.spawned == ["other", "asked"]


def test_a_lease_wait_expires_on_its_deadline_and_frees_its_place() -> None:
    h = Harness().open(wait_timeout=5)
    records = h.submit(call("w", "a", "w"), call("late", "a"), call("next", "a", "w"))
    assert h.deadlines == [5]
    assert h.scheduler.next_deadline() == 5
    h.now = 4.9
    h.do(h.scheduler.expire(h.now))
    assert records["late"].result is None
    h.now = 5
    h.do(h.scheduler.expire(h.now))
    late = records["late"].result
    assert late is not None and (late.status, late.error_type) == (
        Status.TIMEOUT,
        "LeaseWaitTimeoutError",
    )
    assert "behind w (t) on a" in (late.error or "")
    assert records["next"].result is not None  # it waited as long: it timed out too
    assert h.scheduler.next_deadline() == math.inf


def test_a_granted_call_stops_its_wait_clock() -> None:
    h = Harness().open(wait_timeout=5)
    records = h.submit(call("w", "a", "w"), call("r", "a"))
    h.now = 1
    h.run_to_end(records["w"])
    assert h.spawned == ["w", "r"] and h.scheduler.next_deadline() == math.inf
    h.now = 10
    h.do(h.scheduler.expire(h.now))
    assert records["r"].result is None  # running, not timed out


def test_cancelling_a_queued_call_withdraws_it_and_lets_the_next_one_in() -> None:
    h = Harness().open()
    records = h.submit(call("w1", "a", "w"), call("w2", "a", "w"), call("r", "a"))
    h.do(h.scheduler.cancel(records["w2"], CancelReason(Why.ASKED)))
    w2 = records["w2"].result
    assert w2 is not None and (w2.status, w2.error) == (Status.CANCELLED, "cancelled")
    h.run_to_end(records["w1"])
    assert h.spawned == ["w1", "r"]


def test_a_failed_dependency_skips_its_dependents_with_the_reason() -> None:
    h = Harness().open()
    records = h.submit(call("a", "x"), call("b", "y", after=["a"]), call("c", "z", after=["b"]))
    assert h.spawned == ["a"]
    h.run_to_end(records["a"], Status.ERROR)
    for skipped in ("b", "c"):
        result = records[skipped].result
        assert result is not None and result.status is Status.SKIPPED
        assert result.error_type == "DependencyFailedError"
    assert h.spawned == ["a"]


def test_max_concurrency_is_a_pool_of_slots() -> None:
    h = Harness().open(max_concurrency=2)
    records = h.submit(*(call(f"c{i}", f"f{i}", "w") for i in range(4)))
    assert h.spawned == ["c0", "c1"]
    h.run_to_end(records["c1"])
    assert h.spawned == ["c0", "c1", "c2"]


def test_an_undeclared_call_is_a_barrier() -> None:
    h = Harness().open()
    records = h.submit(call("r", "a"), call("barrier"), call("after", "b"))
    assert h.spawned == ["r"]
    h.run_to_end(records["r"])
    assert h.spawned == ["r", "barrier"]
    h.run_to_end(records["barrier"])
    assert h.spawned == ["r", "barrier", "after"]


def test_an_illegal_move_raises() -> None:
    h = Harness().open()
    records = h.submit(call("r", "a"))
    h.run_to_end(records["r"])
    with pytest.raises(tk.errors.IllegalTransitionError, match="can't go from FINISHED to RUNNING"):
        h.scheduler.start(records["r"])


# -- the pure helpers ------------------------------------------------------------------------------


def test_deadlines_skip_stale_entries_and_stay_small() -> None:
    @attrs.define
    class Item:
        token: int = 0

    deadlines: Deadlines[Item] = Deadlines(lambda item: item.token)
    items = [Item() for _ in range(1000)]
    for i, item in enumerate(items):
        item.token = deadlines.add(float(i), item)
    for item in items[:-1]:  # all but the last stop waiting
        item.token = 0
        deadlines.discard()
    assert len(deadlines) == 1
    assert len(deadlines._heap) < 100  # rebuilt, not left to grow
    assert deadlines.next_deadline() == 999.0
    assert deadlines.expire(998.5) == []
    assert deadlines.expire(999.0) == [items[-1]]
    assert deadlines.next_deadline() == math.inf


def test_prephase_verdicts() -> None:
    assert _scheduler.before_hook_verdict(None) is None
    status, error = _scheduler.before_hook_verdict(tk.kernel.Block("no"))  # type: ignore[misc]
    assert (status, str(error)) == (Status.DENIED, "blocked: no")
    assert _scheduler.before_hook_verdict(7)[0] is Status.ERROR  # type: ignore[index]
    assert _scheduler.approval_verdict(True, "t", "") is None
    assert _scheduler.approval_verdict(False, "t", "")[0] is Status.DENIED  # type: ignore[index]
    assert _scheduler.approval_verdict("yes", "t", "")[0] is Status.ERROR  # type: ignore[index]
    allow = _scheduler.policy_verdict(lambda c: tk.Permission.ALLOW, call("c"))
    assert allow == tk.Decision.allow()
    broken = _scheduler.policy_verdict(lambda c: 1 / 0, call("c"))
    assert isinstance(broken, tuple) and broken[0] is Status.DENIED
    assert "ZeroDivisionError" in str(broken[1])


# -- structure -------------------------------------------------------------------------------------

PACKAGE = FilePath(toolkernel.__file__).parent
PURE = [
    "locks/_resources.py",
    "locks/_table.py",
    "locks/_table_values.py",
    "locks/_requests.py",
    "locks/_trie.py",
    "locks/_keyqueue.py",
    "kernel/_actions.py",
    "kernel/_admission.py",
    "kernel/_call.py",
    "kernel/_events.py",
    "kernel/_leasing.py",
    "kernel/_messages.py",
    "kernel/_observe.py",
    "kernel/_record.py",
    "kernel/_scheduler.py",
]


def _imports(file: FilePath, *, type_only: bool = True) -> set[str]:
    """Absolute names of the modules ``file`` imports; with ``type_only=False``, only those it
    imports at run time (not under ``if TYPE_CHECKING:``)."""
    tree = ast.parse(file.read_text())
    package = ".".join(["toolkernel", *file.relative_to(PACKAGE).parent.parts])
    found: set[str] = set()
    for node in tree.body:
        if not type_only and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for child in ast.walk(node):
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    module = ".".join([*base, *([child.module] if child.module else [])])
                else:
                    module = child.module or ""
                found.add(module)
                found.update(f"{module}.{alias.name}" for alias in child.names)
    return found


@pytest.mark.parametrize("module", PURE)
def test_the_pure_core_imports_no_event_loop(module: str) -> None:
    imported = _imports(PACKAGE / module, type_only=False)
    assert not {m for m in imported if m.split(".")[0] in ("trio", "anyio", "asyncio")}


@pytest.mark.parametrize("type_only", [True, False], ids=["type-only-included", "run-time"])
def test_no_module_imports_itself_in_a_cycle(type_only: bool) -> None:
    modules: dict[str, set[str]] = {}
    for file in PACKAGE.rglob("*.py"):
        if "sample_project" in file.parts:
            continue
        parts = file.relative_to(PACKAGE).with_suffix("").parts
        name = ".".join(["toolkernel", *(parts[:-1] if parts[-1] == "__init__" else parts)])
        modules[name] = _imports(file, type_only=type_only)
    edges = {
        name: {m for m in imported if m in modules and m != name and not name.startswith(m + ".")}
        for name, imported in modules.items()
    }
    # Package __init__ files re-export their children; an edge into a package stands for the
    # modules it re-exports, which is what makes a cycle through it.
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = 1
        for nxt in sorted(edges[name]):
            if state.get(nxt) == 1:
                raise AssertionError(" -> ".join([*trail[trail.index(nxt) :], nxt]))
            if nxt not in state:
                visit(nxt, [*trail, nxt])
        state[name] = 2

    for name in sorted(modules):
        if name not in state:
            visit(name, [name])


def test_keys_are_workspace_paths() -> None:
    assert isinstance(path("a/b"), Path)


def test_the_scheduler_calls_no_listener_its_events_come_back_in_order_as_actions() -> None:
    # A listener runs once the operation has returned (the async layer gives the events), so
    # one that cancels or submits calls starts an operation of its own on a settled scheduler.
    h = Harness().open()
    heard: list[tk.CallEvent] = []
    h.scheduler.add_listener(heard.append)
    batch = [call("w1", "a", "w"), call("w2", "a", "w"), call("x", "b")]
    records, actions = h.scheduler.submit(batch, None)
    assert heard == []
    told = [(type(p.event).__name__, p.event.call_id) for act, p in actions if act is Act.TELL]
    assert told == [
        ("CallQueued", "w1"),
        ("CallQueued", "w2"),
        ("CallQueued", "x"),
        ("CallBlocked", "w2"),
    ]
    assert [act for act, _ in actions] == [Act.TELL] * 4 + [Act.START] * 2  # events first
    h.do(actions)
    assert [(type(e).__name__, e.call_id) for e in heard] == told
    heard.clear()
    w1 = records[0]
    _, started = h.scheduler.start(w1)
    assert heard == [] and [act for act, _ in started] == [Act.TELL]
    h.do(started)
    h.do(h.scheduler.release(w1))
    finished = h.scheduler.finish(w1, h.scheduler.make_result(w1, Status.OK, "done"))
    assert [(type(e).__name__, e.call_id) for e in heard] == [("CallStarted", "w1")]
    h.do(finished)
    assert [(type(e).__name__, e.call_id) for e in heard] == [
        ("CallStarted", "w1"),
        ("CallFinished", "w1"),
    ]
    assert h.spawned == ["w1", "x", "w2"]
    assert h.revoked == ["w1"]  # its context, before w2 may run


def test_waiting_for_a_slot_is_a_stage_of_its_own() -> None:
    # One slot: x, granted at admission, waits for it holding its leases (HELD, keys fresh);
    # w2, granted only when w1 ends, waits for it too (FOR_SLOT), and looks at its keys again.
    h = Harness().open(max_concurrency=1)
    records = h.submit(call("w1", "a", "w"), call("w2", "a", "w"), call("x", "b"))
    w2, x = records["w2"], records["x"]
    assert (w2.stage, x.stage) == (Stage.QUEUED, Stage.HELD)
    h.run_to_end(records["w1"])
    assert (w2.stage, x.stage) == (Stage.FOR_SLOT, Stage.FRESH)  # the freed slot went to x
    assert w2.state is CallState.QUEUED
    h.run_to_end(x)
    assert w2.stage is Stage.GRANTED
    assert h.spawned == ["w1", "x", "w2"]

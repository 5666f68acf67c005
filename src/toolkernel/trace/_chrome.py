"""``ChromeTrace``: what the kernel ran, when, written as Chrome trace JSON for Perfetto.

Attach it with ``kernel.add_listener(trace)``, run calls, then ``trace.write("trace.json")``
and open the file at https://ui.perfetto.dev (or ``chrome://tracing``). What a person sees:

- a process **running** with one lane (a "thread") per call running at the same time: lane 1
  is used whenever it is free, so the number of lanes is the peak concurrency, and a call
  never moves lane. Each call is one slice, named ``c7 Edit calc/ops.py``; clicking it shows
  its call id, tool, claims, status (and error), how long it waited, and whom it waited behind.
- a process **waiting**, drawn apart: one slice per call that was blocked (behind other
  calls' leases, or for a concurrency slot), from its admission to its start, with the calls
  and resources it waited on.
- arrows (flow events) from the end of each call to the start of every call that waited
  behind it.
- with :meth:`ChromeTrace.span`, slices of your own in a process above them (the demo draws
  the model's turns there).

Times are the kernel's clock, from the first event on, in microseconds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import attrs

from ..kernel import CallEvent
from ..testing._recorder import CallRecording, Interval, Recorder

__all__ = ["ChromeTrace"]

_AGENT, _RUNNING, _WAITING = 1, 2, 3  # process ids, in the order they are shown


@attrs.frozen
class _Span:
    name: str
    start: float
    end: float
    lane: str
    args: Mapping[str, Any]


@attrs.define(eq=False)
class ChromeTrace:
    """A kernel listener that collects call events and writes them as Chrome trace JSON.

    ::

        trace = ChromeTrace()
        kernel.add_listener(trace)
        await kernel.run(calls)
        trace.write("trace.json")        # open it at https://ui.perfetto.dev

    ``labels`` maps call ids to a short text shown after the tool's name (the file it edits).
    """

    title: str = "toolkernel"
    labels: dict[str, str] = attrs.field(factory=dict)
    _recorder: Recorder = attrs.field(factory=Recorder, init=False)
    _spans: list[_Span] = attrs.field(factory=list, init=False)

    def __call__(self, event: CallEvent) -> None:
        self._recorder(event)

    def leases_returned(self, call_id: str) -> None:
        """A call's leases returned before its ``CallFinished``: its run ends here."""
        self._recorder.leases_returned(call_id)

    def leases_granted(self, call_id: str) -> None:
        """A call that started ahead of its grant holds its leases: drawn as running from its
        start (what it did before is on its own copy, or held back until now)."""
        self._recorder.leases_granted(call_id)

    def span(
        self,
        name: str,
        start: float,
        end: float,
        *,
        lane: str = "agent",
        args: Mapping[str, Any] | None = None,
    ) -> None:
        """Add a slice of your own (times on the kernel's clock) in lane ``lane`` of a process
        drawn above the calls: a model's turn, a phase of your program."""
        self._spans.append(_Span(name, start, end, lane, dict(args or {})))

    def to_json(self) -> dict[str, Any]:
        """The trace as a JSON-ready dict (``{"traceEvents": [...], ...}``)."""
        calls = [c for c in self._recorder.recording if c.wait is not None]
        starts = [c.wait.start for c in calls if c.wait is not None]
        starts += [s.start for s in self._spans]
        origin = min(starts, default=0.0)

        def us(seconds: float) -> float:
            return round((seconds - origin) * 1_000_000, 3)

        events: list[dict[str, Any]] = []
        events += _process(_AGENT, f"{self.title}: agent", 0) if self._spans else []
        events += _process(_RUNNING, f"{self.title}: running", 1)
        events += _process(_WAITING, f"{self.title}: waiting", 2)

        own_lanes: dict[str, int] = {}
        for span in self._spans:
            tid = own_lanes.setdefault(span.lane, len(own_lanes) + 1)
            events.append(_slice(_AGENT, tid, span.name, us(span.start), us(span.end), span.args))
        events += [_thread(_AGENT, tid, name) for name, tid in own_lanes.items()]

        runs = [c for c in calls if c.run is not None]
        run_lane = _lanes([c.run for c in runs if c.run is not None])
        waits = [c for c in calls if _waited(c)]
        wait_lane = _lanes([c.wait for c in waits if c.wait is not None])
        events += [_thread(_RUNNING, n, f"lane {n}") for n in sorted(set(run_lane))]
        events += [_thread(_WAITING, n, f"waiting {n}") for n in sorted(set(wait_lane))]

        where: dict[str, tuple[int, CallRecording]] = {}  # call id -> its run's lane
        for call, lane in zip(runs, run_lane, strict=True):
            assert call.run is not None
            name = self._name(call)
            events.append(
                _slice(_RUNNING, lane, name, us(call.run.start), us(call.run.end), _args(call))
            )
            where[call.call_id] = (lane, call)
        for call, lane in zip(waits, wait_lane, strict=True):
            assert call.wait is not None
            args = {
                "call_id": call.call_id,
                "tool": call.name,
                "waited_behind": list(call.waited_behind),
                "contested": list(call.contested),
            }
            name = f"{self._name(call)} (waiting)"
            events.append(
                _slice(_WAITING, lane, name, us(call.wait.start), us(call.wait.end), args)
            )
        flow = 0
        for call in runs:
            assert call.run is not None
            for blocker_id in call.waited_behind:
                found = where.get(blocker_id)
                if found is None:
                    continue
                blocker_lane, blocker = found
                assert blocker.run is not None
                flow += 1
                # The arrow leaves from just inside the end of the blocker's slice and lands
                # on the start of the waiter's ("bp": "e": bound to the enclosing slice).
                leave = max(us(blocker.run.start), us(blocker.run.end) - 0.001)
                common = {"name": "waited for", "cat": "lease", "id": flow}
                events.append(
                    {**common, "ph": "s", "pid": _RUNNING, "tid": blocker_lane, "ts": leave}
                )
                events.append(
                    {
                        **common,
                        "ph": "f",
                        "bp": "e",
                        "pid": _RUNNING,
                        "tid": where[call.call_id][0],
                        "ts": us(call.run.start),
                    }
                )
        return {
            "traceEvents": events,
            "displayTimeUnit": "ms",
            "otherData": {
                "producer": "toolkernel",
                "calls": len(calls),
                "lanes": len(set(run_lane)),
            },
        }

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the trace to ``path`` as JSON."""
        with open(path, "w", encoding="utf-8") as file:
            json.dump(self.to_json(), file, indent=None, separators=(",", ":"))

    def _name(self, call: CallRecording) -> str:
        label = self.labels.get(call.call_id, "")
        return f"{call.call_id} {call.name} {label}".rstrip()


def _waited(call: CallRecording) -> bool:
    # Blocked behind other calls, or for a slot; not the moment every call takes to start.
    return call.wait is not None and bool(call.waited_behind or call.contested)


def _lanes(intervals: list[Interval]) -> list[int]:
    """A lane (1, 2, ...) for each interval: the lowest one free when it opens, so the number of
    lanes is the most intervals open at once. Intervals opening at one time take lanes in the
    order given (the order calls were queued), whatever order their tasks happened to start in;
    whether a lane is free is judged by event order."""
    order = sorted(range(len(intervals)), key=lambda i: (intervals[i].start, i))
    lanes = [0] * len(intervals)
    free_after: list[int] = []  # per lane: sequence number of the event that closed its last
    for index in order:
        interval = intervals[index]
        for lane, closed in enumerate(free_after):
            if closed <= interval.first:
                free_after[lane] = interval.last
                lanes[index] = lane + 1
                break
        else:
            free_after.append(interval.last)
            lanes[index] = len(free_after)
    return lanes


def _args(call: CallRecording) -> dict[str, Any]:
    result = call.result
    assert result is not None
    args: dict[str, Any] = {
        "call_id": call.call_id,
        "tool": call.name,
        "claims": [str(claim) for claim in call.claims],
        "status": result.status.value,
        "waited_s": round(result.wait_time, 6),
    }
    if call.waited_behind:
        args["waited_behind"] = list(call.waited_behind)
        args["contested"] = list(call.contested)
    if call.parent is not None:
        args["parent"] = call.parent
    if not result.ok:
        args["error_type"] = result.error_type
        args["error"] = result.error
    return args


def _process(pid: int, name: str, order: int) -> list[dict[str, Any]]:
    return [
        {"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}},
        {"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": order}},
    ]


def _thread(pid: int, tid: int, name: str) -> dict[str, Any]:
    return {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}


def _slice(
    pid: int, tid: int, name: str, start: float, end: float, args: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "ph": "X",
        "pid": pid,
        "tid": tid,
        "name": name,
        "cat": "call",
        "ts": start,
        "dur": round(end - start, 3),
        "args": dict(args),
    }

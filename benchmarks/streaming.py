"""Streaming: the time of a multi-call turn, waiting for the whole answer vs starting each call
the moment its block is complete in the streamed answer.

Every recorded turn of two or more calls is replayed twice through ``toolkernel.agent.run_agent``
and a real kernel, on trio's ``MockClock``: a ``ScriptedModel`` emits the turn's calls at their
recorded times, and stand-in tools declare the claims the built-in tools would
(``toolkernel._replay``) and sleep their recorded durations. *Whole* (``stream=False``) runs
every call once the answer is finished; *streamed* (``stream=True``) submits each call when its
block is complete, conflicting calls still in emission order. A turn's time runs from the
request to the last result (when the loop would ask the model again): the model's answer plus
what the calls take after it.

What a turn needs: each call's emission time (seconds from the request). Two sources:

- Recorded turns in the traces' format (``src/toolkernel/_replay/sample-traces/*.jsonl``,
  ``benchmarks/data/*.jsonl``) whose calls carry ``"emitted_s"``. The shared traces carry no
  emission times (each call has ``duration_s`` only): they are read, counted, and reported as
  such.
- Claude Code transcripts (``--transcripts FILE...``; ``--spotter GIT_DIR`` and ``--entire
  GIT_DIR``: the sessions of marot/spotter and entireio/cli, read as ``normalize_sessions.py``
  reads them, see ``benchmarks/data/README.md``), where each content block of an answer
  is a line of its own, stamped when the block was complete. A call is emitted at its
  ``tool_use`` line; the request was sent at the line before the answer's first; the answer ends
  with its last call; a call takes from its line to its ``tool_result``'s (as in the traces).

Caveats: recorded durations include time the original agent spent before starting a call
(waiting for permission, or for the answer to end), so the turns are also run with durations
capped at 30 s and with per-tool medians, as ``scheduling.py`` does. Time units are
milliseconds of virtual time, so every time is exact.

Run from the repository root::

    .venv/bin/python benchmarks/streaming.py                        # the traces beside the repo
    .venv/bin/python benchmarks/streaming.py --spotter DIR --entire DIR   # and transcripts
    .venv/bin/python benchmarks/streaming.py --quick                # smoke run, built-in sample
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path as FilePath
from typing import Any, NamedTuple

import anyio
import trio
import trio.testing

# The transcripts' sources are read as normalize_sessions.py reads them (this directory is on
# the path when a benchmark runs as a script).
from normalize_sessions import entire, spotter

import toolkernel as tk
from toolkernel._replay import RecordedTurn, capped, per_tool_medians, recorded_call
from toolkernel.agent import ScriptedModel, Turn, run_agent

REPO = FilePath(__file__).resolve().parents[1]
SHARED_TRACES = REPO / "src" / "toolkernel" / "_replay" / "sample-traces"  # the shipped sample
LOCAL_TRACES = REPO / "benchmarks" / "data"
PATH_ARGS = ("file_path", "path", "notebook_path")


class EmittedTurn(NamedTuple):
    """A recorded turn with the time each call was emitted (ms from the request)."""

    turn: RecordedTurn
    emitted: tuple[float, ...]


# -- reading ------------------------------------------------------------------------------------


def traces_with_emission(file: FilePath) -> tuple[list[EmittedTurn], int]:
    """The multi-call turns of a trace file whose calls all carry ``emitted_s``, and how many
    multi-call turns carry none."""
    found, without = [], 0
    for line in file.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        turn = json.loads(line)
        calls = turn.get("calls") or []
        if len(calls) < 2:
            continue
        if not all(isinstance(c.get("emitted_s"), int | float) for c in calls):
            without += 1
            continue
        recorded = RecordedTurn(
            f"{turn['session']} turn {turn['turn']}",
            tuple(
                recorded_call(c["id"], c["tool"], c.get("args") or {}, round(c["duration_s"] * 1e3))
                for c in calls
            ),
        )
        found.append(EmittedTurn(recorded, _ordered(c["emitted_s"] * 1e3 for c in calls)))
    return found, without


def _stamp(entry: Mapping[str, Any]) -> float | None:
    stamp = entry.get("timestamp")
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _relative(value: Any, cwd: Any) -> Any:
    if not isinstance(value, str) or not isinstance(cwd, str) or not value.startswith("/"):
        return value
    if value == cwd:
        return "."
    root = cwd.rstrip("/") + "/"
    return value[len(root) :] if value.startswith(root) else value


def transcript_turns(lines: Iterable[str], label: str) -> list[EmittedTurn]:
    """The multi-call turns of one Claude Code transcript, with emission times."""
    entries = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    results: dict[str, float] = {}
    for entry in entries:
        message = entry.get("message")
        stamp = _stamp(entry)
        if entry.get("type") != "user" or not isinstance(message, dict) or stamp is None:
            continue
        for block in message.get("content") if isinstance(message.get("content"), list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                results.setdefault(str(block.get("tool_use_id")), stamp)
    asked: dict[str, float] = {}  # message id -> when the request was sent
    calls: dict[str, list[tuple[float, dict[str, Any], Any]]] = {}
    previous: float | None = None
    for entry in entries:
        stamp = _stamp(entry)
        message = entry.get("message")
        if entry.get("type") == "assistant" and isinstance(message, dict) and stamp is not None:
            key = str(message.get("id") or entry.get("uuid"))
            if key not in asked and previous is not None:
                asked[key] = previous
            content = message.get("content")
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    calls.setdefault(key, []).append((stamp, block, entry.get("cwd")))
        if stamp is not None:
            previous = stamp
    turns = []
    for number, (key, blocks) in enumerate(calls.items(), 1):
        start = asked.get(key)
        ended = [results.get(str(block.get("id"))) for _, block, _ in blocks]
        if start is None or len(blocks) < 2 or any(end is None for end in ended):
            continue  # a lone call, or one never answered (the session ended)
        recorded = []
        for index, ((stamp, block, cwd), end) in enumerate(zip(blocks, ended, strict=True), 1):
            raw = block.get("input") if isinstance(block.get("input"), dict) else {}
            args = {k: _relative(v, cwd) if k in PATH_ARGS else v for k, v in raw.items()}
            ms = round(max(0.0, float(end or 0.0) - stamp) * 1e3)
            recorded.append(recorded_call(f"c{index}", str(block.get("name")), args, ms))
        emitted = _ordered(round((stamp - start) * 1e3) for stamp, _, _ in blocks)
        turns.append(EmittedTurn(RecordedTurn(f"{label} turn {number}", tuple(recorded)), emitted))
    return turns


def _ordered(times: Iterable[float]) -> tuple[float, ...]:
    """Times made non-negative and non-decreasing (lines are written in order; clocks are not
    always)."""
    out: list[float] = []
    for value in times:
        out.append(max(float(value), out[-1] if out else 0.0, 0.0))
    return tuple(out)


# -- replaying ----------------------------------------------------------------------------------


def _stand_ins(turns: Sequence[EmittedTurn]) -> list[tk.Tool]:
    table = {
        f"{t}/{c}": call.claims
        for t, turn in enumerate(turns)
        for c, call in enumerate(turn.turn.calls)
    }

    def stand_in(name: str) -> tk.Tool:
        async def run(ctx: tk.ToolContext, ms: float, key: str) -> None:
            await anyio.sleep(ms)

        return tk.tool(name=name, claims=lambda arguments: table[arguments["key"]])(run)

    return [stand_in(n) for n in sorted({c.tool for t in turns for c in t.turn.calls})]


def turn_times(turns: Sequence[EmittedTurn], *, stream: bool) -> list[float]:
    """Each turn's time (ms), run through the agent loop and one kernel, one after the other."""

    async def main() -> list[float]:
        times = []
        async with tk.open_kernel(tools=_stand_ins(turns)) as kernel:
            for t, (turn, emitted) in enumerate(turns):
                calls = [
                    tk.ToolCall(call.id, call.tool, {"ms": call.ms, "key": f"{t}/{c}"})
                    for c, call in enumerate(turn.calls)
                ]
                model = ScriptedModel([Turn("", calls, emitted=emitted)])
                begin = trio.current_time()
                outcome = await run_agent(model, kernel, "go", max_steps=1, stream=stream)
                times.append(trio.current_time() - begin)
                failed = [r for r in outcome.steps[0].results if not r.ok]
                if failed:
                    raise RuntimeError(f"{turn.label}: {failed[0].call_id} {failed[0].error}")
        return times

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


class Report(NamedTuple):
    title: str
    turns: int
    answer_ms: float
    whole_ms: float
    streamed_ms: float
    per_turn: tuple[float, ...]
    """Each turn's saving, as a fraction of its whole-answer time."""


def measure(title: str, turns: Sequence[EmittedTurn]) -> Report:
    whole = turn_times(turns, stream=False)
    streamed = turn_times(turns, stream=True)
    for turn, w, s in zip(turns, whole, streamed, strict=True):
        if s > w:  # starting earlier can't end later, with emission order kept
            raise AssertionError(f"{turn.turn.label}: streamed {s} ms > whole {w} ms")
    return Report(
        title,
        len(turns),
        sum(t.emitted[-1] for t in turns),
        sum(whole),
        sum(streamed),
        tuple((w - s) / w if w else 0.0 for w, s in zip(whole, streamed, strict=True)),
    )


def with_variants(turns: Sequence[EmittedTurn]) -> list[tuple[str, list[EmittedTurn]]]:
    recorded = [t.turn for t in turns]

    def rebuilt(variant: Sequence[RecordedTurn]) -> list[EmittedTurn]:
        return [EmittedTurn(v, t.emitted) for v, t in zip(variant, turns, strict=True)]

    return [
        ("recorded durations", list(turns)),
        ("durations capped at 30 s", rebuilt(capped(recorded))),
        ("per-tool median durations", rebuilt(per_tool_medians(recorded))),
    ]


def print_report(report: Report) -> None:
    saved = report.whole_ms - report.streamed_ms
    share = saved / report.whole_ms if report.whole_ms else 0.0
    median = statistics.median(report.per_turn) if report.per_turn else 0.0
    faster = sum(1 for saving in report.per_turn if saving > 0)
    print(
        f"  {report.title:28} {report.turns:5} turns   whole {report.whole_ms / 1e3:9.1f} s   "
        f"streamed {report.streamed_ms / 1e3:9.1f} s   saved {saved / 1e3:7.1f} s ({share:5.1%})"
    )
    print(
        f"  {'':28} {faster:5} turns faster; median turn {median:5.1%}; the answers "
        f"themselves {report.answer_ms / 1e3:.1f} s of the whole"
    )


# -- the smoke run ------------------------------------------------------------------------------


def _line(kind: str, second: float, content: list[dict[str, Any]], **extra: Any) -> str:
    stamp = datetime.datetime(2026, 1, 1, 10, 0, tzinfo=datetime.UTC)
    stamp += datetime.timedelta(seconds=second)
    entry = {"type": kind, "timestamp": stamp.isoformat(), "cwd": "/w/app", **extra}
    return json.dumps({**entry, "message": {"content": content, **extra.pop("message", {})}})


def _use(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def _result(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id}


SAMPLE = (
    _line("user", 0.0, [{"type": "text", "text": "Fix the parser"}]),
    _line("assistant", 2.0, [{"type": "text", "text": "Reading."}], message={"id": "m1"}),
    _line(
        "assistant", 3.0, [_use("t1", "Read", file_path="/w/app/src/a.py")], message={"id": "m1"}
    ),
    _line(
        "assistant", 4.0, [_use("t2", "Edit", file_path="/w/app/src/b.py")], message={"id": "m1"}
    ),
    _line(
        "assistant", 6.0, [_use("t3", "Read", file_path="/w/app/src/b.py")], message={"id": "m1"}
    ),
    _line("user", 5.0, [_result("t1")]),
    _line("user", 7.0, [_result("t2")]),
    _line("user", 7.5, [_result("t3")]),
)
"""One answer of three calls (emitted 3, 4 and 6 s after the request; the third reads what
the second edits), for the smoke run."""


def smoke() -> int:
    turns = transcript_turns(SAMPLE, "sample")
    (turn,) = turns
    assert turn.emitted == (3000.0, 4000.0, 6000.0), turn.emitted
    assert [c.ms for c in turn.turn.calls] == [2000, 3000, 1500]
    report = measure("sample", turns)
    # Whole: everything from 6 s; b.py's read after its edit: 6 + 3 + 1.5 = 10.5 s. Streamed:
    # the edit from 4 s, the read of b.py after it (7 s): 8.5 s.
    assert (report.whole_ms, report.streamed_ms) == (10_500.0, 8_500.0), report
    print("streaming: the sample turn takes 10.5 s waiting for the whole answer, 8.5 s streamed")
    return 0


# -- main ---------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run on a built-in sample")
    parser.add_argument("--traces", type=FilePath, nargs="*", default=None, help="trace files")
    parser.add_argument("--transcripts", nargs="*", default=[], help="Claude Code transcripts")
    parser.add_argument("--spotter", metavar="GIT_DIR", help="marot/spotter's git directory")
    parser.add_argument("--entire", metavar="GIT_DIR", help="entireio/cli's git directory")
    parser.add_argument("--sessions", type=int, default=120, help="entire sessions to read")
    options = parser.parse_args(argv)
    if options.quick:
        return smoke()
    began = time.perf_counter()
    traces = options.traces
    if traces is None:
        traces = sorted(SHARED_TRACES.glob("*.jsonl")) + sorted(LOCAL_TRACES.glob("*.jsonl"))
        if not SHARED_TRACES.exists():
            print(f"Traces: none at {SHARED_TRACES} (toolkernel's sample trace ships there).")
    sets: list[tuple[str, list[EmittedTurn]]] = []
    for file in traces:
        found, without = traces_with_emission(file)
        print(
            f"Traces: {file.name}: {len(found)} multi-call turns with emission times, "
            f"{without} without (only each call's duration is recorded)"
        )
        if found:
            sets.append((file.name, found))
    sources: list[tuple[str, list[tuple[str, list[str]]]]] = []
    if options.transcripts:
        files = [
            (f, FilePath(f).read_text(encoding="utf-8").splitlines()) for f in options.transcripts
        ]
        sources.append(("transcripts", files))
    if options.spotter:
        sources.append(("spotter (Elixir)", [(n, list(ls)) for n, ls in spotter(options.spotter)]))
    if options.entire:
        chosen = entire(options.entire, options.sessions)
        sources.append(("entire (Go)", [(n, list(ls)) for n, ls in chosen]))
    for name, transcripts in sources:
        found = [t for n, lines in transcripts for t in transcript_turns(lines, n)]
        print(f"{name}: {len(transcripts)} transcripts, {len(found)} multi-call turns")
        if found:
            sets.append((name, found))
    if not sets:
        print(
            "Nothing to measure: no turn carries emission times. Pass Claude Code transcripts "
            "(--transcripts FILE..., --spotter GIT_DIR), or run --quick for the smoke run."
        )
        return smoke()
    print("Multi-call turn time, request to last result, summed; whole answer vs streamed:")
    for name, turns in sets:
        print(f"{name}:")
        for title, variant in with_variants(turns):
            print_report(measure(title, variant))
    print(f"({time.perf_counter() - began:.1f} s of real time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""MCP server: toolkernel's ``python -m toolkernel mcp`` against the reference filesystem server
(npm ``@modelcontextprotocol/server-filesystem``), side by side in one run.

a. **Latency per call.** One session on each server over stdio, through the official Python
   SDK's ``mcp.Client``, making calls one after another on the same files: ``Read`` against
   ``read_text_file`` of one 300-line file, ``Edit`` against ``edit_file`` of a line of a copy
   of it (each server its own copy, so neither's edits make the other's view stale). toolkernel
   runs twice: with its default ``--leases auto`` (the root's lease service, shared by every
   server on it) and with ``--leases none`` (leases kept in the process). Each round times
   every contender in turn (the order rotating); median and p90 over all calls, and each
   median's ratio to the reference's. Target: no worse than the reference (at most 1.0x).
b. **Lost edits.** 2, 8 and 32 sessions at once, each appending lines to two shared files by
   read-modify-write (``tests/mcp/node/workload.mjs``, on the official TypeScript SDK: Read,
   take the last line, Edit it into itself and a new line; an edit refused because the file
   changed since the session read it is read again and retried). Over stdio each session
   starts a server process of its own, as agents do; toolkernel also serves all the sessions
   from one process over HTTP. An edit is *lost* when the server reported it made and its line
   is not in the file, *misplaced* when its line does not follow the line its session read.
   Columns: edits made (reported successful), lost, misplaced; refusals retried as stale
   views, other refusals (the reference's "could not find exact match": its last line had been
   lost), sessions ended by an error; edits made per second once every session is connected;
   seconds to connect them all, and the row's wall time.
c. **Batch.** One turn of 8 independent edits and 4 commands (``sleep`` and ``wc``): through
   one ``Batch`` call, against the same calls one at a time, each way in a fresh copy of a
   tree and a fresh server (the files read, untimed, first). The speed-up, and the two trees
   compared at the end (they must be equal, and hold every edit).

(a) and (b) need Node and npm, to install the reference server and the SDK into
``.venv/mcp-node`` (``tests/mcp/node_packages.py``); without them they are skipped, saying
why, and the benchmark still exits 0. Times are never asserted: read the PASS/MISS lines.
A tool call that fails where it must not, an edit toolkernel loses or two trees that differ
exit 1.

    .venv/bin/python benchmarks/mcp_server.py            # full run
    .venv/bin/python benchmarks/mcp_server.py --quick    # smoke run (well under a minute)
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import pathlib
import platform
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from typing import IO, Any

import anyio
import mcp.client.stdio

import mcp

# The Node packages' installer and the workload's checks are the tests' own.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from tests.mcp.mcp_http import serving_http
from tests.mcp.node_packages import WORKLOAD, NodePackagesUnavailable, install, seed, tally

TOOLKERNEL = [sys.executable, "-m", "toolkernel", "mcp"]
TARGET = 1.0  # toolkernel's median per call at most the reference's
LINES = [
    f"    value_{i:03} = compute({i}, scale=2.5)  # a line of a source file\n" for i in range(300)
]
MARKER = "marker = {}\n"


class Failed(Exception):
    """A call failed that must not, or a check did not hold: the benchmark exits 1."""


def text_of(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


async def call(client: Any, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise Failed(f"{tool}({arguments}) failed: {text_of(result)[:300]}")
    return text_of(result)


def client_for(command: Sequence[str], errlog: IO[str], cwd: str | None = None) -> Any:
    """A session on the stdio server ``command``, its stderr into ``errlog``.

    ``mode="legacy"``: the initialize handshake, one session per connection, as the TypeScript
    SDK's clients (the agents of today) make it. In the SDK's default ``"auto"`` mode it speaks
    the sessionless 2026-07-28 protocol, where toolkernel's server (as of this writing) sees
    each request as a new agent, and refuses every Edit as of a file never read."""
    parameters = mcp.StdioServerParameters(command=command[0], args=list(command[1:]), cwd=cwd)
    transport = mcp.client.stdio.stdio_client(parameters, errlog=errlog)
    return mcp.Client(transport, mode="legacy", read_timeout_seconds=120)


# a. Latency per call.


class Contender:
    """One server and its session, making the same two kinds of call as the others."""

    def __init__(self, name: str, client: Any, read: str, edit: str, dialect: str) -> None:
        self.name, self.client, self.dialect = name, client, dialect
        self.read_path, self.edit_path = read, edit
        self.marker = 0
        self.samples: dict[str, list[float]] = {"Read": [], "Edit": []}

    async def read(self, path: str) -> str:
        if self.dialect == "toolkernel":
            return await call(self.client, "Read", {"file_path": path})
        return await call(self.client, "read_text_file", {"path": path})

    async def edit(self) -> None:
        old, new = MARKER.format(self.marker), MARKER.format(1 - self.marker)
        if self.dialect == "toolkernel":
            arguments = {"file_path": self.edit_path, "old_string": old, "new_string": new}
            await call(self.client, "Edit", arguments)
        else:
            edits = [{"oldText": old, "newText": new}]
            await call(self.client, "edit_file", {"path": self.edit_path, "edits": edits})
        self.marker = 1 - self.marker

    async def timed(self, count: int, keep: bool = True) -> None:
        for kind, action in (("Read", lambda: self.read(self.read_path)), ("Edit", self.edit)):
            for _ in range(count):
                began = time.perf_counter()
                await action()
                if keep:
                    self.samples[kind].append(time.perf_counter() - began)


async def latency(root: pathlib.Path, reference: Sequence[str], count: int, rounds: int) -> None:
    read = root / "read.txt"
    read.write_text("".join(LINES))
    servers = [
        ("reference", [*reference, str(root)], "reference"),
        ("toolkernel", [*TOOLKERNEL, "--root", str(root)], "toolkernel"),
        (
            "toolkernel --leases none",
            [*TOOLKERNEL, "--root", str(root), "--leases", "none"],
            "toolkernel",
        ),
    ]
    contenders = []
    async with AsyncExitStack() as stack:
        errlog = stack.enter_context(tempfile.TemporaryFile("w+"))  # noqa: SIM115
        for i, (name, command, dialect) in enumerate(servers):
            edit = root / f"edit-{i}.txt"
            edit.write_text("".join(LINES[:150]) + MARKER.format(0) + "".join(LINES[150:]))
            client = await stack.enter_async_context(client_for(command, errlog, cwd=str(root)))
            contender = Contender(name, client, str(read), str(edit), dialect)
            await contender.read(str(edit))  # toolkernel edits only what the session has read
            await contender.timed(max(2, count // 5), keep=False)  # warm up
            contenders.append(contender)
        for rnd in range(rounds):
            shift = rnd % len(contenders)  # rotate, so none always goes first
            for contender in contenders[shift:] + contenders[:shift]:
                await contender.timed(count)
    base = contenders[0]
    print(f"(a) Latency per call, sequential, one stdio session each; ms, {rounds} rounds")
    print(f"  {'server':<26}{'call':<6}{'median':>8}{'p90':>8}{'/reference':>12}")
    for contender in contenders:
        for kind, samples in contender.samples.items():
            median, p90 = statistics.median(samples), percentile(samples, 0.9)
            line = f"  {contender.name:<26}{kind:<6}{median * 1e3:>8.2f}{p90 * 1e3:>8.2f}"
            if contender is not base:
                ratio = median / statistics.median(base.samples[kind])
                verdict = "PASS" if ratio <= TARGET else "MISS"
                line += f"{ratio:>11.2f}x  (target: at most {TARGET:g}x) {verdict}"
            print(line)


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# b. Lost edits.


@contextmanager
def http_server(root: pathlib.Path, token: str) -> Iterator[str]:
    """toolkernel's server over HTTP on a free loopback port, for ``root``; its URL."""
    try:
        with serving_http(root, token) as url:
            yield url
    except RuntimeError as exc:
        raise Failed(str(exc)) from None


async def workload(spec: dict[str, Any], modules: pathlib.Path) -> dict[str, Any]:
    env = {**os.environ, "TOOLKERNEL_MCP_NODE_MODULES": str(modules)}
    done = await anyio.run_process(
        ["node", str(WORKLOAD)], input=json.dumps(spec).encode(), env=env, check=False
    )
    lines = done.stdout.decode().strip().splitlines()
    if not lines:
        raise Failed(f"workload.mjs printed nothing: {done.stderr.decode()[-500:]}")
    summary: dict[str, Any] = json.loads(lines[-1])
    if "fatal" in summary:
        raise Failed(f"workload.mjs: {summary['fatal'][:500]}")
    return summary


async def lost_edits(
    work: pathlib.Path,
    reference: Sequence[str],
    modules: pathlib.Path,
    counts: Sequence[int],
    edits: int,
) -> bool:
    """Print the table; whether toolkernel kept every edit."""
    print(f"(b) Lost edits: N sessions at once, {edits} appends each, on 2 shared files")
    print(
        f"  {'server':<28}{'sessions':>9}{'made':>6}{'lost':>6}{'misplaced':>10}"
        f"{'stale':>7}{'other':>7}{'errors':>7}{'edits/s':>9}{'start s':>9}{'all s':>7}"
    )
    kept = True
    for sessions in counts:
        for kind in KINDS:
            root = work / f"b-{sessions}-{KINDS.index(kind)}"
            root.mkdir()
            files = seed(root, 2)
            began = time.perf_counter()
            with server_for(kind, root, reference) as server:
                spec = {
                    "servers": [server],
                    "sessions": sessions,
                    "edits": edits,
                    "files": files,
                    "dialect": "reference" if kind.startswith("reference") else "toolkernel",
                }
                summary = await workload(spec, modules)
            found = tally(files, summary["landed"])
            rate = summary["succeeded"] / summary["elapsed_s"] if summary["elapsed_s"] else 0.0
            print(
                f"  {kind:<28}{sessions:>9}{summary['succeeded']:>6}{len(found.lost):>6}"
                f"{len(found.misplaced):>10}{summary['refusals']['stale']:>7}"
                f"{summary['refusals']['other']:>7}{len(summary['errors']):>7}{rate:>9.0f}"
                f"{summary['connect_s']:>9.1f}{time.perf_counter() - began:>7.1f}"
            )
            if kind.startswith("toolkernel"):
                problems = [*summary["errors"], *summary["other_refusals"]]
                problems += [*found.lost, *found.misplaced, *found.torn, *found.added]
                if summary["succeeded"] != summary["attempted"] or problems:
                    kept = False
                    print(f"    toolkernel did not keep every edit: {problems[:5]}")
    return kept


KINDS = ("reference (a process each)", "toolkernel (a process each)", "toolkernel (HTTP, one)")


@contextmanager
def server_for(kind: str, root: pathlib.Path, reference: Sequence[str]) -> Iterator[dict[str, Any]]:
    """The workload's server of ``kind`` (one of :data:`KINDS`) on ``root``: a command each
    session starts, or an HTTP server this runs meanwhile."""
    if kind.startswith("reference"):
        yield {"command": [*reference, str(root)]}
    elif "HTTP" in kind:
        token = secrets.token_urlsafe(16)
        with http_server(root, token) as url:
            yield {"url": url, "token": token}
    else:
        yield {"command": [*TOOLKERNEL, "--root", str(root)]}


# c. Batch against one call at a time.

EDITED = 8
COMMANDS = 4


def make_tree(root: pathlib.Path) -> None:
    (root / "src").mkdir(parents=True)
    (root / "data").mkdir()
    for i in range(EDITED):
        (root / "src" / f"m{i}.py").write_text(f"VALUE = {i}\n" + "".join(LINES[:100]))
    for j in range(COMMANDS):
        (root / "data" / f"d{j}.txt").write_text("".join(LINES[: 10 * (j + 1)]))


def turn(pause: float) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    for i in range(EDITED):
        arguments = {"file_path": f"src/m{i}.py", "old_string": f"VALUE = {i}\n"}
        calls.append(
            {"tool": "Edit", "arguments": {**arguments, "new_string": f"VALUE = {i + 100}\n"}}
        )
    for j in range(COMMANDS):
        command = f"sleep {pause:g} && wc -l data/d{j}.txt"
        calls.append({"tool": "Bash", "arguments": {"command": command}})
    return calls


def snapshot(root: pathlib.Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


async def one_turn(root: pathlib.Path, batch: bool, pause: float) -> float:
    make_tree(root)
    with tempfile.TemporaryFile("w+") as errlog:
        return await timed_turn(root, batch, pause, errlog)


async def timed_turn(root: pathlib.Path, batch: bool, pause: float, errlog: IO[str]) -> float:
    async with client_for([*TOOLKERNEL, "--root", str(root)], errlog, cwd=str(root)) as client:
        for i in range(EDITED):  # untimed: an agent reads before it edits
            await call(client, "Read", {"file_path": f"src/m{i}.py"})
        calls = turn(pause)
        began = time.perf_counter()
        if batch:
            answer = await call(client, "Batch", {"calls": calls})
            statuses = re.findall(r"^\[\d+\] \w+: (\w+)$", answer, re.MULTILINE)
            if statuses != ["ok"] * len(calls):
                raise Failed(f"the Batch's calls did not all succeed: {answer[:500]}")
        else:
            for item in calls:
                await call(client, item["tool"], item["arguments"])
        return time.perf_counter() - began


async def batch_turns(work: pathlib.Path, rounds: int, pause: float) -> bool:
    """Print the comparison; whether the two ways left equal trees."""
    times: dict[bool, list[float]] = {True: [], False: []}
    equal = True
    for rnd in range(rounds):
        trees = {}
        for batch in (rnd % 2 == 0, rnd % 2 != 0):  # alternate which goes first
            root = work / f"c-{rnd}-{'batch' if batch else 'serial'}"
            times[batch].append(await one_turn(root, batch, pause))
            trees[batch] = snapshot(root)
        expected = all(
            trees[True][f"src/m{i}.py"].startswith(f"VALUE = {i + 100}\n".encode())
            for i in range(EDITED)
        )
        equal = equal and trees[True] == trees[False] and expected
    serial, batched = statistics.median(times[False]), statistics.median(times[True])
    print(
        f"(c) One turn: {EDITED} Edits of different files and {COMMANDS} commands "
        f"(sleep {pause:g} s, wc); median of {rounds} rounds"
    )
    print(f"  one call at a time  {serial * 1e3:>8.1f} ms")
    print(f"  one Batch call      {batched * 1e3:>8.1f} ms   ({serial / batched:.2f}x faster)")
    print(f"  final trees equal, every edit in: {'yes' if equal else 'NO'}")
    return equal


def toolkernel_missing() -> str | None:
    probe = subprocess.run(
        [*TOOLKERNEL, "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    if probe.returncode != 0:
        return f"python -m toolkernel mcp does not start: {probe.stderr.strip()[-300:]}"
    return None


async def run(options: argparse.Namespace, work: pathlib.Path) -> int:
    quick = options.quick
    modules: pathlib.Path | None = None
    try:
        modules = await anyio.to_thread.run_sync(install)
    except NodePackagesUnavailable as exc:
        print(f"(a) and (b) skipped: {exc}")
    ok = True
    began = time.perf_counter()
    if modules is not None:
        reference = [str(modules / ".bin" / "mcp-server-filesystem")]
        (work / "a").mkdir()
        await latency(work / "a", reference, count=20 if quick else 100, rounds=2 if quick else 10)
        print(f"  ({time.perf_counter() - began:.0f} s)")
        began = time.perf_counter()
        counts = (2, 8, 32)
        ok = await lost_edits(work, reference, modules, counts, edits=2 if quick else 10)
        print(f"  ({time.perf_counter() - began:.0f} s)")
        began = time.perf_counter()
    rounds = 2 if quick else 10
    ok = await batch_turns(work, rounds, pause=0.05 if quick else 0.2) and ok
    print(f"  ({time.perf_counter() - began:.0f} s)")
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer calls and rounds")
    options = parser.parse_args(argv)
    node = shutil.which("node")
    node_version = "none"
    if node is not None:
        node_version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    print(
        f"Python {platform.python_version()}, mcp {importlib.metadata.version('mcp')}, "
        f"node {node_version.strip()}, {os.cpu_count()} CPUs"
    )
    if options.quick:
        print("Smoke run: too few calls for stable figures; run without --quick to compare.")
    why_not = toolkernel_missing()
    if why_not is not None:
        print(f"Skipped: {why_not}")
        return 0
    failures: Sequence[BaseException] = ()
    try:
        with tempfile.TemporaryDirectory(prefix="toolkernel-mcp-bench-") as directory:
            status = anyio.run(run, options, pathlib.Path(directory).resolve())
    except* Failed as group:  # the SDK's task groups wrap what a session's block raised
        failures = group.exceptions
    for exc in failures:
        print(f"FAILED: {exc}")
    return 1 if failures else status


if __name__ == "__main__":
    sys.exit(main())

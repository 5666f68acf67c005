"""Race freedom on real files: running batches concurrently gives what running them in order gives.

The workload is trio's own sources, copied twice. Thousands of seeded-random Edit, Read and Grep
calls, in batches, run through one kernel concurrently on the first copy, and one at a time, in
the same order, on the second. If the kernel ever let two conflicting calls overlap, or reordered
them, an edit would be lost or a read would see a different state: the trees or some result would
differ.
"""

from __future__ import annotations

import collections
import os
import pathlib
import random
import re
import shutil
from typing import Any

import anyio
import pytest
import trio

import toolkernel as tk
from toolkernel.tools import builtin_tools

SEED = 20240601
FILES = 110
CALLS = 2200
# Small subtrees, since a Grep reads every file below its path; now and then the whole tree.
GREP_DIRECTORIES = ["_tools", "testing", "_subprocess_platform", "_core/_tests/type_tests"]
GREP_PATTERNS = [r"tk-marker-\d+", r"^\s*def \w+\(", r"^import \w+", r"_tk\d+\b", r"await trio\."]


def copy_python_sources(target: pathlib.Path) -> pathlib.Path:
    source = pathlib.Path(trio.__file__).parent

    def ignore(directory: str, names: list[str]) -> list[str]:
        return [
            n
            for n in names
            if n == "__pycache__"
            or (not n.endswith(".py") and not os.path.isdir(os.path.join(directory, n)))
        ]

    shutil.copytree(source, target, ignore=ignore)
    return target


def tree_contents(root: pathlib.Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def make_batches(root: pathlib.Path, rng: random.Random) -> list[list[tk.ToolCall]]:
    """Seeded random batches of Edit, Read and Grep calls over the sources under ``root``."""
    everything = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))
    picked = sorted(rng.sample(everything, FILES))
    hot = picked[:: len(picked) // 8]  # a few files many calls go to, so edits meet in batches
    unique_lines: dict[str, list[str]] = {}
    tokens: dict[str, list[str]] = {}
    for name in picked:
        text = (root / name).read_text()
        lines = [line for line in text.splitlines() if len(line.strip()) >= 10]
        unique_lines[name] = [line for line in lines if text.count(line) == 1]
        counts = collections.Counter(re.findall(r"\b[a-z][a-z_]{3,}\b", text))
        tokens[name] = sorted(t for t, n in counts.items() if n >= 2)

    batches: list[list[tk.ToolCall]] = []
    number = 0
    while number < CALLS:
        batch = []
        for _ in range(rng.randint(5, 40)):
            number += 1
            call_id = f"c{number}"
            name = rng.choice(hot) if rng.random() < 0.35 else rng.choice(picked)
            kind = rng.random()
            if kind < 0.45 and unique_lines[name]:
                line = rng.choice(unique_lines[name])
                arguments: dict[str, Any] = {
                    "file_path": name,
                    "old_string": line,
                    "new_string": f"{line}  # tk-marker-{number}",
                }
                batch.append(tk.ToolCall(call_id, "Edit", arguments))
            elif kind < 0.52 and tokens[name]:
                token = rng.choice(tokens[name])
                arguments = {
                    "file_path": name,
                    "old_string": token,
                    "new_string": f"{token}_tk{number}",
                    "replace_all": True,
                }
                batch.append(tk.ToolCall(call_id, "Edit", arguments))
            elif kind < 0.92:
                arguments = {"file_path": name}
                if rng.random() < 0.6:
                    arguments["offset"] = rng.randint(1, 400)
                    arguments["limit"] = rng.randint(1, 60)
                batch.append(tk.ToolCall(call_id, "Read", arguments))
            else:
                directory = rng.choice(GREP_DIRECTORIES) if rng.random() < 0.97 else "."
                arguments = {
                    "pattern": rng.choice(GREP_PATTERNS),
                    "path": directory,
                    "output_mode": rng.choice(["files_with_matches", "content", "count"]),
                }
                if rng.random() < 0.3:
                    arguments["glob"] = rng.choice(["*.py", "test_*.py", "**/_*.py"])
                batch.append(tk.ToolCall(call_id, "Grep", arguments))
        batches.append(batch)
    return batches


def outcome(result: tk.ToolResult) -> tuple[tk.Status, Any, str | None]:
    return result.status, result.output, result.error


async def test_concurrent_batches_end_like_the_same_calls_in_order(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fsync makes a write durable across a power cut, which is not what this test is about; on a
    # disk it costs milliseconds an edit, and there are thousands.
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    concurrent_root = copy_python_sources(tmp_path / "concurrent")
    serial_root = copy_python_sources(tmp_path / "serial")
    original = tree_contents(serial_root)
    batches = make_batches(serial_root, random.Random(SEED))
    calls = [call for batch in batches for call in batch]
    assert len(calls) >= 2000
    touched = {c.arguments["file_path"] for c in calls if "file_path" in c.arguments}  # type: ignore[operator]
    assert len(touched) >= 100
    # Some batches edit one file more than once: those edits must not be lost or reordered.
    same_file_edits = sum(
        1
        for batch in batches
        for n in collections.Counter(
            c.arguments["file_path"]  # type: ignore[index]
            for c in batch
            if c.name == "Edit"
        ).values()
        if n > 1
    )
    assert same_file_edits >= 20

    running = 0
    most_running = 0

    def watch(event: tk.CallEvent) -> None:
        nonlocal running, most_running
        if isinstance(event, tk.kernel.CallStarted):
            running += 1
            most_running = max(most_running, running)
        elif isinstance(event, tk.kernel.CallFinished) and event.result.started_at is not None:
            running -= 1

    with anyio.fail_after(120):
        concurrent: list[tk.ToolResult] = []
        async with tk.open_kernel(builtin_tools(), root=concurrent_root) as kernel:
            kernel.add_listener(watch)
            for batch in batches:
                concurrent.extend(await kernel.run(batch))

        serial: list[tk.ToolResult] = []
        async with tk.open_kernel(builtin_tools(), root=serial_root) as kernel:
            for call in calls:
                serial.extend(await kernel.run([call]))

    assert running == 0
    assert most_running > 1, "no two calls ever ran at once: nothing was tested"
    differing_calls = [
        f"{call.id} {call.name} {call.arguments}: {mine.status.name} vs {reference.status.name}"
        for call, mine, reference in zip(calls, concurrent, serial, strict=True)
        if outcome(mine) != outcome(reference)
    ]
    assert not differing_calls, (
        f"{len(differing_calls)} calls ended differently: {differing_calls[:3]}"
    )
    final = tree_contents(concurrent_root)
    expected = tree_contents(serial_root)
    differing_files = sorted(
        n for n in final.keys() | expected.keys() if final.get(n) != expected.get(n)
    )
    assert not differing_files
    assert not [name for name in final if name.endswith(".tktmp")]

    # The workload did real work: most edits applied, and the tree changed.
    statuses = collections.Counter((c.name, r.status) for c, r in zip(calls, serial, strict=True))
    assert statuses["Edit", tk.Status.OK] > 0.5 * (
        statuses["Edit", tk.Status.OK] + statuses["Edit", tk.Status.ERROR]
    )
    assert statuses["Grep", tk.Status.OK] > 0
    assert statuses["Read", tk.Status.OK] > 0
    assert final != original

"""``assert_serializable``: the calls run through the kernel end as they do one at a time.

The kernel promises that a batch ends exactly as its calls would, run one by one in emission
order: conflicting calls never overlap and keep their order, so only calls that cannot see each
other run together. That holds only if each tool declares everything it touches. A tool that
declares a shared lease and writes, or does I/O behind ``ctx.fs`` (``open()``, a subprocess),
can lose an update when two of its calls run together: the final files, or what a call
returned, then differ from the one-by-one run. This module runs both and compares.

Both runs use fresh workspaces made by ``make_root()``, and a :class:`Recorder` watches the
kernel's run, so what :func:`check_race_free` finds is reported too.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import pathlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import anyio
import attrs
import sniffio

from .._open import open_kernel
from ..kernel import KernelTool, ToolCall, ToolResult
from ._clock import (
    VirtualClockEventLoop,
    hold_virtual_time_for_threads,
    real_time_for_processes,
    virtual_clock,
)
from ._race import check_race_free
from ._recorder import Recorder

__all__ = ["assert_serializable", "check_serializable", "Tree", "tree_of"]

Tools = Iterable[KernelTool] | Callable[[], Iterable[KernelTool]]
RootMaker = Callable[[], "str | os.PathLike[str] | contextlib.AbstractContextManager[Any]"]
Calls = Sequence[ToolCall] | Sequence[Sequence[ToolCall]]

DIRECTORY = "(a directory)"


Tree = dict[str, "bytes | str"]
"""A workspace's content: each path (POSIX, relative to the root) mapped to a file's bytes,
``"(a directory)"``, or ``"-> target"`` for a symbolic link."""


def tree_of(root: str | os.PathLike[str]) -> Tree:
    """Everything under ``root``, without following links."""
    top = pathlib.Path(root)
    found: Tree = {}
    for path in sorted(top.rglob("*")):
        name = path.relative_to(top).as_posix()
        if path.is_symlink():
            found[name] = f"-> {os.readlink(path)}"
        elif path.is_dir():
            found[name] = DIRECTORY
        elif path.is_file():
            found[name] = path.read_bytes()
    return found


def _batches(calls: Calls) -> list[list[ToolCall]]:
    items: list[Any] = list(calls)
    if all(isinstance(item, ToolCall) for item in items):
        return [items] if items else []
    return [list(batch) for batch in items]


def _outcome(result: ToolResult) -> tuple[Any, ...]:
    return (result.status, result.output, result.error)


@attrs.frozen
class _Run:
    results: tuple[ToolResult, ...]
    tree: Tree
    violations: tuple[str, ...]


async def _run(
    tools: Tools,
    batches: list[list[ToolCall]],
    make_root: RootMaker,
    one_by_one: bool,
    options: Mapping[str, Any],
) -> _Run:
    fresh = list(tools() if callable(tools) and not isinstance(tools, Iterable) else tools)
    with contextlib.ExitStack() as stack:
        made = make_root()
        # A path is a directory (``pathlib.Path`` is a context manager too, a deprecated one).
        if isinstance(made, str | os.PathLike):
            root: str | os.PathLike[str] = made
        else:
            root = stack.enter_context(made)
        recorder = Recorder()
        results: list[ToolResult] = []
        async with open_kernel(fresh, root=root, **options) as kernel:
            kernel.add_listener(recorder)
            for batch in batches:
                if one_by_one:
                    for call in batch:
                        results += await kernel.run([call])
                else:
                    results += await kernel.run(batch)
        violations = () if one_by_one else tuple(map(str, check_race_free(recorder.recording)))
        spellings = _root_spellings(root)
        results = [_without_root(result, spellings) for result in results]
        return _Run(tuple(results), tree_of(root), violations)


ROOT_PLACEHOLDER = "<root>"
"""What the workspace's own directory reads as in compared results: each run has its own."""


def _root_spellings(root: str | os.PathLike[str]) -> list[str]:
    spelled = os.fspath(root)
    return sorted({spelled, os.path.realpath(spelled), os.path.abspath(spelled)}, key=len)[::-1]


def _without_root(result: ToolResult, spellings: list[str]) -> ToolResult:
    """``result`` with every mention of its run's root directory replaced by ``<root>``, so a
    message naming a file (``No such file: /tmp/x1/a``) reads alike in both runs."""

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            for spelling in spellings:
                value = value.replace(spelling, ROOT_PLACEHOLDER)
            return value
        if type(value) in (list, tuple):
            return type(value)(scrub(item) for item in value)
        if type(value) is dict:
            return {scrub(key): scrub(item) for key, item in value.items()}
        return value

    output, error = scrub(result.output), scrub(result.error)
    if output == result.output and error == result.error:
        return result
    return attrs.evolve(result, output=output, error=error)


def _show(value: object, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe_result(result: ToolResult) -> str:
    if result.ok:
        return f"OK {_show(result.output)}"
    return f"{result.status.name} {_show(result.error)}"


def _tree_diff(serial: Tree, kernel: Tree) -> list[str]:
    lines: list[str] = []
    for name in sorted(serial.keys() | kernel.keys()):
        before, after = serial.get(name), kernel.get(name)
        if before == after:
            continue
        if before is None:
            lines.append(f"  {name}: only after the kernel's run")
        elif after is None:
            lines.append(f"  {name}: only after the one-by-one run")
        elif isinstance(before, bytes) and isinstance(after, bytes):
            try:
                old, new = before.decode(), after.decode()
            except UnicodeDecodeError:
                lines.append(f"  {name}: the bytes differ ({len(before)} and {len(after)} bytes)")
                continue
            diff = difflib.unified_diff(
                old.splitlines(),
                new.splitlines(),
                fromfile="one by one",
                tofile="through the kernel",
                lineterm="",
                n=1,
            )
            lines.append(f"  {name}:")
            lines.extend(f"    {line}" for line in list(diff)[:40])
        else:
            lines.append(f"  {name}: {_show(before)} one by one, {_show(after)} through the kernel")
    return lines


def _compare(
    batches: list[list[ToolCall]],
    kernel: _Run,
    serial: _Run,
    outcome: Callable[[ToolResult], object],
) -> list[str]:
    """The differences, as lines of a report; empty if none."""
    calls = [call for batch in batches for call in batch]
    lines: list[str] = []
    differing = [
        (call, mine, theirs)
        for call, mine, theirs in zip(calls, kernel.results, serial.results, strict=True)
        if outcome(mine) != outcome(theirs)
    ]
    if differing:
        lines.append("calls that ended differently:")
        for call, mine, theirs in differing:
            lines.append(f"  {call.id} ({call.name} {_show(call.arguments, 80)}):")
            lines.append(f"    through the kernel: {_describe_result(mine)}")
            lines.append(f"    one by one:         {_describe_result(theirs)}")
    tree = _tree_diff(serial.tree, kernel.tree)
    if tree:
        lines.append("the final trees differ:")
        lines.extend(tree)
    if kernel.violations:
        lines.append("races in the kernel's run (check_race_free):")
        lines.extend(f"  {violation}" for violation in kernel.violations)
    if lines:
        listing = [
            f"  batch {number}: "
            + "; ".join(f"{c.id} {c.name} {_show(c.arguments, 60)}" for c in batch)
            for number, batch in enumerate(batches, 1)
        ]
        lines[:0] = [
            "run through the kernel, the calls did not end as they do one at a time:",
            *listing,
        ]
    return lines


async def check_serializable(
    tools: Tools,
    calls: Calls,
    make_root: RootMaker,
    *,
    max_concurrency: int | None = None,
    pools: Mapping[str, int] | None = None,
    outcome: Callable[[ToolResult], object] = _outcome,
) -> list[str]:
    """Run ``calls`` through a kernel and one at a time; return the differences (as lines of a
    report), or an empty list if both ended the same. See :func:`assert_serializable`.

    Runs on the caller's event loop and clock: under a test's virtual clock, durations cost
    nothing.
    """
    batches = _batches(calls)
    options: dict[str, Any] = {"max_concurrency": max_concurrency, "pools": pools}
    kernel = await _run(tools, batches, make_root, False, options)
    serial = await _run(tools, batches, make_root, True, options)
    return _compare(batches, kernel, serial, outcome)


def assert_serializable(
    tools: Tools,
    calls: Calls,
    make_root: RootMaker,
    *,
    max_concurrency: int | None = None,
    pools: Mapping[str, int] | None = None,
    outcome: Callable[[ToolResult], object] = _outcome,
    backend: Literal["trio", "asyncio"] = "trio",
    timeout: float = 24 * 3600.0,
) -> None:
    """Run ``calls`` through a kernel, and again one at a time in order, each run on a fresh
    workspace from ``make_root()``; raise ``AssertionError`` with a readable diff if the final
    trees or the calls' outcomes differ, or if the kernel's run had a race.

    ::

        @given(batches(...))
        def test_my_tools_are_race_free(batch):
            assert_serializable(my_tools, batch.calls, make_root)

    - ``tools``: the tools, or a function returning fresh ones (for tools that keep state,
      such as ``TodoWrite``: each run then gets its own).
    - ``calls``: one batch (a list of ``ToolCall``), or a list of batches run one after the
      other.
    - ``make_root``: makes a fresh workspace each time it is called, and returns its directory,
      or a context manager that gives it and cleans it up (``tempfile.TemporaryDirectory()``
      with the files written in).
    - ``outcome``: what of a result must match (default: status, output and error message).
    - ``max_concurrency``, ``pools``: as for ``open_kernel``.

    It runs its own event loop (``backend``) on virtual time (:func:`virtual_clock`, or
    :class:`VirtualClockEventLoop`), so durations cost nothing, the clock stands still while
    ``ctx.fs`` works in a thread, and it moves at the real rate while a child process (a Bash
    command) works; ``timeout`` (virtual seconds) fails a run that hangs.
    In an async test, ``await check_serializable(...)`` instead.
    """
    try:
        running = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        running = None
    if running is not None:
        raise RuntimeError(
            f"assert_serializable runs its own event loop, and {running} already runs in this "
            f"thread; in an async test, use `lines = await check_serializable(...)` and "
            f"`assert not lines, '\\n'.join(lines)`"
        )
    batches = _batches(calls)

    async def main() -> list[str]:
        await hold_virtual_time_for_threads()
        await real_time_for_processes()  # a Bash command takes the time it really takes
        with anyio.fail_after(timeout):
            return await check_serializable(
                tools,
                batches,
                make_root,
                max_concurrency=max_concurrency,
                pools=pools,
                outcome=outcome,
            )

    lines = anyio.run(main, backend=backend, backend_options=_virtual_time(backend))
    if lines:
        raise AssertionError("\n".join(lines))


def _virtual_time(backend: str) -> dict[str, Any]:
    if backend == "trio":
        return {"clock": virtual_clock()}
    return {"loop_factory": VirtualClockEventLoop}

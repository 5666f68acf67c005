"""``FakeTool``: a tool for tests that takes the time it is told, fails when it is told, and
declares what it is told.

Every call takes its ``duration`` on the running loop's clock (``anyio.sleep``: instantly, and
exactly, under ``MockClock`` or ``VirtualClockEventLoop``) and may be scripted to fail at its
start or at its end. When the kernel has a workspace, a fake also does the file I/O its claims
describe, through ``ctx.fs``: it reads each of its ``paths`` when it starts and, if it writes,
appends a line with its call id to each of them when it ends. So the order in which writers ran
shows in the files, and what a reader saw shows in its output: running a batch through the
kernel and one call at a time must give the same files and outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import anyio

from .._errors import ToolError
from ..kernel import ToolContext
from ..locks import Claim
from ..tools import Tool

__all__ = ["FakeTool", "FakeToolError"]


class FakeToolError(ToolError):
    """What a :class:`FakeTool` raises when a call is scripted to fail."""


class FakeTool(Tool):
    """A tool for tests: scripted durations and failures, declared claims.

    ::

        read = FakeTool("read", reads=True)          # shared lease on each of its paths
        edit = FakeTool("edit", writes=True)         # exclusive lease on each of its paths
        tap = FakeTool("tap", claims=[tk.exclusive(tk.device("phone"))])
        sync = FakeTool("sync")                       # declares nothing: every call a barrier

        ToolCall("c1", "edit", {"paths": ["a.txt"], "duration": 2, "fail": "end"})

    A call's arguments, all optional: ``paths`` (a list of workspace paths), ``duration``
    (seconds; default: the tool's ``duration``), ``fail`` (``"start"``: raise
    :class:`FakeToolError` at once; ``"end"``: after its duration, before it writes).

    Claims: ``reads=True`` takes a shared lease on each path, ``writes=True`` an exclusive one;
    ``claims`` adds more, as a list or a function of the parsed arguments. With none of them
    the tool declares nothing and each call is a barrier (exclusive on everything), as with
    ``@tool``. With a workspace (``open_kernel(root=...)``) it reads its paths at its start
    (its output maps each path to its content then, or None if missing) and, with
    ``writes=True``, appends ``"<call id>\\n"`` to each at its end; ``touch_files=False`` turns
    the I/O off.
    """

    def __init__(
        self,
        name: str,
        *,
        reads: bool = False,
        writes: bool = False,
        claims: Iterable[Claim] | Callable[[Mapping[str, Any]], Iterable[Claim]] | None = None,
        duration: float = 1.0,
        touch_files: bool = True,
        wait_timeout: float | None = None,
        run_timeout: float | None = None,
    ) -> None:
        if claims is not None and not callable(claims):
            fixed = tuple(claims)
            claims = lambda arguments: fixed  # noqa: E731 - the same claims for every call
        self.writes_files = writes
        self.declares_nothing = not (reads or writes) and claims is None
        """True if a call of it is a barrier (it declared no claims at all)."""
        self.duration = duration
        self.touch_files = touch_files
        super().__init__(
            name=name,
            description=f"A fake tool for tests ({name}).",
            reads=["paths"] if reads and not writes else [],
            writes=["paths"] if writes else [],
            claims=claims,
            wait_timeout=wait_timeout,
            run_timeout=run_timeout,
        )

    async def run(  # type: ignore[override]
        self,
        ctx: ToolContext,
        paths: list[str] | None = None,
        duration: float | None = None,
        fail: Literal["start", "end"] | None = None,
    ) -> dict[str, str | None] | None:
        """Take ``duration`` seconds; read (and, if it writes, append to) ``paths``."""
        if fail == "start":
            raise FakeToolError(f"{self.name} call {ctx.call_id} failed at its start, as scripted")
        # Without a workspace (NoWorkspaceError, an AttributeError) there are no files to touch.
        fs = getattr(ctx, "fs", None) if self.touch_files else None
        seen: dict[str, str | None] | None = None
        if fs is not None:
            seen = {}
            for path in paths or ():
                try:
                    seen[path] = await fs.read_text(path)
                except FileNotFoundError:
                    seen[path] = None
        await anyio.sleep(self.duration if duration is None else duration)
        if fail == "end":
            raise FakeToolError(f"{self.name} call {ctx.call_id} failed at its end, as scripted")
        if fs is not None and self.writes_files:
            assert seen is not None
            for path in paths or ():
                await fs.write_text(path, (seen[path] or "") + f"{ctx.call_id}\n", parents=True)
        return seen

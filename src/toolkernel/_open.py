"""``open_kernel``: a kernel wired to a workspace, the way applications use it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from .kernel import Kernel, KernelTool, open_kernel_core
from .locks import Claim, Path
from .tools import FileAccess, Workspace

__all__ = ["open_kernel", "WorkspaceEnvironment"]


class WorkspaceEnvironment:
    """Adapts a :class:`Workspace` to what the kernel needs: keys, and checked file access."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def key(self, raw: str) -> Path:
        return self.workspace.key(raw)

    def file_access(self, claims: Sequence[Claim]) -> FileAccess:
        return FileAccess(self.workspace, claims)


@asynccontextmanager
async def open_kernel(
    tools: Iterable[KernelTool] = (),
    root: str | os.PathLike[str] | Workspace | None = None,
    **options: Any,
) -> AsyncIterator[Kernel]:
    """Open a kernel that runs ``tools``; with ``root``, tools get ``ctx.fs`` inside that root.

    ::

        async with open_kernel(tools=[read_file, edit_file], root=".", max_concurrency=16) as k:
            results = await k.run([ToolCall("c1", "read_file", {"path": "a.txt"})])

    Options: ``max_concurrency``, ``pools``, ``policy``, ``approver``, ``approval_timeout``,
    ``before_hooks``, ``after_hooks``, ``max_depth``, ``wait_timeout``, ``run_timeout``.
    Leaving the block cancels whatever still runs; every call still gets its result.
    """
    if root is not None:
        workspace = root if isinstance(root, Workspace) else Workspace(root)
        options["environment"] = WorkspaceEnvironment(workspace)
    async with open_kernel_core(tools, **options) as kernel:
        yield kernel

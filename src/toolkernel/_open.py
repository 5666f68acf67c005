"""``open_kernel``: a kernel wired to a workspace, the way applications use it."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shlex
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, NoReturn, ParamSpec

from ._errors import KernelNotOpenError
from .kernel import (
    AfterHook,
    Approver,
    BeforeHook,
    Kernel,
    KernelOptions,
    KernelTool,
    Policy,
    open_kernel_core,
)
from .kernel._policy import allow_all
from .leases import Fence, default_socket_path, find_service, parse_leases
from .leases._connect import open_leases
from .locks import Claim
from .tools import FileAccess, FileAccessed, FileView, Workspace

__all__ = ["open_kernel", "WorkspaceEnvironment"]

P = ParamSpec("P")

_log = logging.getLogger("toolkernel.leases")

_USE_ASYNC_WITH = "use `async with tk.open_kernel(...) as kernel:`"


class KernelOpening(AbstractAsyncContextManager[Kernel]):
    """What ``open_kernel(...)`` returns: the kernel, once entered with ``async with``.

    Entering and leaving are those of the context manager it wraps, exceptions and all. Used any
    other way (awaited, entered with a plain ``with``, asked for ``.run``), it raises
    :class:`KernelNotOpenError` saying to use ``async with``, rather than an error about a
    class of ``contextlib``.
    """

    __slots__ = ("_manager",)

    def __init__(self, manager: AbstractAsyncContextManager[Kernel]) -> None:
        self._manager = manager

    async def __aenter__(self) -> Kernel:
        return await self._manager.__aenter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        return await self._manager.__aexit__(exc_type, exc, traceback)

    def __repr__(self) -> str:
        return "<open_kernel(...), not yet open: enter it with `async with`>"

    # Hidden from type checkers, so that they flag these uses before they run.
    if not TYPE_CHECKING:

        def __await__(self) -> NoReturn:
            raise KernelNotOpenError(
                f"open_kernel(...) can't be awaited: it opens a kernel for the length of a "
                f"block and closes it after; {_USE_ASYNC_WITH}"
            )

        def __enter__(self) -> NoReturn:
            raise KernelNotOpenError(
                f"open_kernel(...) needs `async with`, not `with`: {_USE_ASYNC_WITH} inside "
                f"an async function (from synchronous code, start one with trio.run or "
                f"asyncio.run)"
            )

        def __exit__(self, *exc_info: object) -> None:  # with looks it up before __enter__ runs
            return None

        def __getattr__(self, name: str) -> NoReturn:
            if name.startswith("__"):  # copy, pickle and inspect probe for these
                raise AttributeError(name)
            raise KernelNotOpenError(
                f"open_kernel(...) is not the kernel yet, so it has no {name!r}: "
                f"{_USE_ASYNC_WITH} and then use kernel.{name}"
            )


def _opened_by_async_with(
    function: Callable[P, AsyncIterator[Kernel]],
) -> Callable[P, AbstractAsyncContextManager[Kernel]]:
    """As ``asynccontextmanager``, returning a :class:`KernelOpening` that explains misuse."""
    manager = asynccontextmanager(function)

    @functools.wraps(function)
    def opening(*args: P.args, **kwargs: P.kwargs) -> AbstractAsyncContextManager[Kernel]:
        return KernelOpening(manager(*args, **kwargs))

    return opening


class WorkspaceEnvironment:
    """Adapts a :class:`Workspace` to what the kernel needs: keys, and checked file access.

    It keeps each agent's view of the files (``toolkernel.tools.FileView``): one for the
    kernel's own calls, one for each ``ToolCall.agent`` named, made on first use.
    """

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.key = workspace.key  # bound once: the kernel keys every path of every call
        self.views: dict[str | None, FileView] = {}

    def file_access(
        self,
        claims: Sequence[Claim],
        call_id: str,
        *,
        observer: Callable[[FileAccessed], None] | None = None,
        agent: str | None = None,
        read_first: bool = False,
        fence: Fence | None = None,
        before_grant: bool = False,
    ) -> FileAccess:
        view = self.views.get(agent)
        if view is None:
            view = self.views[agent] = FileView()
        return FileAccess(
            self.workspace,
            claims,
            call_id=call_id,
            observer=observer,
            view=view,
            read_first=read_first,
            fence=fence,
            before_grant=before_grant,
        )


@_opened_by_async_with
async def open_kernel(
    tools: Iterable[KernelTool] = (),
    root: str | os.PathLike[str] | Workspace | None = None,
    *,
    max_concurrency: int | None = None,
    pools: Mapping[str, int] | None = None,
    policy: Policy = allow_all,
    approver: Approver | None = None,
    approval_timeout: float | None = 300.0,
    before_hooks: Sequence[BeforeHook] = (),
    after_hooks: Sequence[AfterHook] = (),
    max_depth: int = 8,
    wait_timeout: float | None = None,
    run_timeout: float | None = None,
    leases: str | None = None,
) -> AsyncIterator[Kernel]:
    """Open a kernel that runs ``tools``; with ``root``, tools get ``ctx.fs`` inside that root.

    ::

        async with open_kernel(tools=[read_file, edit_file], root=".", max_concurrency=16) as k:
            results = await k.run([ToolCall("c1", "read_file", {"path": "a.txt"})])

    Options:

    - ``max_concurrency``: at most this many top-level calls run at once (None: no limit).
    - ``pools``: capacities of counted resources tools may claim (``{"network": 5}``).
    - ``policy``: decides, before any lease is requested, whether a call may run (``ALLOW``,
      ``DENY``, or ``ASK`` the ``approver``); ``approval_timeout`` bounds the wait for an answer
      (seconds; None waits for ever).
    - ``before_hooks`` / ``after_hooks``: may rewrite a call's arguments, block it, supply its
      result, or rewrite its result.
    - ``max_depth``: how deep ``ctx.call`` may nest.
    - ``wait_timeout`` / ``run_timeout``: default limits (seconds, None for none) on waiting for
      leases and on running (the run limit covers the tool and its after-hooks together);
      tools and calls may set their own.
    - ``leases``: where leases are decided. None (the default) keeps them in this process.
      ``"unix:PATH"`` shares them with every process using the lease service at ``PATH``
      (``python -m toolkernel serve --root DIR``), ``"etcd://host:port"`` with every process
      using that etcd cluster: a granted call then also waits for its claims there before its
      tool starts, so calls of several agents on one tree never overlap where they conflict.
      ``"auto"`` finds the lease service serving ``root`` (one started with ``serve --root``
      and no ``--socket``), and keeps leases in-process if none runs, saying so with a warning
      on the ``toolkernel.leases`` logger. Needs ``root``, the same directory for every
      process. ``kernel.leases`` says which is in use: ``"in-process"`` or the URL.

    A bad option raises ``TypeError`` or ``ValueError`` here, before anything runs. Leaving the
    block cancels whatever still runs; every call still gets its result.
    """
    options = KernelOptions(  # checks them all, before anything opens
        max_concurrency=max_concurrency,
        pools=pools,
        policy=policy,
        approver=approver,
        approval_timeout=approval_timeout,
        before_hooks=before_hooks,
        after_hooks=after_hooks,
        max_depth=max_depth,
        wait_timeout=wait_timeout,
        run_timeout=run_timeout,
    )
    if leases is not None:
        if root is None:
            raise ValueError("leases= needs a root: shared leases name paths in the workspace")
        if leases == "auto":
            leases = _found_service(root.root if isinstance(root, Workspace) else root)
        else:
            parse_leases(leases)  # a bad URL raises here, before anything opens
    environment = None
    owned: Workspace | None = None  # a workspace made here is closed here; a given one is not
    if root is not None:
        workspace = root if isinstance(root, Workspace) else Workspace(root)
        owned = None if workspace is root else workspace
        environment = WorkspaceEnvironment(workspace)
    with contextlib.closing(owned) if owned is not None else contextlib.nullcontext():
        if leases is None:
            async with open_kernel_core(tools, environment=environment, options=options) as k:
                yield k
            return
        assert environment is not None
        root_path = environment.workspace.root
        async with (
            open_leases(leases, root_path, pools=pools) as shared,
            open_kernel_core(
                tools, environment=environment, options=options, shared=shared, shared_at=leases
            ) as k,
        ):
            yield k


def _found_service(root: str | os.PathLike[str]) -> str | None:
    """``leases="auto"``: the URL of the service serving ``root``, or None for in-process
    leases; either way it is logged, the fall-back as a warning, since other processes' calls
    on the tree are then not ordered against this kernel's."""
    found = find_service(root)
    if found is not None:
        _log.info('leases="auto": this kernel shares its leases through %s', found)
        return found
    _log.warning(
        'leases="auto": no lease service serves %s (none listens at %s), so this kernel keeps '
        "its leases in-process: calls of other processes on the tree are not ordered against "
        "its calls. Start one with `python -m toolkernel serve --root %s` before opening the "
        "kernel, or open it with leases=None to keep them in-process without this message.",
        os.fspath(root),
        default_socket_path(root),
        shlex.quote(os.fspath(root)),
    )
    return None

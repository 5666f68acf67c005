"""What the kernel needs of the place calls run in (a ``Workspace``, adapted), as a protocol."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ..locks import Claim, Path
from ._files import FileSystem

__all__ = ["Environment"]


class Environment(Protocol):
    """Where calls run: how paths become keys, and what file access a call is given."""

    def key(self, raw: str) -> Path:
        """The canonical key of a path spelling; raises ``InvalidClaimError`` if refused."""
        ...

    def file_access(
        self,
        claims: Sequence[Claim],
        call_id: str,
        *,
        observer: Callable[[Any], None] | None = None,
        agent: str | None = None,
        read_first: bool = False,
        fence: Any = None,
        before_grant: bool = False,
    ) -> FileSystem:
        """The ``ctx.fs`` object for call ``call_id`` holding ``claims``. It must have a
        ``close()`` method: the kernel calls it when the call ends, and from then on every
        operation must fail.

        ``observer``, when given (only when a kernel listener watches file access), is to be
        called with a description of every access the object checks (``FileAccess`` passes a
        ``toolkernel.tools.FileAccessed``). An environment that can't report accesses may
        ignore it; the kernel passes it by keyword only when somebody watches.

        ``agent`` (``ToolCall.agent``) names whose view of the files the access keeps, and
        ``read_first`` (``ToolCall.read_first``) says the call comes from a model; the kernel
        passes each only when set.

        ``fence`` (a ``toolkernel.leases.Fence``), passed only when the kernel shares its
        leases with other processes, is the fence of the call's grant: the access must make
        every change visible through it, so a call whose grant was lost changes nothing.

        ``before_grant``, passed only when true, says the call runs ahead of its lease grant
        (``toolkernel.kernel.Ahead``): the access must refuse every write (the kernel asks for
        another once the call is granted)."""
        ...

"""What the kernel needs from a tool and from the place calls run in, as protocols.

The kernel knows nothing of functions, signatures or files: ``toolkernel.tools`` turns decorated
functions into objects of this shape, and a ``Workspace`` into an :class:`Environment`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..locks import Claim, Path

if TYPE_CHECKING:
    from ._context import ToolContext

__all__ = ["KernelTool", "Environment", "KeyFunction"]

KeyFunction = Callable[[str], Path]
"""Turns a path as a tool's argument spells it into its canonical lease key."""


@runtime_checkable
class KernelTool(Protocol):
    """A tool as the kernel sees it."""

    @property
    def name(self) -> str:
        """The name models call it by."""
        ...

    @property
    def wait_timeout(self) -> float | None:
        """Default limit, in seconds, on waiting for leases (None: no limit)."""
        ...

    @property
    def run_timeout(self) -> float | None:
        """Default limit, in seconds, on running (None: no limit)."""
        ...

    def parse_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate raw arguments; raise ``InvalidArgumentsError`` with a message for the model."""
        ...

    def claims(self, arguments: Mapping[str, Any], key: KeyFunction) -> Sequence[Claim] | None:
        """The claims a call with these (parsed) arguments needs; None means "not declared"
        (exclusive on everything), an empty sequence means "nothing at all"."""
        ...

    async def invoke(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> Any:
        """Run the tool. Its return value is the result's output."""
        ...


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
    ) -> Any:
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
        every change visible through it, so a call whose grant was lost changes nothing."""
        ...

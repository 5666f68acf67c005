"""What the kernel needs from a tool and from the place calls run in, as protocols.

The kernel knows nothing of functions, signatures or files: ``toolkernel.tools`` turns decorated
functions into objects of this shape, and a ``Workspace`` into an :class:`Environment`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..locks import Claim, Path

# Where calls run has a module of its own: the context a tool is given needs it, and this module
# names that context, so keeping both here would close a circle.
from ._environment import Environment as Environment

if TYPE_CHECKING:
    from ._context import ToolContext

__all__ = ["KernelTool", "Environment", "KeyFunction", "key_owner"]

KeyFunction = Callable[[str], Path]
"""Turns a path as a tool's argument spells it into its canonical lease key.

A kernel with a workspace passes its ``Workspace.key``, or a wrapper of it (one remembering
the keys of a batch, one noting what it was asked) that names what it wraps in
``__wrapped__``, as ``functools.wraps`` does: :func:`key_owner` finds the workspace through
them."""


def key_owner(key: KeyFunction) -> object | None:
    """The object whose method ``key`` is, through the wrappers that name what they wrap in
    ``__wrapped__`` (a kernel's key is its ``Workspace.key``, maybe wrapped); None for a plain
    function. A tool whose claims need the workspace itself (its root, its configuration) asks
    this, never ``key.__self__``, which a wrapper hides."""
    while True:
        wrapped = getattr(key, "__wrapped__", None)
        if wrapped is None:
            return getattr(key, "__self__", None)
        key = wrapped


@runtime_checkable
class KernelTool(Protocol):
    """A tool as the kernel sees it.

    One method is optional, so not part of the protocol: ``ahead(arguments, key) -> Ahead |
    None``. A tool that has it and answers an :class:`~toolkernel.kernel.Ahead` for a call
    lets the kernel start that call before its leases are granted, when nothing earlier can
    be changed by it (``toolkernel.kernel._ahead``); its tool then makes nothing visible
    before ``await ctx.wait_granted()`` returns (``ctx.fs`` refuses writes until then). The
    Bash tool in the sandbox has it (a command's writes land only when its change set is
    committed), and so have the tools that only read: Read, ListDir, Grep and Glob, and a
    tool declared ``@tool(ahead=True)``, whose result is held until the grant and whose run is
    made again, granted, if what it read changed meanwhile.
    """

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
        (exclusive on everything), an empty sequence means "nothing at all".

        A call that waited for its leases has its claims computed again before it runs (what
        its paths name may have changed meanwhile). A tool whose claims depend on nothing but
        the arguments and what ``key`` answers may say so with a true ``claims_follow_keys``
        attribute (``Tool`` does, unless a subclass overrides ``claims``): such a call is
        checked by keying the same spellings again instead. Without the attribute, ``claims``
        is asked again: a tool that reads the project to decide (the Bash tool) needs that."""
        ...

    async def invoke(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> Any:
        """Run the tool. Its return value is the result's output."""
        ...

"""Events the kernel emits about calls, in the order things happen, and the listener protocols
``Kernel.add_listener`` takes.

Within a batch, every call's ``CallQueued`` comes before any call's ``CallFinished``.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeAlias, runtime_checkable

import attrs

from ..locks import Claim
from ._call import ToolResult

__all__ = [
    "CallQueued",
    "CallBlocked",
    "CallStarted",
    "CallProgress",
    "CallFinished",
    "CallEvent",
    "KernelListener",
    "FileAccessListener",
    "LeaseListener",
]


# -- What ``Kernel.add_listener`` takes, as protocols a listener can be annotated and checked with
# A listener is any callable taking an event (:class:`KernelListener`); a plain function will do.
# It may also watch two things that are not events, by having a method for each:
#
# - :class:`FileAccessListener`: ``file_accessed(access)``, for every access a call makes
#   through ``ctx.fs`` (allowed or refused), called from the worker thread doing the I/O;
# - :class:`LeaseListener`: ``leases_returned(call_id)``, when a call's leases return before its
#   ``CallFinished`` (its after-hooks run in between).
#
# The kernel looks for these methods once, when the listener is added. A class that means to
# have them can say so by subclassing the protocols, so a type checker holds its methods to
# their signatures::
#
#     class Watcher(FileAccessListener, LeaseListener):
#         def __call__(self, event: CallEvent) -> None: ...
#         def file_accessed(self, access: FileAccessed) -> None: ...
#         def leases_returned(self, call_id: str) -> None: ...
#
# ``toolkernel.testing.Recorder`` is such a listener.
@runtime_checkable
class KernelListener(Protocol):
    """Called synchronously with every event of the kernel, in the task where it happens.

    A listener that raises is removed (and the error logged); it never breaks a call.
    """

    def __call__(self, event: CallEvent, /) -> None: ...


@runtime_checkable
class FileAccessListener(KernelListener, Protocol):
    """A listener that also watches every file access made through ``ctx.fs``."""

    def file_accessed(self, access: Any, /) -> None:
        """Called with a description of one access, allowed or refused (with a workspace, a
        ``toolkernel.tools.FileAccessed``), from the worker thread doing the I/O: it must be
        quick and thread-safe. Calls that started before the listener was added are not
        watched."""
        ...


@runtime_checkable
class LeaseListener(KernelListener, Protocol):
    """A listener that is also told when a call's leases return before its ``CallFinished``.

    It may also have a ``leases_granted(call_id)`` method: it is then told, in the call's own
    task, when a call that started ahead of its grant (its ``CallStarted`` says ``ahead``) has
    its leases, so what it holds runs from there (``toolkernel.testing.Recorder`` has it).
    """

    def leases_returned(self, call_id: str, /) -> None:
        """Called with a call's id when its leases return: a call gives them back when its tool
        ends, before its after-hooks run, and the next call on its files may start meanwhile.
        (Without after-hooks the two happen at once, and only ``CallFinished`` is given.)"""
        ...


# -- The events, in the order a call has them -----------------------------------------------------
@attrs.frozen
class CallQueued:
    """A call was admitted (or rejected at admission: a ``CallFinished`` follows)."""

    call_id: str
    name: str
    time: float
    claims: tuple[Claim, ...]
    """The canonical claims it will request (empty if admission failed)."""
    parent: str | None = None
    """For a call made by a tool through ``ctx.call``: the id of the call that made it. It
    runs inside its parent's leases, so the two may hold conflicting claims at once."""


@attrs.frozen
class CallBlocked:
    """A call asked for its leases and has to wait."""

    call_id: str
    name: str
    time: float
    waits_for: tuple[str, ...]
    """Ids of the calls it waits behind (holding, or earlier in line)."""
    resources: tuple[str, ...]
    """The contested resources, spelled for people."""


@attrs.frozen
class CallStarted:
    """A call's leases were granted and its tool began running (or, with ``ahead``, its
    tool began running ahead of its grant: ``toolkernel.kernel.Ahead``)."""

    call_id: str
    name: str
    time: float
    ahead: bool = False


@attrs.frozen
class CallProgress:
    """A running tool reported progress through ``ctx.progress``."""

    call_id: str
    name: str
    time: float
    message: str
    data: Any = None


@attrs.frozen
class CallFinished:
    """A call ended; ``result`` is what ``run`` returns for it."""

    call_id: str
    name: str
    time: float
    result: ToolResult


CallEvent: TypeAlias = CallQueued | CallBlocked | CallStarted | CallProgress | CallFinished

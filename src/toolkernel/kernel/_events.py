"""Events the kernel emits about calls, in the order things happen.

Within a batch, every call's ``CallQueued`` comes before any call's ``CallFinished``.
"""

from __future__ import annotations

from typing import Any, TypeAlias

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
]


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
    """A call's leases were granted and its tool began running."""

    call_id: str
    name: str
    time: float


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

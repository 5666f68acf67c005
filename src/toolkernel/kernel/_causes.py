"""Why a call ended early, as values: carried from where it is decided to where a message is
formatted (``_messages``), never parsed back out of one. Pure data."""

from __future__ import annotations

import enum
from typing import NamedTuple

from ._call import Status

__all__ = ["Why", "CancelReason", "RootCause", "ASKED", "OUT_OF_TIME"]


class Why(enum.Enum):
    """Who or what cancelled a call; the value is the message, formatted with the parent's id
    and tool name where it names them."""

    ASKED = "cancelled"
    CALLER_CANCELLED = "cancelled: the caller of run() was cancelled"
    STREAM_LEFT = "cancelled: the stream was left early"
    KERNEL_CLOSING = "cancelled: the kernel is closing"
    TASK_CANCELLED = "cancelled: the task running it was cancelled"
    WITH_PARENT = "cancelled with its parent call {call_id}"
    PARENT_ENDED = (
        "cancelled: its parent call {call_id} ({name}) ended first; "
        "a tool must await the calls it makes before it returns"
    )
    OUT_OF_TIME = "the time limit of its run() ran out"


class CancelReason(NamedTuple):
    """Why a call was cancelled: ``why``, and the parent call it names, if any."""

    why: Why
    call_id: str = ""
    name: str = ""

    def __str__(self) -> str:
        return self.why.value.format(call_id=self.call_id, name=self.name)


ASKED = CancelReason(Why.ASKED)
"""``handle.cancel()``, ``kernel.cancel(...)``, ``cancel_all()``: nobody said why."""

OUT_OF_TIME = CancelReason(Why.OUT_OF_TIME)
"""The calls a ``run(timeout=...)`` cuts short: they end TIMEOUT, not CANCELLED."""


class RootCause(NamedTuple):
    """The failure at the head of a chain of ``after=`` calls skipped one after another."""

    call_id: str
    name: str
    status: Status
    error: str | None

"""What the scheduler asks of the async layer: the value its operations return. Pure data.

The scheduler never calls into the async layer. Each of its operations that changes what runs
returns a list of actions, in the order it decided them, and the async layer (``_kernel.py``)
does them, as h11's connection returns the events and bytes its caller must act on:

- ``START``: a granted top-level call is RUNNING; spawn the task that runs its tool.
- ``PREPHASE``: a call's before-hooks or its approver must be awaited; spawn a task for that.
- ``INTERRUPT``: cancel the call; if a task of the async layer runs it (its hooks, its tool),
  cancel that task's scope and the task finishes it; if none does, finish it now, CANCELLED.
- ``WAKE``: a call was granted (a nested one, whose parent's task waits) or finished: wake
  whoever waits for it, and for its batch if that was the batch's last.
- ``CHANGED``: a call running ahead of its grant was told what an earlier call it conflicts
  with changed (a ``ChangedMeanwhile``): wake its tool if it waits for that
  (``ToolContext.wait_changed``).
- ``TIMER``: the earliest lease-wait deadline moved earlier: sleep until the new one.
- ``REVOKE``: a running call's leases are going (or its run ended, to go back in line): revoke
  what its tool was given (its ``ToolContext``), before anyone else can run on them.
- ``TELL``: give an event to the listeners (its payload a :class:`Telling`). An operation's
  events come ahead of its other actions, in the order decided; the async layer gives them
  once the operation has returned, and the events of operations a listener starts after
  those: a listener that cancels or submits calls starts a new operation on a settled
  scheduler, never one in the middle of another.

The async handles (cancel scopes, events) are the async layer's own, kept by it, not on the
records.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from ._events import CallEvent
    from ._record import CallRecord

__all__ = [
    "Act",
    "Action",
    "NO_ACTIONS",
    "START",
    "PREPHASE",
    "INTERRUPT",
    "WAKE",
    "CHANGED",
    "TIMER",
    "TELL",
    "REVOKE",
    "Telling",
]


class Act(enum.Enum):
    START = "start"
    PREPHASE = "prephase"
    INTERRUPT = "interrupt"
    WAKE = "wake"
    CHANGED = "changed"
    TIMER = "timer"
    TELL = "tell"
    REVOKE = "revoke"


# Module globals: on Python 3.11 ``Act.START`` goes through the enum metaclass (about 0.1 us).
START, PREPHASE, INTERRUPT = Act.START, Act.PREPHASE, Act.INTERRUPT
WAKE, CHANGED, TIMER, TELL, REVOKE = Act.WAKE, Act.CHANGED, Act.TIMER, Act.TELL, Act.REVOKE


class Telling(NamedTuple):
    """An event to give, and the call it is about (whose ``stream`` may listen too)."""

    record: CallRecord
    event: CallEvent


Action = tuple[Act, Any]
"""What to do, and to which call: a ``CallRecord``; None for ``TIMER``, a :class:`Telling` for
``TELL``. (``Any``, not that union: the async layer takes actions on every call's way through,
and telling a type checker which it is would cost a call each time.)"""

NO_ACTIONS: list[Action] = []
"""Returned when there is nothing to do (never appended to)."""

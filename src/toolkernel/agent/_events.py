"""What the agent loop reports while it runs, step by step.

:func:`~toolkernel.agent.run_agent` calls ``on_event`` with these, and with the kernel's own
events for the calls of each batch (``CallQueued``, ``CallBlocked``, ``CallStarted``,
``CallProgress``, ``CallFinished``), in the order things happen.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import attrs

from .._errors import ModelError
from ..kernel import CallEvent, ToolCall

__all__ = ["StepStarted", "ModelReplied", "ModelRetrying", "TodosUpdated", "AgentEvent"]


@attrs.frozen
class StepStarted:
    """The loop is asking the model for step ``step`` (1 for the first)."""

    step: int


@attrs.frozen
class ModelReplied:
    """The model answered: what it said, and the batch of calls it emitted (empty: it is done).

    ``calls`` are the kernel calls as they will run (ids, tool names, ``after=``)."""

    step: int
    text: str
    calls: tuple[ToolCall, ...]


@attrs.frozen
class ModelRetrying:
    """A model request failed transiently; the loop waits ``delay`` seconds and tries again
    (``attempt`` is the try about to be made: 2 for the first retry)."""

    step: int
    attempt: int
    delay: float
    error: ModelError = attrs.field(eq=False)


@attrs.frozen
class TodosUpdated:
    """A ``TodoWrite`` call succeeded: ``todos`` is the whole list now."""

    step: int
    call_id: str
    todos: tuple[Any, ...]


AgentEvent: TypeAlias = StepStarted | ModelReplied | ModelRetrying | TodosUpdated | CallEvent

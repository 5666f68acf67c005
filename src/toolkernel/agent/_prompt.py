"""The system-prompt paragraph that tells a model how to emit calls so they run well here."""

from __future__ import annotations

__all__ = ["CALLS_PROMPT"]

CALLS_PROMPT = (
    "Calling tools: put every tool call that does not need another call's result into the same "
    "message. They run at the same time, and calls that touch the same file still run one after "
    "the other, in the order you wrote them, so write them in the order they must happen. When "
    "you need to see a result before deciding what to do next, wait for it and call in your next "
    "message. When a call only needs another call of the same message to finish first, or uses "
    'its output as it is, give it the argument "depends_on": [N], where N is the position of '
    "that call in your message (1 for the first); it then runs once call N has finished, and is "
    "skipped if call N fails. Inside a string argument of such a call, ${N} stands for the "
    "output of call N."
)
"""Appended to the system prompt by :func:`~toolkernel.agent.run_agent` (``calls_prompt=``)."""

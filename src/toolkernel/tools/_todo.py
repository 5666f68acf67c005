"""The built-in TodoWrite tool: the session's todo list, kept on the tool object."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from ..kernel import ToolContext
from ..locks import Claim, device, exclusive
from ._declare import Tool

__all__ = ["TodoItem", "TodoWrite"]


class _TodoRequired(TypedDict):
    content: str
    status: Literal["pending", "in_progress", "completed"]


class TodoItem(_TodoRequired, total=False):
    activeForm: str
    id: str
    priority: str


class TodoWrite(Tool):
    """Replace the session's todo list (what is pending, in progress, completed)."""

    name = "TodoWrite"

    def __init__(self) -> None:
        super().__init__()
        self.todos: list[TodoItem] = []

    def declare(self, arguments: Mapping[str, Any]) -> list[Claim]:
        return [exclusive(device("todo"))]

    async def run(self, ctx: ToolContext, todos: list[TodoItem]) -> str:  # type: ignore[override]
        """Replace the todo list.

        Args:
            todos: The whole new list; each {content, status: pending|in_progress|completed}.
        """
        self.todos = list(todos)
        counts = {
            s: sum(1 for t in todos if t["status"] == s)
            for s in ("pending", "in_progress", "completed")
        }
        return (
            f"todo list updated: {counts['pending']} pending, {counts['in_progress']} in "
            f"progress, {counts['completed']} completed"
        )

"""The built-in coding tools, named and shaped like the tools models are trained on.

They live by kind: ``_file_tools`` (Read, Write, Edit, MultiEdit, ListDir, Move, Delete),
``_search`` (Glob, Grep), ``_bash`` (Bash), ``_todo`` (TodoWrite). This module hands them out.
"""

from __future__ import annotations

from ._bash import bash_tool
from ._declare import Tool
from ._file_tools import delete, edit, list_dir, move, multi_edit, read, write
from ._read_only import is_read_only_command
from ._search import glob, grep
from ._todo import TodoWrite

__all__ = ["builtin_tools", "is_read_only_command"]


def builtin_tools(bash: bool = False) -> list[Tool]:
    """The built-in coding tools (Bash only with ``bash=True``), ready for ``open_kernel``.

    Each call returns fresh tool objects, so a ``TodoWrite`` list belongs to one kernel.
    """
    tools: list[Tool] = [
        read,
        write,
        edit,
        multi_edit,
        glob,
        grep,
        list_dir,
        move,
        delete,
        TodoWrite(),
    ]
    if bash:
        tools.append(bash_tool)
    return tools

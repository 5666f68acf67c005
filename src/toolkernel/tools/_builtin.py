"""The built-in coding tools, named and shaped like the tools models are trained on.

They live by kind: ``_file_tools`` (Read, Write, Edit, MultiEdit, ListDir, Move, Delete),
``_search`` (Glob, Grep), ``_bash`` (Bash), ``_todo`` (TodoWrite). This module hands them out.
"""

from __future__ import annotations

from ._bash import bash_tool, make_bash_tool
from ._declare import Tool
from ._file_tools import delete, edit, list_dir, move, multi_edit, read, write
from ._read_only import is_read_only_command
from ._search import glob, grep
from ._todo import TodoWrite
from .shell import ShellRules

__all__ = ["builtin_tools", "is_read_only_command"]


def builtin_tools(bash: bool = False, *, shell_rules: ShellRules | None = None) -> list[Tool]:
    """The built-in coding tools (Bash only with ``bash=True``), ready for ``open_kernel``.

    ``shell_rules`` is the table Bash reads a command's claims from (default: the built-in
    rules); a project extends it with ``ShellRules.from_file("shell-rules.toml")`` or
    ``ShellRules.default().extended(...)``.

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
        tools.append(bash_tool if shell_rules is None else make_bash_tool(shell_rules))
    elif shell_rules is not None:
        raise TypeError("shell_rules= is for the Bash tool: pass bash=True with it")
    return tools

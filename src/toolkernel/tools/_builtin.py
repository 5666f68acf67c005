"""The built-in coding tools, named and shaped like the tools models are trained on.

They live by kind: ``_file_tools`` (Read, Write, Edit, MultiEdit, ListDir, Move, Delete),
``_search`` (Glob, Grep), ``_bash`` (Bash), ``_todo`` (TodoWrite). This module hands them out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._declare import Tool
from ._file_tools import delete, edit, list_dir, move, multi_edit, read, write
from ._search import glob, grep
from ._todo import TodoWrite

if TYPE_CHECKING:
    from ..shell import ShellRules

__all__ = ["builtin_tools"]


def builtin_tools(
    bash: bool = False,
    *,
    shell_rules: ShellRules | None = None,
    shell_writable: Sequence[str] = (),
) -> list[Tool]:
    """The built-in coding tools (Bash only with ``bash=True``), ready for ``open_kernel``.

    ``shell_rules`` is the table Bash reads a command's claims from (default: the built-in
    rules); a project extends it with ``ShellRules.from_file("shell-rules.toml")`` or
    ``ShellRules.default().extended(...)``. ``shell_writable``: directories outside the
    workspace Bash's commands may write in the sandbox, beside their temporary directory and
    the toolchains' caches.

    Each call returns fresh tool objects, so a ``TodoWrite`` list belongs to one kernel, and
    the Bash tool's ``statistics`` count that kernel's commands.

    Read, ListDir, Grep and Glob only read, so each runs ahead of its grant beside an earlier
    sandboxed command that has not committed, and again if its commit changed what it read
    (``KernelStatistics.ran_ahead`` and ``ahead_thrown_away`` count them).
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
        from ._bash import make_bash_tool  # the shell analysis and the sandbox, on first use

        tools.append(make_bash_tool(shell_rules, writable=shell_writable))
    elif shell_rules is not None or shell_writable:
        raise TypeError("shell_rules= and shell_writable= are for the Bash tool: pass bash=True")
    return tools

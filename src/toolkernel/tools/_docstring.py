"""A tool's descriptions from its docstring: the text before ``Args:``, and one line per argument.

Google style, the one models' tool descriptions are usually written in::

    '''Read a text file.

    Args:
        file_path: The file to read.
        offset: The line to start at; a description may go on
            over several indented lines.
    '''
"""

from __future__ import annotations

import inspect
import re

__all__ = ["docstring_parts"]

_SECTION = re.compile(r"^(Args|Arguments|Parameters):\s*$", re.MULTILINE)
_ARG_LINE = re.compile(r"^\s{2,}(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def docstring_parts(doc: str) -> tuple[str, dict[str, str]]:
    """The description (the text before an ``Args:`` section) and each argument's description."""
    doc = inspect.cleandoc(doc)
    match = _SECTION.search(doc)
    if match is None:
        return doc.strip(), {}
    description = doc[: match.start()].strip()
    params: dict[str, str] = {}
    current: str | None = None
    for line in doc[match.end() :].splitlines():
        if line and not line[0].isspace():
            break  # the next section
        found = _ARG_LINE.match(line)
        if found:
            current = found.group(1).lstrip("*")
            params[current] = found.group(2).strip()
        elif current and line.strip():
            params[current] = f"{params[current]} {line.strip()}"
    return description, params

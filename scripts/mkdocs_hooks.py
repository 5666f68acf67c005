"""MkDocs hooks for the documentation site (mkdocs.yml, ``hooks:``).

The docstrings are written in reStructuredText's inline habits, which mkdocstrings passes
through as Markdown: a role (``:class:`Recorder```) arrives as ``:class:`` before a code span,
and a literal block's ``::`` ends its paragraph. This turns both into what they mean on a page:
the code span alone (``~a.b.C`` shown as ``C``, as Sphinx does), and a single colon.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:class|func|meth|attr|mod|exc|data|obj|const):<code>(~?)([^<]*)</code>")
_LITERAL = re.compile(r"::</p>")


def _code(match: re.Match[str]) -> str:
    name = match[2].rpartition(".")[2] if match[1] else match[2]
    return f"<code>{name}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    return _LITERAL.sub(":</p>", _ROLE.sub(_code, html))

"""Where pytest writes its cache, beyond the ``.pytest_cache`` its rule names.

pytest writes ``.pytest_cache`` in its *rootdir*: the directory of the configuration file it
finds upward from its arguments' common ancestor (or of ``-c FILE``), or ``--rootdir DIR``. So
besides ``.pytest_cache`` where it runs (and in each parent, as for every fixed write), one is
claimed in the directory of each argument and each directory between it and where pytest runs,
in ``--rootdir`` and beside ``-c``'s file. ``-o cache_dir=...``, ``-o log_file=...`` and a
non-empty ``-o addopts=...`` move what it writes where no claim says: a barrier.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from ._access import Cwds, join, path_text
from ._coded import Invocation, coded
from ._words import Word

if TYPE_CHECKING:
    from ._walk import Walk

__all__ = ["pytest"]

_OVERRIDE: Final = frozenset({"-o", "--override-ini"})
_CONFIG_FILE: Final = frozenset({"-c", "--config-file"})
_MOVING_KEYS: Final = frozenset({"cache_dir", "log_file", "junit_logfile"})


def pytest(
    walk: Walk, values: Sequence[tuple[str, str, Word]], operands: Sequence[Word], cwds: Cwds
) -> None:
    """Check ``pytest``'s ``-o`` values; claim the caches its rootdir may hold."""
    places: list[str] = []
    for _, option, word in values:
        text = word.text
        if option in _OVERRIDE:
            if text is None:
                raise walk.fail("pytest -o sets an option not known from the text")
            key, _, value = text.partition("=")
            if key.strip() in _MOVING_KEYS or (key.strip() == "addopts" and value.strip()):
                raise walk.fail(f"pytest -o {key.strip()} changes where it writes")
        elif option == "--rootdir":
            places.append(text or "")
        elif option in _CONFIG_FILE:
            places.append(posixpath.dirname(text) if text else "")
    for word in operands:
        node = path_text(word)  # a glob's directory (`tests/test_*.py`: tests)
        if node is None:
            places.append("")
            continue
        node = node.split("::", 1)[0].rstrip("/")
        if node.endswith(".py"):
            node = posixpath.dirname(node)  # a test module: its directory is the start
        while node not in ("", ".", "/"):
            places.append(node)
            node = posixpath.dirname(node)
    for place in places:
        if not place:
            # A root not known from the text: its cache may be anywhere beneath.
            walk.touch("write", ".", cwds, "pytest")
            continue
        cache = frozenset(join(cwd, place) for cwd in cwds)
        walk.touch("write", ".pytest_cache", cache, "pytest", optional=True)


@coded("pytest", "py.test")
def _pytest_rule(run: Invocation) -> None:
    pytest(run.walk, run.values, run.operands, run.cwds)

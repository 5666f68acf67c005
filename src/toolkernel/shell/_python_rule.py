"""Where the Python interpreter's own options put bytecode, and the ``-X`` options it knows.

The Bash tool runs every command with ``PYTHONPYCACHEPREFIX`` outside the workspace
(``_environment``), so no ``__pycache__`` needs a claim. A command's own options can undo that:

- ``-X pycache_prefix=DIR`` puts the bytecode of every module it imports under ``DIR`` (from
  where it runs, for a relative one): ``DIR`` is claimed, or dropped if it is outside the
  workspace (what is written there is not the kernel's to order);
- ``-X pycache_prefix`` with no directory, ``-E`` and ``-I`` (which ignore the environment's
  ``PYTHON*`` variables) put it beside each module: the whole workspace is written, since a
  module may come from anywhere in it (a virtualenv's site-packages too);
- ``-B`` writes none, whatever the rest says.

Any other ``-X`` option must be one that only changes how the program runs or what it prints
(``-X dev``, ``-X utf8``, ``-X importtime``...); ``-X presite`` imports a module first, and one
not known (or not known from the text) makes the command a barrier.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from ._access import Cwds
from ._coded import Invocation, coded
from ._words import Word

if TYPE_CHECKING:
    from ._walk import Walk

__all__ = ["python"]

# -X options that change how the interpreter runs or what it prints, not what it reads or
# writes (perf and perf_jit write /tmp/perf-*.map, outside the workspace).
_HARMLESS_X: Final = frozenset(
    "dev utf8 importtime faulthandler tracemalloc showrefcount int_max_str_digits "
    "frozen_modules warn_default_encoding no_debug_ranges cpu_count gil context_aware_warnings "
    "thread_inherit_context disable_remote_debug pathconfig_warnings perf perf_jit tlbc".split()
)
_IGNORING_ENVIRONMENT: Final = frozenset({"-E", "-I"})


def python(
    walk: Walk, program: str, present: set[str], values: Sequence[tuple[str, str, Word]], cwds: Cwds
) -> None:
    """Check the ``-X`` options of ``program`` (``python``, ``python3``); record where its
    options put bytecode."""
    prefixes: list[str | None] = []  # None: no directory (beside each module)
    for _, option, word in values:
        if option != "-X":
            continue
        text = word.text
        if text is None:
            raise walk.fail(f"{program} -X {word.raw}: an option not known from the text")
        name, equals, value = text.partition("=")
        if name == "pycache_prefix":
            prefixes.append(value if equals and value else None)
        elif name not in _HARMLESS_X:
            raise walk.fail(f"{program} -X {text} is not an option the rules know")
    if "-B" in present:
        return  # no bytecode is written
    beside = sorted(present & _IGNORING_ENVIRONMENT)
    if not prefixes and not beside:
        return  # the environment's PYTHONPYCACHEPREFIX holds
    # Python takes the first -X pycache_prefix; each is claimed, whichever that is.
    for where in prefixes:
        if where is not None:
            rule = f"{program} -X pycache_prefix"
            walk.touch("write", where, cwds, rule, create="dir", optional=True)
    if None in prefixes or (beside and not prefixes):
        rule = f"{program} {'-X pycache_prefix' if None in prefixes else beside[0]}"
        walk.touch("write", ".", frozenset({"."}), rule)  # beside each module it imports


@coded("python", "python3")
def _python_rule(run: Invocation) -> None:
    python(run.walk, run.rule.name, run.present, run.values, run.cwds)

"""What curl's option values read and write beyond the files its rule names.

Some of curl's values are small languages that name files:

- ``-w``/``--write-out`` ``%output{file}`` (curl 8.3 and later) sends what follows to a file, and
  ``-w @file`` reads the format from a file, which may say ``%output{...}``: a barrier;
- ``-o`` with ``#1`` names a file by each URL's glob match (``-o 'page_#1'``): not that one path,
  so a barrier; ``--create-dirs`` makes the directories of an output file: a barrier;
- ``-d @file``, ``--data-urlencode name@file``, ``-F name=@file`` or ``name=<file``, ``-H @file``
  and ``--json @file`` read a file: the workspace is read.

A value whose option was abbreviated and given as the next word (``--write x``) is read as an
operand, so when such an option is present every operand is checked too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from ._access import Cwds
from ._coded import Invocation, coded
from ._words import Word

if TYPE_CHECKING:
    from ._walk import Walk

__all__ = ["curl"]

_WRITE_OUT: Final = frozenset({"-w", "--write-out"})
_OUTPUT: Final = frozenset({"-o", "--output"})
_AT_FILE: Final = frozenset({"-d", "--data", "--data-binary", "-H", "--header", "--json"})
_NAMED_FILE: Final = frozenset({"--data-urlencode", "-F", "--form"})


def curl(
    walk: Walk,
    present: set[str],
    values: Sequence[tuple[str, str, Word]],
    operands: Sequence[Word],
    cwds: Cwds,
) -> None:
    """Check the values of ``curl``'s options; record the files they read."""
    if "--create-dirs" in present:
        raise walk.fail("curl --create-dirs makes directories its claims can't name")
    given = {option for _, option, _ in values}
    checked = [(option, word) for _, option, word in values]
    missing = present & (_WRITE_OUT | _AT_FILE | _NAMED_FILE) - given
    checked += [(option, word) for word in operands for option in missing]
    for option, word in checked:
        text = word.text
        if option in _WRITE_OUT and (text is None or "%output{" in text or text.startswith("@")):
            raise walk.fail("curl -w writes a file (%output{...}) or reads its format from one")
        if option in _OUTPUT and (text is None or "#" in text):
            raise walk.fail("curl -o names its files by the URLs' globs (#1)")
        reads_file = (option in _AT_FILE and (text is None or text.startswith("@"))) or (
            option in _NAMED_FILE and (text is None or "@" in text or "<" in text)
        )
        if reads_file:
            walk.touch("read", ".", frozenset({"."}), f"curl {option}")


@coded("curl")
def _curl_rule(run: Invocation) -> None:
    curl(run.walk, run.present, run.values, run.operands, run.cwds)

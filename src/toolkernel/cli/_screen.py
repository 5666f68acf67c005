"""Where the demo writes: plain text, or colour on a terminal (with rich, ``toolkernel[cli]``).

The demo says four kinds of thing: plain sentences, turn headings, live timeline lines (``…``
a call waits, ``▶`` starts, ``■`` ends) and a chart per turn (``·`` waiting, ``█`` running,
``✗`` never ran). :class:`Screen` prints them as they are; the rich one colours them: waits in
yellow, starts in cyan, ends in green (red when the call failed), headings bold.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["Screen", "make_screen"]

_FAILED = re.compile(r"\((error|timeout|cancelled|denied|skipped)[:)]|; (error|timeout|cancelled)")


class Screen:
    """Plain text, for pipes and files (and terminals without rich).

    A reader that goes away (``| head -1``) leaves it silent, ``gone``: the demo runs on to
    its end and exits as a program its reader left does (141), without a traceback from
    every line it had left to say."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.gone = False

    def _emit(self, write: Callable[[], object]) -> None:
        if self.gone:
            return
        try:
            write()
        except BrokenPipeError:
            self.gone = True
            # The interpreter flushes stdout on the way out: let that go nowhere, not fail.
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), self.out.fileno())

    def say(self, text: str) -> None:
        self._emit(lambda: print(text, file=self.out, flush=True))

    def heading(self, text: str) -> None:
        self.say("\n" + text)

    def live_line(self, text: str) -> None:
        self.say(text)

    def chart(self, text: str) -> None:
        self.say("\n" + text)


class RichScreen(Screen):
    """The same, in colour (rich)."""

    def __init__(self, out: TextIO, force: bool) -> None:
        super().__init__(out)
        from rich.console import Console

        self.console: Any = Console(file=out, force_terminal=force or None, highlight=False)

    def _print(self, text: Any) -> None:
        self._emit(lambda: self.console.print(text, soft_wrap=True))

    def say(self, text: str) -> None:
        from rich.text import Text

        self._print(Text(text))

    def heading(self, text: str) -> None:
        from rich.text import Text

        self._print(Text("\n" + text, style="bold"))

    def live_line(self, text: str) -> None:
        from rich.text import Text

        line = Text(text)
        if " … " in text:
            line.stylize("yellow")
        elif " ▶ " in text:
            line.stylize("cyan")
        elif " ■ " in text:
            line.stylize("red" if _FAILED.search(text) else "green")
        self._print(line)

    def chart(self, text: str) -> None:
        from rich.text import Text

        self._print(Text(""))
        for row in text.splitlines():
            line = Text(row)
            line.highlight_regex(r"·+", "yellow")
            line.highlight_regex(r"█+", "red" if _FAILED.search(row) else "green")
            line.highlight_regex(r"✗", "bold red")
            line.highlight_regex(r"waited for .*", "dim")
            self._print(line)


def make_screen(out: TextIO, color: str) -> Screen:
    """``color``: ``auto`` (colour on a terminal, if rich is installed), ``always``, ``never``."""
    if color == "never":
        return Screen(out)
    try:
        import rich  # noqa: F401
    except ImportError:
        return Screen(out)
    if color == "always":
        return RichScreen(out, force=True)
    isatty = getattr(out, "isatty", None)
    return RichScreen(out, force=False) if isatty is not None and isatty() else Screen(out)

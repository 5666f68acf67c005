"""A pseudo-terminal for the console's tests: ``python -m toolkernel console`` runs in it as a
person would run it (pexpect), with a terminal that answers the line editor's cursor-position
requests, as a real one does (without that, prompt_toolkit shows no toolbar).

What it printed is kept as text with the terminal's escape sequences taken out, so a test waits
for words (``expect``) rather than for bytes; matching moves on past each match, so the same
words can be waited for again.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time

import pexpect

ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-Za-z]|\x1b[=>78]")
CURSOR_POSITION_REQUEST = "\x1b[6n"


class Terminal:
    def __init__(self, *args: str, cwd: str | None = None, rows: int = 40, cols: int = 140):
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        env.update(TERM="xterm", COLUMNS=str(cols), LINES=str(rows))
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "toolkernel", *args],
            cwd=cwd,
            env=env,
            encoding="utf-8",
            dimensions=(rows, cols),
        )
        self.text = ""
        self.position = 0
        self._pending = ""

    def _read(self, wait: float) -> None:
        raw = self._pending + self.child.read_nonblocking(65536, timeout=wait)
        # An escape sequence may come split across two reads: keep its start for the next.
        cut = raw.rfind("\x1b")
        if cut >= 0 and len(raw) - cut < 32 and not ESCAPES.match(raw, cut):
            raw, self._pending = raw[:cut], raw[cut:]
        else:
            self._pending = ""
        for _ in range(raw.count(CURSOR_POSITION_REQUEST)):
            self.child.send("\x1b[1;1R")
        self.text += ESCAPES.sub("", raw).replace("\r", "")

    def expect(self, words: str, timeout: float = 30.0) -> str:
        """Wait until ``words`` are printed (after the last match); the text up to them."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.text.find(words, self.position)
            if found >= 0:
                before = self.text[self.position : found]
                self.position = found + len(words)
                return before
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{words!r} was not printed; since the last match:\n"
                    f"{self.text[self.position :]}"
                )
            try:
                self._read(0.1)
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF:
                raise AssertionError(
                    f"the console ended before printing {words!r}:\n{self.text[self.position :]}"
                ) from None

    def line(self, text: str) -> None:
        """Type ``text`` and Enter."""
        self.child.send(text + "\r")

    def type(self, keys: str) -> None:
        self.child.send(keys)

    def leave(self, timeout: float = 30.0) -> int:
        """Ctrl-D at the prompt; the exit status once the console has ended.

        Pressed again every quarter of a second, as an impatient person would: a Ctrl-D typed
        while the line editor is not reading (between two prompts) is the terminal driver's
        end-of-file, and is lost.
        """
        deadline = time.monotonic() + timeout
        pressed = 0.0
        while self.child.isalive() and time.monotonic() < deadline:
            if time.monotonic() - pressed > 0.25:
                self.child.sendeof()
                pressed = time.monotonic()
            with contextlib.suppress(pexpect.TIMEOUT, pexpect.EOF):
                self._read(0.05)
        self.child.close(force=True)
        status = self.child.exitstatus
        return -1 if status is None else status

    def close(self) -> None:
        if self.child.isalive():
            self.child.close(force=True)

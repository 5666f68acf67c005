"""What the console prints, as a terminal of 40 columns shows it and as a program reading a pipe
gets it: on a terminal, lines wrap at word boundaries (a result's output keeps its indent);
left to the terminal, a long line was broken mid-word. Piped, a line is written whole."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, cast

import pytest
from rich.console import Console

from toolkernel.agent import ModelReplied, TodosUpdated
from toolkernel.cli._console import ConsoleApp, make_console
from toolkernel.kernel import CallFinished, Kernel, Status, ToolResult

WIDTH = 40
REPLY = (
    "I read the configuration and renamed the function everywhere it was called, then ran "
    "the tests again: all of them pass now."
)
OUTPUT = (
    "error: the module toolkernel.unavailable could not be imported because its dependency "
    "is missing\nsecond line"
)
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class _Kernel:
    """What ``ConsoleApp`` asks of a kernel to print events."""

    def __init__(self) -> None:
        self.tools: dict[str, Any] = {}

    def add_listener(self, listener: Callable[[object], None]) -> None:
        pass


def _app(out: Console) -> ConsoleApp:
    return ConsoleApp(cast(Kernel, _Kernel()), out, None)


def _printed(out: Console, show: Callable[[], None]) -> list[str]:
    with out.capture() as captured:
        show()
    return _ESCAPES.sub("", captured.get()).splitlines()


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Console:
    monkeypatch.setenv("COLUMNS", str(WIDTH))  # the terminal's width, as rich reads it
    return make_console(terminal=True)


def _finished(output: str) -> CallFinished:
    result = ToolResult("c1", "Bash", Status.OK, output, started_at=0.0, finished_at=0.5)
    return CallFinished("c1", "Bash", 0.5, result)


def test_a_model_reply_wraps_at_word_boundaries(terminal: Console) -> None:
    lines = _printed(terminal, lambda: _app(terminal).on_agent_event(ModelReplied(1, REPLY, ())))
    assert len(lines) > 1
    assert all(len(line) <= WIDTH for line in lines)
    assert " ".join(lines).split() == f"model: {REPLY}".split()  # no word cut in two


def test_a_result_s_output_wraps_at_word_boundaries_under_its_indent(terminal: Console) -> None:
    lines = _printed(terminal, lambda: _app(terminal).on_event(_finished(OUTPUT)))
    assert lines[0] == "✓ c1 Bash ok in 0.50 s"
    body = lines[1:]
    assert len(body) > 2 and body[-1] == "    second line"
    assert all(line.startswith("    ") and len(line) <= WIDTH for line in body)
    assert all(line == line.rstrip() for line in body)
    assert " ".join(body).split() == OUTPUT.split()


def test_a_word_longer_than_a_line_is_folded_not_lost(terminal: Console) -> None:
    word = "x" * (2 * WIDTH)
    lines = _printed(terminal, lambda: _app(terminal).on_event(_finished(word)))
    assert "".join(line.strip() for line in lines[1:]) == word
    assert all(len(line) <= WIDTH for line in lines)


def test_piped_every_line_is_written_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    out = make_console(terminal=False)
    app = _app(out)
    assert _printed(out, lambda: app.on_agent_event(ModelReplied(1, REPLY, ()))) == [
        f"model: {REPLY}"
    ]
    assert _printed(out, lambda: app.on_event(_finished(OUTPUT)))[1:] == [
        f"    {line}" for line in OUTPUT.splitlines()
    ]


@pytest.mark.parametrize("piped", [False, True])
def test_text_is_printed_as_it_is_never_as_markup(
    piped: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    out = make_console(terminal=not piped)
    app = _app(out)
    # A typed line naming no command; a closing tag rich's markup would choke on.
    assert _printed(out, lambda: app.say("there is no command /[/foo] :smile:")) == [
        "there is no command /[/foo] :smile:"
    ]
    todos = ({"content": "tidy up", "status": "completed"}, {"content": "ship", "status": "x"})
    assert _printed(out, lambda: app.on_agent_event(TodosUpdated(1, "c2", todos))) == [
        "  [x] tidy up",
        "  [ ] ship",
    ]

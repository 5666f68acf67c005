"""``python -m toolkernel console`` as a person uses it: in a real pseudo-terminal (pexpect, see
``terminal.py``), typing lines and keys, reading what it prints; and with its input piped.

Each test starts the console as a subprocess over a temporary directory with real files. One
also starts the tests' MCP server (``--mcp``, tests/mcp/server.py) through the console; the chat
test starts a loopback Chat Completions server (tests/loopback.py) that the console's model
client talks to.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from collections.abc import Callable, Iterator

import anyio
import pexpect
import pytest

from tests.loopback import Reply, Request, chat_reply, serve

from .terminal import Terminal

MCP_SERVER = pathlib.Path(__file__).parents[1] / "mcp" / "server.py"


@pytest.fixture
def project(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "a.txt").write_text("hello world\n")
    (tmp_path / "notes.md").write_text("# notes\nTODO: tidy up\n")
    return tmp_path


Start = Callable[..., Terminal]


@pytest.fixture
def console(project: pathlib.Path) -> Iterator[Start]:
    started: list[Terminal] = []

    def start(*options: str) -> Terminal:
        terminal = Terminal("console", "--root", str(project), *options)
        started.append(terminal)
        terminal.expect("/help")  # the banner
        terminal.expect("tk>")
        return terminal

    yield start
    for terminal in started:
        terminal.close()


def test_a_line_of_calls_runs_as_one_batch_with_progress_and_results(
    console: Start, project: pathlib.Path
) -> None:
    term = console()
    term.line(
        "Read file_path=a.txt; Edit file_path=a.txt old_string=world new_string='there, you'; "
        "Read file_path=a.txt"
    )
    term.expect("→ c1 Read file_path=a.txt")
    term.expect("→ c2 Edit file_path=a.txt old_string=world new_string='there, you'")
    term.expect("→ c3 Read file_path=a.txt")
    term.expect("c2 Edit waits for c1 on a.txt")
    term.expect("✓ c1 Read ok")
    term.expect("hello world")
    term.expect("✓ c2 Edit ok")
    term.expect("✓ c3 Read ok")
    term.expect("hello there, you")
    assert (project / "a.txt").read_text() == "hello there, you\n"
    # Values are JSON for parameters that don't take strings; errors come back as results.
    term.line("Read file_path=a.txt limit=1; Grep pattern=TODO output_mode=content")
    term.expect("✓ c5 Grep ok")
    term.line("Edit file_path=a.txt old_string=absent new_string=x")
    term.expect("✗ c6 Edit error")
    term.expect("old_string")
    assert term.leave() == 0


def test_missing_arguments_are_asked_for_one_at_a_time_and_cancel_abandons(
    console: Start, project: pathlib.Path
) -> None:
    term = console()
    term.line("Edit file_path=a.txt")
    term.expect("Edit old_string (string):")
    term.line("hello")
    term.expect("Edit new_string (string):")
    term.line("goodbye cruel")
    term.expect("✓ c1 Edit ok")
    assert (project / "a.txt").read_text() == "goodbye cruel world\n"
    term.line("Write file_path=new.txt")
    term.expect("Write content (string):")
    term.line("/cancel")
    term.expect("abandoned: nothing of that line ran")
    assert not (project / "new.txt").exists()
    # Tab completes tool names, then parameters.
    term.type("Wri\t")
    term.expect("Write")
    term.type(" file_\t")
    term.expect("file_path=")
    term.line('new.txt content=""')
    term.expect("✓ c2 Write ok")
    assert (project / "new.txt").read_text() == ""
    assert term.leave() == 0


def test_tools_tool_help_and_mistakes(console: Start) -> None:
    term = console()
    term.line("/tools")
    term.expect("Read")
    term.expect("reads file_path")
    term.line("/tool edit")
    term.expect("Replace exact text in a file")
    term.expect("old_string")
    term.expect('"required"')
    term.line("/help")
    term.expect("/cancel [ID]")
    term.line("Raed file_path=a.txt")
    term.expect("there is no tool named 'Raed'; did you mean Read?")
    term.line("Read a.txt")
    term.expect("Read takes arguments as NAME=VALUE, not 'a.txt'; for example file_path=a.txt")
    term.line("Read path=a.txt")
    term.expect("Read has no parameter 'path'; it takes file_path, offset, limit")
    term.line("/frobnicate")
    term.expect("there is no command /frobnicate")
    assert term.leave() == 0


def test_status_shows_held_leases_and_waits_and_cancel_stops_a_call(console: Start) -> None:
    term = console("--mcp", f"{sys.executable} {MCP_SERVER}")
    term.line("stall; write key=k value=v")
    term.expect("c2 write waits for c1 on device:mcp:test-store")
    term.expect("running: c1 stall")  # the toolbar, live
    term.line("/status")
    term.expect("c1")
    term.expect("running")
    term.expect("shared device:mcp:test-store")
    term.expect("c2")
    term.expect("waiting")
    term.expect("behind c1 on device:mcp:test-store")
    term.line("/cancel c1")
    term.expect("⊘ c1 stall cancelled")
    term.expect("✓ c2 write ok")
    term.line("/cancel c9")
    term.expect("no unfinished call c9")
    # Ctrl-D leaves at once: what still runs is cancelled, never waited for.
    term.line("stall")
    term.expect("→ c3 stall")
    assert term.leave() == 0
    assert "⊘ c3 stall cancelled" in term.text


def test_calls_piped_in_run_in_order_and_print_a_transcript(project: pathlib.Path) -> None:
    script = "Write file_path=b.txt content='one two'\nRead file_path=b.txt\n/status\n"
    done = subprocess.run(
        [sys.executable, "-m", "toolkernel", "console", "--root", str(project)],
        input=script,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out = done.stdout
    assert "tk> Write file_path=b.txt content='one two'" in out
    assert "✓ c1 Write ok" in out and "✓ c2 Read ok" in out
    assert out.index("✓ c1 Write ok") < out.index("✓ c2 Read ok")
    assert "one two" in out.split("✓ c2 Read ok")[1]


def test_without_root_the_console_works_in_the_current_directory(project: pathlib.Path) -> None:
    (project / "sub").mkdir()
    (project / "sub" / "b.txt").write_text("in sub\n")
    done = subprocess.run(
        [sys.executable, "-m", "toolkernel", "console"],
        input="Read file_path=b.txt\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=project / "sub",
    )
    assert "✓ c1 Read ok" in done.stdout and "in sub" in done.stdout


async def test_chatting_with_a_model_that_calls_the_tools(project: pathlib.Path) -> None:
    def answer(request: Request) -> Reply:
        results = [m for m in request.json["messages"] if m["role"] == "tool"]
        return chat_reply(f"a.txt says: {results[0]['content'].strip()}")

    script = [
        chat_reply(
            "Let me look.",
            ("call_1", "Read", json.dumps({"file_path": "a.txt"})),
            ("call_2", "Grep", json.dumps({"pattern": "TODO", "output_mode": "content"})),
        ),
        answer,
    ]
    async with serve(script) as server:
        term = await anyio.to_thread.run_sync(
            lambda: Terminal(
                "console", "--root", str(project), "--model", server.url, "--model-name", "m"
            )
        )
        try:
            steps = [
                ("expect", "chatting with the model m"),
                ("expect", "tk>"),
                ("line", "what does a.txt say?"),
                ("expect", "model: Let me look."),
                ("expect", "→ call_1 Read file_path=a.txt"),
                # The two calls run at once: either may finish first.
                ("expect", "model: a.txt says: 1"),  # Read numbers its lines
                ("expect", "hello world"),
                ("line", "/call Read file_path=notes.md"),
                ("expect", "✓ c1 Read ok"),
            ]
            printed = []
            for action, text in steps:
                printed.append(await anyio.to_thread.run_sync(getattr(term, action), text))
            calls_done = printed[5]  # what came between the calls starting and the answer
            assert "✓ call_1 Read ok" in calls_done and "✓ call_2 Grep ok" in calls_done
            status = await anyio.to_thread.run_sync(term.leave)
        finally:
            term.close()
    assert status == 0
    first, second = (r.json for r in server.requests)
    assert first["model"] == "m"
    assert {t["function"]["name"] for t in first["tools"]} >= {"Read", "Edit", "Grep"}
    assert first["messages"][-1] == {"role": "user", "content": "what does a.txt say?"}
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_1", "call_2"]


def test_version_and_help_on_every_command() -> None:
    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "toolkernel", *args],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    import toolkernel

    assert run("--version").strip() == f"toolkernel {toolkernel.__version__}"
    top = run("--help")
    assert "demo" in top and "console" in top and "--version" in top
    console_help = run("console", "--help")
    for option in ("--root", "--model URL", "--model-name", "--bash", "--mcp COMMAND"):
        assert option in console_help


def test_a_model_url_that_is_not_http_is_a_clear_error(project: pathlib.Path) -> None:
    model = ["--model", "localhost:11434/v1", "--model-name", "m"]
    done = subprocess.run(
        [sys.executable, "-m", "toolkernel", "console", "--root", str(project), *model],
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "console: --model:" in done.stdout and "http" in done.stdout


def test_ctrl_c_cancels_what_runs_and_a_second_one_leaves(console: Start) -> None:
    term = console("--mcp", f"{sys.executable} {MCP_SERVER}")
    term.line("stall; write key=k value=v")
    term.expect("c2 write waits for c1 on device:mcp:test-store")
    term.type("\x03")  # Ctrl-C: as /cancel, everything that runs or waits
    term.expect("Ctrl-C: cancelling 2 calls; Ctrl-C again leaves")
    after = term.expect("ready · /help")  # the toolbar: nothing runs any more
    assert "⊘ c1 stall cancelled" in after and "⊘ c2 write cancelled" in after
    # A line typed in between starts over: the next Ctrl-C cancels again, not leaves.
    term.line("stall")
    term.expect("→ c3 stall")
    term.type("\x03")
    term.expect("Ctrl-C: cancelling 1 call; Ctrl-C again leaves")
    term.expect("⊘ c3 stall cancelled")
    term.type("\x03")  # a second in a row leaves
    term.child.expect(pexpect.EOF, timeout=30)
    term.child.close()
    assert term.child.exitstatus == 0


def test_ctrl_c_with_nothing_running_says_how_to_leave_and_a_second_leaves(
    console: Start,
) -> None:
    term = console()
    term.type("\x03")
    term.expect("nothing runs; Ctrl-C again (or Ctrl-D, /quit) leaves")
    term.type("\x03")
    term.child.expect(pexpect.EOF, timeout=30)
    term.child.close()
    assert term.child.exitstatus == 0

"""``python -m toolkernel console``: type tool calls, or chat with a model that calls the tools,
and watch them run through a kernel over a directory.

Each line is submitted as one batch the moment it is entered, while earlier batches still run:
the kernel orders what conflicts and overlaps the rest, and the person can look (``/status``) or
cancel (``/cancel``) meanwhile. Events are printed above the prompt as they happen (a call
waiting behind another and on what, its progress, its end and output), and the toolbar under the
prompt shows what runs and waits. On a terminal the line editor is prompt_toolkit's (history,
Tab completion of commands, tools and parameters); with input from a pipe, lines are read as they
come and echoed, so a script of calls can be replayed.

Ctrl-C cancels what runs (every unfinished call, and the model's turn), as ``/cancel`` does; a
second Ctrl-C in a row leaves, as Ctrl-D and ``/quit`` do. In a question for a missing argument
it abandons that line.

Runs on asyncio (prompt_toolkit's loop), through anyio like the rest of toolkernel.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Protocol

import anyio
import anyio.abc
import attrs
from rich.console import Console

from .._errors import MCPServerGoneError, ToolDeclarationError
from .._open import open_kernel
from ..agent import (
    AgentEvent,
    Model,
    ModelReplied,
    ModelRetrying,
    OpenAICompatibleModel,
    StepStarted,
    StopReason,
    TodosUpdated,
    run_agent,
)
from ..kernel import CallBlocked, CallEvent, CallFinished, CallStarted, Kernel, ToolCall
from ..tools import builtin_tools
from ._console_syntax import (
    ConsoleSyntaxError,
    answer_value,
    complete,
    find_tool,
    missing_question,
    parameters,
    parse_calls,
)
from ._console_view import (
    call_line,
    event_line,
    help_view,
    status_view,
    tool_view,
    tools_view,
)

__all__ = ["ConsoleOptions", "run_console"]


@attrs.frozen
class ConsoleOptions:
    """What ``python -m toolkernel console`` was asked for."""

    root: str
    model_url: str | None = None
    model_name: str | None = None
    bash: bool = False
    mcp: tuple[str, ...] = ()
    max_steps: int = 30


def run_console(options: ConsoleOptions) -> int:
    """Run the console until the person leaves; the exit code."""
    if not os.path.isdir(options.root):
        print(f"console: --root {options.root!r} is not a directory", file=sys.stderr)
        return 2
    result: int = anyio.run(_main, options, backend="asyncio")
    return result


class LineReader(Protocol):
    waits_at_end: bool
    """At the end of input, let what runs finish (a script), or cancel it (Ctrl-D)."""

    async def read(self, prompt: str) -> str:
        """The next line; raises EOFError at the end of input, KeyboardInterrupt on Ctrl-C."""
        ...

    async def ask(self, question: str) -> str:
        """An answer to a question (a missing argument); raises as ``read`` does."""
        ...


class TerminalReader:
    """prompt_toolkit's line editor: history, Tab completion, a live toolbar."""

    waits_at_end = False

    def __init__(self, app: ConsoleApp) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.completion import Completer, Completion
        from prompt_toolkit.history import InMemoryHistory

        class CallCompleter(Completer):
            def get_completions(self, document: Any, complete_event: Any) -> Any:
                for text, start in app.completions(document.text_before_cursor):
                    yield Completion(text, start_position=start)

        self.lines: PromptSession[str] = PromptSession(
            history=InMemoryHistory(),
            completer=CallCompleter(),
            complete_while_typing=False,
            bottom_toolbar=app.toolbar,
            refresh_interval=0.5,
        )
        self.answers: PromptSession[str] = PromptSession(history=InMemoryHistory())

    async def read(self, prompt: str) -> str:
        return await self.lines.prompt_async(prompt)

    async def ask(self, question: str) -> str:
        return await self.answers.prompt_async(question)


class PipeReader:
    """Lines from a pipe or a file, echoed after the prompt so the output reads as a session."""

    waits_at_end = True

    def __init__(self, echo: Callable[[str], None]) -> None:
        self.echo = echo

    async def read(self, prompt: str) -> str:
        line: str = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        if not line:
            raise EOFError
        line = line.rstrip("\n")
        self.echo(prompt + line)
        return line

    async def ask(self, question: str) -> str:
        return await self.read(question)


@asynccontextmanager
async def _patched_stdout(terminal: bool) -> AsyncIterator[None]:
    """On a terminal, print above the prompt rather than through it."""
    if not terminal:
        yield
        return
    from prompt_toolkit.patch_stdout import patch_stdout

    with patch_stdout(raw=True):
        yield


def make_console(terminal: bool) -> Console:
    """Where the console prints. On a terminal, rich wraps each line at word boundaries to the
    terminal's width at the time (a line left for the terminal to break is broken mid-word);
    piped, each line is written whole, for the program that reads it. Text is printed as it
    is, never as rich markup or emoji codes: a typed line, a file or a model's reply may hold
    ``[/x]`` or ``:x:``."""
    if terminal:
        return Console(force_terminal=True, markup=False, emoji=False, highlight=False)
    return Console(
        force_terminal=False,
        width=shutil.get_terminal_size((100, 24)).columns,  # what tables are laid out to
        soft_wrap=True,
        markup=False,
        emoji=False,
        highlight=False,
    )


async def _main(options: ConsoleOptions) -> int:
    terminal = sys.stdin.isatty() and sys.stdout.isatty()
    out = make_console(terminal)
    async with AsyncExitStack() as stack:
        tools: list[Any] = list(builtin_tools(bash=options.bash))
        for command in options.mcp:
            from ..mcp import stdio_tools

            try:
                server_tools = await stack.enter_async_context(stdio_tools(shlex.split(command)))
            except Exception as exc:  # a server not to start, whatever it did
                # Not an MCP server (``cat`` answers with its question), a quote left open
                # (shlex's ValueError), a program missing: this server's problem, said so.
                known = isinstance(exc, OSError | MCPServerGoneError | ToolDeclarationError)
                why = str(exc) if known else f"{type(exc).__name__}: {exc}"
                out.print(f"console: can't start the MCP server {command!r}: {why}", style="red")
                return 1
            tools.extend(server_tools)
        model: Model | None = None
        if options.model_url is not None:
            if not (options.model_name or os.environ.get("OPENAI_MODEL")):
                out.print(
                    "console: --model needs the model's name: --model-name NAME (or set "
                    "OPENAI_MODEL)",
                    style="red",
                )
                return 2
            try:
                http = OpenAICompatibleModel(base_url=options.model_url, model=options.model_name)
            except ValueError as exc:  # a URL without http:// or https://, say
                out.print(f"console: --model: {exc}", style="red")
                return 2
            model = await stack.enter_async_context(http)
        kernel = await stack.enter_async_context(
            open_kernel(tools, root=options.root, max_concurrency=16)
        )
        app = ConsoleApp(kernel, out, model, max_steps=options.max_steps)
        reader: LineReader = (
            TerminalReader(app) if terminal else PipeReader(lambda line: out.print(line))
        )
        out.print(app.banner(options))
        async with _patched_stdout(terminal):
            await app.run(reader)
    return 0


class ConsoleApp:
    """The console's state: the kernel, the conversation, and what it has set going."""

    def __init__(
        self, kernel: Kernel, out: Any, model: Model | None, *, max_steps: int = 30
    ) -> None:
        self.kernel = kernel
        self.tools = kernel.tools
        self.out = out
        self.model = model
        self.max_steps = max_steps
        self.messages: tuple[dict[str, Any], ...] | None = None
        self.turn: anyio.CancelScope | None = None
        self.step = 0
        self.blocked_on: dict[str, tuple[str, ...]] = {}
        self.next_number = 1
        self.group: anyio.abc.TaskGroup | None = None
        self.interrupted = False  # the last key was a Ctrl-C: another one leaves
        kernel.add_listener(self.on_event)

    # -- what is shown -------------------------------------------------------------------------

    def banner(self, options: ConsoleOptions) -> str:
        who = f"model {options.model_name or ''} at {options.model_url}".replace("  ", " ")
        mode = f"chatting with the {who}" if self.model else "type calls"
        return (
            f"toolkernel console on {os.path.abspath(options.root)} · {len(self.tools)} tools · "
            f"{mode} · /help"
        )

    def say(self, text: str, style: str = "dim") -> None:
        self.out.print(text, style=style)

    def on_event(self, event: CallEvent) -> None:
        """The kernel's listener: every call's events, whoever submitted it."""
        if isinstance(event, CallBlocked):
            self.blocked_on[event.call_id] = event.resources
        elif isinstance(event, CallStarted) and event.call_id not in self.blocked_on:
            return  # started at once: its end says enough
        elif isinstance(event, CallStarted | CallFinished):
            self.blocked_on.pop(event.call_id, None)
        line = event_line(event)
        if line is not None:
            self.out.print(line)

    def on_agent_event(self, event: AgentEvent) -> None:
        if isinstance(event, StepStarted):
            self.step = event.step
        elif isinstance(event, ModelReplied):
            if event.text:
                self.out.print(f"model: {event.text}", style="magenta")
            for call in event.calls:
                self.out.print(call_line(call))
        elif isinstance(event, ModelRetrying):
            self.say(
                f"the model's request failed ({event.error}); trying again in "
                f"{event.delay:.1f} s (attempt {event.attempt})"
            )
        elif isinstance(event, TodosUpdated):
            for todo in event.todos:
                done = isinstance(todo, dict) and todo.get("status") == "completed"
                content = todo.get("content") if isinstance(todo, dict) else todo
                self.say(f"  [{'x' if done else ' '}] {content}", "")

    def toolbar(self) -> str:
        """The line under the prompt: what runs and what waits, refreshed as it changes."""
        snapshot = self.kernel.snapshot()
        now = anyio.current_time()
        parts = [f"{i.call_id} {i.name} {now - i.since:.1f}s" for i in snapshot.running]
        waiting = [f"{i.call_id} {i.name} behind {','.join(i.waits_for)}" for i in snapshot.queued]
        text = ""
        if self.turn is not None:
            text += f"model working (step {self.step}) · "
        if parts:
            text += "running: " + ", ".join(parts) + " · "
        if waiting:
            text += "waiting: " + ", ".join(waiting) + " · "
        return text + ("/status /cancel /help" if text else "ready · /help")

    def completions(self, text: str) -> list[tuple[str, int]]:
        snapshot = self.kernel.snapshot()
        live = [i.call_id for i in (*snapshot.running, *snapshot.queued, *snapshot.pending)]
        if self.model is not None and not text.startswith("/"):
            return []  # a message to the model
        return complete(text, self.tools, live)

    # -- the loop ------------------------------------------------------------------------------

    async def run(self, reader: LineReader) -> None:
        """Read and act on lines until /quit or Ctrl-D (then cancel what runs), or the end of a
        script (then let it finish)."""
        async with anyio.create_task_group() as group:
            self.group = group
            while True:
                try:
                    line = await reader.read(PROMPT)
                except EOFError:
                    if not reader.waits_at_end:
                        self.cancel("", leaving=True)  # nothing could be typed to stop them
                    elif self._unfinished():
                        self.say("waiting for the calls still running")
                    break
                except KeyboardInterrupt:
                    if self.interrupt():
                        self.cancel("", leaving=True)
                        break
                    continue
                self.interrupted = False
                if not await self.handle(line, reader):
                    self.cancel("", leaving=True)
                    break

    def interrupt(self) -> bool:
        """Ctrl-C: cancel what runs, the model's turn too; True to leave (a second in a row)."""
        if self.interrupted:
            return True
        self.interrupted = True
        unfinished = self._unfinished()
        if unfinished or self.turn is not None:
            calls = f"{unfinished} call{'s' if unfinished != 1 else ''}"
            self.say(f"Ctrl-C: cancelling {calls}; Ctrl-C again leaves", "yellow")
            self.cancel("")
        else:
            self.say("nothing runs; Ctrl-C again (or Ctrl-D, /quit) leaves", "yellow")
        return False

    def _unfinished(self) -> int:
        snapshot = self.kernel.snapshot()
        return len(snapshot.running) + len(snapshot.queued) + len(snapshot.pending)

    async def handle(self, line: str, reader: LineReader) -> bool:
        """Act on one line; False to leave."""
        text = line.strip()
        if not text:
            return True
        if not text.startswith("/"):
            if self.model is not None:
                self.chat(text)
            else:
                await self.calls(text, reader)
            return True
        command, _, rest = text.partition(" ")
        rest = rest.strip()
        if command in ("/quit", "/exit"):
            return False
        if command == "/help":
            self.out.print(help_view(self.model is not None), soft_wrap=False)
        elif command == "/tools":
            self.out.print(tools_view(self.tools.values()), soft_wrap=False)
        elif command == "/tool":
            try:
                self.out.print(tool_view(self.tools[find_tool(rest, self.tools)]), soft_wrap=False)
            except ConsoleSyntaxError as exc:
                self.say(str(exc) if rest else "/tool NAME shows a tool; /tools lists them", "red")
        elif command == "/status":
            self.out.print(
                status_view(
                    self.kernel.snapshot(),
                    self.blocked_on,
                    anyio.current_time(),
                    self.kernel.lease_statistics(),
                ),
                soft_wrap=False,
            )
        elif command == "/cancel":
            self.cancel(rest)
        elif command == "/call":
            await self.calls(rest, reader)
        else:
            self.say(f"there is no command {command}; /help lists them", "red")
        return True

    # -- calls typed by hand -------------------------------------------------------------------

    async def calls(self, text: str, reader: LineReader) -> None:
        """Read the line's calls, ask for what is missing, and submit them as one batch."""
        try:
            drafts = parse_calls(text, self.tools)
        except ConsoleSyntaxError as exc:
            self.say(str(exc), "red")
            return
        for draft in drafts:
            schemas = parameters(self.tools[draft.name])
            for name in draft.missing:
                value = await self._ask(reader, draft.name, name, schemas.get(name))
                if value is _ABANDONED:
                    self.say("abandoned: nothing of that line ran")
                    return
                draft.arguments[name] = value
        calls = [ToolCall(self._new_id(), d.name, d.arguments) for d in drafts]
        for call in calls:
            self.out.print(call_line(call))
        assert self.group is not None
        self.group.start_soon(self.kernel.run, calls)

    async def _ask(self, reader: LineReader, tool: str, name: str, schema: Any) -> Any:
        while True:
            try:
                answer = await reader.ask(missing_question(tool, name, schema))
            except (EOFError, KeyboardInterrupt):
                return _ABANDONED
            if answer.strip() == "/cancel":
                return _ABANDONED
            if answer == "":
                self.say(f'{tool} needs {name}: type a value ("" for an empty string), or /cancel')
                continue
            return answer_value(answer, schema)

    def _new_id(self) -> str:
        live = {i.call_id for i in _infos(self.kernel)}
        while True:
            call_id = f"c{self.next_number}"
            self.next_number += 1
            if call_id not in live:
                return call_id

    def cancel(self, call_id: str, *, leaving: bool = False) -> None:
        """``/cancel ID`` cancels one call; ``/cancel`` everything, the model's turn too."""
        live = [i.call_id for i in _infos(self.kernel)]
        if call_id:
            if call_id not in live:
                self.say(f"no unfinished call {call_id}; /status lists them", "red")
                return
            self.kernel.cancel(call_id)
            return
        if not live and self.turn is None:
            if not leaving:
                self.say("nothing to cancel")
            return
        if self.turn is not None:
            self.turn.cancel()
            self.say("cancelling the model's turn")
        self.kernel.cancel(*live)

    # -- chatting ------------------------------------------------------------------------------

    def chat(self, text: str) -> None:
        if self.turn is not None:
            self.say("the model is still answering the last message; /cancel stops it", "red")
            return
        self.turn = anyio.CancelScope()
        assert self.group is not None
        self.group.start_soon(self._turn, text, self.turn)

    async def _turn(self, text: str, scope: anyio.CancelScope) -> None:
        assert self.model is not None
        try:
            outcome = await run_agent(
                self.model,
                self.kernel,
                text,
                max_steps=self.max_steps,
                messages=self.messages,
                on_event=self.on_agent_event,
                cancel_scope=scope,
            )
        finally:
            self.turn = None
        self.messages = outcome.messages
        if outcome.stop_reason is not StopReason.COMPLETED:
            why = f": {outcome.error}" if outcome.error else ""
            self.say(f"the model's turn ended: {outcome.stop_reason.value}{why}", "yellow")


_ABANDONED = object()
PROMPT = "tk> "


def _infos(kernel: Kernel) -> Iterable[Any]:
    snapshot = kernel.snapshot()
    return (*snapshot.running, *snapshot.queued, *snapshot.pending)

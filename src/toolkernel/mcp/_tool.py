"""One tool of an MCP server as a kernel tool: checked arguments, claims, the call, its result.

What a call claims is decided in ``_claims``: the user's ``reads=``/``writes=``/``claims=``, a
preset for the reference servers, inference from the tool's schema, or else a barrier (the
workspace and the server's device, shared for a tool whose ``readOnlyHint`` says so, exclusive
otherwise). Calls of one server that claim finer resources share its device, so they serialize
only where their claims conflict, unless the server was opened with ``serial=True``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pydantic

from .._errors import CallEndedError, MCPServerGoneError, MCPToolError, ToolDeclarationError
from ..kernel import KeyFunction, ToolContext
from ..locks import Claim, Resource, device, exclusive, shared
from ..tools import Tool
from ._arguments import ArgumentsSchema
from ._claims import ServerPlace, barrier_claims, effect_claims, infer_effects
from ._content import error_text_of, first_problem, output_of
from ._presets import Effects, Preset

if TYPE_CHECKING:
    import mcp

__all__ = ["MCPTool", "ServerConnection", "ClaimsFunction", "ToolClaimsFunction"]

ClaimsFunction = Callable[[Mapping[str, Any]], Iterable[Claim]]
"""Claims of one tool's call from its arguments, as ``@tool(claims=...)`` takes them."""
ToolClaimsFunction = Callable[["MCPTool", Mapping[str, Any]], Iterable[Claim] | None]
"""Claims of any tool's call from the tool and the arguments; None leaves the call to the
preset, inference or the barrier."""

_CONNECTION_CLOSED = -32000  # mcp_types.CONNECTION_CLOSED: the transport ended
_STDERR_TAIL = 600  # characters of the server's stderr quoted when it goes away


class ServerConnection:
    """One MCP server as its tools share it: its name, its client, whether it is gone, where it
    reads paths, its preset, and whether its calls must run one at a time."""

    def __init__(
        self,
        name: str,
        command: Sequence[str] = (),
        errlog: Any = None,
        *,
        place: ServerPlace | None = None,
        preset: Preset | None = None,
        serial: bool = False,
    ) -> None:
        self.command = tuple(command)
        self.rename(name)
        self.client: mcp.Client | None = None
        self.gone = False
        self.place = place or ServerPlace()
        self.preset = preset
        self.serial = serial
        self._errlog = errlog
        self._own_errlog = False

    def rename(self, name: str) -> None:
        """Call the server ``name``, in claims (``device("mcp:<name>")``) and messages."""
        self.name = name
        self.device: Resource = device(f"mcp:{name}")

    def capture_stderr(self, file: Any) -> None:
        """Read the tail of ``file`` (the server's stderr) into the error when it goes away."""
        self._errlog, self._own_errlog = file, True

    def gone_error(self, tool: str, *, during: bool) -> MCPServerGoneError:
        when = "while the call ran, so whether it took effect is unknown" if during else "earlier"
        message = (
            f"the MCP server {self.name!r} has gone away {when}: its process exited or closed "
            f"its connection, and none of its tools (such as {tool}) can run until it is "
            f"started again"
        )
        tail = self.stderr_tail()
        if tail:
            message += f"; the last it wrote on stderr: {tail}"
        return MCPServerGoneError(message)

    def stderr_tail(self) -> str:
        """The end of what the server wrote on stderr, when it is captured here."""
        if not self._own_errlog:
            return ""
        try:
            self._errlog.flush()
            fd = self._errlog.fileno()
            size = os.fstat(fd).st_size
            # pread leaves the file offset alone: the server's stderr shares it.
            data = os.pread(fd, _STDERR_TAIL, max(0, size - _STDERR_TAIL))
        except (OSError, ValueError):
            return ""
        lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines()]
        return " / ".join(line for line in lines[-6:] if line)


class MCPTool(Tool):
    """A tool of an MCP server, run through the kernel; :func:`~toolkernel.mcp.stdio_tools`
    and :func:`~toolkernel.mcp.http_tools` make them.

    Its arguments are checked against the tool's ``inputSchema`` (``jsonschema``) when a call is
    admitted; its claims are the user's, a preset's, inferred, or a barrier (see ``_claims``);
    its output is the server's text, or a :class:`~toolkernel.Content` when there is more (images,
    resources, structured content); an ``isError`` result is an ERROR result carrying the
    server's text (:class:`~toolkernel.errors.MCPToolError`), and a server that has gone away
    fails the call with :class:`~toolkernel.errors.MCPServerGoneError`.

    Attributes: ``name`` (what models call it: the server's name for it, after ``prefix``),
    ``remote_name`` (the server's name for it), ``server`` (the server's name), ``device`` (the
    server's device), ``read_only_hint``, ``annotations`` (as the server sent them),
    ``input_schema``, ``output_schema``, ``effects`` (what a call touches, from the server's
    preset or inferred from the schema; None when unknown), ``reads`` and ``writes`` (the path
    arguments declared for it). As for every tool, what is known is an attribute and what
    computes is a method: ``parameters_schema()`` writes a fresh copy of ``input_schema`` (the
    caller may change it), ``claims(arguments, key)`` a call's claims.
    """

    def __init__(
        self,
        connection: ServerConnection,
        spec: Any,
        *,
        prefix: str = "",
        reads: Sequence[str] = (),
        writes: Sequence[str] = (),
        claims: ClaimsFunction | None = None,
        tool_claims: ToolClaimsFunction | None = None,
        wait_timeout: float | None = None,
        run_timeout: float | None = None,
    ) -> None:
        self.remote_name: str = spec.name
        self.server = connection.name
        self.device = connection.device
        annotations = getattr(spec, "annotations", None)
        self.annotations: dict[str, Any] = (
            annotations.model_dump(by_alias=True, exclude_none=True) if annotations else {}
        )
        self.read_only_hint = self.annotations.get("readOnlyHint") is True
        self.input_schema: dict[str, Any] = dict(spec.input_schema or {"type": "object"})
        self.output_schema: dict[str, Any] | None = (
            dict(spec.output_schema) if spec.output_schema else None
        )
        self._connection = connection
        description = (
            spec.description
            or getattr(spec, "title", None)
            or f"{spec.name} (a tool of the MCP server {connection.name!r})"
        )
        super().__init__(
            name=prefix + spec.name,
            description=description,
            wait_timeout=wait_timeout,
            run_timeout=run_timeout,
        )
        self._schema = ArgumentsSchema(self.name, self.input_schema)
        for option, names in (("reads", reads), ("writes", writes)):
            for argument in names:
                if argument not in self._schema.properties:
                    takes = ", ".join(self._schema.properties) or "no arguments"
                    raise ToolDeclarationError(
                        f"{option}= names argument {argument!r} of MCP tool {self.remote_name!r}"
                        f" (server {self.server!r}), which has no such argument (it takes "
                        f"{takes}); name an argument that holds a path"
                    )
        self.reads, self.writes = tuple(reads), tuple(writes)
        self._claims_of_arguments = claims
        self._claims_of_call = tool_claims
        self.effects: Effects | None = None
        self._relative_to_root = False  # how the server reads a relative path: see _claims
        preset = connection.preset
        entry = preset.tools.get(self.remote_name) if preset is not None else None
        properties = self._schema.properties
        if entry is not None and all(name in properties for name in entry.path_arguments):
            self.effects, self._relative_to_root = entry, bool(preset and preset.relative_to_root)
        else:
            self.effects = infer_effects(properties, self.read_only_hint)

    # -- the kernel's side -----------------------------------------------------------------------

    def parse_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Check the arguments against the tool's ``inputSchema``; they go to the server as
        they are (the server fills in its own defaults)."""
        self._schema.check(arguments)
        return dict(arguments)

    def declare(self, arguments: Mapping[str, Any]) -> list[Claim] | None:
        """What the user declared for this call (``claims=``, a function for this tool or one
        for every tool; ``reads=``/``writes=`` are added by ``claims``) beside a share of the
        server's device; None if the user declared nothing for it."""
        finer: Iterable[Claim] | None = None
        if self._claims_of_arguments is not None:
            finer = self._claims_of_arguments(arguments)
        elif self._claims_of_call is not None:
            finer = self._claims_of_call(self, arguments)
        if finer is not None:
            return [self._server_share, *finer]
        return [self._server_share] if self.reads or self.writes else None

    @property
    def _server_share(self) -> Claim:
        """The server's device as calls with finer claims hold it: shared, unless the server
        takes one call at a time."""
        return exclusive(self.device) if self._connection.serial else shared(self.device)

    def claims(self, arguments: Mapping[str, Any], key: KeyFunction) -> Sequence[Claim] | None:
        """The user's claims, else the preset's or inferred ones, else a barrier."""
        if self.reads or self.writes:
            # A path argument the call leaves out claims nothing (as a default of None would).
            arguments = {**dict.fromkeys((*self.reads, *self.writes)), **arguments}
        found = super().claims(arguments, key)
        if found is not None:
            return found
        connection = self._connection
        if self.effects is not None:
            found = effect_claims(
                self.effects,
                arguments,
                key,
                connection.place,
                relative_to_root=self._relative_to_root,
                server=self.device,
                serial=connection.serial,
            )
            if found is not None:
                return found
        return barrier_claims(
            key, self.device, read_only=self.read_only_hint, serial=connection.serial
        )

    def parameters_schema(self) -> dict[str, Any]:
        """The tool's ``inputSchema``, as the server sent it (a copy)."""
        return dict(self.input_schema)

    async def run(self, ctx: ToolContext, **arguments: Any) -> Any:
        return await self.invoke(ctx, arguments)

    async def invoke(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> Any:
        """Call the tool on its server; report the server's progress as ``ctx.progress``."""
        from mcp import MCPError  # the extra is there: stdio_tools made this tool

        connection = self._connection
        client = connection.client
        if connection.gone or client is None:
            raise connection.gone_error(self.name, during=False)

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            text = message or (f"{progress:g}/{total:g}" if total else f"{progress:g}")
            with contextlib.suppress(CallEndedError):  # it came after the call ended
                ctx.progress(text, {"progress": progress, "total": total})

        try:
            result = await client.call_tool(
                self.remote_name, dict(arguments), progress_callback=on_progress
            )
        except pydantic.ValidationError as exc:  # the SDK could not read the server's answer
            raise MCPToolError(
                f"the MCP server {self.server!r} answered the call of {self.remote_name} with "
                f"a result that is not valid MCP ({first_problem(exc)}); whether the call "
                f"took effect is unknown"
            ) from None
        except MCPError as exc:
            if exc.code == _CONNECTION_CLOSED:
                connection.gone = True
                raise connection.gone_error(self.name, during=True) from None
            raise MCPToolError(
                f"the MCP server {self.server!r} refused the call of {self.remote_name}: "
                f"{exc.message} (error {exc.code})"
            ) from None
        if result.is_error:
            raise MCPToolError(
                error_text_of(result)
                or f"the MCP server {self.server!r} reported an error and gave no message"
            )
        return output_of(result)

"""The context a tool receives as its first argument."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import attrs

from .._errors import CallEndedError, NoWorkspaceError
from ..locks import Claim
from ._ahead import ChangedMeanwhile
from ._call import ToolResult
from ._environment import Environment
from ._files import FileSystem

__all__ = ["ToolContext"]

# The kernel's record of the call, handed back to it as it was given: opaque here, so that this
# module (which every tool's signature names) needs nothing of the kernel's bookkeeping.
_Record = Any


class Runner(Protocol):
    """What a context needs of the kernel running its call."""

    async def _call_nested(
        self, parent: _Record, name: str, arguments: Mapping[str, Any]
    ) -> ToolResult: ...

    def _progress(self, record: _Record, message: str, data: Any) -> None: ...

    def _file_observer(self) -> Callable[..., None] | None: ...

    def _fence_for(self, record: _Record) -> Any: ...

    async def _wait_granted(self, record: _Record) -> tuple[ChangedMeanwhile, ...]: ...

    async def _wait_changed(self, record: _Record, seen: int) -> tuple[ChangedMeanwhile, ...]: ...

    def _report_changes(self, record: _Record, changed: Iterable[Claim]) -> None: ...

    def _ran_ahead(self, record: _Record) -> bool: ...

    def _before_grant(self, record: _Record) -> bool: ...

    def _report_thrown_away(self, record: _Record) -> None: ...


@attrs.define(eq=False)
class ToolContext:
    """What a running call knows and may do: its id, its leases, its file access, nested calls.

    ``fs`` is the call's only file access: every read and write is checked against ``claims``
    (a kernel opened without a workspace has none to give: ``fs`` raises
    :class:`~toolkernel.errors.NoWorkspaceError`). When the call ends, its context is revoked:
    ``fs``, ``call`` and ``progress`` then raise :class:`~toolkernel.errors.CallEndedError`, so
    a tool that keeps its context (in a background task, say) can never touch what it no longer
    holds.
    """

    call_id: str
    """The id of the call being run."""
    tool_name: str
    """The name of the tool being run."""
    claims: tuple[Claim, ...]
    """The canonical claims this call holds."""
    depth: int
    """0 for a call the model made, 1 for a call made by a tool, and so on."""
    _environment: Environment | None = attrs.field(repr=False, alias="environment")
    _kernel: Runner = attrs.field(repr=False, alias="kernel")
    _record: _Record = attrs.field(repr=False, alias="record")
    resumed: Any = attrs.field(default=None, init=False)
    """What this tool's previous run of this call left, when it raised ``HoldMore`` (the
    ``state`` it gave); None on a call's first run."""
    # Built on first use: most calls of some tools never touch a file.
    _fs: FileSystem | None = attrs.field(default=None, init=False, repr=False)
    # Taken before the grant by a call running ahead: it writes nothing, and reads on till the
    # call ends (``wait_granted`` has ``fs`` made again, able to write).
    _early_fs: FileSystem | None = attrs.field(default=None, init=False, repr=False)
    _ended: bool = attrs.field(default=False, init=False, repr=False)

    @property
    def fs(self) -> FileSystem:
        """File access checked against ``claims`` (a ``toolkernel.tools.FileAccess``).

        Its I/O methods are async, and run on the kernel's event loop; a ``thread=True`` tool
        calls them through it: ``anyio.from_thread.run(ctx.fs.read_text, path)``. Raises
        :class:`~toolkernel.errors.NoWorkspaceError` in a kernel opened without a workspace.

        Taken while the call runs ahead of its lease grant (:attr:`ran_ahead`), it reads and
        refuses every write (:class:`~toolkernel.errors.UndeclaredAccessError`): nothing a call
        writes may be visible before its grant. Taken again after :meth:`wait_granted`, it
        writes what the claims cover.
        """
        if self._ended:
            raise self._revoked("use its file access")
        if self._fs is None:
            if self._environment is None:
                raise NoWorkspaceError(
                    f"call {self.call_id} ({self.tool_name}) can't use ctx.fs: the kernel has "
                    f"no workspace, as it was opened without a root; give it the directory its "
                    f"tools work in: open_kernel(tools, root=...)"
                )
            # Passed only when set, so an environment that knows none of them keeps working.
            options: dict[str, Any] = {}
            observer = self._kernel._file_observer()
            if observer is not None:  # somebody watches what calls touch
                options["observer"] = observer
            call = self._record.call
            if call.agent is not None:
                options["agent"] = call.agent
            if call.read_first:
                options["read_first"] = True
            fence = self._kernel._fence_for(self._record)
            if fence is not None:  # leases shared with other processes
                options["fence"] = fence
            early = self._kernel._before_grant(self._record)
            if early:
                options["before_grant"] = True
            self._fs = self._environment.file_access(self.claims, self.call_id, **options)
            if early:
                self._early_fs = self._fs
        return self._fs

    def progress(self, message: str, data: Any = None) -> None:
        """Report progress; it is emitted as a ``CallProgress`` event. Not a checkpoint."""
        if self._ended:
            raise self._revoked("report progress")
        self._kernel._progress(self._record, message, data)

    async def call(self, name: str, /, **arguments: Any) -> ToolResult:
        """Run another tool from inside this one and return its result (never raises for it).

        Claims that this call's leases cover are granted within this call's lease group (so
        several nested calls still exclude each other); claims outside them are acquired from
        the kernel like any call's. If that wait would close a cycle (this call's parent waits
        for someone who waits for it), the nested call fails at once with a deadlock error.
        """
        if self._ended:
            raise self._revoked(f"call {name}")
        return await self._kernel._call_nested(self._record, name, arguments)

    @property
    def ran_ahead(self) -> bool:
        """Whether this call started before its leases were granted (its tool lets it:
        :class:`~toolkernel.kernel.Ahead`); it then awaits :meth:`wait_granted` before it
        makes anything visible."""
        return self._kernel._ran_ahead(self._record)

    async def wait_granted(self) -> tuple[ChangedMeanwhile, ...]:
        """Wait until this call's leases are granted; the calls that conflicted with it and
        finished while it ran ahead of its grant, in the order they finished, each with what
        it changed. Always a checkpoint.

        Only a call whose tool lets it run ahead (``ahead``: see
        :class:`~toolkernel.kernel.Ahead`) can start before its grant; for any other call
        this returns at once, with nothing. A call running ahead gives its concurrency slot
        back while it waits here, and takes one again before this returns; the wait is
        bounded by its lease-wait limit (the call then ends ``TIMEOUT``), and cancellable. Its
        run limit runs on meanwhile: it started when the tool did. With leases shared with
        other processes, those are taken here too, after the kernel's own.
        Nothing a call does before this returns may be visible to anyone: its writes are
        committed after, under the leases.

        ::

            run = await run_on_a_copy(...)          # before the grant: invisible
            for earlier in await ctx.wait_granted():
                if touches(earlier.changed, run.read):
                    run = await run_on_a_copy(...)  # holding the leases now
            commit(run)
        """
        if self._ended:
            raise self._revoked("wait for its leases")
        meanwhile = await self._kernel._wait_granted(self._record)
        if self._ended:  # it timed out, or its shared leases could not be taken
            raise self._revoked("go on")
        if self._fs is not None and self._fs is self._early_fs:
            # Made before the grant, it can't write (nor has it the fence of shared leases
            # taken at the grant): the next ``fs`` is made anew; this one reads on.
            self._fs = None
        return meanwhile

    async def wait_changed(self, seen: int = 0) -> tuple[ChangedMeanwhile, ...]:
        """While this call runs ahead of its grant, wait until more than ``seen`` of the calls
        it conflicts with have finished having changed something; all of those so far, as
        :meth:`wait_granted` would give them. Once the call is granted (or if it never ran
        ahead) no more can come, and this waits until cancelled. Always a checkpoint; raises
        ``TypeError`` if ``seen`` is not an int >= 0.

        For a tool whose run ahead is spoilt by such a change: it can stop the run then,
        rather than finish a run it will throw away::

            async with anyio.create_task_group() as group:
                async def watch() -> None:
                    seen = ()
                    while not touches(seen, run_reads):
                        seen = await ctx.wait_changed(len(seen))
                    group.cancel_scope.cancel()  # spoilt: stop it, run again once granted
                ...
        """
        if type(seen) is not int or seen < 0:
            raise TypeError(f"seen is how many changes were seen (an int >= 0), not {seen!r}")
        if self._ended:
            raise self._revoked("wait for what changed meanwhile")
        return await self._kernel._wait_changed(self._record, seen)

    def report_thrown_away(self) -> None:
        """Say that what this call's tool did ahead of its grant is thrown away, and that it
        runs again, holding its leases (a call that finished meanwhile changed what it read:
        :meth:`wait_granted`); counted in ``KernelStatistics.ahead_thrown_away``. Not a
        checkpoint."""
        if self._ended:
            raise self._revoked("report a run thrown away")
        self._kernel._report_thrown_away(self._record)

    def report_changes(self, changed: Iterable[Claim]) -> None:
        """Say what this call changed (exclusive claims on what it wrote, created or
        deleted): what the calls running ahead of their grants that conflict with it are
        told when it finishes (``wait_granted``). Without it, a call is taken to have
        changed every exclusive claim it holds. Not a checkpoint."""
        if self._ended:
            raise self._revoked("report its changes")
        self._kernel._report_changes(self._record, changed)

    def close(self) -> None:
        """Revoke this context (the kernel does, as the call's leases go). Idempotent."""
        self._ended = True
        if self._fs is not None:
            self._fs.close()
        if self._early_fs is not None and self._early_fs is not self._fs:
            self._early_fs.close()

    def _revoked(self, doing: str) -> CallEndedError:
        return CallEndedError(
            f"can't {doing}: call {self.call_id} ({self.tool_name}) has ended and its context "
            f"was revoked; a tool may use its context only while its call runs"
        )

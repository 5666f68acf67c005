"""The context a tool receives as its first argument."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from ..locks import Claim
from ._call import ToolResult

if TYPE_CHECKING:
    from ._kernel import Kernel, _CallRecord

__all__ = ["ToolContext"]


@attrs.define(eq=False)
class ToolContext:
    """What a running call knows and may do: its id, its leases, its file access, nested calls.

    ``fs`` is the call's only file access: every read and write is checked against ``claims``
    (it is None when the kernel has no workspace).
    """

    call_id: str
    """The id of the call being run."""
    tool_name: str
    """The name of the tool being run."""
    claims: tuple[Claim, ...]
    """The canonical claims this call holds."""
    depth: int
    """0 for a call the model made, 1 for a call made by a tool, and so on."""
    fs: Any
    """File access checked against ``claims`` (a ``toolkernel.tools.FileAccess``), or None."""
    _kernel: Kernel = attrs.field(repr=False, alias="kernel")
    _record: _CallRecord = attrs.field(repr=False, alias="record")

    def progress(self, message: str, data: Any = None) -> None:
        """Report progress; it is emitted as a ``CallProgress`` event. Not a checkpoint."""
        self._kernel._report_progress(self._record, message, data)

    async def call(self, name: str, /, **arguments: Any) -> ToolResult:
        """Run another tool from inside this one and return its result (never raises for it).

        Claims that this call's leases cover are granted within this call's lease group (so
        several nested calls still exclude each other); claims outside them are acquired from
        the kernel like any call's. If that wait would close a cycle (this call's parent waits
        for someone who waits for it), the nested call fails at once with a deadlock error.
        """
        return await self._kernel._call_nested(self._record, name, arguments)

"""A submitted call's handle: what is known of the call, waiting for it, cancelling it.

One shape for the objects users hold (a handle, a tool): what is already known and cheap to
read is an attribute or a property (``handle.call_id``, ``handle.finished``, ``handle.result``;
``tool.name``, ``tool.reads``); what waits, acts or computes is a method
(``await handle.wait_finished()``, ``handle.cancel()``; ``tool.parameters_schema()``, which
writes a fresh schema, and ``tool.claims(arguments, key)``).
"""

from __future__ import annotations

from typing import Protocol

from ._call import ToolCall, ToolResult
from ._record import CallRecord

__all__ = ["CallHandle"]


class Waits(Protocol):
    """What a handle needs of its kernel."""

    async def _wait_finished(self, record: CallRecord) -> ToolResult: ...

    def _cancel_call(self, record: CallRecord) -> None: ...


class CallHandle:
    """A submitted call: read its state and result, wait for it, cancel it.

    ``kernel.submit`` and ``kernel.submit_batch`` make them::

        handle = kernel.submit(ToolCall("c1", "Read", {"file_path": "a.txt"}))
        result = await handle.wait_finished()      # waits
        assert handle.finished and handle.result is result
    """

    __slots__ = ("_kernel", "_record", "call")

    def __init__(self, call: ToolCall, record: CallRecord, kernel: Waits) -> None:
        self.call = call
        """The call as submitted."""
        self._record = record
        self._kernel = kernel

    def __repr__(self) -> str:
        return f"<CallHandle {self.call.id!r} {self._record.state.name}>"

    @property
    def call_id(self) -> str:
        """The call's id."""
        return self.call.id

    @property
    def finished(self) -> bool:
        """True once the call has its result."""
        return self._record.result is not None

    @property
    def result(self) -> ToolResult:
        """The call's result; raises ``RuntimeError`` if it has not finished (see
        ``finished``; ``await wait_finished()`` waits for it).

        It was a method: ``handle.result()`` still works, with a ``DeprecationWarning``.
        """
        if self._record.result is None:
            raise RuntimeError(f"call {self.call.id} has not finished")
        return self._record.result

    async def wait_finished(self) -> ToolResult:
        """Wait until the call has finished and return its result. Always a checkpoint."""
        return await self._kernel._wait_finished(self._record)

    def cancel(self) -> None:
        """Cancel the call (synchronous); it finishes with a CANCELLED result, unless its tool
        finishes anyway (a commit it shields from cancellation) and says what it did."""
        self._kernel._cancel_call(self._record)

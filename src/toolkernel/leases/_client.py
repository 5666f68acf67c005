"""The lease service's client (``leases="unix:PATH"``): one connection per kernel, on anyio.

Requests are pipelined on the one connection: each carries a number, and the replies and grants
that answer it carry it back, in whatever order the service decides. A reader task dispatches
them; a writer task sends what ``release`` (synchronous) and the others queue; a heartbeat keeps
the service from presuming this process dead while it is alive.

A lost connection (the service stopped, revoked this client after a silence longer than its
TTL, or sent a frame that is not one of the protocol's: not JSON, nested too deep, a reply of
the wrong shape) means every grant is gone: waiting ``acquire`` calls raise
:class:`LeaseServiceError` (a ``ConnectionError``), and every publish through a fence of an
earlier grant raises :class:`FencedOutError`. There is no reconnection behind the caller's back:
leases held before could not be trusted after it. Open a new backend.
"""

from __future__ import annotations

import contextlib
import math
import os
import shlex
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import attrs
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectSendStream

from .. import _errors
from .._errors import FencedOutError, LeaseReleaseError, LeaseServiceError
from ..locks import Claim, canonical_claims
from ._backend import Grant, Op, Rename, Unlink
from ._fencing import make_change, stage
from ._wire import (
    HEADER_SIZE,
    ProtocolError,
    batched,
    encode_claims,
    encode_op,
    frame,
    frame_length,
    parse_frame,
)

__all__ = ["UnixLeaseClient", "open_unix", "connect_unix"]


@attrs.define(eq=False)
class _Pending:
    event: anyio.Event = attrs.Factory(anyio.Event)
    reply: dict[str, Any] | None = None


def _rebuild(error: object, lost: bool = False) -> BaseException:
    """The exception a service's error reply describes (its own class where it is ours)."""
    if not isinstance(error, dict):
        return LeaseServiceError("the lease service answered a malformed error")
    name = str(error.get("type"))
    message = str(error.get("message"))
    code = error.get("errno")
    cls = getattr(_errors, name, None) if name in _errors.__all__ else None
    if cls is not None and not issubclass(cls, _SERVICE_ERRORS):
        cls = None  # not one the service raises (a signal such as HoldMore, above all)
    if cls is None:
        cls = {
            "PermissionError": PermissionError,
            "FileNotFoundError": FileNotFoundError,
            "FileExistsError": FileExistsError,
            "IsADirectoryError": IsADirectoryError,
            "NotADirectoryError": NotADirectoryError,
        }.get(name)
    if isinstance(code, int) and (cls is None or issubclass(cls, OSError)):
        return (cls or OSError)(code, message, *([error["path"]] if "path" in error else []))
    if cls is not None:
        return cls(message)
    return ValueError(f"the lease service refused the request: {message}")


# The errors a service's reply may name that are rebuilt as themselves: the lease table's, the
# fence's, a path changed under a publish (each takes its message alone).
_SERVICE_ERRORS = (
    _errors.InvalidClaimError,
    _errors.LeaseReleaseError,
    _errors.FencedOutError,
    _errors.LeaseServiceError,
    _errors.PathChangedError,
)


@attrs.define(eq=False)
class UnixLeaseClient:
    """A :class:`LeaseBackend` talking to the lease service; made by :func:`open_unix`."""

    path: str
    _root_fd: int
    _outbox: MemoryObjectSendStream[bytes]
    ttl: float = 0.0
    _pending: dict[int, _Pending] = attrs.field(init=False, factory=dict)
    _held: dict[str, int] = attrs.field(init=False, factory=dict)  # grant id -> request number
    _next: int = attrs.field(init=False, default=0)
    _lost: str | None = attrs.field(init=False, default=None)
    # Set by connect_unix: the block open_unix would have run the client in.
    _block: AbstractAsyncContextManager[UnixLeaseClient] | None = attrs.field(
        init=False, default=None
    )

    # -- the backend --------------------------------------------------------------------------

    async def acquire(
        self, claims: Iterable[Claim], *, priority: int = 0, label: str = ""
    ) -> Grant:
        """Wait until the service grants all of ``claims``; cancelling withdraws the request."""
        wanted = canonical_claims(claims)
        number, pending = self._send(
            {
                "op": "acquire",
                "claims": encode_claims(wanted),
                "priority": priority,
                "label": label,
            }
        )
        try:
            await pending.event.wait()
        except BaseException:
            # Withdraw (or give back what was granted meanwhile): the service releases either.
            self._pending.pop(number, None)
            if self._lost is None:
                self._queue({"op": "release", "n": self._number(), "of": number})
            raise
        reply = self._answer(number, pending, lease=int, token=int)
        grant = Grant(str(reply["lease"]), reply["token"], wanted)
        self._held[grant.id] = number
        return grant

    def release(self, grant: Grant) -> None:
        """Give ``grant`` back. Synchronous, never blocks: the message is queued. A grant lost
        with the connection is released without error."""
        number = self._held.pop(grant.id, None)
        if number is None:
            if self._lost is not None:
                return
            raise LeaseReleaseError(f"can't release lease {grant.id}: it is not held")
        self._queue({"op": "release", "n": self._number(), "of": number})

    def fence(self, grant: Grant) -> UnixFence:
        return UnixFence(self, grant)

    async def aclose(self) -> None:
        """Close the connection: the service releases everything this client held."""
        self._lose("the client was closed")
        block, self._block = self._block, None
        if block is not None:
            await block.__aexit__(None, None, None)

    # -- for tests and tools ------------------------------------------------------------------

    async def status(self) -> dict[str, Any]:
        """The service's counts: connections, held leases, waiting requests."""
        number, pending = self._send({"op": "status"})
        await pending.event.wait()
        return self._answer(number, pending)

    async def ping(self) -> None:
        """A round trip: when it returns, the service has handled everything sent before."""
        number, pending = self._send({"op": "ping"})
        await pending.event.wait()
        self._answer(number, pending)

    # -- publishing ---------------------------------------------------------------------------

    async def publish(self, grant: Grant, op: Op) -> None:
        number = self._held.get(grant.id)
        if number is None or self._lost is not None:
            raise FencedOutError(f"can't make the change: lease {grant.id} is no longer held")
        message = {"op": "publish", "of": number, "token": grant.token, **encode_op(op)}
        reply_number, pending = self._send(message)
        # Once sent, the change is made or refused: a cancellation must not leave the caller
        # unsure which (the reply comes, or the connection's loss wakes this).
        with anyio.CancelScope(shield=True):
            await pending.event.wait()
        self._answer(reply_number, pending, lost=FencedOutError)

    def stage(self, op: Rename) -> Rename:
        return stage(self._root_fd, op)

    def discard(self, scratch: tuple[str, ...]) -> None:
        with contextlib.suppress(OSError):
            make_change(self._root_fd, Unlink(scratch))

    # -- the connection -----------------------------------------------------------------------

    def _number(self) -> int:
        self._next += 1
        return self._next

    def _queue(self, message: Mapping[str, Any]) -> None:
        try:
            self._outbox.send_nowait(frame(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._lose("the connection to the lease service is closed")

    def _send(self, message: Mapping[str, Any]) -> tuple[int, _Pending]:
        if self._lost is not None:
            raise LeaseServiceError(f"no lease service: {self._lost}")
        number = self._number()
        pending = self._pending[number] = _Pending()
        self._queue({**message, "n": number})
        return number, pending

    def _answer(
        self,
        number: int,
        pending: _Pending,
        lost: type[Exception] = LeaseServiceError,
        **fields: type[Any] | tuple[type[Any], ...],
    ) -> dict[str, Any]:
        """The reply to request ``number``, checked to hold ``fields`` of their types; raises
        what an error reply says, or ``lost`` (the connection is lost, or lost here, if a
        reply lacks a field: nothing the service says can be trusted then)."""
        self._pending.pop(number, None)
        reply = pending.reply
        if reply is not None and not reply["ok"]:
            raise _rebuild(reply.get("error"))
        for name, kind in fields.items():
            value = reply.get(name) if reply is not None else None
            if reply is not None and (not isinstance(value, kind) or isinstance(value, bool)):
                self._lose(f"the lease service answered a reply whose {name!r} is {value!r:.80}")
                reply = None
        if reply is None:
            raise lost(f"lost the lease service at {self.path}: {self._lost}")
        return reply

    def _lose(self, why: str) -> None:
        if self._lost is not None:
            return
        self._lost = why
        self._held.clear()
        self._outbox.close()
        for pending in self._pending.values():
            pending.event.set()

    async def run_reader(self, stream: anyio.abc.ByteReceiveStream) -> None:
        reader = BufferedByteReceiveStream(stream)
        try:
            while True:
                body = await reader.receive_exactly(
                    frame_length(await reader.receive_exactly(HEADER_SIZE))
                )
                message = parse_frame(body)
                number, ok = message.get("re"), message.get("ok")
                if not isinstance(ok, bool) or not (
                    number is None or (isinstance(number, int) and not isinstance(number, bool))
                ):
                    raise ProtocolError(f"a reply whose 're' is {number!r:.40} and 'ok' {ok!r:.40}")
                pending = self._pending.get(number) if number is not None else None
                if pending is None:
                    if not ok and number is None:  # the service refused the connection
                        self._lose(str(_rebuild(message.get("error"))))
                        return
                    continue  # a grant for a withdrawn request: the service releases it
                pending.reply = message
                pending.event.set()
        except ProtocolError as exc:
            self._lose(f"the lease service sent a frame this client can't read ({exc})")
        except (
            anyio.EndOfStream,
            anyio.IncompleteRead,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            OSError,
        ):
            pass
        finally:
            self._lose("the lease service closed the connection")

    async def run_writer(
        self, stream: anyio.abc.SocketStream, frames: anyio.abc.ObjectReceiveStream[bytes]
    ) -> None:
        try:
            async with frames:
                async for data in frames:
                    await stream.send(batched(data, frames))
            # Closed by this side: the service sees the end and releases everything at once.
            await stream.send_eof()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self._lose("the connection to the lease service broke")

    async def run_heartbeat(self) -> None:
        while self._lost is None:
            await anyio.sleep(self.ttl / 4)
            self._queue({"op": "ping", "n": 0})


@attrs.frozen
class UnixFence:
    """Publishes one grant's changes through the service, which makes them."""

    client: UnixLeaseClient
    grant: Grant

    def publish(self, op: Op) -> None:
        """Make ``op`` visible if the grant is still held (from a worker thread; blocking)."""
        if isinstance(op, Rename) and op.source_dir is not None:
            staged = self.client.stage(op)
            try:
                anyio.from_thread.run(self.client.publish, self.grant, staged)
            except BaseException:
                self.client.discard(staged.source)
                raise
            return
        anyio.from_thread.run(self.client.publish, self.grant, op)


@asynccontextmanager
async def open_unix(
    path: str, root: str | os.PathLike[str], *, pools: Mapping[str, int] | None = None
) -> AsyncIterator[UnixLeaseClient]:
    """Connect to the lease service at ``path`` serving ``root``; disconnect on the way out.

    Raises :class:`LeaseServiceError` saying how to start one when none listens at ``path``.
    """
    try:
        stream = await anyio.connect_unix(path)
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        raise LeaseServiceError(_no_service(path, root, exc)) from exc
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        found = os.fstat(root_fd)
        sender, receiver = anyio.create_memory_object_stream[bytes](math.inf)
        client = UnixLeaseClient(path, root_fd, sender)
        try:
            async with stream, anyio.create_task_group() as tasks:
                tasks.start_soon(client.run_reader, stream)
                tasks.start_soon(client.run_writer, stream, receiver)
                hello = {
                    "op": "hello",
                    "root": [found.st_dev, found.st_ino],
                    "pools": dict(pools or {}),
                }
                number, pending = client._send(hello)
                await pending.event.wait()
                ttl = client._answer(number, pending, ttl=(int, float))["ttl"]
                if not 0 < ttl < math.inf:  # the heartbeat's period: a quarter of it
                    client._lose(f"the lease service answered a TTL of {ttl!r}")
                    raise LeaseServiceError(f"lost the lease service at {path}: {client._lost}")
                client.ttl = float(ttl)
                tasks.start_soon(client.run_heartbeat)
                try:
                    yield client
                finally:
                    client._lose("the client was closed")
                    tasks.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The tasks catch their own errors: what the group holds came from the caller's
            # block (or the hello), and the caller expects it as raised, not wrapped.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
    finally:
        os.close(root_fd)


def _no_service(path: str, root: str | os.PathLike[str], exc: OSError) -> str:
    why = (
        "there is no such socket"
        if isinstance(exc, FileNotFoundError)
        else "the socket is there, but nothing accepts on it: its service has stopped"
    )
    return (
        f"no lease service listens at {path} ({why}): start one for this workspace with "
        f"`python -m toolkernel serve --root {shlex.quote(os.fspath(root))} --socket "
        f'{shlex.quote(path)}`, or open the kernel with leases="auto" (the service serving '
        f"the root if one runs, leases in this process if none does)"
    )


async def connect_unix(
    path: str, root: str | os.PathLike[str], *, pools: Mapping[str, int] | None = None
) -> UnixLeaseClient:
    """:func:`open_unix` without the block: ``aclose()`` ends it, in the task that connected."""
    block = open_unix(path, root, pools=pools)
    client = await block.__aenter__()
    client._block = block
    return client

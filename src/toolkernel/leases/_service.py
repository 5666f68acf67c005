"""The lease service: one ``LeaseTable`` deciding for every process on a workspace root.

``python -m toolkernel serve --root DIR [--socket PATH]`` runs :func:`serve`. Each client
connects over a Unix socket and speaks the frames of ``_wire``. The service owns the table: a
request is entered in the order its frame arrives, and the grants a release makes are sent to
their clients in the same step (the hand-off of ``LeaseTable.release``). Each grant gets a
fencing token from a counter that only goes up (started at the service's start time in
microseconds, so a restarted service's tokens are greater too).

A client that closes its connection, crashes or falls silent for longer than the TTL loses
everything at once: its held leases are released, its waiting requests withdrawn, and its
connection closed, so it learns it (its next write is refused, not made late).

The fence is here too: a client makes a change visible by asking the service to make it
(``publish``). The service checks the grant is still held and covers what the change alters
exclusively, then makes the change beneath its own root, in the same step of its event loop.
Revocation is another step of that loop, so no change lands after its grant went away.

A malformed frame gets an error reply naming what is wrong (one nested too deep for a recursive
walk included: ``_wire.loads`` refuses it); a frame too long to read gets an error and the
connection is closed. A peer of another user, or a connection past :data:`MAX_CONNECTIONS`
(4,096; a kernel opens one), gets an error frame saying why, and is closed once the client has
closed its end or a second has passed (closed with the client's hello unread, the client's
write would fail before it read why). None of these touches other clients. Any other exception
a connection's tasks meet is a bug: it ends that connection only (dropped as if its client had
gone, with a line on stderr), never the service.

A client that does not read its replies costs the service a bounded amount: its replies and
grants wait in its outbox, and once more than :data:`OUTBOX_LIMIT` (1 MiB) of them wait, its
next frames wait unread in the socket until its writer has got the outbox back under the limit
(backpressure). Nothing is dropped: a grant is queued whatever the outbox holds, so a client
that reads gets every one. Measured: a client of 64 tasks taking and giving back leases keeps
under 1 KB waiting, 2,000 waiters granted at once 140 KB, 100,000 granted at once 7 MB (read
while its frames wait). Dropping a connection past a limit instead was rejected: a burst of
grants to a client doing nothing wrong would have to fit under it. Each connection has a writer
task of its own, so a client that stops reading delays no one else's grants. While its frames
wait, each write it takes counts as hearing from it; a client that takes nothing for the TTL
is dropped, as a silent one is.

What one connection may ask of the table is bounded too: :data:`MAX_REQUESTS` (1,000,000)
requests held and waiting, whose frames add up to :data:`MAX_REQUEST_BYTES` (128 MiB). A request
past either gets an error reply naming the limit (``LeaseServiceError``) and the connection goes
on. A kernel asks for one request a call its own table granted: a batch of 100,000 calls (the
deep-queue scale) is 100,000 requests and 15 to 22 MB of frames, so either limit is six times
that and more. Measured, a request costs the service some 1.5 KB, or eleven times its frame's
length for a big one: one connection's share of the table stays under about 1.5 GB. A
connection with no requests costs some 17 KB. The pools a hello names stay in the table after
their client (the capacity is what every client must agree on), so the table keeps
:data:`MAX_POOLS` (1,024) at the most; a hello naming more new ones is refused whole. These
limits stop a runaway client (a leak, a loop), not one set on filling the machine across
thousands of connections: that one runs as the service's own user (peers of another are
refused) and could as well kill it.

Only whole frames are heard from a client: one that begins a frame and never ends it (a slow
loris) is silent, holds at most a frame (1 MiB) meanwhile, and is dropped after its TTL. Each
frame is handled in one step of the event loop and the reader yields between frames, so a
client sending frames as fast as it can gets one connection's share of the loop: beside two
clients flooding it with pings or releases, another's round trip stayed near a millisecond. A
step takes as long as its frame asks, though: a request of 1 MiB (some 20,000 claims) holds the
loop about 0.3 s, and two clients sending those one after another made every other round trip
0.33 s (1.2 s at worst), slower but never dropped (the late ticks are credited). A publish is
made within its step too (the fence needs it), so a change on a file system that hangs (a
network or FUSE mount beneath the root) stops the loop with it.

Silence is timed by one watchdog for every connection, ticking every quarter TTL. Time during
which the service itself did not run (stopped with SIGSTOP, a suspended machine, a starved
process) is not a client's silence: its frames waited unread in the socket. A tick that comes
late says how long the service was away, and every connection last heard before the tick was
due is credited with that much before the watchdog decides. A client silent for the TTL is
dropped within a quarter TTL more.

Descriptors: the command raises the soft limit on open files to the hard one at start, as
servers do (the common 1,024 is a few hundred clients). Once the limit is reached anyway,
``accept`` fails with ``EMFILE`` (or ``ENFILE``, ``ENOBUFS``, ``ENOMEM``): the service keeps
serving the clients it has, tries again every 0.1 s, and accepts the waiting ones once
descriptors free up; any other failure to accept one connection is that connection's.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, TextIO

import anyio
import anyio.abc
import attrs
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectSendStream

from .._beneath import DIRECTORY_FLAGS
from .._checks import check_capacity, check_ttl
from .._errors import FencedOut, LeaseServiceError, ToolkernelError
from ..locks import Claim, LeaseTable
from ._address import default_socket_path, peer_allowed
from ._fencing import apply_op
from ._wire import (
    HEADER_SIZE,
    ProtocolError,
    batched,
    decode_claims,
    decode_op,
    field,
    frame,
    frame_length,
    parse_frame,
)

__all__ = ["LeaseService", "serve", "DEFAULT_TTL"]

DEFAULT_TTL = 10.0

# accept(2)'s ways of saying the process or the system is out of something a new connection
# needs (trio's serve_listeners retries on the same ones); the waiting clients stay queued.
ACCEPT_CAPACITY_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
ACCEPT_RETRY: Final = 0.1
# ... and its ways of saying the listening socket itself is unusable: no use trying again.
_LISTENER_ERRNOS: Final = frozenset({errno.EBADF, errno.EINVAL, errno.ENOTSOCK})
_MESSAGE_LIMIT: Final = 4096  # characters of an error message sent back: it may quote the frame
OUTBOX_LIMIT: Final = 1 << 20
"""Bytes of replies and grants waiting for one client past which its frames wait unread."""
MAX_REQUESTS: Final = 1_000_000
"""Requests held and waiting one connection may have."""
MAX_REQUEST_BYTES: Final = 128 << 20
"""What the frames of one connection's requests held and waiting may add up to (128 MiB)."""
MAX_CONNECTIONS: Final = 4096
"""Connections served at once; one more gets an error frame and is closed."""
MAX_POOLS: Final = 1024
"""Pools the table keeps a capacity for: each one a hello names stays after its client."""


@attrs.define(eq=False)
class _Connection:
    number: int
    outbox: MemoryObjectSendStream[bytes]
    last_seen: float
    # The client's request number of each lease it has, held or waiting, and back.
    leases: dict[int, int] = attrs.Factory(dict)
    numbers: dict[int, int] = attrs.Factory(dict)
    tokens: dict[int, int] = attrs.Factory(dict)  # held lease id -> token
    # Each lease's charge against MAX_REQUEST_BYTES (its frame's length), and their sum.
    sizes: dict[int, int] = attrs.Factory(dict)
    request_bytes: int = 0
    frame_size: int = 0  # the length of the frame being handled
    closed: bool = False
    # Its tasks' scope: the watchdog cancels it to end a connection fallen silent.
    scope: anyio.CancelScope = attrs.Factory(anyio.CancelScope)
    unsent: int = 0  # bytes queued in the outbox or being written
    # Set by the writer each time it has written some (or ended): the reader waits on it.
    wrote: anyio.Event = attrs.Factory(anyio.Event)

    def send(self, message: Mapping[str, Any]) -> None:
        if not self.closed:
            data = frame(message)
            try:
                self.outbox.send_nowait(data)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                self.closed = True
            else:
                self.unsent += len(data)


def error_reply(number: object, exc: BaseException) -> dict[str, Any]:
    message = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
    error: dict[str, Any] = {"type": type(exc).__name__, "message": message[:_MESSAGE_LIMIT]}
    if isinstance(exc, OSError):
        if exc.errno is not None:
            error["errno"] = exc.errno
        if exc.filename is not None:
            error["path"] = os.fsdecode(exc.filename)
    reply: dict[str, Any] = {"ok": False, "error": error}
    if isinstance(number, int) and not isinstance(number, bool):
        reply["re"] = number
    return reply


@attrs.define(eq=False)
class LeaseService:
    """The state of a running service: its table, its connections, its root."""

    root_fd: int
    ttl: float
    table: LeaseTable
    fixed_pools: frozenset[str]
    _connections: dict[int, _Connection] = attrs.field(init=False, factory=dict)
    _owners: dict[int, tuple[_Connection, int]] = attrs.field(init=False, factory=dict)
    _next_connection: int = attrs.field(init=False, default=0)
    _next_token: int = attrs.field(init=False, factory=lambda: time.time_ns() // 1000)
    _root_id: tuple[int, int] = attrs.field(init=False)
    _pools: int = attrs.field(init=False)  # how many the table has a capacity for (MAX_POOLS)

    def __attrs_post_init__(self) -> None:
        found = os.fstat(self.root_fd)
        self._root_id = (found.st_dev, found.st_ino)
        self._pools = len(self.table.statistics().pool_units_held)

    # -- connections --------------------------------------------------------------------------

    async def accept(self, listener: anyio.abc.SocketListener) -> None:
        """Accept clients on ``listener`` until cancelled, each served by :meth:`handle`.

        Out of descriptors, it waits and tries again, serving the clients it has meanwhile."""
        async with anyio.create_task_group() as connections:
            exhausted = False
            while True:
                try:
                    stream = await listener.accept()
                except (anyio.BrokenResourceError, OSError) as exc:
                    code = _errno(exc)
                    if code in _LISTENER_ERRNOS:
                        raise
                    why = (
                        describe(exc)
                        if code is None
                        else f"{errno.errorcode.get(code, code)}, {os.strerror(code)}"
                    )
                    if code not in ACCEPT_CAPACITY_ERRNOS:
                        complain(f"a connection could not be accepted ({why})")
                        continue
                    if not exhausted:
                        complain(
                            f"can't accept connections ({why}): serving the clients connected, "
                            f"trying again every {ACCEPT_RETRY} s"
                        )
                    exhausted = True
                    await anyio.sleep(ACCEPT_RETRY)
                    continue
                exhausted = False
                connections.start_soon(self.handle, stream)

    async def handle(self, stream: anyio.abc.SocketStream) -> None:
        """Serve one client until it leaves, falls silent past the TTL, or breaks the framing.

        An unexpected exception (a bug) ends this connection only, with a line on stderr."""
        self._next_connection += 1
        number = self._next_connection
        try:
            await self._serve(stream, number)
        except Exception as exc:
            complain(f"connection {number} dropped after an unexpected error: {describe(exc)}")

    async def _serve(self, stream: anyio.abc.SocketStream, number: int) -> None:
        async with stream:
            problem = self._refusal(stream.extra(anyio.abc.SocketAttribute.raw_socket))
            if problem is not None:
                await refuse(stream, problem)
                return
            sender, receiver = anyio.create_memory_object_stream[bytes](math.inf)
            connection = _Connection(number, sender, anyio.current_time())
            self._connections[connection.number] = connection
            try:
                with connection.scope:
                    async with anyio.create_task_group() as tasks:
                        written = anyio.Event()
                        tasks.start_soon(self._write, stream, receiver, connection, written)
                        try:
                            await self._read(stream, connection)
                            # The writer sends what is queued (a last error), then ends.
                            connection.outbox.close()
                            with anyio.move_on_after(1):
                                await written.wait()
                        finally:
                            tasks.cancel_scope.cancel()
            finally:
                self.drop(connection)

    def _refusal(self, raw: Any) -> Exception | None:
        """Why the connection on socket ``raw`` is not served, if it is not."""
        if not peer_allowed(raw):
            return PermissionError(errno.EACCES, "the peer runs as another user")
        if len(self._connections) >= MAX_CONNECTIONS:
            return LeaseServiceError(
                f"can't serve one more connection: the service has {MAX_CONNECTIONS:,} "
                "connections, the most it serves at once"
            )
        return None

    def drop(self, connection: _Connection) -> None:
        """Release everything ``connection`` holds and withdraw what it waits for, at once."""
        connection.closed = True
        connection.outbox.close()
        self._connections.pop(connection.number, None)
        for lease_id in list(connection.leases):
            self._release(connection, lease_id)

    async def watch(self) -> None:
        """Drop every connection silent for the TTL, until cancelled (see the module docstring:
        the service's own stalls are not counted)."""
        tick = self.ttl / 4
        due = anyio.current_time() + tick
        while True:
            await anyio.sleep_until(due)
            now = anyio.current_time()
            away = now - due  # how long past its time the tick came: the service did not run
            for connection in list(self._connections.values()):
                if connection.last_seen < due:
                    connection.last_seen += away
                if now - connection.last_seen >= self.ttl:
                    self._revoke(connection)
            due = now + tick

    async def exit_when_idle(self, seconds: float, scope: anyio.CancelScope) -> None:
        """Cancel ``scope`` once no client has been connected for ``seconds``."""
        idle_since = anyio.current_time()
        while True:
            await anyio.sleep(min(seconds, 1.0) / 4)
            now = anyio.current_time()
            if self._connections:
                idle_since = now
            elif now - idle_since >= seconds:
                scope.cancel()
                return

    def _revoke(self, connection: _Connection) -> None:
        # Its leases go in this step; its tasks end at their next checkpoint.
        connection.scope.cancel()
        try:
            self.drop(connection)
        except Exception as exc:
            complain(
                f"connection {connection.number} dropped after an unexpected error: {describe(exc)}"
            )

    async def _write(
        self,
        stream: anyio.abc.SocketStream,
        frames: anyio.abc.ObjectReceiveStream[bytes],
        connection: _Connection,
        written: anyio.Event,
    ) -> None:
        try:
            async with frames:
                async for data in frames:
                    data = batched(data, frames)
                    await stream.send(data)
                    connection.unsent -= len(data)
                    connection.wrote.set()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            connection.closed = True  # nothing more can reach the client
            connection.wrote.set()
            written.set()

    async def _read(self, stream: anyio.abc.SocketStream, connection: _Connection) -> None:
        reader = BufferedByteReceiveStream(stream)
        while True:
            # Backpressure: what it has not read of its replies waits in its outbox, and its
            # next frame waits in the socket until the outbox is back under the limit.
            while connection.unsent > OUTBOX_LIMIT and not connection.closed:
                connection.wrote = anyio.Event()
                await connection.wrote.wait()
                # It takes what it is sent: it is alive, though its pings wait unread.
                connection.last_seen = anyio.current_time()
            try:
                header = await reader.receive_exactly(HEADER_SIZE)
                length = frame_length(header)
                body = await reader.receive_exactly(length)
            except ProtocolError as exc:
                connection.send(error_reply(None, exc))
                return  # no way to find the next frame
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, OSError):
                return
            if connection.closed:
                return  # revoked meanwhile: nothing more is done for it
            connection.last_seen = anyio.current_time()
            connection.frame_size = length
            number: object = None
            try:
                message = parse_frame(body)
                number = message.get("n")
                reply = self.handle_message(connection, message)
            except (ProtocolError, ToolkernelError, OSError, ValueError, TypeError) as exc:
                reply = error_reply(number, exc)
            if reply is not None:
                connection.send(reply)

    # -- messages -----------------------------------------------------------------------------

    def handle_message(
        self, connection: _Connection, message: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """Act on one frame; return the reply (None for a message that has none)."""
        op = message.get("op")
        number = field(message, "n", int)
        if op == "acquire":
            return self._acquire(connection, number, message)
        if op == "release":
            lease_id = self._lease_of(connection, field(message, "of", int))
            if lease_id is not None:
                self._release(connection, lease_id)
            return None
        if op == "publish":
            return self._publish(connection, number, message)
        if op == "ping":
            return {"re": number, "ok": True}
        if op == "hello":
            return self._hello(number, message)
        if op == "status":
            statistics = self.table.statistics()
            return {
                "re": number,
                "ok": True,
                "connections": len(self._connections),
                "held": statistics.held,
                "waiting": statistics.waiting,
            }
        raise ProtocolError(f"unknown op {op!r}")

    def _hello(self, number: int, message: Mapping[str, Any]) -> dict[str, Any]:
        root = message.get("root")
        if root != list(self._root_id):
            raise ProtocolError(
                "the client's workspace root is not the directory this service serves"
            )
        pools = message.get("pools", {})
        if not isinstance(pools, dict):
            raise ProtocolError("'pools' must be an object")
        for name, capacity in sorted(pools.items()):
            check_capacity(name, capacity)  # as the table would, before anything is compared
        new = sum(self.table.capacity(name) is None for name in pools)
        if self._pools + new > MAX_POOLS:
            raise LeaseServiceError(
                f"can't add {new:,} pools to the {self._pools:,} the service has: it keeps "
                f"{MAX_POOLS:,} pools at the most"
            )
        for name, capacity in sorted(pools.items()):
            current = self.table.capacity(name)
            if current is None:
                self._pools += 1
                self._grant(self.table.set_capacity(name, capacity))
            elif current != capacity:
                raise ProtocolError(
                    f"pool {name!r} has capacity {current} here, not {capacity}: every "
                    "client of one service must give a pool the same capacity"
                )
        return {"re": number, "ok": True, "ttl": self.ttl, "pid": os.getpid()}

    def _acquire(
        self, connection: _Connection, number: int, message: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        if number in connection.numbers:
            raise ProtocolError(f"request number {number} is in use")
        if len(connection.leases) >= MAX_REQUESTS:
            raise LeaseServiceError(
                f"can't queue request {number}: its connection has {MAX_REQUESTS:,} requests "
                "held or waiting, the most one connection may have"
            )
        size = connection.frame_size
        if connection.request_bytes + size > MAX_REQUEST_BYTES:
            raise LeaseServiceError(
                f"can't queue request {number}: its connection's requests held or waiting "
                f"would take {connection.request_bytes + size:,} bytes of frames, over the "
                f"{MAX_REQUEST_BYTES:,} bytes one connection may have"
            )
        claims: list[Claim] = decode_claims(message.get("claims"))
        priority = message.get("priority", 0)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise ProtocolError("'priority' must be an integer")
        lease_id = self.table.request(claims, priority=priority, group=connection, owner=connection)
        connection.leases[lease_id] = number
        connection.numbers[number] = lease_id
        connection.sizes[lease_id] = size
        connection.request_bytes += size
        self._owners[lease_id] = (connection, number)
        if self.table.is_held(lease_id):
            self._grant((lease_id,))
        return None

    def _lease_of(self, connection: _Connection, number: int) -> int | None:
        return connection.numbers.get(number)

    def _release(self, connection: _Connection, lease_id: int) -> None:
        del connection.numbers[connection.leases.pop(lease_id)]
        connection.tokens.pop(lease_id, None)
        connection.request_bytes -= connection.sizes.pop(lease_id)
        del self._owners[lease_id]
        self._grant(self.table.release(lease_id, owner=connection))

    def _grant(self, lease_ids: tuple[int, ...]) -> None:
        for lease_id in lease_ids:
            connection, number = self._owners[lease_id]
            self._next_token += 1
            token = self._next_token
            connection.tokens[lease_id] = token
            connection.send({"re": number, "ok": True, "lease": lease_id, "token": token})

    def _publish(
        self, connection: _Connection, number: int, message: Mapping[str, Any]
    ) -> dict[str, Any]:
        lease_id = self._lease_of(connection, field(message, "of", int))
        token = field(message, "token", int)
        op = decode_op(message)
        if lease_id is None or connection.tokens.get(lease_id) != token:
            raise FencedOut(f"can't make the change: lease with token {token} is not held")
        # Synchronously, in this step of the loop: nothing can revoke the grant meanwhile.
        apply_op(self.root_fd, self.table.claims(lease_id), op)
        return {"re": number, "ok": True}


async def refuse(stream: anyio.abc.SocketStream, problem: Exception) -> None:
    """Tell the client on ``stream`` why it is not served, then hear it out for a second: a
    socket closed with its hello unread would fail the client's write first, and the client
    might never read why."""
    with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
        await stream.send(frame(error_reply(None, problem)))
        await stream.send_eof()
        with anyio.move_on_after(1):
            while True:
                await stream.receive()


async def serve(
    root: str | os.PathLike[str],
    *,
    socket_path: str | None = None,
    ttl: float = DEFAULT_TTL,
    pools: Mapping[str, int] | None = None,
    idle_exit: float | None = None,
    out: TextIO = sys.stdout,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve leases for the workspace at ``root`` until cancelled, SIGINT or SIGTERM (or, with
    ``idle_exit``, until no client has been connected for that many seconds).

    Prints the socket's path on ``out`` once clients can connect, alone on the first line, for
    the program that started it to read; then calls ``ready(path)`` (where the command line
    tells a person at a terminal that it listens, and how to stop it). Removes the socket on
    the way out.
    One service a socket: an exclusive ``flock`` on ``PATH.lock``, held while it serves, makes a
    second service started at the same moment fail with ``EADDRINUSE`` instead of taking the
    path over (binding unlinks a socket file left there, which would leave the first one's
    clients in a table of their own).
    """
    check_ttl("ttl", ttl)  # pools are checked by their table, as everywhere
    if idle_exit is not None:
        check_ttl("idle_exit", idle_exit)
    path = socket_path or default_socket_path(root, create=True)
    # The directory ``root`` names, a link to it followed once: its clients key it so.
    root_fd = os.open(root, DIRECTORY_FLAGS & ~os.O_NOFOLLOW)
    try:
        with _sole_service(path):
            if _answers(path):
                raise OSError(errno.EADDRINUSE, "a lease service already listens there", path)
            service = LeaseService(
                root_fd, ttl, LeaseTable(pools=dict(pools or {})), frozenset(pools or ())
            )
            listener = await anyio.create_unix_listener(path, mode=0o600)
            try:
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    print(path, file=out, flush=True)  # once a signal can stop it cleanly
                    if ready is not None:
                        ready(path)
                    async with anyio.create_task_group() as tasks:
                        tasks.start_soon(service.accept, listener)
                        tasks.start_soon(service.watch)
                        if idle_exit is not None:
                            tasks.start_soon(service.exit_when_idle, idle_exit, tasks.cancel_scope)
                        async for _ in signals:
                            tasks.cancel_scope.cancel()
                            break
            finally:
                # First: cancelled, the close's checkpoint raises, and nothing after it would run.
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                await listener.aclose()
    finally:
        os.close(root_fd)


@contextlib.contextmanager
def _sole_service(path: str) -> Iterator[None]:
    """Hold ``PATH.lock`` exclusively, or fail with ``EADDRINUSE`` if another service does.

    The lock file goes with its service; a lock taken on a file already unlinked by a service
    on its way out is let go and taken again on the new one, so two services never each hold
    a lock of their own."""
    lock = path + ".lock"
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OSError(
                errno.EADDRINUSE,
                "a lease service for this socket is already running (or starting)",
                path,
            ) from None
        held = os.fstat(fd)
        try:
            named = os.stat(lock, follow_symlinks=False)
        except FileNotFoundError:
            named = None
        if named is not None and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)  # unlinked under us: lock the file now at that name
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)  # still locked: a newcomer locks a new file, never this one
        os.close(fd)


def _answers(path: str) -> bool:
    import socket

    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True


def raise_descriptor_limit() -> None:
    """Raise this process's soft limit on open descriptors to its hard limit, as servers do:
    each client holds one, and the common soft limit is 1,024."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):  # an unlimited hard limit (macOS)
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def complain(line: str) -> None:
    print(f"toolkernel serve: {line}", file=sys.stderr, flush=True)


def describe(exc: BaseException) -> str:
    """``exc`` in one line: its type, its message and where it was raised (each of a group's)."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in exc.exceptions)
    try:
        text = " ".join(f"{type(exc).__name__}: {exc}".split())
    except Exception:  # a __str__ that raises
        text = f"{type(exc).__name__} (its message can't be shown)"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        text += f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})"
    return text


def _errno(exc: BaseException) -> int | None:
    """The errno of ``exc`` or of the ``OSError`` it wraps (anyio raises BrokenResourceError)."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__
    return cause.errno if isinstance(cause, OSError) else None

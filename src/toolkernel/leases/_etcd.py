"""Leases kept in etcd (``leases="etcd://host:port[?ttl=SECONDS]"``): several machines, one queue.

How a request is decided
------------------------
A request is one key, ``/toolkernel/<root-id>/queue/<uuid>``, whose value is the JSON of its
canonical claims (with its priority and label, for people reading the queue). The key is attached
to the client's *session*: one etcd lease per client, kept alive by a keepalive thread every third
of its TTL. A client that dies, or stops being heard from, loses the session when the TTL runs
out, and etcd deletes every key of it in one revision: its leases return and its waiters are
withdrawn, within the TTL (10 s by default, ``?ttl=`` to change; whole seconds, rounded up, and
at least etcd's minimum, 1.5 election timeouts: 2 s with etcd's default settings).

Every client mirrors the whole queue of its root in a :class:`~toolkernel.locks.LeaseTable`: it
reads the prefix once, in create-revision order, then follows one watch stream over the prefix
(etcd's gRPC gateway, JSON lines), adding a request for each new key and releasing it for each
deleted one, in revision order. A request of its own is granted when its mirror holds it: when
it conflicts with no key of a lower create revision still present (held or waiting). So
hierarchical paths, shared and exclusive modes, pools and all-or-nothing grants follow exactly
the rules of the in-process table, in etcd's order of arrival. One watch per client serves all
its waiters (rather than one watch per key ahead of each waiter): re-deciding after a delete is
the table's hand-off, O(depth) per front let through, not a re-read. The price: every client
hears of every request of its root. Every client of one root must give the same pool capacities
(``pools=``); a request its mirror cannot decide (an unknown pool) holds nothing there, and its
own client's ``acquire`` raises. So does a value no client can read (not JSON, nested deeper
than any request's, of the wrong shape): it holds nothing in any mirror, and breaks none.

Why every client agrees: in create-revision order and without priorities, "held" is a function
of the keys present, not of the history that led there (a request is held iff it conflicts with
no earlier key present; a later one can never have been granted ahead of an earlier conflicting
one). A client that starts, or re-reads the prefix after the watch fell behind a compaction,
reaches the same verdicts as one that watched from the beginning.

Priorities do not reorder requests across clients. An overtake by priority depends on who was
waiting when the request arrived, which a client that starts later cannot see from the keys
present; two clients deciding differently who holds a file would break safety, which matters
more. So etcd's queue is first come first served (conflict-aware); a priority only orders what a
client has not yet sent.

Fencing: what it promises, and what it does not
-----------------------------------------------
No service stands between a client and the file system, so the client fences itself. Before the
step that makes a change visible (a rename, an unlink...), :meth:`EtcdFence.publish`:

1. refuses if the session is lost, or if less than ``margin`` (a quarter of the TTL) is left of
   it as the client reckons it: from the *sending* time of the last keepalive etcd answered, plus
   the TTL it answered with. A client cut off from etcd stops publishing at TTL minus margin after
   its last keepalive, without needing to hear anything, before etcd can expire it;
2. runs a transaction comparing the request key's create revision with the grant's token (a key
   exists, with that revision, only while its request and its session do); refuses if it fails;
3. checks the reckoning of (1) again, then makes the change.

This promises that a change is made visible only by a client whose key was present in etcd a
moment before and whose session cannot have expired yet by its own clock. It does *not* promise
that the change lands before the leases pass to another client if the process is paused (stopped,
swapped out, a long garbage collection) for longer than the margin between step 3 and the system
call itself, nor if the machine's clock runs slower than etcd's by more than the margin over a
TTL. (etcd renews every lease when it elects a new leader: that only makes the reckoning more
cautious.) A file system that checked a token itself would close that gap; ours check none.

Failures: the client learns etcd's members from the first endpoint and fails over between them
(a killed member costs a retry; the watch resumes from the last revision it saw). A lost
session (TTL passed without a keepalive answered) fails the waiters of that session with
:class:`ConnectionError` and fences its grants out; the next ``acquire`` opens a new session.
Not handled: a member that stops answering without its connections failing (a frozen process)
stalls this client's watch, so its waiters wait, until TCP gives up on the connection.

The HTTP client is httpx, synchronous, on three threads of the backend's own (keepalive, watch,
releases; releases queued together go as one transaction) and in worker threads for puts and
fences: keepalives keep going while the event loop is busy, and the backend works the same under
trio and asyncio. Of the clients of etcd v3 on PyPI, the gRPC ones are asyncio only (aetcd,
etcd3aio) or unmaintained (etcd3), and etcd3gw wraps this same gateway synchronously with
requests; none would add a capability worth a dependency, and the gateway needs only httpx,
which toolkernel already uses. (They were not measured against it.)
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import math
import os
import queue
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import anyio
import attrs
import sniffio

from .._errors import FencedOutError, LeaseReleaseError, LeaseServiceError
from .._extras import missing_extra

try:
    import httpx
except ImportError as exc:  # say which extra brings it
    raise ImportError(missing_extra("etcd", 'leases="etcd://..."', "httpx"), name="httpx") from exc
from ..locks import Claim, LeaseTable, canonical_claims
from ._backend import Grant, Op
from ._fencing import check_covered, make_change
from ._urls import EtcdLeases
from ._wire import ProtocolError, decode_claims, encode_claims, loads

__all__ = ["EtcdLeaseBackend", "EtcdFence", "connect", "root_id"]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)


def _prefix_end(prefix: bytes) -> bytes:
    # The first key past every key starting with ``prefix`` (prefixes here end in "/").
    return prefix[:-1] + bytes([prefix[-1] + 1])


# -- the gateway ----------------------------------------------------------------------------------


class LeaseNotFound(ConnectionError):
    """etcd knows no session of that id: it expired (or was revoked)."""


class _Gateway:
    """Calls to etcd's JSON gateway, failing over between the cluster's members."""

    def __init__(self, endpoints: list[str], timeout: float) -> None:
        self._endpoints = endpoints
        self._current = 0
        self._lock = threading.Lock()
        self._timeout = timeout
        self._streaming: socket.socket | None = None
        self._client = httpx.Client(timeout=httpx.Timeout(timeout, connect=min(timeout, 1.0)))

    def close(self) -> None:
        streaming = self._streaming
        if streaming is not None:
            with contextlib.suppress(OSError):
                streaming.shutdown(socket.SHUT_RDWR)
        self._client.close()

    def discover(self) -> None:
        """Add the client URLs of every member of the cluster to the endpoints."""
        answer = self.call("/v3/cluster/member/list", {})
        for member in answer.get("members", ()):
            for url in member.get("clientURLs", ()):
                with self._lock:
                    if url.rstrip("/") not in self._endpoints:
                        self._endpoints.append(url.rstrip("/"))

    def endpoint(self) -> str:
        with self._lock:
            return self._endpoints[self._current]

    def failed(self, endpoint: str) -> None:
        with self._lock:
            if self._endpoints[self._current] == endpoint:
                self._current = (self._current + 1) % len(self._endpoints)

    def call(
        self,
        path: str,
        body: Mapping[str, object],
        *,
        attempts: int | None = None,
        retry_for: float = 0.0,
    ) -> Any:
        """POST ``body`` to ``path``; on a failure try the next member (``attempts`` in all,
        one per member by default), and keep trying for ``retry_for`` seconds (an election
        takes about one); raise the last error if none answers."""
        give_up = time.monotonic() + retry_for
        while True:
            tries = attempts if attempts is not None else len(self._endpoints)
            error: Exception | None = None
            for _ in range(max(tries, 1)):
                endpoint = self.endpoint()
                try:
                    response = self._client.post(endpoint + path, json=body)
                    answer = _object(response.content)
                except (httpx.TransportError, ValueError) as exc:
                    error = exc
                    self.failed(endpoint)
                    continue
                if "lease not found" in str(answer.get("error", "")):
                    raise LeaseNotFound(answer["error"])
                if response.status_code != 200:
                    # No leader (a member restarting, an election): another member may do.
                    error = ConnectionError(f"etcd at {endpoint} answered {answer!r}")
                    self.failed(endpoint)
                    continue
                return answer
            assert error is not None
            if time.monotonic() + 0.05 > give_up:
                raise error
            time.sleep(0.05)

    def stream(self, path: str, body: Mapping[str, object]) -> Iterator[Any]:
        """POST ``body`` to a streaming ``path`` of the current member; yield each JSON line.

        :meth:`close` ends it from another thread (an error in the reader)."""
        endpoint = self.endpoint()
        timeout = httpx.Timeout(None, connect=min(self._timeout, 1.0))
        try:
            with self._client.stream("POST", endpoint + path, json=body, timeout=timeout) as r:
                # Its socket, so that close() can interrupt the read (closing the response
                # from another thread leaves a blocking recv waiting).
                stream = r.extensions.get("network_stream")
                self._streaming = stream.get_extra_info("socket") if stream is not None else None
                for line in r.iter_lines():
                    if line:
                        yield _object(line)
        except (httpx.TransportError, ValueError):
            self.failed(endpoint)
            raise
        finally:
            self._streaming = None


def _object(data: bytes | str) -> dict[str, Any]:
    """An answer of etcd's gateway: :class:`ProtocolError` (a ``ValueError``, as httpx's own
    decoding raises) unless it is a JSON object, nested no deeper than the wire allows."""
    answer = loads(data)
    if not isinstance(answer, dict):
        raise ProtocolError(f"etcd answered JSON that is not an object: {answer!r:.80}")
    return answer


# -- waking a task of the event loop from one of our threads -------------------------------------


def _threadsafe(event: anyio.Event) -> Callable[[], None]:
    """A function any thread may call to set ``event`` (of the running loop) soon."""
    if sniffio.current_async_library() == "trio":
        import trio

        token = trio.lowlevel.current_trio_token()

        def wake_trio() -> None:
            with contextlib.suppress(trio.RunFinishedError):  # nobody waits any more
                token.run_sync_soon(event.set)

        return wake_trio
    loop = asyncio.get_running_loop()

    def wake_asyncio() -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(event.set)

    return wake_asyncio


@attrs.define(eq=False)
class _Session:
    """One etcd lease: every request of the client while it lives is attached to it."""

    id: int
    ttl: float
    held_until: float
    """``time.monotonic()`` before which etcd cannot have expired it (see the module docstring)."""
    lost: bool = False
    why: str = ""
    """Why it was lost, for the messages of what it fails."""


@attrs.define(eq=False)
class _Request:
    """A request of this client, as the watch thread and ``acquire`` share it."""

    claims: tuple[Claim, ...]
    session: _Session
    wake: Callable[[], None]
    granted: bool = False
    error: BaseException | None = None


# -- the backend --------------------------------------------------------------------------------


class EtcdLeaseBackend:
    """A :class:`~toolkernel.leases.LeaseBackend` on etcd. Open it with :func:`connect`."""

    def __init__(
        self,
        gateway: _Gateway,
        prefix: bytes,
        root: str,
        ttl: float,
        pools: Mapping[str, int] | None,
    ) -> None:
        self._gateway = gateway
        self._prefix = prefix
        self._root = root
        self._ttl = max(1, math.ceil(ttl))  # etcd's TTLs are whole seconds
        self._pools = dict(pools or {})
        self.margin = max(0.25 * self._ttl, 0.1)
        """Seconds of session left below which a fenced write is refused."""
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._session: _Session | None = None
        self._session_lock = threading.Lock()
        # The mirror of the queue, changed by the watch thread only (and read under the lock).
        self._table = LeaseTable(self._pools)
        self._ids: dict[bytes, int] = {}
        self._keys: dict[int, bytes] = {}
        self._revision = 0
        self._mine: dict[bytes, _Request] = {}
        self._deletes: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._ready = threading.Event()
        self._threads = [
            threading.Thread(target=self._keep_alive, name="etcd-keepalive", daemon=True),
            threading.Thread(target=self._watch, name="etcd-watch", daemon=True),
            threading.Thread(target=self._send_deletes, name="etcd-release", daemon=True),
        ]

    # -- lifecycle ------------------------------------------------------------------------------

    def _start(self, discover: bool) -> None:
        if discover:
            self._gateway.discover()
        self._open_session()
        self._load()
        for thread in self._threads:
            thread.start()

    async def aclose(self) -> None:
        """Withdraw every request and release every grant (revoking the session), then stop."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._deletes.put(None)
        with self._lock:
            requests = list(self._mine.values())
            self._mine.clear()
        for request in requests:
            request.error = ConnectionError("the etcd lease backend was closed")
            request.wake()
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._shut_down)

    def _shut_down(self) -> None:
        session = self._session
        if session is not None and not session.lost:
            self._lose(session, "the backend was closed")
            # If no member answers, it expires by itself within its TTL.
            with contextlib.suppress(httpx.HTTPError, ConnectionError, ValueError):
                self._gateway.call("/v3/lease/revoke", {"ID": str(session.id)}, attempts=2)
        # The threads first: each ends at its next look at ``_closed`` (the release thread at
        # the ``None`` queued for it), after the call it may be making, which a closed gateway
        # would fail with an error none of them expects.
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=5)
        self._gateway.close()

    # -- sessions -------------------------------------------------------------------------------

    def _open_session(self) -> _Session:
        with self._session_lock:
            session = self._session
            if session is not None and not session.lost:
                if time.monotonic() < session.held_until:
                    return session
                # Past its TTL by our reckoning: etcd may have expired it, or soon will.
                self._lose(session, "etcd went unheard for its TTL")
            sent = time.monotonic()
            answer = self._gateway.call("/v3/lease/grant", {"TTL": str(self._ttl)})
            ttl = float(answer["TTL"])
            session = _Session(int(answer["ID"]), ttl, sent + ttl)
            self._session = session
            return session

    def _keep_alive(self) -> None:
        while not self._closed.wait(self._ttl / 3):
            session = self._session
            if session is None or session.lost:
                continue
            sent = time.monotonic()
            try:
                answer = self._gateway.call("/v3/lease/keepalive", {"ID": str(session.id)})
            except (httpx.HTTPError, ConnectionError, ValueError):
                if time.monotonic() > session.held_until:
                    self._lose(session, "etcd went unheard for its TTL")
                continue
            ttl = float(answer.get("result", {}).get("TTL", 0))
            if ttl > 0:
                session.held_until = max(session.held_until, sent + ttl)
            else:
                # etcd expired it (every key of it is gone): it was unheard for its TTL.
                self._lose(session, "etcd expired its session, unheard for its TTL")

    def _lose(self, session: _Session, why: str) -> None:
        session.why = why
        session.lost = True
        with self._lock:
            lost = [r for r in self._mine.values() if r.session is session and not r.granted]
        for request in lost:
            request.error = ConnectionError(
                f"lost the etcd session while waiting for leases: {why}"
            )
            request.wake()

    # -- the mirror -----------------------------------------------------------------------------

    def _load(self) -> None:
        """Read the whole queue and rebuild the mirror from it."""
        answer = self._gateway.call(
            "/v3/kv/range",
            {"key": _b64(self._prefix), "range_end": _b64(_prefix_end(self._prefix))},
        )
        kvs = sorted(answer.get("kvs", ()), key=lambda kv: int(kv["create_revision"]))
        with self._lock:
            self._table = LeaseTable(self._pools)
            self._ids = {}
            self._keys = {}
            for kv in kvs:
                self._add(_unb64(kv["key"]), kv.get("value", ""))
            self._revision = int(answer["header"]["revision"])
            granted = self._granted(self._ids[key] for key in self._mine if key in self._ids)
        self._wake(granted)

    def _add(self, key: bytes, value: str) -> None:
        try:
            # Written by another client: ``loads`` refuses a value nested deeper than any
            # request's (json and the checks would raise RecursionError).
            claims = canonical_claims(decode_claims(loads(_unb64(value))["claims"]))
            lease_id = self._table.request(claims)
        except (ValueError, KeyError, TypeError) as exc:
            # A request this client cannot decide (another version, a pool unknown here, a
            # value of the wrong shape) holds nothing in its mirror, nor in any other client's;
            # if it is ours, its acquire fails.
            request = self._mine.get(key)
            if request is not None:
                request.error = exc
                self._wake([request])
            return
        self._ids[key] = lease_id
        self._keys[lease_id] = key

    def _granted(self, lease_ids: Iterable[int]) -> list[_Request]:
        """Mark this client's requests among ``lease_ids`` that the mirror holds as granted."""
        granted = []
        for lease_id in lease_ids:
            request = self._mine.get(self._keys[lease_id])
            if request is not None and not request.granted and self._table.is_held(lease_id):
                request.granted = True
                granted.append(request)
        return granted

    @staticmethod
    def _wake(requests: Iterable[_Request]) -> None:
        for request in requests:
            request.wake()

    def _watch(self) -> None:
        while not self._closed.is_set():
            body = {
                "create_request": {
                    "key": _b64(self._prefix),
                    "range_end": _b64(_prefix_end(self._prefix)),
                    "start_revision": str(self._revision + 1),
                }
            }
            try:
                for message in self._gateway.stream("/v3/watch", body):
                    if self._closed.is_set():
                        return
                    result = message.get("result", {})
                    if int(result.get("compact_revision", 0)) > self._revision:
                        # Fell behind a compaction: the events are gone; read the queue anew.
                        self._load()
                        break
                    self._apply(result.get("events", ()))
            except Exception:
                # The member went away, or the backend closed the stream (any error then).
                if self._closed.is_set():
                    return
            if self._closed.wait(0.05):  # the member went away: resume on the next one
                return

    def _apply(self, events: Iterable[Any]) -> None:
        changed: list[int] = []
        with self._lock:
            # One revision can delete many keys (a transaction, a session expiring): all of its
            # events come in one message, so only revisions before this message were seen.
            seen = self._revision
            for event in events:
                kv = event["kv"]
                key = _unb64(kv["key"])
                revision = int(kv["mod_revision"])
                if revision <= seen:
                    continue  # seen before a reconnection
                if event.get("type") == "DELETE":
                    lease_id = self._ids.pop(key, None)
                    if lease_id is not None:
                        del self._keys[lease_id]
                        changed.extend(self._table.release(lease_id))
                elif key not in self._ids:
                    self._add(key, kv.get("value", ""))
                    if key in self._ids:
                        changed.append(self._ids[key])
                self._revision = revision
            granted = self._granted(i for i in changed if i in self._keys)
        self._wake(granted)

    # -- requests -------------------------------------------------------------------------------

    async def acquire(
        self, claims: Iterable[Claim], *, priority: int = 0, label: str = ""
    ) -> Grant:
        """Wait until all of ``claims`` are granted; withdraw the request if cancelled.

        Always a checkpoint. Raises ``ConnectionError`` if the session is lost while waiting
        (etcd unheard for its TTL) and ``ValueError`` for claims no client can decide (a pool of
        unknown capacity).
        """
        canonical = canonical_claims(claims)
        LeaseTable(self._pools).request(canonical)  # refuse what the mirror would refuse
        if self._closed.is_set():
            raise ConnectionError("the etcd lease backend is closed")
        key = self._prefix + uuid.uuid4().hex.encode()
        value = json.dumps(
            {"claims": encode_claims(canonical), "priority": priority, "label": label}
        ).encode()
        try:
            for attempt in range(2):
                session = self._session
                if session is None or session.lost or time.monotonic() >= session.held_until:
                    session = await anyio.to_thread.run_sync(self._open_session)
                event = anyio.Event()
                request = _Request(canonical, session, _threadsafe(event))
                with self._lock:
                    self._mine[key] = request
                try:
                    token = await anyio.to_thread.run_sync(self._put, key, value, session)
                    break
                except LeaseNotFound:
                    # etcd expired the session before the keepalive thread heard of it: take
                    # the request out of it (losing it wakes its requests), then try a new one.
                    with self._lock:
                        del self._mine[key]
                    self._lose(session, "etcd expired its session, unheard for its TTL")
                    if attempt:
                        raise
            await event.wait()
            if request.error is not None:
                raise request.error
            return Grant(key.decode(), token, canonical)
        except BaseException:
            with self._lock:
                self._mine.pop(key, None)
            self._deletes.put(key)  # withdraws it, or releases a grant that raced the exit
            raise

    def _put(self, key: bytes, value: bytes, session: _Session) -> int:
        """Create the request's key; return its create revision (the fencing token).

        A transaction, so that a retry after a lost answer cannot put the key twice (which
        would not change its create revision, but would answer with another revision)."""
        encoded = _b64(key)
        put = {"key": encoded, "value": _b64(value), "lease": str(session.id)}
        absent = {"key": encoded, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
        answer = self._gateway.call(
            "/v3/kv/txn",
            {
                "compare": [absent],
                "success": [{"request_put": put}],
                "failure": [{"request_range": {"key": encoded}}],
            },
            retry_for=session.ttl,
        )
        if answer.get("succeeded", False):
            return int(answer["header"]["revision"])
        kvs = answer["responses"][0]["response_range"].get("kvs", ())
        if not kvs:
            raise ConnectionError("the request's key vanished as it was made: the session ended")
        return int(kvs[0]["create_revision"])

    def release(self, grant: Grant) -> None:
        """Release ``grant``: synchronous, never blocks (the delete is sent by a thread).

        A grant lost meanwhile is released without error; a second release raises
        :class:`LeaseReleaseError`.
        """
        key = grant.id.encode()
        with self._lock:
            if self._mine.pop(key, None) is None:
                raise LeaseReleaseError(f"can't release lease {grant.id}: it is not held")
        self._deletes.put(key)

    def _send_deletes(self) -> None:
        while True:
            keys = [self._deletes.get()]
            # What queued meanwhile goes in the same transaction: one write (one fsync) for
            # many releases, within etcd's default limit of 128 operations a transaction.
            while len(keys) < 128 and not self._deletes.empty():
                keys.append(self._deletes.get())
            stop = None in keys
            deletes = [{"request_delete_range": {"key": _b64(key)}} for key in keys if key]
            while deletes and not self._closed.is_set():
                try:
                    self._gateway.call("/v3/kv/txn", {"success": deletes})
                    break
                except (httpx.HTTPError, ConnectionError, ValueError):
                    time.sleep(0.05)  # no member answers; the session's TTL is the backstop
            if stop:
                return

    # -- fencing --------------------------------------------------------------------------------

    def fence(self, grant: Grant) -> EtcdFence:
        """The fence through which ``grant``'s holder makes its changes visible."""
        with self._lock:
            request = self._mine.get(grant.id.encode())
        return EtcdFence(self, grant, request.session if request is not None else None)

    def check(self, grant: Grant, session: _Session | None) -> None:
        """Raise :class:`FencedOutError` unless ``grant`` is held now (blocking: a worker
        thread)."""
        self._check_time(grant, session)
        assert session is not None
        compare = {
            "key": _b64(grant.id.encode()),
            "target": "CREATE",
            "result": "EQUAL",
            "create_revision": str(grant.token),
        }
        try:
            answer = self._gateway.call("/v3/kv/txn", {"compare": [compare]}, attempts=2)
        except (httpx.HTTPError, ConnectionError, ValueError) as exc:  # ValueError: unreadable
            unreachable = f"can't write under lease {grant.id}: etcd is unreachable"
            raise FencedOutError(unreachable) from exc
        if not answer.get("succeeded", False):
            raise FencedOutError(f"can't write under lease {grant.id}: it is no longer held")
        self._check_time(grant, session)

    def _check_time(self, grant: Grant, session: _Session | None) -> None:
        if self._closed.is_set() or session is None:
            raise FencedOutError(f"can't write under lease {grant.id}: it is no longer held")
        if session.lost:
            raise FencedOutError(f"can't write under lease {grant.id}: {session.why}")
        left = session.held_until - time.monotonic()
        if left < self.margin:
            raise FencedOutError(
                f"can't write under lease {grant.id}: etcd went unheard for too long "
                f"({left:.2f} s of its TTL left, under the margin of {self.margin:.2f} s)"
            )

    @property
    def root(self) -> str:
        return self._root


@attrs.define(eq=False)
class EtcdFence:
    """Publishes one grant's changes while etcd still holds it (see the module docstring)."""

    _backend: EtcdLeaseBackend
    _grant: Grant
    _session: _Session | None

    def check(self) -> None:
        """Raise :class:`FencedOutError` unless the grant is held (blocking; a worker thread)."""
        self._backend.check(self._grant, self._session)

    def publish(self, op: Op) -> None:
        """Make ``op`` visible if the grant is still held; else raise :class:`FencedOutError`.

        Blocking: call it from a worker thread. ``PermissionError`` if the grant does not cover
        what ``op`` changes; the ``OSError`` of the change itself.
        """
        check_covered(self._grant.claims, op)
        root_fd = os.open(self._backend.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self.check()
            make_change(root_fd, op)
        finally:
            os.close(root_fd)


def root_id(root: str | os.PathLike[str]) -> str:
    """The name of a workspace root in etcd: a digest of its real path."""
    real = os.path.realpath(os.fspath(root))
    return hashlib.sha256(real.encode()).hexdigest()[:16]


async def connect(
    spec: EtcdLeases,
    root: str | os.PathLike[str],
    *,
    pools: Mapping[str, int] | None = None,
    endpoints: Iterable[str] = (),
    discover: bool = True,
) -> EtcdLeaseBackend:
    """Open a session with the etcd cluster ``spec`` names, for the workspace at ``root``.

    Every client of one root must give the same ``pools``. ``endpoints`` adds client URLs to the
    members discovered from the first one (``discover=False``: only those given). The caller
    closes it with ``await backend.aclose()`` (``open_leases`` does).
    """
    real_root = await anyio.to_thread.run_sync(os.path.realpath, os.fspath(root))
    prefix = f"/toolkernel/{root_id(real_root)}/queue/".encode()
    first = f"http://{spec.host}:{spec.port}"
    gateway = _Gateway([first, *(e.rstrip("/") for e in endpoints)], timeout=max(spec.ttl / 3, 0.5))
    backend = EtcdLeaseBackend(gateway, prefix, real_root, spec.ttl, pools)
    try:
        await anyio.to_thread.run_sync(backend._start, discover)
    except (httpx.TransportError, ConnectionError, ValueError) as exc:
        # Nothing answers there, or not as etcd does (ProtocolError is a ValueError): the
        # backend's error, as the lease service's client gives when no service listens.
        gateway.close()
        raise LeaseServiceError(
            f"no session could be opened with etcd at {first} ({exc}): start etcd there (is "
            "the address right?), or keep the leases in this process (leases=None)"
        ) from exc
    except BaseException:
        gateway.close()
        raise
    return backend

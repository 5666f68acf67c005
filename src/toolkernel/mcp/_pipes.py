"""stdin and stdout for the MCP server's stdio transport, read and written from the event loop.

The SDK's ``stdio_server`` reads each line, writes each message and flushes it in a worker
thread (``anyio.wrap_file``): three thread hand-offs a call, most of what a Read costs beyond
the work. Where stdin and stdout are pipes or sockets (as an MCP client starts a server), these
wrappers read and write them non-blocking, woken by the loop; anywhere else (a file, a
terminal) the SDK's own are used.

They also bound a message: a line longer than :data:`MAX_LINE` is not kept whole in memory.
It is read through and dropped, and the request it held, if its ``id`` is near its start as
clients write it, is answered with an error saying how long a message may be. A line that is
not a JSON-RPC message (not UTF-8, not JSON, a batch array, no ``"jsonrpc": "2.0"``) is
answered the same way, as the HTTP transport answers those bytes (``-32700`` or ``-32600``),
instead of going to the SDK, which drops it unanswered and leaves its sender waiting; bytes
that are not UTF-8 are never read as replacement characters (a ``Write`` of them would write
those).

Like the SDK's, the claim moves fds 0 and 1 out of the way for as long as the server runs (to
``/dev/null`` and stderr), so nothing a tool or a command writes can reach the wire.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import stat
from collections.abc import AsyncIterator, Iterator
from typing import Final

import anyio
from mcp_types import jsonrpc_message_adapter
from pydantic import ValidationError

__all__ = ["MAX_LINE", "PipeReader", "PipeWriter", "claimed_pipes"]

MAX_LINE: Final = 64 * 1024 * 1024
"""The longest message the server reads (64 MiB; a Write of a 40 MiB file fits)."""

_CHUNK = 1 << 20
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')


class PipeWriter:
    """What the SDK's writer needs of stdout: ``write`` a message, ``flush`` (nothing to do)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = anyio.Lock()  # the SDK's writer and the reader's refusals share the pipe

    async def write(self, text: str) -> None:
        data = memoryview(text.encode())
        async with self._lock:
            while data:
                try:
                    data = data[os.write(self._fd, data) :]
                except BlockingIOError:
                    await anyio.wait_writable(self._fd)

    async def flush(self) -> None:
        await anyio.lowlevel.checkpoint()


class PipeReader:
    """What the SDK's reader needs of stdin: its lines, as an async iterator."""

    def __init__(self, fd: int, writer: PipeWriter) -> None:
        self._fd = fd
        self._writer = writer

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        pending = bytearray()
        dropping = 0  # bytes of an overlong line read through so far (0: none)
        head = b""  # its first bytes, where its id is
        while True:
            try:
                chunk = os.read(self._fd, _CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not chunk:
                if pending and not dropping:
                    last = await self._checked(bytes(pending))
                    if last is not None:
                        yield last
                return
            start = 0
            while True:
                end = chunk.find(b"\n", start)
                piece = chunk[start:] if end < 0 else chunk[start : end + 1]
                if dropping:
                    dropping += len(piece)
                else:
                    pending += piece
                    if len(pending) > MAX_LINE:
                        head, dropping = bytes(pending[:4096]), len(pending)
                        pending.clear()
                if end < 0:
                    break
                start = end + 1
                if dropping:
                    await self._refuse(head, dropping)
                    dropping, head = 0, b""
                else:
                    line = await self._checked(bytes(pending))
                    pending.clear()
                    if line is not None:
                        yield line
            await anyio.lowlevel.checkpoint()

    async def _checked(self, data: bytes) -> str | None:
        """``data``, one line, as text if it is a JSON-RPC message; else None, its sender told
        what is wrong with it."""
        if not data.strip():
            return None  # a blank line: nothing to read, nothing to answer
        try:
            text = data.decode()
        except UnicodeDecodeError as exc:
            message = f"Parse error: the message is not UTF-8 (a bad byte at offset {exc.start})"
            await self._answer(data[:4096], -32700, message)
            return None
        try:
            jsonrpc_message_adapter.validate_json(text, by_name=False)  # as the SDK reads it
        except RecursionError:
            await self._answer(data[:4096], -32700, "Parse error: nested too deeply")
            return None
        except ValidationError as exc:
            errors = exc.errors()
            invalid = [error["msg"] for error in errors if error["type"] == "json_invalid"]
            if invalid:
                await self._answer(data[:4096], -32700, f"Parse error: {invalid[0]}")
            elif text.lstrip().startswith("["):
                message = "Invalid Request: batches are not supported; send each message alone"
                await self._answer(data[:4096], -32600, message)
            else:
                message = (
                    'Invalid Request: not a JSON-RPC 2.0 message (an object with "jsonrpc": '
                    '"2.0" and a "method", or a "result" or an "error", with an "id")'
                )
                await self._answer(data[:4096], -32600, message)
            return None
        return text

    async def _refuse(self, head: bytes, length: int) -> None:
        message = (
            f"this message of {length:,} bytes is longer than the server reads "
            f"({MAX_LINE:,} bytes); send less at a time (a long file in several Writes or "
            "Edits)"
        )
        await self._answer(head, -32600, message)

    async def _answer(self, head: bytes, code: int, message: str) -> None:
        """Answer the request whose first bytes are ``head`` with a JSON-RPC error."""
        found = _ID.search(head)
        if found is None:
            return  # a notification, or no id to answer: nothing to say it to
        try:
            request_id = json.loads(found.group(1))
        except ValueError:  # an id string with a bad escape: no id to answer
            return
        reply = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
        await self._writer.write(json.dumps(reply) + "\n")


def _pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextlib.contextmanager
def claimed_pipes() -> Iterator[tuple[PipeReader, PipeWriter] | None]:
    """Private non-blocking copies of fds 0 and 1 while fds 0 and 1 point at ``/dev/null`` and
    stderr; None (nothing claimed) unless both are pipes or sockets."""
    if not (_pipe(0) and _pipe(1)):
        yield None
        return
    read_fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    write_fd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    saved_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    saved_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
        # Our copies share their open file descriptions with nobody now: non-blocking
        # changes no other process's stdin or stdout.
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
        writer = PipeWriter(write_fd)
        yield PipeReader(read_fd, writer), writer
    finally:
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (null, saved_in, saved_out, read_fd, write_fd):
            os.close(fd)

"""stdin and stdout for the MCP server's stdio transport, read and written from the event loop.

The SDK's ``stdio_server`` reads each line, writes each message and flushes it in a worker
thread (``anyio.wrap_file``): three thread hand-offs a call, most of what a Read costs beyond
the work. Where stdin and stdout are pipes or sockets (as an MCP client starts a server), these
wrappers read and write them non-blocking, woken by the loop; anywhere else (a file, a
terminal) the SDK's own are used.

They also bound a message: a line longer than :data:`MAX_LINE` is not kept whole in memory.
It is read through and dropped, and the request it held, if its ``id`` is near its start as
clients write it, is answered with an error saying how long a message may be.

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
                    yield pending.decode("utf-8", "replace")
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
                    line = pending.decode("utf-8", "replace")
                    pending.clear()
                    yield line
            await anyio.lowlevel.checkpoint()

    async def _refuse(self, head: bytes, length: int) -> None:
        found = _ID.search(head)
        if found is None:
            return  # a notification, or no id to answer: nothing to say it to
        message = (
            f"this message of {length:,} bytes is longer than the server reads "
            f"({MAX_LINE:,} bytes); send less at a time (a long file in several Writes or "
            "Edits)"
        )
        reply = {
            "jsonrpc": "2.0",
            "id": json.loads(found.group(1)),
            "error": {"code": -32600, "message": message},
        }
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

"""What the etcd tests drive: lease clients in processes of their own, and a loopback TCP proxy
that can stop a client's traffic (a partition, without touching the network)."""

from __future__ import annotations

import contextlib
import json
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

CLIENT = Path(__file__).with_name("etcd_client.py")


class ClientProcess:
    """``etcd_client.py`` in a process of its own; see its docstring for the commands."""

    def __init__(self, url: str, root: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(CLIENT), url, str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._messages: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self._backlog: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    @classmethod
    def start(cls, n: int, url: str, root: Path) -> list[ClientProcess]:
        """Start ``n`` clients side by side (an import of toolkernel takes a while), ready."""
        clients = [cls(url, root) for _ in range(n)]
        for client in clients:
            client.expect("ready", timeout=30)
        return clients

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._messages.put(json.loads(line))
        self._messages.put(None)

    def send(self, **command: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def poll(self, key: str, value: object = None, timeout: float = 0.0) -> dict[str, Any] | None:
        """The first message with ``key`` (equal to ``value`` if given) within ``timeout``."""
        end = time.monotonic() + timeout
        while True:
            for message in self._backlog:
                if key in message and (value is None or message[key] == value):
                    self._backlog.remove(message)
                    return message
            try:
                message = self._messages.get(timeout=max(end - time.monotonic(), 0.001))
            except queue.Empty:
                return None
            if message is None:
                raise EOFError(f"the client process exited ({self.process.poll()})")
            self._backlog.append(message)

    def expect(self, key: str, value: object = None, timeout: float = 10.0) -> dict[str, Any]:
        message = self.poll(key, value, timeout)
        assert message is not None, f"no {key!r} {value!r} within {timeout} s"
        return message

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def close(self) -> None:
        """Ask it to exit (end of its input), kill it if it doesn't, and close the pipes."""
        assert self.process.stdin is not None and self.process.stdout is not None
        with contextlib.suppress(OSError):  # a broken pipe, if it died
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        self.process.stdout.close()


class PausableProxy:
    """Forwards TCP from a loopback port to ``target_port``; :meth:`pause` holds every byte
    (both ways, new connections too) until :meth:`resume`."""

    def __init__(self, target_port: int) -> None:
        self._target = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def pause(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._closed = True
        self._flowing.set()
        self._listener.close()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._flowing.wait()
            try:
                server = socket.create_connection(("127.0.0.1", self._target))
            except OSError:
                client.close()
                continue
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                data = source.recv(65536)
                self._flowing.wait()
                if not data or self._closed:
                    break
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

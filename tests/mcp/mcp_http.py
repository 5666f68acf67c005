"""``python -m toolkernel mcp --http`` started for a test or a benchmark: one way to start it,
find its URL, and stop it."""

from __future__ import annotations

import os
import pathlib
import re
import selectors
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["SERVER", "serving_http"]

SERVER = [sys.executable, "-m", "toolkernel", "mcp"]


@contextmanager
def serving_http(root: pathlib.Path, token: str, *options: str) -> Iterator[str]:
    """The server on ``root`` over HTTP (a free loopback port unless ``options`` say
    ``--http``), requiring ``token``; yields the URL it prints. Raises ``RuntimeError`` with the
    end of its stderr if it prints none within a minute."""
    address = [] if "--http" in options else ["--http", "127.0.0.1:0"]
    command = [*SERVER, "--root", str(root), *address, *options]
    env = {**os.environ, "TOOLKERNEL_MCP_TOKEN": token}
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, env=env)
        assert process.stdout is not None
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(process.stdout, selectors.EVENT_READ)
                ready = selector.select(timeout=60)
            first = process.stdout.readline().decode() if ready else ""
            url = re.search(r"https?://\S+", first)
            if url is None:
                errors.seek(0)
                said = errors.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"the server printed {first!r}, not its URL; stderr: {said}")
            yield url.group(0)
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            process.stdout.close()

"""``python -m toolkernel mcp``'s options: a wrong one is a one-line error naming it, before
anything starts (the server itself is tested in ``tests/mcp/test_mcp_server.py``)."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from toolkernel.cli import main


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--root", "/nonexistent/place"], "--root '/nonexistent/place' is not a directory"),
        (["--leases", "carrier-pigeon"], "--leases:"),
        (["--max-concurrency", "0"], "--max-concurrency takes a whole number of at least 1"),
    ],
)
def test_a_wrong_option_is_one_line_saying_which(
    options: list[str], said: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["mcp", "--root", str(tmp_path), *options]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert error.startswith("mcp: ") and said in error and error.count("\n") == 1, error


@pytest.mark.parametrize("address", ["localhost:http", "127.0.0.1:70000"])
def test_a_wrong_http_address_is_refused_by_the_parser(
    address: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["mcp", "--root", str(tmp_path), "--http", address])
    assert ended.value.code == 2
    assert "--http" in capsys.readouterr().err


def test_the_server_imports_its_transport_before_it_connects_to_the_lease_service(
    tmp_path: pathlib.Path,
) -> None:
    # The lease client's heartbeat runs on the event loop, which an import blocks: the SDK
    # imported after connecting left it silent, and with many servers starting at once past
    # the service's TTL, which dropped them (benchmarks/mcp_server.py, 32 sessions).
    script = """
import sys
import toolkernel._open as opened
from toolkernel.cli import main

connect = opened.open_leases
seen = []

def recording(*args, **kwargs):
    seen.append(sorted(m for m in ("mcp.server.stdio", "mcp.server.lowlevel") if m in sys.modules))
    return connect(*args, **kwargs)

opened.open_leases = recording
try:  # no service listens there: connecting fails, after the transport was imported or not
    main(["mcp", "--root", sys.argv[1], "--leases", "unix:" + sys.argv[2]])
finally:
    print("seen", seen)
"""
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path), str(tmp_path / "no.sock")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "seen [['mcp.server.lowlevel', 'mcp.server.stdio']]" in done.stdout, done.stderr


# -- the exit status, as a client or a script sees it: real server processes ---------------------


def _server(root: pathlib.Path, *options: str, prelude: str = "") -> list[str]:
    """The server's command line; ``prelude`` runs first (to hide a package, say)."""
    code = f"{prelude}\nimport sys\nfrom toolkernel.cli import main\nsys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", code, "mcp", "--root", str(root), *options]


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90
    )


def _one_line_saying(done: subprocess.CompletedProcess[str], said: str) -> None:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"mcp: {said}") and done.stderr.count("\n") == 1, done.stderr


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nothing listens there once it is closed


def test_a_server_that_cannot_listen_says_so_in_one_line(
    tmp_path: pathlib.Path, taken_port: int
) -> None:
    address = f"127.0.0.1:{taken_port}"
    options = ["--leases", "none", "--http", address]
    done = _run(_server(tmp_path, *options))
    assert done.returncode == 1
    _one_line_saying(done, f"can't listen on {address}: address already in use")


def test_a_server_whose_lease_service_is_not_there_says_so_in_one_line(
    tmp_path: pathlib.Path,
) -> None:
    missing = f"/tmp/tk-absent-{os.getpid()}.sock"
    done = _run(_server(tmp_path, "--leases", f"unix:{missing}"))
    assert done.returncode == 1
    _one_line_saying(done, f"no lease service listens at {missing} (there is no such socket)")


def test_a_server_whose_etcd_does_not_answer_says_so_in_one_line(
    tmp_path: pathlib.Path, closed_port: int
) -> None:
    leases = f"etcd://127.0.0.1:{closed_port}"
    done = _run(_server(tmp_path, "--leases", leases))
    assert done.returncode == 1
    _one_line_saying(
        done, f"no session could be opened with etcd at http://127.0.0.1:{closed_port}"
    )


def test_a_server_that_would_start_a_lease_service_without_trio_says_so_at_once(
    tmp_path: pathlib.Path,
) -> None:
    # The service runs on trio: without it, one started on demand never came, and the server
    # said so after waiting a minute for it.
    prelude = "import sys; sys.modules['trio'] = None"
    started = time.monotonic()
    done = _run(_server(tmp_path, prelude=prelude))
    assert done.returncode == 1
    assert time.monotonic() - started < 30
    _one_line_saying(done, "--leases auto: starting the root's lease service needs the 'trio'")
    assert done.stderr.rstrip().endswith("; or pass --leases none")


def test_a_missing_root_is_one_line_and_status_2(tmp_path: pathlib.Path) -> None:
    done = _run(_server(tmp_path / "absent"))
    assert done.returncode == 2
    _one_line_saying(done, "--root")


def test_a_server_ends_with_0_when_its_client_closes_stdin(tmp_path: pathlib.Path) -> None:
    command = _server(tmp_path, "--leases", "none")
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        client = {"name": "raw", "version": "0"}
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
        process.stdin.write(json.dumps(hello).encode() + b"\n")
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["id"] == 1
        process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        process.stdin.close()  # the client is done
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        assert process.stderr is not None
        said = process.stderr.read().decode()
        process.stderr.close()
    assert said == ""


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGHUP"])
def test_an_http_server_stopped_by_a_signal_ends_without_a_traceback(
    tmp_path: pathlib.Path, stop: str
) -> None:
    """Cancelled, uvicorn logged the lifespan it was cut short in as an ERROR, traceback and
    all; told to stop, it stops as on its own signals."""
    import signal

    command = [sys.executable, "-m", "toolkernel", "mcp", "--root", str(tmp_path)]
    server = subprocess.Popen(
        [*command, "--http", "0", "--leases", "none"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    assert server.stdout.readline().startswith("http://127.0.0.1:")
    server.send_signal(getattr(signal, stop))
    _, errors = server.communicate(timeout=30)
    assert "Traceback" not in errors and "ERROR" not in errors, errors
    assert server.returncode == 0

"""``python -m toolkernel mcp``'s options: a wrong one is a one-line error naming it, before
anything starts (the server itself is tested in ``tests/mcp/test_mcp_server.py``)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

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

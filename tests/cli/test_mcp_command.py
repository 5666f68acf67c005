"""``python -m toolkernel mcp``'s options: a wrong one is a one-line error naming it, before
anything starts (the server itself is tested in ``tests/mcp/test_mcp_server.py``)."""

from __future__ import annotations

import pathlib

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

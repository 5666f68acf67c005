"""``python -m toolkernel serve`` as a person and as a program start it: the socket's path alone
on the first line of its output, for the program that reads it; on a terminal, a line saying it
listens and how to stop it; Ctrl-C ends it with no traceback."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from toolkernel.cli import main
from toolkernel.cli._serve import listening
from toolkernel.leases import _service


@pytest.fixture
def socket_path() -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="tks-", dir="/tmp")  # a socket's path has 108 bytes
    yield os.path.join(directory, "s.sock")
    shutil.rmtree(directory)


def test_on_a_terminal_it_says_it_listens_and_ctrl_c_stops_it_cleanly(
    tmp_path: Path, socket_path: str
) -> None:
    said = listening(str(tmp_path), socket_path, None)
    assert said == (
        f"toolkernel lease service for {tmp_path} listening on unix:{socket_path} (Ctrl-C to stop)"
    )
    command = ["-m", "toolkernel", "serve", "--root", str(tmp_path), "--socket", socket_path]
    child = pexpect.spawn(sys.executable, command, encoding="utf-8", timeout=30)
    try:
        child.expect_exact(said + "\r\n")
        assert child.before == socket_path + "\r\n"  # the first line: the path alone
        child.sendintr()
        child.expect(pexpect.EOF)
        assert "Traceback" not in child.before and "KeyboardInterrupt" not in child.before
    finally:
        child.close()
    assert child.exitstatus == 0
    assert not os.path.exists(socket_path)


def test_a_program_reads_the_path_alone_and_nothing_else(tmp_path: Path, socket_path: str) -> None:
    command = [sys.executable, "-m", "toolkernel", "serve", "--root", str(tmp_path)]
    command += ["--socket", socket_path, "--exit-when-idle", "30"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stderr is not None
    try:
        assert process.stdout.readline() == socket_path + "\n"
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    assert process.stdout.read() == ""  # no line for a person: nobody at a terminal reads it
    assert process.stderr.read() == ""
    process.stdout.close()
    process.stderr.close()


def test_the_line_names_an_idle_exit() -> None:
    assert listening("/w", "/s.sock", 30.0) == (
        "toolkernel lease service for /w listening on unix:/s.sock (Ctrl-C to stop; it stops "
        "by itself once no client has been connected for 30 s)"
    )


@pytest.mark.parametrize(
    "interrupt",
    [KeyboardInterrupt(), BaseExceptionGroup("from a task group", [KeyboardInterrupt()])],
    ids=["alone", "in a group"],
)
def test_ctrl_c_before_it_listens_ends_it_with_130_and_no_traceback(
    interrupt: BaseException,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def interrupted(*args: object, **kwargs: object) -> None:
        raise interrupt

    monkeypatch.setattr(_service, "serve", interrupted)
    assert main(["serve", "--root", str(tmp_path)]) == 130
    assert capsys.readouterr() == ("", "")


def test_another_error_is_not_taken_for_ctrl_c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def failing(*args: object, **kwargs: object) -> None:
        raise BaseExceptionGroup("from a task group", [KeyboardInterrupt(), RuntimeError("bug")])

    monkeypatch.setattr(_service, "serve", failing)
    with pytest.raises(BaseExceptionGroup):
        main(["serve", "--root", str(tmp_path)])

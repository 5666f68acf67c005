"""The command line given what it can't use: a one-line error and an exit status, never a
traceback, and never a hang; a reader that leaves early (``| head -1``) ends it quietly."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

import pytest

from toolkernel.cli import main


def toolkernel(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolkernel", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["replay", "--agents", "2", "--scale", "inf"], "--scale must be a finite number"),
        (["replay", "--agents", "2", "--scale", "-1"], "--scale must be a finite number"),
        (["replay", "--agents", "2", "--scale", "nan"], "--scale must be a finite number"),
        (["replay", "--agents", "0"], "--agents must be a whole number, 1 or more"),
        (["replay", "--agents", "2", "--turns", "-5"], "--turns must be a whole number, 0 or"),
        (["serve", "--root", ".", "--exit-when-idle", "-1"], "--exit-when-idle must be a finite"),
    ],
)
def test_a_number_out_of_range_is_an_argument_error(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    """``--scale inf`` hung; ``-1`` and ``nan`` failed every call; ``--agents 0`` and
    ``--turns -5`` meant something else, silently."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert said in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"not json\n", "line 1 is not JSON"),
        (b"\xff\xfe\x00garbage", "is not UTF-8 text"),
    ],
)
def test_a_trace_that_is_not_one_is_a_one_line_error_with_agents_too(
    tmp_path: pathlib.Path, content: bytes, said: str
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(content)
    done = toolkernel("replay", "--agents", "2", str(trace))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert said in done.stderr and done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize("place", ["missing/t.json", "."])
def test_a_trace_the_demo_cant_write_is_said_before_the_session(
    tmp_path: pathlib.Path, place: str
) -> None:
    with pytest.raises(SystemExit, match=r"demo: can't write the trace to .*: (there is no|it is)"):
        main(["demo", "--no-latency", "--trace", str(tmp_path / place)])


def test_a_lease_service_serves_a_root_given_as_a_link_to_it(tmp_path: pathlib.Path) -> None:
    """It opened the root without following a link: 'Not a directory', and an MCP server
    starting a service for such a root waited for one that never came."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to("real")
    done = toolkernel("serve", "--root", str(tmp_path / "link"), "--exit-when-idle", "0.5")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(".sock")


@pytest.mark.parametrize(
    "argv", [["replay"], ["demo", "--no-latency"], ["demo", "--agents", "2", "--no-latency"]]
)
def test_a_reader_that_leaves_early_ends_it_quietly(argv: list[str]) -> None:
    """``| head -1``: a BrokenPipeError's traceback from every line still to say, before. The
    reader here is gone before the first line (no race with a pipe's buffer)."""
    read, write = os.pipe()
    os.close(read)
    process = subprocess.Popen(
        [sys.executable, "-m", "toolkernel", *argv],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write)
    _, errors = process.communicate(timeout=120)
    assert "Traceback" not in errors and "BrokenPipe" not in errors, errors
    assert process.returncode == 141


@pytest.mark.parametrize(
    ("server", "said"),
    [('"unterminated', "No closing quotation"), ("cat", "MCPError")],  # cat: not an MCP server
)
def test_an_mcp_server_the_console_cant_start_is_a_one_line_error(
    tmp_path: pathlib.Path, server: str, said: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolkernel", "console", "--root", str(tmp_path), "--mcp", server],
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr, done.stderr
    assert f"console: can't start the MCP server {server!r}: " in done.stdout
    assert said in done.stdout


def _children(pid: int) -> dict[int, str]:
    """The processes whose parent is ``pid``, with their command lines."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = pathlib.Path(f"/proc/{entry}/stat").read_text()
            line = pathlib.Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
            found[int(entry)] = line.decode(errors="replace")
    return found


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the processes in /proc")
def test_a_replay_by_agents_stopped_by_sigterm_leaves_nothing_replaying_for_ever(
    tmp_path: pathlib.Path,
) -> None:
    """SIGTERM runs no ``finally``: its agents replayed on for nobody, and its lease service
    served nobody for ever. The agents end with it; the service once idle."""
    replay = subprocess.Popen(
        [sys.executable, "-m", "toolkernel", "replay", "--agents", "2", "--scale", "0.5"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    agents: dict[int, str] = {}
    while len(agents) < 2 and time.monotonic() < deadline:
        children = _children(replay.pid)
        agents = {pid: line for pid, line in children.items() if "_replay._agents" in line}
        time.sleep(0.1)
    services = [line for line in children.values() if " serve " in line]
    replay.terminate()
    replay.wait(10)
    assert len(agents) == 2 and len(services) == 1, children
    assert "--exit-when-idle" in services[0]
    deadline = time.monotonic() + 10
    while any(_running(pid) for pid in agents) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in agents if _running(pid)]


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has ended, whoever is yet to reap it)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"

"""The Node side of the MCP tests: the official TypeScript SDK (for ``node/workload.mjs`` and
``node/client.mjs``) and the reference filesystem server, pinned in ``node/package.json`` and
installed once from the npm registry into ``.venv/mcp-node``.

Tests ask for the ``node_modules`` fixture (``from .node_packages import node_modules``), which
is skipped where there is no ``npm`` or the registry can't be reached; the benchmark calls
:func:`install` and says why it skips on :class:`NodePackagesUnavailable`. :func:`seed` makes
the files ``workload.mjs`` appends to, and :func:`tally` reads them against what it reported.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import re
import shutil
import subprocess
from collections.abc import Sequence

import attrs
import pytest

NODE = pathlib.Path(__file__).resolve().parent / "node"
PACKAGE = NODE / "package.json"
WORKLOAD = NODE / "workload.mjs"
CLIENT = NODE / "client.mjs"
PLACE = pathlib.Path(__file__).resolve().parents[2] / ".venv" / "mcp-node"
LINE = re.compile(r"s(\d+)-(\d+)")  # what workload.mjs appends: session k's n-th line


class NodePackagesUnavailable(RuntimeError):
    """npm is missing, or could not install the pinned packages; the message says which."""


def install(run: str | None = None) -> pathlib.Path:
    """Install ``node/package.json``'s packages into ``.venv/mcp-node`` unless they are there
    already, and return its ``node_modules``.

    Processes running side by side install once, under a lock, and give up together: ``run``
    (default: pytest-xdist's id of the test run, shared by its workers, else this process's
    id) marks an install that failed in it, so the others skip at once instead of trying again.
    """
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise NodePackagesUnavailable("needs node and npm, to install the MCP SDK for Node")
    if run is None:
        run = os.environ.get("PYTEST_XDIST_TESTRUNUID", str(os.getpid()))
    wanted = PACKAGE.read_text()
    stamp, failed = PLACE / "installed", PLACE / "failed"
    PLACE.mkdir(parents=True, exist_ok=True)
    with open(PLACE / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if failed.exists() and failed.read_text().startswith(run + "\n"):
            raise NodePackagesUnavailable(failed.read_text().split("\n", 1)[1])
        if not stamp.exists() or stamp.read_text() != wanted:
            (PLACE / "package.json").write_text(wanted)
            quiet = ["--silent", "--no-audit", "--no-fund"]
            try:
                subprocess.run(
                    [npm, "install", *quiet, "--prefix", str(PLACE)],
                    check=True,
                    timeout=120,  # a few seconds where the npm registry can be reached
                )
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
                why = f"npm could not install {PACKAGE.name}'s packages from its registry ({exc})"
                failed.write_text(f"{run}\n{why}")
                raise NodePackagesUnavailable(why) from None
            stamp.write_text(wanted)
    return PLACE / "node_modules"


@pytest.fixture(scope="session")
def node_modules() -> pathlib.Path:
    """The ``node_modules`` directory holding the MCP SDK and the reference filesystem server
    (its program: ``node_modules / ".bin" / "mcp-server-filesystem"``)."""
    try:
        return install()
    except NodePackagesUnavailable as exc:
        pytest.skip(str(exc))


def seed(root: pathlib.Path, count: int) -> list[str]:
    """``count`` files in ``root``, each with a header line; their absolute paths."""
    paths = []
    for i in range(count):
        path = root / f"f{i}.txt"
        path.write_text(f"header {path.name}\n")
        paths.append(str(path))
    return paths


@attrs.frozen
class Tally:
    """What the files hold against what the server reported."""

    reported: int  # edits the server reported successful
    lost: tuple[str, ...]  # reported successful, not in its file
    added: tuple[str, ...]  # in a file, never reported successful
    torn: tuple[str, ...]  # lines that are no header and no "s<k>-<n>", or repeated
    out_of_order: tuple[str, ...]  # a session's lines not in the order it made them
    misplaced: tuple[str, ...]  # a line not right after the last line its session read


def tally(files: Sequence[str], landed: Sequence[Sequence[str]]) -> Tally:
    """``landed``: ``[file, line, after]`` of each edit reported successful (workload.mjs)."""
    expected: dict[str, set[str]] = {file: set() for file in files}
    after: dict[tuple[str, str], str] = {}
    for file, line, last in landed:
        expected[file].add(line)
        after[file, line] = last
    lost: list[str] = []
    added: list[str] = []
    torn: list[str] = []
    out_of_order: list[str] = []
    misplaced: list[str] = []
    for file in files:
        text = pathlib.Path(file).read_text()
        name = pathlib.Path(file).name
        lines = text.split("\n")
        if lines[0] != f"header {name}" or lines[-1] != "":
            torn.append(f"{name}: {text[:40]!r}...{text[-40:]!r}")
        body = lines[1:-1]
        found = set(body)
        torn += [f"{name}: {x!r}" for x in body if not LINE.fullmatch(x)]
        torn += [f"{name}: {x!r} twice" for x in sorted(found) if body.count(x) > 1]
        lost += [f"{name}: {x}" for x in sorted(expected[file] - found)]
        added += [f"{name}: {x}" for x in sorted(found - expected[file])]
        for previous, x in zip(lines[:-2], body, strict=True):
            if (file, x) in after and after[file, x] != previous:
                misplaced.append(f"{name}: {x} after {previous}, not {after[file, x]}")
        last: dict[str, int] = {}
        for x in body:
            if (match := LINE.fullmatch(x)) is not None:
                session, n = match.group(1), int(match.group(2))
                if n <= last.get(session, 0):
                    out_of_order.append(f"{name}: {x} after s{session}-{last[session]}")
                last[session] = n
    return Tally(
        len(landed), tuple(lost), tuple(added), tuple(torn), tuple(out_of_order), tuple(misplaced)
    )

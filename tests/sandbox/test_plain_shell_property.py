"""The sandbox's promise, as a property: a command of file operations, run on an overlay of a
tree and committed, leaves the tree a plain shell leaves, and prints what it prints.

Hypothesis writes the commands from a small vocabulary over a few names (so that operations
meet: a rename onto what another made, a directory removed that a file was written into, a
link replaced), each operation's exit status printed, so a failure in one place shows as a
different output, not only a different tree. Real processes: a few dozen examples.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import tempfile
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkernel import sandbox

from ..trees import snapshot
from .scenario import scenario

pytestmark = pytest.mark.skipif(
    sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}"
)

NAMES = ("a", "b", "d", "d/x", "d/e", "e", "e/y")
PYTHON_RENAME = "python3 -c 'import os, sys; os.rename(sys.argv[1], sys.argv[2])'"


def operations() -> st.SearchStrategy[str]:
    name = st.sampled_from(NAMES)
    return st.one_of(
        st.builds("echo {1} > {0}".format, name, st.sampled_from(["one", "two"])),
        st.builds("echo more >> {}".format, name),
        st.builds("rm {}".format, name),
        st.builds("rm -r {}".format, name),
        st.builds("mkdir {}".format, name),
        st.builds("mv {} {}".format, name, name),
        st.builds(f"{PYTHON_RENAME} {{}} {{}}".format, name, name),
        st.builds("ln {} {}".format, name, name),
        st.builds("ln -sfn {} {}".format, st.sampled_from(["a", "../outside", "d"]), name),
        st.builds("chmod 600 {}".format, name),
        # Files only: a directory copied into itself stops where its listing's order says.
        st.builds("cp {} {}".format, st.sampled_from(["a", "d/x", "b"]), name),
    )


def seed(root: pathlib.Path) -> None:
    (root / "a").write_text("a\n")
    (root / "d").mkdir()
    (root / "d" / "x").write_text("x\n")
    (root / "e").symlink_to("d")


def outside(root: pathlib.Path) -> dict[str, Any]:
    """What is beside ``root``, in its parent."""
    return {
        name: found
        for name, found in snapshot(root.parent).items()
        if name != root.name and not name.startswith(f"{root.name}/") and name != "(linked)"
    }


@settings(
    max_examples=int(os.environ.get("TOOLKERNEL_SANDBOX_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(operations(), min_size=1, max_size=6))
def test_a_command_ends_as_in_a_plain_shell(steps: list[str]) -> None:
    command = "; ".join(f"{step} 2>/dev/null; echo $?" for step in steps)
    place = pathlib.Path(tempfile.mkdtemp(prefix="toolkernel-property-"))
    try:
        # Each tree beside nothing of the other's: a link may lead out of it (../outside).
        plain, sandboxed = place / "p" / "plain", place / "s" / "sandboxed"
        for root in (plain, sandboxed):
            root.mkdir(parents=True)
            seed(root)
        expected = subprocess.run(
            ["bash", "-c", command], cwd=plain, capture_output=True, text=True, check=True
        ).stdout
        found = scenario(str(sandboxed), command)
        assert found["underneath"] == []
        assert found["output"] == expected
        assert snapshot(sandboxed) == snapshot(plain)
        assert outside(sandboxed) == outside(plain)  # what was written through a link out of it
    finally:
        shutil.rmtree(place)


def plain_run(root: pathlib.Path, command: str) -> str:
    """``command`` in a plain shell in ``root``; what it printed."""
    return subprocess.run(
        ["bash", "-c", command], cwd=root, capture_output=True, text=True, check=True
    ).stdout


@settings(
    max_examples=int(os.environ.get("TOOLKERNEL_SANDBOX_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(operations(), min_size=1, max_size=4),
    st.lists(operations(), min_size=1, max_size=3),
    st.sampled_from(["before_read", "before_check"]),
)
def test_another_writer_meanwhile_loses_nothing(
    steps: list[str], others: list[str], when: str
) -> None:
    # Another writer changes the tree once the command has run on its overlay (before its
    # change set is read, or before it is checked). What the sandbox promises of such a
    # writer (a command reads live what it only reads, unchecked) is that its commit loses
    # nothing of it: every path ends as the command left it where only the command changed
    # it, as the other writer left it where only it did; where both did, as the command
    # leaves it run after the other writer (its change there does not depend on what was
    # there: a rename onto it). Else the run is taken for a conflict, and the tree is what the
    # other writer alone leaves.
    command = "; ".join(f"{step} 2>/dev/null; echo $?" for step in steps)
    other = "; ".join(f"{step} 2>/dev/null" for step in others) + "; true"
    place = pathlib.Path(tempfile.mkdtemp(prefix="toolkernel-property-"))
    try:
        names = ("run", "seed", "command", "other", "other, then command")
        roots = {name: place / str(at) / "root" for at, name in enumerate(names)}
        for root in roots.values():
            root.mkdir(parents=True)
            seed(root)
        plain_run(roots["command"], command)
        plain_run(roots["other"], other)
        plain_run(roots["other, then command"], other)
        plain_run(roots["other, then command"], command)
        found = scenario(str(roots["run"]), command, **{when: other})
        start, mine, theirs, after, result = (
            entries(roots[name]) for name in ("seed", "command", "other", names[4], "run")
        )
        if found["underneath"]:
            # Nothing of the run is committed. What it wrote beside the root, through a link
            # out of it, went straight there (a write outside the workspace is policy, and the
            # test's directory is in the temporary directory, which the policy lets it write):
            # that is as one of the runs left it.
            inside = {path: value for path, value in result.items() if not path.startswith("../")}
            assert inside == {p: v for p, v in theirs.items() if not p.startswith("../")}, found
            for path in result.keys() - inside.keys():
                assert result[path] in (theirs.get(path), mine.get(path), after.get(path)), path
            return
        for path in start.keys() | mine.keys() | theirs.keys() | result.keys():
            if mine.get(path) == start.get(path):
                assert result.get(path) == theirs.get(path), (path, found)
            elif theirs.get(path) == start.get(path) or theirs.get(path) == mine.get(path):
                assert result.get(path) == mine.get(path), (path, found)
            else:
                assert result.get(path) == mine.get(path) == after.get(path), (path, found)
    finally:
        shutil.rmtree(place)


def entries(root: pathlib.Path) -> dict[str, Any]:
    """The tree in and beside ``root``, each path by its own entry (no links between)."""
    found = {name: value for name, value in snapshot(root).items() if name != "(linked)"}
    found.update({f"../{name}": value for name, value in outside(root).items()})
    return found

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
import stat
import subprocess
import tempfile
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkernel import sandbox

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


def tree(root: pathlib.Path) -> dict[str, Any]:
    found: dict[str, Any] = {}
    inodes: dict[int, list[str]] = {}
    for place in sorted(root.rglob("*")):
        name = place.relative_to(root).as_posix()
        status = place.lstat()
        if stat.S_ISLNK(status.st_mode):
            found[name] = ("link", os.readlink(place))
        elif stat.S_ISDIR(status.st_mode):
            found[name] = ("dir", stat.S_IMODE(status.st_mode))
        else:
            found[name] = ("file", place.read_bytes(), stat.S_IMODE(status.st_mode))
            inodes.setdefault(status.st_ino, []).append(name)
    found["(linked)"] = sorted(names for names in inodes.values() if len(names) > 1)
    return found


def outside(root: pathlib.Path) -> dict[str, Any]:
    """What is beside ``root``, in its parent."""
    return {
        name: found
        for name, found in tree(root.parent).items()
        if name != root.name and not name.startswith(f"{root.name}/") and name != "(linked)"
    }


@settings(
    max_examples=int(os.environ.get("TOOLKERNEL_SANDBOX_EXAMPLES", "30")),
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
        assert tree(sandboxed) == tree(plain)
        assert outside(sandboxed) == outside(plain)  # what was written through a link out of it
    finally:
        shutil.rmtree(place)

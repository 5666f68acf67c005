"""Renames overlayfs refuses are made by the sandbox's rename supervisor, as a plain shell's
file system makes them; and what it renamed is logged, so that the change set tells an entry
renamed from one changed in place.

Real commands on real overlays (``scenario.py``), as this process's user and as an
unprivileged one (in a user namespace) where the tests run as root.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import pytest

from toolkernel import sandbox
from toolkernel.sandbox import Overlay

from ..tools.privileges import as_a_user
from .scenario import run_as

pytestmark = pytest.mark.skipif(
    sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}"
)
RENAME = (
    "import os, sys\ntry: os.rename(sys.argv[1], sys.argv[2])\nexcept OSError as e: print(e.errno)"
)


@pytest.fixture(params=["this user", "unprivileged"])
def user(request: pytest.FixtureRequest) -> list[str]:
    return as_a_user() if request.param == "unprivileged" else []


@pytest.fixture
def root(shared_directory: pathlib.Path, user: list[str]) -> pathlib.Path:
    (shared_directory / "d" / "sub").mkdir(parents=True)
    (shared_directory / "d" / "sub" / "deep.txt").write_text("deep\n")
    (shared_directory / "d" / "link").symlink_to("sub/deep.txt")
    (shared_directory / "d" / "run.sh").write_text("#!/bin/sh\n")
    (shared_directory / "d" / "run.sh").chmod(0o755)
    (shared_directory / "full").mkdir()
    (shared_directory / "full" / "kept.txt").write_text("kept\n")
    if user:
        for place in [shared_directory, *shared_directory.rglob("*")]:
            os.lchown(place, 65534, 65534)
    return shared_directory


def rename(user: list[str], root: pathlib.Path, source: str, target: str) -> dict[str, Any]:
    return run_as(user, root, f"python3 -c '{RENAME}' {source} {target}")


def test_a_directory_of_the_lower_layer_is_renamed_with_all_it_holds(
    user: list[str], root: pathlib.Path
) -> None:
    found = rename(user, root, "d", "e")
    assert found["underneath"] == []
    assert not (root / "d").exists()
    assert (root / "e" / "sub" / "deep.txt").read_text() == "deep\n"
    assert os.readlink(root / "e" / "link") == "sub/deep.txt"
    assert (root / "e" / "run.sh").stat().st_mode & 0o777 == 0o755
    assert sorted(os.listdir(root)) == ["e", "full"]


@pytest.mark.parametrize(
    ("source", "target", "error"),
    [("d", "d/sub/inside", 22), ("d", "full", 39), ("missing", "x", 2)],
)
def test_a_rename_that_fails_changes_nothing(
    user: list[str], root: pathlib.Path, source: str, target: str, error: int
) -> None:
    before = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    found = rename(user, root, source, target)
    assert found["output"].strip() == str(error)
    assert found["changes"] == []
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == before


def test_the_renames_log_follows_an_entry_through_its_directorys_renames(
    tmp_path: pathlib.Path,
) -> None:
    overlay = Overlay.create(tmp_path)
    try:
        log = pathlib.Path(overlay.place) / "renames"
        steps = [("a.txt", "dir/a.txt"), ("dir", "moved"), ("b.txt", "c.txt"), ("x", "c.txt")]
        log.write_bytes(b"".join(f"{s}\0{t}\0".encode() for s, t in steps))
        # c.txt came from b.txt, then x replaced it: what is there came from x.
        assert overlay.renamed() == {"moved/a.txt": "a.txt", "moved": "dir", "c.txt": "x"}
    finally:
        overlay.discard()


def test_a_rename_given_a_bad_pointer_fails_as_the_kernel_would(
    user: list[str], root: pathlib.Path
) -> None:
    call = (
        "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
        "print(libc.rename(ctypes.c_void_p(8), b'x'), ctypes.get_errno())"
    )
    assert run_as(user, root, f'python3 -c "{call}"')["output"] == "-1 14\n"  # EFAULT

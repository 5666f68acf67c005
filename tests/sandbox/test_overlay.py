"""A run's layers are removed whatever removes them, and however often: the remover thread and
the interpreter's exit may take the same tree away at once, and neither may fail for it."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import threading
import time

from toolkernel.sandbox import _overlay


def test_two_removers_of_one_tree_both_end_without_error(tmp_path: pathlib.Path) -> None:
    place = tmp_path / "layers"
    for outer in range(40):
        for inner in range(25):
            (place / f"d{outer}" / f"e{inner}").mkdir(parents=True)
    (place / "d0" / "e0").chmod(0)  # as overlayfs leaves its work directory
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def remove() -> None:
        start.wait()
        try:
            _overlay._remove_tree(str(place))
        except BaseException as exc:  # what the test is about: nothing escapes
            errors.append(exc)

    removers = [threading.Thread(target=remove) for _ in range(2)]
    for remover in removers:
        remover.start()
    for remover in removers:
        remover.join()
    assert errors == []
    assert not os.path.lexists(place)


def _left_by(base: pathlib.Path, name: str, owner: str) -> pathlib.Path:
    """An overlay's place as a run leaves it, owned by ``owner`` (its ``started`` file)."""
    place = base / f".toolkernel-overlay-{name}"
    (place / "upper" / "target").mkdir(parents=True)
    (place / "work" / "work").mkdir(parents=True)
    (place / "work" / "work").chmod(0)  # as overlayfs leaves it
    (place / "started").write_text(owner)
    return place


def test_the_layers_a_killed_process_left_are_swept_and_no_one_elses(
    tmp_path: pathlib.Path,
) -> None:
    root, base = tmp_path / "root", tmp_path / "base"
    root.mkdir()
    base.mkdir()
    gone = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    began = _overlay._process_start(gone.pid)
    gone.kill()
    gone.wait()
    namespace = _overlay._pid_namespace()
    dead = _left_by(base, "dead", f"{gone.pid} {began} {namespace}\n")
    alive = _left_by(base, "alive", _overlay._owner())
    elsewhere = _left_by(base, "other-ns", f"{gone.pid} {began} pid:[1]\n")
    unowned = _left_by(base, "older", "")
    overlay = _overlay.Overlay.create(root, base=str(base))
    try:
        deadline = time.monotonic() + 20
        while dead.exists():
            assert time.monotonic() < deadline, "the dead process's layers are still there"
            time.sleep(0.02)
        assert alive.exists() and elsewhere.exists() and unowned.exists()
        assert os.path.isdir(overlay.upper)
    finally:
        overlay.discard()
        for place in (alive, elsewhere, unowned):
            _overlay._remove_tree(str(place))

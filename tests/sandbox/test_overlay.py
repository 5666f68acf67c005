"""A run's layers are removed whatever removes them, and however often: the remover thread and
the interpreter's exit may take the same tree away at once, and neither may fail for it."""

from __future__ import annotations

import os
import pathlib
import threading

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

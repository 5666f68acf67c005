"""Keying a path: ``Workspace.key`` against the lexical ``path()``, side by side in one run.

The kernel keys every path of every call twice, on the event loop (at admission and after the
grant), so the common case, a canonical relative spelling with no link on the way, must cost
little more than the lexical normalization ``tk.path`` does. Variants, per key:

a. ``path(p)`` — lexical only: the floor, no file system at all;
b. ``ws.key(p)`` — the fast path: one ``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`` (one
   relative ``lstat`` for a single component) beneath the root's descriptor;
c. ``ws.key(p)`` without ``openat2`` — the fallback: a relative ``lstat`` per prefix (macOS,
   old kernels);
d. the component walk — what every key cost before the fast path: an ``lstat`` (by absolute path)
   per component, links followed by hand. Still what a spelling with a link or a ``..`` costs.

Paths: ``f1`` (depth 1), ``src/pkg/a.py`` (depth 3), ``src/pkg/new.py`` (its last component does
not exist yet), ``a/b/c/d.py`` (depth 4), and ``link/pkg/a.py`` (through a link: the fast path
meets it and hands over to the walk). Target (issue 7): ``ws.key`` of depth 1 to 4 without links
in at most 3 us. Each figure is the best of several interleaved repetitions of a tight loop,
by ``time.perf_counter``. Benchmarks are never asserted as tests: read the PASS/MISS lines.

Run from the repository root::

    .venv/bin/python benchmarks/keys.py            # full run
    .venv/bin/python benchmarks/keys.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import pathlib
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Sequence

import toolkernel as tk
from toolkernel import _beneath
from toolkernel.tools import Workspace

TARGET_US = 3.0
PATHS = ("f1", "src/pkg/a.py", "src/pkg/new.py", "a/b/c/d.py", "link/pkg/a.py")
NO_LINKS = ("f1", "src/pkg/a.py", "src/pkg/new.py", "a/b/c/d.py")


def make_tree(root: pathlib.Path) -> None:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "a.py").touch()
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "a" / "b" / "c" / "d.py").touch()
    (root / "f1").touch()
    (root / "link").symlink_to("src")


def time_us(action: Callable[[str], object], spelling: str, loops: int) -> float:
    began = time.perf_counter()
    for _ in range(loops):
        action(spelling)
    return (time.perf_counter() - began) / loops * 1e6


def measure(ws: Workspace, loops: int, reps: int) -> dict[tuple[str, str], float]:
    """Best microseconds per key of each (variant, path), repetitions interleaved."""
    openat2 = _beneath.openat2

    def without_openat2(spelling: str) -> object:
        _beneath.openat2 = None
        try:
            return ws.key(spelling)
        finally:
            _beneath.openat2 = openat2

    variants: dict[str, Callable[[str], object]] = {
        "path": tk.path,
        "key": ws.key,
        "key_lstat": without_openat2,
        "walk": lambda spelling: ws._resolve_key(spelling)[0],
    }
    for spelling in PATHS:
        assert ws.key(spelling) == ws._resolve_key(spelling)[0]
    best: dict[tuple[str, str], float] = {}
    for rep in range(reps):
        names = list(variants) if rep % 2 == 0 else list(reversed(variants))
        for spelling in PATHS:
            for name in names:
                figure = time_us(variants[name], spelling, loops)
                best[name, spelling] = min(best.get((name, spelling), figure), figure)
    return best


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer loops and reps")
    options = parser.parse_args(argv)
    loops, reps = (2_000, 3) if options.quick else (20_000, 15)
    with tempfile.TemporaryDirectory() as directory:
        make_tree(pathlib.Path(directory))
        with Workspace(directory) as ws:
            if ws.fold_case or ws.unicode_form:
                print("this file system folds names: keys take the walk (no fast path)")
            us = measure(ws, loops, reps)
    print(
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}, "
        f"openat2 {'yes' if _beneath.openat2 else 'no'}, best of {reps} x {loops:,} keys"
    )
    header = f"  {'path':<16}{'path()':>9}{'key':>9}{'x':>6}{'lstat':>9}{'x':>6}{'walk':>9}{'x':>6}"
    print(header + "   (us per key; x = times path())")
    for spelling in PATHS:
        lexical = us["path", spelling]
        row = f"  {spelling:<16}{lexical:>9.2f}"
        for name in ("key", "key_lstat", "walk"):
            row += f"{us[name, spelling]:>9.2f}{us[name, spelling] / lexical:>6.1f}"
        print(row)
    worst = max(us["key", spelling] for spelling in NO_LINKS)
    verdict = "PASS" if worst <= TARGET_US else "MISS"
    speedup = min(us["walk", s] / us["key", s] for s in NO_LINKS)
    print(
        f"ws.key, depth 1-4, no link: at most {worst:.2f} us (target <= {TARGET_US:g} us): "
        f"{verdict}; at least {speedup:.1f}x faster than the walk"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

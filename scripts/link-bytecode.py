"""Link the bytecode the installers compiled into the tree ``tests/conftest.py`` reads it from.

With ``PYTHONDONTWRITEBYTECODE`` set, the tests keep bytecode under ``.venv/pycache``
(``sys.pycache_prefix``), and Python then reads every module's bytecode there alone: each
module of the standard library and of the installed packages would be compiled again on the
first run, by every test process at once. Linking what pip and Python's own installer compiled
saves that (a first collection of the tests in one process: 36-39 s, then 27-28 s).
Idempotent; run by ``ensure-venv.sh``.
"""

import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path


def link(prefix: Path, roots: Iterable[Path], tag: str) -> int:
    """Link every ``__pycache__/NAME.TAG.pyc`` under ``roots`` to where Python looks for it
    with ``sys.pycache_prefix = prefix``; return how many links were made."""
    made = 0
    for root in roots:
        for cache in root.rglob("__pycache__"):
            mirror = prefix / cache.parent.relative_to(cache.parent.anchor)
            for compiled in cache.glob(f"*.{tag}.pyc"):
                target = mirror / compiled.name
                if target.is_symlink() or target.exists():
                    continue
                try:
                    mirror.mkdir(parents=True, exist_ok=True)
                    target.symlink_to(compiled)
                except OSError:
                    return made  # no links here: the first run compiles, as it would anyway
                made += 1
    return made


def main() -> int:
    names = ("stdlib", "platstdlib", "purelib", "platlib")
    roots = sorted({Path(sysconfig.get_path(name)) for name in names})
    link(Path(sys.prefix) / "pycache", roots, sys.implementation.cache_tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())

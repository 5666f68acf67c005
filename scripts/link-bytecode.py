"""Link the bytecode the installers compiled into the tree ``tests/conftest.py`` reads it from.

With ``PYTHONDONTWRITEBYTECODE`` set, the tests keep bytecode under ``.venv/pycache``
(``sys.pycache_prefix``), and Python then reads every module's bytecode there alone: each
module of the standard library and of the installed packages would be compiled again on the
first run, by every test process at once. Linking what pip and Python's own installer compiled
saves that (about 30 s of a first run on two cores). Idempotent; run by ``ensure-venv.sh``.
"""

import sys
import sysconfig
from pathlib import Path


def main() -> int:
    prefix = Path(sys.prefix) / "pycache"
    tag = sys.implementation.cache_tag
    roots = {sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    for root in sorted(roots):
        for cache in Path(root).rglob("__pycache__"):
            mirror = prefix / cache.parent.relative_to(cache.parent.anchor)
            for compiled in cache.glob(f"*.{tag}.pyc"):
                link = mirror / compiled.name
                if link.is_symlink() or link.exists():
                    continue
                try:
                    mirror.mkdir(parents=True, exist_ok=True)
                    link.symlink_to(compiled)
                except OSError:
                    return 0  # no links here: the first run compiles, as it would anyway
    return 0


if __name__ == "__main__":
    sys.exit(main())

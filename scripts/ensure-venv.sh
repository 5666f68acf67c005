# Sourced by ./run-demo and ./run-tests: make .venv with this project and its dev extras installed.
# Reinstalls only when pyproject.toml changed, and then says what it does, one line a step, on
# stderr (pip's own progress too, on a terminal); silent when nothing needs installing.
# Needs python3 >= 3.11 (or set PYTHON).
PYTHON="${PYTHON:-python3}"
stamp=".venv/.toolkernel-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    started=$SECONDS
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        || { echo "toolkernel needs Python >= 3.11 (set PYTHON=...)" >&2; exit 1; }
    if [ -x .venv/bin/python ]; then
        echo "==> pyproject.toml changed: updating .venv" >&2
    else
        echo "==> creating .venv with $("$PYTHON" -c 'import sys; print(sys.executable, sys.version.split()[0])')" >&2
        "$PYTHON" -m venv .venv
    fi
    # On a terminal pip shows what it fetches and builds; elsewhere (CI, a log) it keeps quiet.
    if [ -t 2 ]; then pip_output=(--progress-bar on); else pip_output=(--quiet); fi
    echo "==> upgrading pip" >&2
    .venv/bin/python -m pip install "${pip_output[@]}" --upgrade pip 1>&2
    echo "==> installing toolkernel (editable) with its extras for development: a minute or two the first time" >&2
    .venv/bin/python -m pip install "${pip_output[@]}" -e '.[dev]' 1>&2
    if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then  # the tests read bytecode from .venv/pycache
        echo "==> linking the installed bytecode into .venv/pycache" >&2
        .venv/bin/python scripts/link-bytecode.py
    fi
    echo "$want" > "$stamp"
    echo "==> .venv is ready ($((SECONDS - started)) s); next time this step is skipped" >&2
fi

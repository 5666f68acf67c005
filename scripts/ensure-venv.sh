# Sourced by ./run-demo and ./run-tests: make .venv with this project and its dev extras installed.
# Reinstalls only when pyproject.toml changed. Needs python3 >= 3.11 (or set PYTHON).
PYTHON="${PYTHON:-python3}"
stamp=".venv/.toolkernel-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        || { echo "toolkernel needs Python >= 3.11 (set PYTHON=...)" >&2; exit 1; }
    [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e '.[dev]'
    echo "$want" > "$stamp"
fi

"""The README's set-up step (scripts/ensure-venv.sh, sourced by ./run-demo and ./run-tests):
one line a step on stderr while it installs, nothing at all when nothing needs installing.

The installing runs are driven with a stand-in ``.venv/bin/python`` that records the pip
commands it is given instead of downloading anything; the script's own logic is what runs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

STAND_IN_PYTHON = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/../pip-calls"
"""


def checkout(tmp_path: Path) -> Path:
    """A directory with the project's pyproject.toml and set-up script."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "ensure-venv.sh", tmp_path / "scripts" / "ensure-venv.sh")
    return tmp_path


def stand_in_venv(root: Path) -> Path:
    python = root / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(STAND_IN_PYTHON)
    python.chmod(0o755)
    return root / ".venv"


def ensure(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", "set -euo pipefail; . scripts/ensure-venv.sh; echo sourced"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHON": "python3"},
        stdin=subprocess.DEVNULL,
    )


def test_nothing_to_install_prints_nothing(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    venv = stand_in_venv(root)
    digest = hashlib.sha256((root / "pyproject.toml").read_bytes()).hexdigest()
    (venv / ".toolkernel-installed").write_text(digest + "\n")
    ran = ensure(root)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "sourced\n", "")
    assert not (venv / "pip-calls").exists()


def test_a_changed_pyproject_says_each_step_on_stderr_then_is_quiet_again(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    venv = stand_in_venv(root)
    (venv / ".toolkernel-installed").write_text("an older pyproject.toml\n")
    ran = ensure(root)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "sourced\n"  # the demo's output stays the demo's
    steps = ran.stderr.splitlines()
    assert [line.split(":")[0].split(" (")[0] for line in steps] == [
        "==> pyproject.toml changed",
        "==> upgrading pip",
        "==> installing toolkernel",
        "==> .venv is ready",
    ]
    # Not a terminal here: pip itself is quiet, the steps are the progress.
    assert (venv / "pip-calls").read_text().splitlines() == [
        "-m pip install --quiet --upgrade pip",
        "-m pip install --quiet -e .[dev]",
    ]
    again = ensure(root)
    assert (again.returncode, again.stdout, again.stderr) == (0, "sourced\n", "")


def test_without_bytecode_writing_the_installed_bytecode_is_linked(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    venv = stand_in_venv(root)
    ran = subprocess.run(
        ["bash", "-c", "set -euo pipefail; . scripts/ensure-venv.sh"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHON": "python3", "PYTHONDONTWRITEBYTECODE": "1"},
        stdin=subprocess.DEVNULL,
    )
    assert ran.returncode == 0, ran.stderr
    assert "==> linking the installed bytecode into .venv/pycache" in ran.stderr.splitlines()
    assert (venv / "pip-calls").read_text().splitlines()[-1] == "scripts/link-bytecode.py"


def test_links_land_where_python_looks_with_a_pycache_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = importlib.util.spec_from_file_location(
        "link_bytecode", ROOT / "scripts" / "link-bytecode.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    tag = sys.implementation.cache_tag
    source = tmp_path / "site" / "pkg" / "mod.py"
    (source.parent / "__pycache__").mkdir(parents=True)
    source.write_text("x = 1\n")
    compiled = source.parent / "__pycache__" / f"mod.{tag}.pyc"
    compiled.write_bytes(b"bytecode")
    (source.parent / "__pycache__" / "mod.other-99.pyc").write_bytes(b"another Python's")
    prefix = tmp_path / "venv" / "pycache"

    assert script.link(prefix, [tmp_path / "site"], tag) == 1
    assert script.link(prefix, [tmp_path / "site"], tag) == 0  # idempotent
    monkeypatch.setattr(sys, "pycache_prefix", str(prefix))
    looked_up = Path(importlib.util.cache_from_source(str(source)))
    assert looked_up.is_symlink() and looked_up.resolve() == compiled.resolve()

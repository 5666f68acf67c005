"""The wheel installs toolkernel and its real subpackages as packages, and the demo's sample
project as data beside ``toolkernel.cli`` (it has packages of its own, which must not be
installed as ``toolkernel...calc``).

The wheel is built from a copy of the project with the setuptools of this environment, the way
a fresh clone would be built (no ``build/``, no ``*.egg-info``).
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "src" / "toolkernel" / "cli" / "sample_project"
REAL_PACKAGES = {
    "toolkernel",
    "toolkernel.agent",
    "toolkernel.cli",
    "toolkernel.kernel",
    "toolkernel.locks",
    "toolkernel.tools",
    "toolkernel.trace",
}

# Run in the copy: the packages setuptools discovers from pyproject.toml, then the wheel.
BUILD = """
import json, sys
from setuptools.build_meta import build_wheel
from setuptools.config.pyprojecttoml import apply_configuration
from setuptools.dist import Distribution

dist = apply_configuration(Distribution(), "pyproject.toml")
dist.set_defaults()
wheel = build_wheel(sys.argv[1])
print(json.dumps({"packages": sorted(dist.packages), "wheel": wheel}))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[set[str], zipfile.ZipFile]:
    project = tmp_path_factory.mktemp("project")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(
        ROOT / "src",
        project / "src",
        ignore=shutil.ignore_patterns("*.egg-info", "build"),
    )
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-c", BUILD, str(out)],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return set(found["packages"]), zipfile.ZipFile(out / found["wheel"])


def test_only_toolkernel_and_its_real_subpackages_are_packages(
    built: tuple[set[str], zipfile.ZipFile],
) -> None:
    packages, wheel = built
    assert packages == REAL_PACKAGES
    top_level = next(n for n in wheel.namelist() if n.endswith(".dist-info/top_level.txt"))
    assert wheel.read(top_level).decode().split() == ["toolkernel"]


def test_the_sample_project_ships_whole_as_data(built: tuple[set[str], zipfile.ZipFile]) -> None:
    _, wheel = built
    shipped = {
        name.removeprefix("toolkernel/cli/sample_project/")
        for name in wheel.namelist()
        if name.startswith("toolkernel/cli/sample_project/")
    }
    expected = {
        path.relative_to(SAMPLE).as_posix()
        for path in SAMPLE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert shipped == expected
    assert {"README.md", "calc/ops.py", "tests/test_calc.py"} <= shipped
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in wheel.namelist())

"""The wheel installs toolkernel and its real subpackages as packages, and the demo's sample
project as data beside ``toolkernel.cli`` (it has packages of its own, which must not be
installed as ``toolkernel...calc``).

The wheel is built from a copy of the project with the setuptools of this environment, the way
a fresh clone would be built (no ``build/``, no ``*.egg-info``).
"""

from __future__ import annotations

import email.parser
import json
import pathlib
import shutil
import subprocess
import sys
import zipfile

import attrs
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "src" / "toolkernel" / "cli" / "sample-project"
REAL_PACKAGES = {
    "toolkernel",
    "toolkernel.agent",
    "toolkernel.cli",
    "toolkernel.formats",
    "toolkernel.integrations",
    "toolkernel.kernel",
    "toolkernel.leases",
    "toolkernel.locks",
    "toolkernel.mcp",
    "toolkernel._replay",
    "toolkernel.sandbox",
    "toolkernel.testing",
    "toolkernel.shell",
    "toolkernel.tools",
    "toolkernel.tools.shell",  # the old path of toolkernel.shell, kept for one release
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


@attrs.frozen
class Built:
    packages: set[str]
    """What setuptools discovers as packages."""
    wheel: zipfile.ZipFile
    log: str
    """What the build said on stderr."""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    project = tmp_path_factory.mktemp("project")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
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
    return Built(set(found["packages"]), zipfile.ZipFile(out / found["wheel"]), done.stderr)


def test_only_toolkernel_and_its_real_subpackages_are_packages(built: Built) -> None:
    assert built.packages == REAL_PACKAGES
    names = built.wheel.namelist()
    top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
    assert built.wheel.read(top_level).decode().split() == ["toolkernel"]
    # Every directory holding an __init__.py outside the sample project is a real package.
    with_init = {n.rsplit("/", 1)[0].replace("/", ".") for n in names if n.endswith("__init__.py")}
    assert {p for p in with_init if "sample-project" not in p} == REAL_PACKAGES


def test_setuptools_sees_no_package_that_it_would_leave_out(built: Built) -> None:
    # Data in a directory Python could import makes setuptools warn "Package would be ignored".
    assert "would be ignored" not in built.log
    assert "importable" not in built.log


def test_the_sample_project_ships_whole_as_data(built: Built) -> None:
    wheel = built.wheel
    shipped = {
        name.removeprefix("toolkernel/cli/sample-project/")
        for name in wheel.namelist()
        if name.startswith("toolkernel/cli/sample-project/")
    }
    expected = {
        path.relative_to(SAMPLE).as_posix()
        for path in SAMPLE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert shipped == expected
    assert {"README.md", "calc/ops.py", "tests/test_calc.py"} <= shipped
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in wheel.namelist())


def test_the_shell_rules_ship_with_the_package(built: Built) -> None:
    assert "toolkernel/shell/rules.toml" in built.wheel.namelist()


def test_the_sample_trace_ships_with_its_licence_note(built: Built) -> None:
    names = set(built.wheel.namelist())
    assert "toolkernel/_replay/sample-traces/claude-code-log.jsonl" in names
    assert "toolkernel/_replay/sample-traces/README.md" in names


def test_the_licence_ships_in_the_wheel_and_its_metadata_says_mit(built: Built) -> None:
    names = built.wheel.namelist()
    info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    assert f"{info}/licenses/LICENSE" in names
    assert built.wheel.read(f"{info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
    metadata = email.parser.Parser().parsestr(built.wheel.read(f"{info}/METADATA").decode())
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]


def test_trio_is_an_extra_and_console_an_alias_of_cli(built: Built) -> None:
    names = built.wheel.namelist()
    info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    metadata = email.parser.Parser().parsestr(built.wheel.read(f"{info}/METADATA").decode())
    requires = metadata.get_all("Requires-Dist")
    assert not [r for r in requires if r.startswith("trio") and "extra ==" not in r]
    assert 'trio>=0.27; extra == "trio"' in requires
    assert [r for r in requires if r.endswith('extra == "console"')] == [
        'toolkernel[cli]; extra == "console"'
    ]
    # The lease service `python -m toolkernel mcp` starts on demand runs on trio.
    assert 'toolkernel[trio]; extra == "mcp"' in requires

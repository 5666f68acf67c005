"""What a missing extra tells the user to run depends on how toolkernel was installed.

PEP 610's ``direct_url.json`` in the installed distribution says where it came from; the
command names that place (a clone, editable or not; a wheel or sdist; a VCS or web URL) and
only an install from an index gets ``pip install 'toolkernel[EXTRA]'``. The metadata is faked
here, the distribution that ``importlib.metadata`` finds being the one point of contact.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolkernel import _extras
from toolkernel._extras import install_command

PACKAGE = Path(_extras.__file__).resolve().parent
"""The directory the toolkernel under test is imported from."""


class FakeDistribution:
    """The two things ``_extras`` asks of an installed distribution."""

    def __init__(self, direct_url: dict[str, Any] | None, location: Path) -> None:
        self.direct_url = direct_url
        self.location = location

    def read_text(self, filename: str) -> str | None:
        assert filename == "direct_url.json"
        return None if self.direct_url is None else json.dumps(self.direct_url)

    def locate_file(self, path: str) -> Path:
        return self.location / path


@pytest.fixture(autouse=True)
def fresh_origin() -> Iterator[None]:
    _extras._origin.cache_clear()  # the real answer is cached for the process
    yield
    _extras._origin.cache_clear()


def installed(monkeypatch: pytest.MonkeyPatch, distribution: FakeDistribution | None) -> None:
    def find(name: str) -> FakeDistribution:
        assert name == "toolkernel"
        if distribution is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return distribution

    monkeypatch.setattr(importlib.metadata, "distribution", find)


def test_an_install_from_an_index_gets_the_plain_command(monkeypatch: pytest.MonkeyPatch) -> None:
    installed(monkeypatch, FakeDistribution(None, PACKAGE.parent))
    assert install_command("cli") == "pip install 'toolkernel[cli]'"


def test_an_editable_install_gets_an_editable_install_of_its_clone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clone = PACKAGE.parent.parent  # src/toolkernel -> the clone
    origin = {"url": clone.as_uri(), "dir_info": {"editable": True}}
    installed(monkeypatch, FakeDistribution(origin, Path("/nowhere/site-packages")))
    assert install_command("mcp") == f"pip install -e '{clone}[mcp]'"


def test_an_install_from_a_wheel_names_the_wheel(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    wheel = tmp_path / "dist dir" / "toolkernel-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"")
    origin = {"url": wheel.as_uri(), "archive_info": {"hashes": {"sha256": "0" * 64}}}
    installed(monkeypatch, FakeDistribution(origin, PACKAGE.parent))
    assert install_command("cli") == f"pip install '{wheel}[cli]'"  # quoted: a space in it


def test_a_wheel_since_removed_is_still_named_and_said_to_be_gone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    wheel = tmp_path / "toolkernel-0.1.0-py3-none-any.whl"
    installed(monkeypatch, FakeDistribution({"url": wheel.as_uri()}, PACKAGE.parent))
    assert install_command("shell") == (
        f"pip install '{wheel}[shell]' (toolkernel was installed from {wheel}, which is no "
        "longer there)"
    )


def test_a_non_editable_install_of_a_directory_names_the_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    origin = {"url": tmp_path.as_uri(), "dir_info": {}}
    installed(monkeypatch, FakeDistribution(origin, PACKAGE.parent))
    assert install_command("agent") == f"pip install '{tmp_path}[agent]'"


def test_an_install_from_git_names_the_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    origin = {
        "url": "https://git.example.invalid/toolkernel.git",
        "vcs_info": {"vcs": "git", "commit_id": "4f2c9e1", "requested_revision": "main"},
    }
    installed(monkeypatch, FakeDistribution(origin, PACKAGE.parent))
    assert install_command("cli") == (
        "pip install 'toolkernel[cli] @ git+https://git.example.invalid/toolkernel.git@4f2c9e1'"
    )


def test_an_install_from_an_archive_on_the_web_names_its_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = "https://files.example.invalid/toolkernel-0.1.0.tar.gz"
    installed(monkeypatch, FakeDistribution({"url": url, "archive_info": {}}, PACKAGE.parent))
    assert install_command("otel") == f"pip install 'toolkernel[otel] @ {url}'"


def test_a_clone_on_sys_path_ahead_of_another_install_names_the_clone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Another copy installed editable elsewhere, this one imported from a clone's src/: the
    # command is for the copy that is running.
    origin = {"url": tmp_path.as_uri(), "dir_info": {"editable": True}}
    installed(monkeypatch, FakeDistribution(origin, Path("/nowhere/site-packages")))
    if PACKAGE.parent.name != "src":
        pytest.skip("toolkernel under test is not imported from a clone's src/")
    assert install_command("cli") == f"pip install -e '{PACKAGE.parent.parent}[cli]'"


def test_an_unreadable_direct_url_counts_as_an_index_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    distribution = FakeDistribution(None, PACKAGE.parent)
    monkeypatch.setattr(distribution, "read_text", lambda filename: "{not json")
    installed(monkeypatch, distribution)
    assert install_command("cli") == "pip install 'toolkernel[cli]'"

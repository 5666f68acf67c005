"""Fixtures of the tools' tests."""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture
def shared_directory() -> Iterator[pathlib.Path]:
    """A directory anyone may write, outside pytest's own (which only its owner may enter)."""
    directory = pathlib.Path(tempfile.mkdtemp(prefix="toolkernel-test-"))
    directory.chmod(0o777)
    try:
        yield directory
    finally:
        for path, _, _ in os.walk(directory):  # a test may leave a directory read-only
            os.chmod(path, 0o777)
        shutil.rmtree(directory)

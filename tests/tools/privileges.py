"""Running a test's program as an unprivileged user, when the tests run as root."""

from __future__ import annotations

import os
import shutil

import pytest


def as_a_user() -> list[str]:
    """The command prefix that runs a program as an unprivileged user (empty if we are one)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv to drop privileges")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]

"""Every async test runs on both event loops: trio and asyncio (anyio's pytest plugin).

A test that asks for ``autojump_clock`` runs on virtual time, on either loop: trio's
``MockClock(autojump_threshold=0)``, or asyncio's ``VirtualClockEventLoop``; the others run on
the real clock (tests doing real file I/O in worker threads, which a virtual clock would leap
past). ``@pytest.mark.trio_only`` keeps a test off asyncio (it tests trio itself).
"""

import os
import pathlib
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import trio.testing
from hypothesis import HealthCheck, settings

from toolkernel.testing import VirtualClockEventLoop

# With PYTHONDONTWRITEBYTECODE set (to keep bytecode out of the tree), each xdist worker would
# rewrite the asserts of every test module and compile what they import afresh on every run: a
# third of its 20 s of collection. And each of the hundreds of Python processes the tests start
# would compile the package again: a fifth of its import time. Keep that bytecode in the
# virtual environment instead, out of the tree (the first run after a change fills it; what
# the installers compiled is linked there when the environment is made: scripts/link-bytecode.py).
if sys.dont_write_bytecode and sys.pycache_prefix is None:
    sys.pycache_prefix = str(Path(sys.prefix) / "pycache")
    sys.dont_write_bytecode = False
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# "ci" bounds the property tests so the whole suite stays well under five minutes on two cores;
# "dev" is the default for local runs; "thorough" is for hunting (TOOLKERNEL_HYPOTHESIS=thorough).
settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile("thorough", max_examples=2000, deadline=None)
settings.load_profile(
    os.environ.get("TOOLKERNEL_HYPOTHESIS", "ci" if os.environ.get("CI") else "dev")
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "trio_only: run this async test on trio only")


class Clock:
    """What tests read of the virtual clock: the time of whichever loop runs the test."""

    def current_time(self) -> float:
        return anyio.current_time()


@pytest.fixture
def autojump_clock() -> Clock:
    """Ask for this to run the test on virtual time (see the module docstring)."""
    return Clock()


@pytest.fixture(params=["trio", "asyncio"])
def anyio_backend(request: pytest.FixtureRequest) -> object:
    virtual = "autojump_clock" in request.fixturenames
    if request.param == "asyncio":
        if request.node.get_closest_marker("trio_only") is not None:
            pytest.skip("tests trio itself")
        return ("asyncio", {"loop_factory": VirtualClockEventLoop} if virtual else {})
    return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)} if virtual else {})


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

"""The tests of ``toolkernel.testing`` use its own pytest fixtures: every async test here runs on
trio and on asyncio, on virtual time that waits for worker threads."""

from toolkernel.testing.pytest_plugin import (  # noqa: F401 - fixtures, found by name
    anyio_backend,
    kernel,
    kernel_root,
    kernel_tools,
    recorder,
)

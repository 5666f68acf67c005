"""One asyncio event loop in a daemon thread, where synchronous adapters open their kernels.

A framework's synchronous entry point (LangGraph's ``invoke``) runs its tools in threads, and a
kernel lives on an event loop. Starting a loop in a new thread for each run cost about 1.5 ms
of CPU (``benchmarks/adapters_langgraph.py``), more than the framework spends on ten calls; so
one loop is started, when first needed, and kept: each run still opens a kernel of its own on
it. The thread is a daemon (nothing on it outlives the run that started it, so nothing is lost
when the interpreter exits), and a forked child starts a loop of its own.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["run_coroutine", "post"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _forget_after_fork() -> None:
    global _lock, _loop
    _lock, _loop = threading.Lock(), None  # the thread did not come along


os.register_at_fork(after_in_child=_forget_after_fork)


def _running_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="toolkernel: adapters' event loop", daemon=True
            )
            thread.start()
            _loop = loop
        return _loop


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> Future[T]:
    """Start ``coroutine`` on the loop; its future gives its result (thread-safe)."""
    return asyncio.run_coroutine_threadsafe(coroutine, _running_loop())


def post(function: Callable[..., Any], *args: Any) -> None:
    """Call ``function(*args)`` on the loop, soon; does not wait for it."""
    _running_loop().call_soon_threadsafe(function, *args)

"""The OpenAI Agents SDK's own tests of function tools, run with every tool leased in a kernel
(``toolkernel.integrations.openai_agents.leased``).

The SDK's tests make their tools themselves (``@function_tool``, ``Agent.as_tool``,
``FunctionTool(...)``) and call them directly (``tool.on_invoke_tool(ctx, input)``) or through
``Runner``; there is no one import to swap. So each test runs twice: as shipped, and with every
tool the SDK invokes leased in a kernel:

- an async test runs with a kernel open for its whole run (as an application's kernel
  outlives its runs: a run cancelled does not wait for its tools' cleanup, nor would a
  kernel's close);
- each function tool the runner invokes is replaced, for that invocation, by its copy from
  ``leased([tool], kernel, claims=...)``: its invoker, failure handling and timeout (counted
  from the grant) are the adapter's; an agent tool's own agent's tools are leased in the same
  kernel, within the agent tool's call;
- an ``@function_tool`` or ``Agent.as_tool`` tool the test invokes directly
  (``tool.on_invoke_tool``) is invoked through its leased copy (in a kernel opened for the
  call when the test is not async). A hand-built ``FunctionTool`` invoked directly is not:
  there is no SDK code between the test and its function to route it through.

Every tool is declared as touching nothing: the SDK's tests have a response's calls wait on
one another (a sibling's start, its cancellation), which calls holding conflicting leases could
never do (an undeclared tool holds the whole workspace). Each call is still submitted,
granted, run and ended in the kernel.

The SDK's own conftest (``upstream_conftest.py``) is used as it is. The SDK runs on asyncio
only, and its tests use pytest-asyncio's ``asyncio`` mark, which anyio's plugin (in auto mode,
as this project runs it) stands in for here.

Tests that fail as shipped too (written for an older SDK than the one installed), and any that
fail only with leases, are strict xfails with their reasons (``_FAILING``, ``_FAILING_LEASED``);
NOTICE.md lists them.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import agents.run_internal.tool_execution
import agents.tool
import pytest
from agents.tool import FunctionTool, _FailureHandlingFunctionToolInvoker

import toolkernel as tk
from toolkernel.integrations.openai_agents import _LeasedInvoker, leased

from .upstream_conftest import (  # noqa: F401  (the SDK's own fixtures)
    clear_default_runner,
    clear_openai_settings,
    clear_span_processor,
    disable_real_model_clients,
    ensure_openai_api_key,
    setup_span_processor,
)

_HERE = Path(__file__).parent

_kernel: contextvars.ContextVar[tk.Kernel | None] = contextvars.ContextVar(
    "openai_agents_upstream_kernel", default=None
)


@contextlib.asynccontextmanager
async def _a_kernel() -> AsyncIterator[tk.Kernel]:
    """The kernel of the test this task runs in, else one opened for the caller."""
    kernel = _kernel.get()
    if kernel is not None:
        yield kernel
        return
    async with tk.open_kernel() as kernel:
        token = _kernel.set(kernel)
        try:
            yield kernel
        finally:
            _kernel.reset(token)


def _nothing(tool: FunctionTool, arguments: Mapping[str, Any]) -> list[tk.Claim]:
    return []


def _leased(tool: FunctionTool, kernel: tk.Kernel) -> FunctionTool:
    return leased([tool], kernel, claims=_nothing)[0]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True, params=["as shipped", "every tool leased"])
def every_tool_leased(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.param == "as shipped":
        return

    invoke = agents.tool._invoke_function_tool_with_metadata

    def invoke_leased(*, function_tool: FunctionTool, **kwargs: Any) -> Awaitable[Any]:
        kernel = _kernel.get()
        if kernel is not None:
            function_tool = _leased(function_tool, kernel)
        return invoke(function_tool=function_tool, **kwargs)

    call = _FailureHandlingFunctionToolInvoker.__call__

    async def call_leased(self: _FailureHandlingFunctionToolInvoker, ctx: Any, input: str) -> Any:
        tool = self._function_tool
        if isinstance(self, _LeasedInvoker) or tool is None:
            return await call(self, ctx, input)
        async with _a_kernel() as kernel:
            return await _leased(tool, kernel).on_invoke_tool(ctx, input)

    monkeypatch.setattr(agents.tool, "_invoke_function_tool_with_metadata", invoke_leased)
    monkeypatch.setattr(
        agents.run_internal.tool_execution, "_invoke_function_tool_with_metadata", invoke_leased
    )
    monkeypatch.setattr(_FailureHandlingFunctionToolInvoker, "__call__", call_leased)


_GENERIC_MESSAGE = (
    "written for an older SDK: 0.24.0, installed, gives the model a generic message for a "
    "failed tool ('An error occurred while running the tool. Please try again.'), not the "
    "error's detail the test looks for"
)
_STAND_IN = (
    "written for an older SDK: the test puts a stand-in for Runner.run/run_streamed's result "
    "under an agent tool, and 0.24.0's agent tool uses more of that result than the stand-in "
    "has (a streamed result's cancel()), so the tool fails otherwise than the test expects"
)

_FAILING: dict[str, str] = {
    "test_function_tool.py::test_function_tool_default_error_works": _GENERIC_MESSAGE,
    "test_function_tool.py::test_manual_function_tool_uses_default_failure_error_function": (
        _GENERIC_MESSAGE
    ),
    "test_function_tool.py::test_default_failure_error_function_survives_deepcopy": (
        _GENERIC_MESSAGE
    ),
    "test_run_step_execution.py::test_default_function_tool_error_trace_respects_sensitive_data_setting": (  # noqa: E501
        _GENERIC_MESSAGE
    ),
    "test_run_step_execution.py::test_multiple_tool_calls_use_default_failure_error_function_for_copied_cancelled_tool": (  # noqa: E501
        _GENERIC_MESSAGE
    ),
    "test_run_step_execution.py::test_multiple_tool_calls_use_default_failure_error_function_for_manual_cancelled_tool": (  # noqa: E501
        _GENERIC_MESSAGE
    ),
    "test_run_step_execution.py::test_single_tool_call_uses_default_failure_error_function_for_cancelled_tool": (  # noqa: E501
        _GENERIC_MESSAGE
    ),
    "test_run_step_execution.py::test_cancelled_function_tool_error_trace_respects_sensitive_data_setting": (  # noqa: E501
        _GENERIC_MESSAGE
    ),
    "test_run_step_execution.py::test_mixed_tool_calls_preserve_shell_output_when_function_tool_cancelled": (  # noqa: E501
        _GENERIC_MESSAGE
    ),
    "test_run_step_execution.py::test_input_guardrail_runs_on_invalid_json": _GENERIC_MESSAGE,
    "test_agent_as_tool.py::test_agent_as_tool_rejects_invalid_builder_output": _GENERIC_MESSAGE,
    "test_agent_as_tool.py::test_agent_as_tool_fallback_uses_current_run_items_only": _STAND_IN,
    "test_agent_as_tool.py::test_agent_as_tool_fallback_returns_most_recent_current_run_output": (
        _STAND_IN
    ),
    "test_agent_as_tool.py::test_agent_as_tool_streaming_reraises_parent_cancellation_without_waiting_for_handler": (  # noqa: E501
        _STAND_IN
    ),
    "test_agent_as_tool.py::test_agent_as_tool_streaming_propagates_base_exception_without_hanging": (  # noqa: E501
        _STAND_IN
    ),
    "test_agent_as_tool.py::test_agent_as_tool_streaming_drains_emitted_events_before_stream_error": (  # noqa: E501
        _STAND_IN
    ),
    "test_agent_as_tool.py::test_agent_as_tool_deferred_same_name_legacy_nested_always_approve_stays_permanent": (  # noqa: E501
        "written for an older SDK: 0.24.0 no longer keeps a nested agent tool's legacy "
        "'always approve' for a same-named deferred tool where the test reads it (None)"
    ),
}
"""Tests failing as shipped too, so in both runs, with the SDK installed: name -> why."""

_FAILING_LEASED: dict[str, str] = {}
"""Tests failing with every tool leased only: name -> why. None do."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "asyncio: pytest-asyncio's mark (anyio runs these here)")
    config.addinivalue_line("markers", "allow_call_model_methods: the SDK's own mark")
    config.addinivalue_line("markers", "serial: the SDK's own mark")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not item.path.is_relative_to(_HERE):
            continue
        name = f"{item.path.name}::{item.originalname}"  # type: ignore[attr-defined]
        reason = _FAILING.get(name)
        if reason is None and "every tool leased" in item.name:
            reason = _FAILING_LEASED.get(name)
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True))
            item.repr_failure = _briefly  # type: ignore[method-assign]
        function = getattr(item, "obj", None)
        if "every tool leased" in item.name and inspect.iscoroutinefunction(function):
            item.obj = _in_a_kernel(function)  # type: ignore[attr-defined]


def _in_a_kernel(test: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """The test, run with a kernel open for its whole run."""

    @functools.wraps(test)
    async def run(*args: Any, **kwargs: Any) -> None:
        async with _a_kernel():
            await test(*args, **kwargs)

    return run


def _briefly(excinfo: pytest.ExceptionInfo[BaseException]) -> Any:
    """An expected failure's report, in Python's own traceback format: pytest's, which no one
    reads for an xfail, would take seconds through these long modules."""
    return excinfo.getrepr(style="native")

"""pydantic-ai's own tool and toolset tests, run with every agent's toolsets wrapped in
``toolkernel.integrations.pydantic_ai.LeasedToolset``.

The tests build their agents themselves (``Agent(tools=...)``, ``@agent.tool``,
``Agent(toolsets=...)``, ``agent.run(toolsets=...)``); there is no one import to swap. So each
test runs twice: as shipped, and with every toolset leased:

- a run (``Agent.iter``, which ``run``, ``run_sync`` and ``run_stream`` go through) opens a
  kernel of its own, unless it runs inside a tool of a run that has one (an agent run from a
  tool), which it then shares;
- the toolsets of the run (the agent's function toolset, its own and the run's toolsets, the
  capabilities'; not the output toolset) are each wrapped in ``LeasedToolset(toolset, kernel,
  claims=...)``, as an application would wrap them, so every call of their tools is submitted
  to the kernel, granted, run by pydantic-ai's task and ended in the kernel.

Every tool is declared as touching nothing: an undeclared tool holds the whole workspace (a
barrier), and some tests have a response's calls wait on one another, which calls holding
conflicting leases could never do; the waiting for conflicting leases is covered by
``tests/integrations/test_pydantic_ai.py``. Toolsets a test calls directly, not through an
agent's run, are not wrapped.

pydantic-ai's own conftest imports test dependencies this project does not have (VCR,
pytest-mock, dirty-equals, blockbuster); the helpers the tests import from it are copied in
``upstream_helpers.py`` and re-exported here, and the three dirty-equals matchers they use
(``IsStr()``, ``IsDatetime()``, ``IsNow(tz=...)``) have stand-ins here. As in pydantic-ai's
conftest, the tests run on asyncio and may not call real models.

Tests failing in either run are strict xfails with their reasons (``_FAILING``,
``_FAILING_LEASED``); NOTICE.md lists them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import datetime
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pydantic_ai.models
import pydantic_graph._utils
import pytest
from pydantic_ai import Agent
from pydantic_ai.toolsets import AbstractToolset

import toolkernel as tk
from toolkernel.integrations.pydantic_ai import LeasedToolset

from .upstream_helpers import create_module, iter_message_parts, message, message_part

__all__ = [
    "IsDatetime",
    "IsNow",
    "IsStr",
    "create_module",
    "iter_message_parts",
    "message",
    "message_part",
]

_HERE = Path(__file__).parent


class _Matcher:
    """Equal to any value of a type (what dirty-equals' ``IsStr()`` and ``IsDatetime()`` are
    used for here)."""

    def __init__(self, kind: type) -> None:
        self._kind = kind

    def __eq__(self, other: object) -> bool:
        return isinstance(other, self._kind)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Is{self._kind.__name__.capitalize()}()"


def IsStr() -> Any:  # dirty-equals' names, which the tests import
    return _Matcher(str)


def IsDatetime() -> Any:
    return _Matcher(datetime.datetime)


class _Now(_Matcher):
    """A datetime in ``tz`` within ``delta`` seconds of now (dirty-equals' ``IsNow``, with
    the ten seconds pydantic-ai's conftest gives it)."""

    def __init__(self, tz: datetime.tzinfo | None, delta: float) -> None:
        super().__init__(datetime.datetime)
        self._tz = tz
        self._delta = delta

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, datetime.datetime) or (other.tzinfo is None) != (self._tz is None):
            return False
        now = datetime.datetime.now(self._tz)
        return abs((other - now).total_seconds()) <= self._delta

    def __repr__(self) -> str:
        return f"IsNow(tz={self._tz!r})"


def IsNow(*, tz: datetime.tzinfo | None = None, delta: float = 10) -> Any:
    return _Now(tz, delta)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def no_model_requests() -> Iterator[None]:
    """As pydantic-ai's conftest: no test calls a real model."""
    with pydantic_ai.models.override_allow_model_requests(False):
        yield


@pytest.fixture(autouse=True)
def close_run_sync_loops(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Close the event loops ``run_sync`` made and left current, as pydantic-ai's own test
    settings, which let the warning for an unclosed loop pass, need not."""
    made: list[asyncio.AbstractEventLoop] = []
    get_event_loop = pydantic_graph._utils.get_event_loop

    def recorded() -> asyncio.AbstractEventLoop:
        loop = get_event_loop()
        if not loop.is_running():  # a running loop is its runner's
            made.append(loop)
        return loop

    monkeypatch.setattr(pydantic_graph._utils, "get_event_loop", recorded)
    yield
    if made:
        asyncio.set_event_loop(None)
    for loop in made:
        if not loop.is_closed() and not loop.is_running():
            loop.close()


_kernel: contextvars.ContextVar[tk.Kernel | None] = contextvars.ContextVar(
    "pydantic_ai_upstream_kernel", default=None
)


@contextlib.asynccontextmanager
async def _a_kernel() -> AsyncIterator[tk.Kernel]:
    """The kernel of the run this task runs inside, else one opened for the caller."""
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


def _nothing(tool: str, arguments: Mapping[str, Any]) -> list[tk.Claim]:
    return []


def _leased(toolsets: list[AbstractToolset[Any]], kernel: tk.Kernel) -> list[AbstractToolset[Any]]:
    return [LeasedToolset(toolset, kernel, claims=_nothing) for toolset in toolsets]


@pytest.fixture(autouse=True, params=["as shipped", "every toolset leased"])
def every_toolset_leased(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.param == "as shipped":
        return

    run = Agent.iter

    @contextlib.asynccontextmanager
    async def run_in_a_kernel(self: Agent[Any, Any], *args: Any, **kwargs: Any) -> Any:
        async with _a_kernel(), run(self, *args, **kwargs) as agent_run:
            yield agent_run

    build = Agent._build_toolset_list

    def build_leased(self: Agent[Any, Any], *args: Any, **kwargs: Any) -> Any:
        toolsets = build(self, *args, **kwargs)
        kernel = _kernel.get()
        # The run's toolsets (``_get_toolset`` asks with ``cap_toolsets``), not the agent's
        # ``toolsets`` property.
        return (
            toolsets
            if kernel is None or "cap_toolsets" not in kwargs
            else _leased(toolsets, kernel)
        )

    get_toolset = Agent._get_toolset

    def get_toolset_leased(
        self: Agent[Any, Any], *args: Any, additional_toolsets: Any = None, **kwargs: Any
    ) -> Any:
        kernel = _kernel.get()
        if kernel is not None and additional_toolsets:
            additional_toolsets = _leased(list(additional_toolsets), kernel)
        return get_toolset(self, *args, additional_toolsets=additional_toolsets, **kwargs)

    monkeypatch.setattr(Agent, "iter", run_in_a_kernel)
    monkeypatch.setattr(Agent, "_build_toolset_list", build_leased)
    monkeypatch.setattr(Agent, "_get_toolset", get_toolset_leased)


_OLDER = "written for an older pydantic-ai: the installed one "
_TOOL_DEFINITION = _OLDER + (
    "gives tool definitions a field (`unless_tool_kind`) the test's snapshot of them lacks"
)
_MODEL_ID = _OLDER + "gives model responses a `model_id` the test's snapshot of the messages lacks"
_RETRIED = _OLDER + (
    "records a tool's retry as a `ToolReturnPart(outcome='retried')`, where the test looks for "
    "`RetryPromptPart`s"
)
_RETRIED_AND_MODEL_ID = _RETRIED + ", and gives model responses a `model_id` the snapshot lacks"
_INSTRUCTIONS = _OLDER + (
    "gives a toolset's instructions as `InstructionPart`s, where the test expects strings"
)
_ENDS_WITH_A_REQUEST = _OLDER + (
    "ends the history of a run whose tool ran out of retries with a request the test's "
    "snapshot does not have"
)

_FAILING: dict[str, str] = {
    "test_tools.py::test_docstring_google": _TOOL_DEFINITION,
    "test_tools.py::test_docstring_sphinx": _TOOL_DEFINITION,
    "test_tools.py::test_docstring_numpy": _TOOL_DEFINITION,
    "test_tools.py::test_google_style_with_returns": _TOOL_DEFINITION,
    "test_tools.py::test_sphinx_style_with_returns": _TOOL_DEFINITION,
    "test_tools.py::test_numpy_style_with_returns": _TOOL_DEFINITION,
    "test_tools.py::test_only_returns_type": _TOOL_DEFINITION,
    "test_tools.py::test_docstring_unknown": _TOOL_DEFINITION,
    "test_tools.py::test_docstring_google_no_body": _TOOL_DEFINITION,
    "test_tools.py::test_takes_just_model": _TOOL_DEFINITION,
    "test_tools.py::test_takes_model_and_int": _TOOL_DEFINITION,
    "test_tools.py::test_suppress_griffe_logging": _TOOL_DEFINITION,
    "test_tools.py::test_json_schema_required_parameters": _TOOL_DEFINITION,
    "test_tools.py::test_schema_generator": _TOOL_DEFINITION,
    "test_tools.py::test_tool_parameters_with_attribute_docstrings": _TOOL_DEFINITION,
    "test_tools.py::test_tool_raises_approval_required": _MODEL_ID,
    "test_tools.py::test_approval_required_toolset": _MODEL_ID,
    "test_tools.py::test_args_validator_success": _MODEL_ID,
    "test_tools.py::test_args_validator_async": _MODEL_ID,
    "test_tools.py::test_args_validator_tool_direct": _MODEL_ID,
    "test_tools.py::test_args_validator_toolset": _MODEL_ID,
    "test_tools.py::test_args_validator_tool_plain": _MODEL_ID,
    "test_tools.py::test_args_validator_requests_approval": _MODEL_ID,
    "test_tools.py::test_tool_ctx_agent": _MODEL_ID,
    "test_tools.py::test_tool_ctx_agent_in_output_validator": _MODEL_ID,
    "test_toolsets.py::test_toolset_max_retries_inherits_from_agent": _MODEL_ID,
    "test_toolsets.py::test_prepare_function_sees_agent_max_retries": _MODEL_ID,
    "test_tools.py::test_resume_deferred_tool_with_invalid_output_call": _RETRIED,
    "test_tools.py::test_unapproved_tool_invalid_args_retry": _RETRIED,
    "test_tools.py::test_tool_timeout_triggers_retry": _RETRIED,
    "test_tools.py::test_sync_tool_timeout_triggers_retry": _RETRIED,
    "test_tools.py::test_tool_timeout_message_format": _RETRIED,
    "test_tools.py::test_agent_level_tool_timeout": _RETRIED,
    "test_tools.py::test_per_tool_timeout_overrides_agent_timeout": _RETRIED,
    "test_toolsets.py::test_tool_explicit_retries_overrides_toolset_and_agent": _RETRIED,
    "test_tools.py::test_parallel_tool_return_with_deferred": _RETRIED_AND_MODEL_ID,
    "test_tools.py::test_retry_tool_until_last_attempt": _RETRIED_AND_MODEL_ID,
    "test_toolsets.py::test_wrapper_toolsets_delegate_instructions": _INSTRUCTIONS,
    "test_toolsets.py::test_combined_toolset_instructions": _INSTRUCTIONS,
    "test_tools.py::test_return_schema_self_unbound": (
        "imports `_extract_return_schema_type`, a private function of pydantic-ai's that the "
        "installed one no longer has"
    ),
    "test_tools.py::test_deferred_tool_results_serializable": _OLDER
    + "serializes `DeferredToolResults` with an `answered_by` field the test's snapshot lacks",
    "test_tools.py::test_args_validator_deferral_metadata_not_merged_for_already_deferred_kinds": (
        _OLDER + "keeps the metadata an args validator gives a deferral, where the test expects "
        "none for a call deferred already"
    ),
    "test_toolsets.py::test_toolset_explicit_max_retries_overrides_agent": _ENDS_WITH_A_REQUEST,
    "test_toolsets.py::test_toolset_tool_max_retries_none_uses_tool_retries_not_output_retries": (
        _ENDS_WITH_A_REQUEST
    ),
}
"""Tests failing as shipped too, so in both runs, with the pydantic-ai installed: name -> why."""


def _defers_with_validated_args() -> bool:
    """Whether the installed pydantic-ai's ``DeferredToolRequests`` has ``validated_args``
    (newer than these tests): their snapshots of it then lack the field."""
    from pydantic_ai.tools import DeferredToolRequests

    return "validated_args" in {field.name for field in dataclasses.fields(DeferredToolRequests)}


if _defers_with_validated_args():
    _VALIDATED_ARGS = _OLDER + (
        "gives `DeferredToolRequests` a `validated_args` field the test's snapshot of them lacks"
    )
    for _name in (
        "test_tool_raises_call_deferred",
        "test_call_deferred_with_metadata",
        "test_approval_required_with_metadata",
        "test_deferred_tool_call_approved_fails",
        "test_deferred_tool_call_result_tool_failed",
        "test_args_validator_defers_call",
        "test_args_validator_approval_resolved_inline_by_capability",
    ):
        _FAILING[f"test_tools.py::{_name}"] = _VALIDATED_ARGS

_FAILING_LEASED: dict[str, str] = {}
"""Tests failing with every toolset leased only: name -> why."""


_UPSTREAM_WARNINGS = (
    # The tests, written for an older pydantic-ai, build and look for ``RetryPromptPart``s,
    # which the one installed deprecates.
    "ignore:`RetryPromptPart` is deprecated:pydantic_ai._warnings.PydanticAIDeprecationWarning",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not item.path.is_relative_to(_HERE):
            continue
        for warning in _UPSTREAM_WARNINGS:
            item.add_marker(pytest.mark.filterwarnings(warning))
        name = f"{item.path.name}::{item.originalname}"  # type: ignore[attr-defined]
        reason = _FAILING.get(name)
        if reason is None and "every toolset leased" in item.name:
            reason = _FAILING_LEASED.get(name)
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True))
            item.repr_failure = _briefly  # type: ignore[method-assign]


def _briefly(excinfo: pytest.ExceptionInfo[BaseException]) -> Any:
    """An expected failure's report, in Python's own traceback format: pytest's, which no one
    reads for an xfail, would take seconds through these long modules."""
    return excinfo.getrepr(style="native")

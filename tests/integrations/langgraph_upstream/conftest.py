"""LangGraph's own ToolNode tests, run against ``toolkernel.integrations.langgraph.ToolNode``.

LangGraph runs on asyncio only, so these tests do too (as in LangGraph's own conftest), and
they meet LangGraph's deprecation of ``create_react_agent``, which LangGraph's own test
settings let pass and ours (warnings are errors) would not.

Most of them send messages of one call, which the node runs without a kernel (alone in one, a
call would be granted at once), so each test runs twice: as shipped, and with every message
run through a kernel of its own.
"""

from pathlib import Path

import pytest

from toolkernel.integrations.langgraph import ToolNode

_HERE = Path(__file__).parent


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True, params=["as shipped", "every message through a kernel"])
def kernel_for_every_message(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    if request.param != "as shipped":
        monkeypatch.setattr(ToolNode, "_alone", lambda self, tool_calls: False)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    deprecated = pytest.mark.filterwarnings(
        "ignore::langgraph.warnings.LangGraphDeprecatedSinceV10"
    )
    for item in items:
        if item.path.parent == _HERE:
            item.add_marker(deprecated)

"""LangGraph's own ToolNode tests, run against ``toolkernel.integrations.langgraph.ToolNode``.

LangGraph runs on asyncio only, so these tests do too (as in LangGraph's own conftest), and
they meet LangGraph's deprecation of ``create_react_agent``, which LangGraph's own test
settings let pass and ours (warnings are errors) would not.
"""

from pathlib import Path

import pytest

_HERE = Path(__file__).parent


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    deprecated = pytest.mark.filterwarnings(
        "ignore::langgraph.warnings.LangGraphDeprecatedSinceV10"
    )
    for item in items:
        if item.path.parent == _HERE:
            item.add_marker(deprecated)

"""The demo's scripted turns are data a model could have sent: valid calls of the built-in tools."""

from __future__ import annotations

import attrs
import pytest

from toolkernel.agent import Turn
from toolkernel.agent._demo_turns import DEMO_TURNS
from toolkernel.kernel import ToolCall
from toolkernel.tools import builtin_tools


def test_every_scripted_call_is_a_valid_call_of_a_builtin_tool() -> None:
    tools = {t.name: t for t in builtin_tools(bash=True)}
    for turn in DEMO_TURNS:
        for call in turn.calls:
            assert isinstance(call.arguments, dict)
            tools[call.name].parse_arguments(call.arguments)


def test_call_ids_are_unique_across_the_session() -> None:
    ids = [call.id for turn in DEMO_TURNS for call in turn.calls]
    assert len(ids) == len(set(ids)) == 17


def test_a_turn_is_a_frozen_value_holding_a_tuple_of_calls() -> None:
    turn = Turn("look", [ToolCall("c1", "Glob", {"pattern": "*"})])
    assert turn.calls == (ToolCall("c1", "Glob", {"pattern": "*"}),)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        turn.says = "else"  # type: ignore[misc]

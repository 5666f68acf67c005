"""The scripted model writes turns as a model would, and the wire format reads them back."""

from __future__ import annotations

import pytest
from hypothesis import given

from toolkernel.agent import ModelError, ScriptedModel, Turn
from toolkernel.agent._demo_turns import DEMO_TURNS
from toolkernel.agent._model import assistant_message
from toolkernel.formats import openai
from toolkernel.formats._names import NameMap
from toolkernel.tools import builtin_tools

from ..strategies import TOOL_NAMES as NAMES
from ..strategies import turns


@given(turns())
def test_what_the_scripted_model_writes_reads_back_as_the_same_calls(turn: Turn) -> None:
    message = assistant_message(turn, NameMap(NAMES))
    assert openai.calls_from_chat(message, tools=NAMES) == list(turn.calls)


async def test_the_demo_session_reads_back_call_for_call() -> None:
    model = ScriptedModel(DEMO_TURNS)
    tools = builtin_tools(bash=True)
    for turn in DEMO_TURNS:
        message = await model.complete([], tools)
        assert message["content"] == turn.says
        assert openai.calls_from_chat(message, tools=tools) == list(turn.calls)
    done = await model.complete([], tools)
    assert done == {"role": "assistant", "content": "Done."} and model.remaining == 0


async def test_an_error_in_the_script_is_raised_and_a_mapping_returned_as_it_is() -> None:
    raw = {"role": "assistant", "content": "raw"}
    model = ScriptedModel([ModelError("down", transient=True), raw])
    with pytest.raises(ModelError, match="down"):
        await model.complete([], [])
    assert await model.complete([], []) is raw

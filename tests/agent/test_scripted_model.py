"""The scripted model writes turns as a model would, and the wire format reads them back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkernel as tk
from toolkernel.agent import DEMO_TURNS, ModelError, ScriptedModel, Turn
from toolkernel.agent._model import assistant_message
from toolkernel.formats import openai
from toolkernel.formats._names import NameMap
from toolkernel.tools import builtin_tools

NAMES = ["Read", "fs.read file", "git.status", "x" * 70]
ids = st.text(st.characters(codec="ascii", categories=["L", "N"]), min_size=1, max_size=8)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text().filter(lambda s: not s.startswith("$")),
    lambda inner: st.lists(inner, max_size=3),
    max_leaves=5,
)
arguments = st.dictionaries(
    st.text(min_size=1, max_size=5).filter(lambda k: k != "depends_on"), values, max_size=3
)


@st.composite
def turns(draw: st.DrawFn) -> Turn:
    call_ids = draw(st.lists(ids, min_size=1, max_size=5, unique=True))
    calls = []
    for n, call_id in enumerate(call_ids):
        earlier = st.sampled_from(call_ids[:n]) if n else st.nothing()
        after = draw(st.lists(earlier, max_size=2, unique=True)) if n else []
        name = draw(st.sampled_from(NAMES))
        calls.append(tk.ToolCall(call_id, name, draw(arguments), after=tuple(after)))
    return Turn(draw(st.text(max_size=10)), calls)


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

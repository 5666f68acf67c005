"""Tool names a format forbids are renamed reversibly; names that fit are kept."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from toolkernel.formats import anthropic, openai, wire_names
from toolkernel.formats._names import NameMap

FITS = re.compile(r"[A-Za-z0-9_-]{1,64}")


def test_names_that_fit_are_kept() -> None:
    names = ["Read", "read_file", "git-status", "x" * 64]
    assert wire_names(names) == {name: name for name in names}


def test_forbidden_characters_become_underscores_and_accents_are_dropped() -> None:
    assert wire_names(["git.status", "search files", "café/list"]) == {
        "git.status": "git_status",
        "search files": "search_files",
        "café/list": "cafe_list",
    }


def test_a_renamed_name_that_would_clash_gets_a_hash_and_both_directions_agree() -> None:
    names = NameMap(["a_b", "a.b", "a b"])
    assert names.wire("a_b") == "a_b"
    clashing = {names.wire("a.b"), names.wire("a b")}
    assert len(clashing) == 2 and "a_b" not in clashing
    for name in ("a_b", "a.b", "a b"):
        assert names.tool(names.wire(name)) == name


def test_a_name_too_long_is_cut_with_a_hash_so_two_long_names_stay_apart() -> None:
    long_a, long_b = "t" * 70 + "a", "t" * 70 + "b"
    mapping = wire_names([long_a, long_b])
    assert all(FITS.fullmatch(w) for w in mapping.values())
    assert mapping[long_a] != mapping[long_b]


@given(st.lists(st.text(min_size=1, max_size=80), unique=True, max_size=8))
def test_wire_names_fit_are_distinct_and_do_not_depend_on_order(names: list[str]) -> None:
    mapping = wire_names(names)
    assert all(FITS.fullmatch(w) for w in mapping.values())
    assert len(set(mapping.values())) == len(names)
    assert wire_names(list(reversed(names))) == mapping


class NamedTool:
    """A tool with a name no provider accepts, as an MCP server may have."""

    name = "fs.read file"
    description = "Read a file."

    def parameters_schema(self) -> dict[str, object]:
        return {"type": "object", "properties": {"path": {"type": "string"}}, "required": []}


def test_exported_names_map_back_to_the_tool_in_every_format() -> None:
    tool = NamedTool()
    chat_name = openai.chat_tools([tool])[0]["function"]["name"]
    responses_name = openai.responses_tools([tool])[0]["name"]
    anthropic_name = anthropic.tools([tool])[0]["name"]
    assert chat_name == responses_name == anthropic_name == "fs_read_file"
    chat = {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": chat_name, "arguments": "{}"}}
        ],
    }
    assert openai.calls_from_chat(chat, tools=[tool])[0].name == "fs.read file"
    items = [{"type": "function_call", "call_id": "c1", "name": chat_name, "arguments": "{}"}]
    assert openai.calls_from_responses(items, tools=[tool])[0].name == "fs.read file"
    blocks = [{"type": "tool_use", "id": "t1", "name": anthropic_name, "input": {}}]
    assert anthropic.calls_from_message(blocks, tools=[tool])[0].name == "fs.read file"


def test_a_name_the_toolset_does_not_know_passes_through_for_the_kernel_to_refuse() -> None:
    chat = {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "Nope", "arguments": "{}"}}
        ],
    }
    assert openai.calls_from_chat(chat, tools=[NamedTool()])[0].name == "Nope"

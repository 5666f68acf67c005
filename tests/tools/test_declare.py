"""Declaring tools: mistakes are caught when a tool is declared, not when a model first calls it.

Each mistake raises ``ToolDeclarationError`` (a ``TypeError`` and a ``ValueError``) whose message
names the tool and says how to fix it.
"""

from __future__ import annotations

import inspect
import math
import re
import subprocess
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import pytest

import toolkernel as tk
from toolkernel._errors import ToolDeclarationError
from toolkernel.errors import BarrierToolWarning
from toolkernel.kernel import Ahead, KeyFunction


def declaring(*fragments: str) -> Any:
    """``pytest.raises(ToolDeclarationError)`` whose message holds every fragment."""
    return pytest.raises(
        ToolDeclarationError, match="(?s)" + "".join(f"(?=.*{re.escape(f)})" for f in fragments)
    )


# -- the function ------------------------------------------------------------------------------


def test_a_tool_without_a_context_parameter_is_refused() -> None:
    with declaring("tool 'read_file'", "first parameter is 'path'", "ctx: ToolContext"):

        @tk.tool(reads=["path"])
        async def read_file(path: str) -> str: ...

    with declaring("tool 'nothing'", "must take the context as its first parameter"):

        @tk.tool
        async def nothing() -> None: ...


def test_the_context_is_known_by_its_name_or_its_annotation() -> None:
    @tk.tool(claims=lambda args: [])
    async def by_name(ctx, path: str) -> None: ...  # type: ignore[no-untyped-def]

    @tk.tool(claims=lambda args: [])
    async def by_annotation(c: tk.ToolContext, path: str) -> None: ...

    for declared in (by_name, by_annotation):
        assert [p for p in declared.parameters_schema()["properties"]] == ["path"]


def test_a_plain_def_is_refused_with_the_reason_and_the_way_out() -> None:
    with declaring(
        "tool 'blocking'", "async def", "can't be cancelled", "leases", "anyio.to_thread.run_sync"
    ):

        @tk.tool  # type: ignore[arg-type]
        def blocking(ctx: tk.ToolContext, path: str) -> str: ...


def test_a_tool_subclass_whose_run_is_not_async_is_refused() -> None:
    class Blocking(tk.Tool):
        name = "Blocking"

        def run(self, ctx: tk.ToolContext, step: int = 1) -> int:  # type: ignore[override]
            return step

    with declaring("tool 'Blocking'", "Blocking.run must be async def", "anyio.to_thread"):
        Blocking()


def test_a_tool_subclass_without_run_is_refused() -> None:
    class Empty(tk.Tool):
        pass

    with declaring("tool 'Empty'", "does not define run()"):
        Empty()


@pytest.mark.parametrize(
    "make",
    [
        lambda: tk.tool(reads=["file"])(_takes_path),
        lambda: tk.tool(writes=["path", "target"])(_takes_path),
    ],
    ids=["reads", "writes"],
)
def test_reads_and_writes_must_name_real_parameters(make: Callable[[], tk.Tool]) -> None:
    with declaring("tool '_takes_path' declares path argument", "it takes path"):
        make()


def test_reads_given_one_string_is_refused_rather_than_read_letter_by_letter() -> None:
    with declaring("tool '_takes_path' reads= must be a list of argument names", "['path']"):
        tk.tool(reads="path")(_takes_path)  # type: ignore[arg-type]


def test_claims_must_be_callable() -> None:
    with declaring("tool '_takes_path' claims= must be a function of the arguments"):
        tk.tool(claims=[tk.exclusive(tk.device("phone"))])(_takes_path)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", "   ", 3])
def test_the_name_must_be_a_non_empty_string(name: Any) -> None:
    with declaring("a tool's name must be a non-empty string", "_takes_path", "name="):
        tk.tool(name=name)(_takes_path)


@pytest.mark.parametrize("option", ["wait_timeout", "run_timeout"])
@pytest.mark.parametrize("value", [math.nan, -1, -math.inf, "5", True])
def test_a_timeout_must_be_a_finite_non_negative_number(option: str, value: Any) -> None:
    with declaring(f"tool '_takes_path' {option} must be a non-negative number of seconds"):
        tk.tool(**{option: value})(_takes_path)


def test_a_timeout_may_be_zero_or_none() -> None:
    declared = tk.tool(wait_timeout=0, run_timeout=None, reads=["path"])(_takes_path)
    assert (declared.wait_timeout, declared.run_timeout) == (0, None)


def test_a_timeout_set_on_a_subclass_is_checked_too() -> None:
    class Slow(tk.Tool):
        run_timeout = -5.0

        async def run(self, ctx: tk.ToolContext) -> None: ...

    with declaring("tool 'Slow' run_timeout must be a non-negative number"):
        Slow()


def test_parameters_that_cannot_be_passed_by_keyword_are_refused() -> None:
    with declaring("tool 'positional' parameter path can't be passed by keyword"):

        @tk.tool
        async def positional(ctx: tk.ToolContext, path: str, /) -> None: ...

    with declaring("tool 'star' parameter *paths can't be passed by keyword"):

        @tk.tool
        async def star(ctx: tk.ToolContext, *paths: str) -> None: ...


class Opaque:
    """Not a JSON value, and pydantic knows nothing of it."""


def test_a_type_hint_with_no_json_schema_is_refused_naming_the_parameter() -> None:
    with declaring("tool 'opaque' parameter 'thing' has a type hint that can't be turned into"):

        @tk.tool
        async def opaque(ctx: tk.ToolContext, path: str, thing: Opaque) -> None: ...

    with declaring("tool 'call_me' parameter 'then'"):

        @tk.tool
        async def call_me(ctx: tk.ToolContext, then: Callable[[], None]) -> None: ...


def test_a_type_hint_that_names_nothing_is_refused() -> None:
    with declaring("can't read the type hints of tool 'ghostly'", "Ghost"):

        @tk.tool
        async def ghostly(ctx: tk.ToolContext, thing: Ghost) -> None: ...  # type: ignore[name-defined]  # noqa: F821


def test_an_unknown_option_is_refused_listing_the_options() -> None:
    with declaring("tool '_takes_path' has no option 'write'", "writes", "reads_workspace"):
        tk.tool(write=["path"])(_takes_path)  # type: ignore[call-overload]


def test_tool_given_something_that_is_not_a_function_says_how_to_name_a_tool() -> None:
    with declaring("tool() takes an async function, or options by keyword", "name='Read'"):
        tk.tool("Read")  # type: ignore[call-overload]


def test_every_declaration_error_is_a_type_error_and_a_value_error() -> None:
    with pytest.raises(TypeError):
        tk.tool(claims=3)(_takes_path)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        tk.tool(run_timeout=-1)(_takes_path)


# -- read_only is now reads_workspace ----------------------------------------------------------


def test_read_only_is_refused_pointing_to_reads_workspace() -> None:
    with declaring("read_only= is now reads_workspace=", "shared lease on the whole workspace"):
        tk.tool(read_only=True)(_takes_path)  # type: ignore[call-overload]

    class Old(tk.Tool):
        read_only = True

        async def run(self, ctx: tk.ToolContext) -> None: ...

    with declaring("tool 'Old'", "read_only= is now reads_workspace=", "claims=lambda args: []"):
        Old()


def test_reads_workspace_takes_a_shared_lease_on_the_whole_workspace() -> None:
    @tk.tool(reads_workspace=True)
    async def survey(ctx: tk.ToolContext) -> None: ...

    assert survey.claims({}, tk.path) == [tk.shared(tk.path("."))]


# -- what a developer reads first ---------------------------------------------------------------


@pytest.mark.parametrize(
    "option",
    [
        "name",
        "description",
        "reads",
        "writes",
        "claims",
        "reads_workspace",
        "wait_timeout",
        "run_timeout",
    ],
)
def test_every_option_of_tool_is_documented_in_its_docstring(option: str) -> None:
    assert tk.tool.__doc__ is not None
    assert f"``{option}``:" in tk.tool.__doc__


def test_the_options_tool_takes_are_the_ones_documented() -> None:
    documented = set(re.findall(r"^    - ``(\w+)``:", tk.tool.__doc__ or "", re.MULTILINE))
    overloads = tk.Tool.__init__.__code__.co_varnames[
        1 : tk.Tool.__init__.__code__.co_kwonlyargcount + 1
    ]
    assert documented == set(overloads)


async def _takes_path(ctx: tk.ToolContext, path: str) -> str:
    """Take a path."""
    return path


def test_a_tool_declaring_no_claims_warns_once_at_its_declaration() -> None:
    with pytest.warns(BarrierToolWarning) as caught:
        line = inspect.currentframe().f_lineno + 2  # type: ignore[union-attr]

        @tk.tool
        async def bare(ctx: tk.ToolContext) -> None: ...

        @tk.tool(name="named")
        async def parenthesized(ctx: tk.ToolContext) -> None: ...

    assert [str(w.message).split(" declares")[0] for w in caught] == [
        "tool 'bare'",
        "tool 'named'",
    ]
    # Each points at the user's line declaring the tool, not inside toolkernel.
    assert [(w.filename, w.lineno) for w in caught] == [(__file__, line), (__file__, line + 3)]
    message = str(caught[0].message)
    assert "each of its calls runs alone" in message
    assert "claims=lambda args: [...]" in message and "claims=lambda args: []" in message
    assert issubclass(BarrierToolWarning, UserWarning)


async def test_the_warning_is_given_at_declaration_not_at_each_call() -> None:
    with pytest.warns(BarrierToolWarning):

        @tk.tool
        async def bare(ctx: tk.ToolContext) -> str:
            return "ran"

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        async with tk.open_kernel([bare]) as kernel:
            results = await kernel.run([tk.ToolCall(f"c{i}", "bare", {}) for i in range(3)])
    assert [r.output for r in results] == ["ran"] * 3


@pytest.mark.parametrize(
    "options",
    [
        {"reads": ["path"]},
        {"writes": ["path"]},
        {"claims": lambda args: []},
        {"claims": lambda args: [tk.exclusive(tk.EVERYTHING)]},  # a barrier on purpose
        {"reads_workspace": True},
    ],
)
def test_a_tool_declaring_anything_does_not_warn(options: dict[str, Any]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tk.tool(**options)(_takes_path)


def test_the_built_in_tools_declare_their_claims() -> None:
    # In a fresh interpreter: the built-in tools are declared when toolkernel is imported.
    code = (
        "import toolkernel, toolkernel.testing, toolkernel.mcp\n"
        "from toolkernel.tools import builtin_tools\n"
        "builtin_tools(bash=True)\n"
    )
    ran = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert (ran.returncode, ran.stderr) == (0, "")


# -- ahead= ------------------------------------------------------------------------------------


def test_ahead_true_lets_a_reader_be_speculated_on() -> None:
    reader = tk.tool(reads=["path"], ahead=True)(_takes_path)
    assert reader.ahead is not None
    assert reader.ahead({"path": "a"}, tk.path) == Ahead(speculative=True)

    class Lookup(tk.Tool):
        reads = ("path",)
        ahead = True

        async def run(self, ctx: tk.ToolContext, path: str) -> None: ...

    found = Lookup().ahead
    assert callable(found) and found({"path": "a"}, tk.path) == Ahead(speculative=True)
    assert tk.tool(reads=["path"])(_takes_path).ahead is None
    assert tk.tool(reads=["path"], ahead=False)(_takes_path).ahead is None


def test_ahead_given_a_function_asks_it_for_each_call() -> None:
    def answer(arguments: Mapping[str, Any], key: KeyFunction) -> Ahead | None:
        return Ahead() if arguments["path"] == "a" else None

    made = tk.tool(writes=["path"], ahead=answer)(_takes_path)
    assert made.ahead is answer


def test_a_subclass_keeps_its_own_ahead_method_unless_told_otherwise() -> None:
    class Commits(tk.Tool):
        writes = ("path",)

        def ahead(self, arguments: Mapping[str, Any], key: KeyFunction) -> Ahead | None:
            return Ahead(speculative=True)

        async def run(self, ctx: tk.ToolContext, path: str) -> None: ...

    assert Commits().ahead({"path": "a"}, tk.path) == Ahead(speculative=True)
    assert Commits(ahead=False).ahead is None


def test_a_wrong_ahead_is_refused_saying_what_it_takes() -> None:
    with declaring("tool '_takes_path' ahead= must be True", "a function of (arguments, key)"):
        tk.tool(reads=["path"], ahead="speculative")(_takes_path)  # type: ignore[call-overload]
    with declaring("ahead= must be True", "not <function"):
        tk.tool(reads=["path"], ahead=lambda arguments: None)(_takes_path)  # type: ignore[call-overload]
    with declaring("ahead=True is for a tool that only reads", "writes path", "wait_granted"):
        tk.tool(writes=["path"], ahead=True)(_takes_path)

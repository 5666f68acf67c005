"""Hypothesis strategies for testing tools and code built on toolkernel (needs ``hypothesis``).

- :func:`path_spellings` and :func:`workspace_paths`: the many ways a model spells one file
  (``./a``, ``a//b``, ``x/../a``, and case, on file systems that fold it), all naming the same
  lease key, so a test finds a tool that keys paths itself instead of through the workspace;
- :func:`claims`: claims of every kind (paths, devices, pools, everything; shared, exclusive,
  units) over a small universe, so they collide often;
- :func:`tool_arguments`: arguments for a call of any tool (the built-ins, yours), drawn from
  its parameters' JSON Schema, with its path arguments drawn from a path strategy;
- :func:`batches`: batches of calls over a given tool set, with durations, failures and
  cancellations, as :class:`~toolkernel.testing.CallBatch` values.

::

    from hypothesis import given
    from toolkernel.testing import FakeTool, assert_serializable
    from toolkernel.testing.strategies import batches, workspace_paths

    FILES = ["a.txt", "src/b.py"]
    read, edit = FakeTool("read", reads=True), FakeTool("edit", writes=True)

    @given(batches([read, edit], paths=workspace_paths(FILES)))
    def test_fakes(batch):
        assert_serializable([read, edit], batch.calls, make_root)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hypothesis import strategies as st

from ..kernel import KernelTool, ToolCall
from ..locks import EVERYTHING, Claim, device, exclusive, path, pool, shared, units
from ._arguments import TEXT, arguments_from_schema
from ._batch import CallBatch
from ._fake import FakeTool

__all__ = [
    "path_spellings",
    "workspace_paths",
    "claims",
    "fake_tool_arguments",
    "tool_arguments",
    "batches",
    "DEFAULT_PATHS",
]

DEFAULT_PATHS = ("a", "a/b", "a/b/c", "a/bc", "b")
"""Paths that overlap in every way: a parent and its children, and ``a/bc`` (not under ``a/b``)."""


def _flip_case(draw: st.DrawFn, text: str) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text)))
    return "".join(c.swapcase() if flip else c for c, flip in zip(text, flips, strict=True))


@st.composite
def _spelled(draw: st.DrawFn, key: str, case: bool) -> str:
    parts = [p for p in key.split("/") if p not in ("", ".")]
    prefix = draw(st.sampled_from(["", "./", ".//", "ghost/../", "./ghost/.././"]))
    out = []
    for index, part in enumerate(parts):
        if case:
            part = _flip_case(draw, part)
        if index < len(parts) - 1 and draw(st.integers(0, 3)) == 0:
            part = f"{part}/../{part}"  # down and back up: the same directory
        out.append(part)
    separators = [draw(st.sampled_from(["/", "/", "//", "/./"])) for _ in out[1:]]
    text = out[0] if out else "."
    for separator, part in zip(separators, out[1:], strict=True):
        text += separator + part
    return prefix + text


def path_spellings(key: str, *, case: bool = False) -> st.SearchStrategy[str]:
    """Spellings of the workspace path ``key`` (``"src/a.py"``) that all name it.

    Extra ``./``, doubled slashes, detours through a directory and back (``src/../src``) and
    through a name that does not exist (``ghost/../``); with ``case=True``, letters in either
    case too, which name the same file only on a file system that folds case (macOS, Windows
    by default: ``Workspace(root).fold_case`` says). Shrinks towards ``key`` itself.
    """
    return st.one_of(st.just(key), _spelled(key, case))


def workspace_paths(
    files: Sequence[str] = DEFAULT_PATHS, *, aliases: bool = True, case: bool = False
) -> st.SearchStrategy[str]:
    """One of ``files`` (workspace-relative paths), spelled any of the ways
    :func:`path_spellings` knows (with ``aliases=False``, just as given)."""
    if not files:
        raise ValueError("workspace_paths needs at least one file")
    chosen = st.sampled_from(list(files))
    if not aliases:
        return chosen
    return chosen.flatmap(lambda key: path_spellings(key, case=case))


def claims(
    paths: Sequence[str] = DEFAULT_PATHS,
    *,
    devices: Sequence[str] = ("phone",),
    pools: Mapping[str, int] | Sequence[str] = ("net",),
    everything: bool = True,
) -> st.SearchStrategy[Claim]:
    """Claims of every kind over a small universe: shared and exclusive ``paths`` and
    ``devices``, 1 to 3 units of (or all of) each pool, and, with ``everything``, shared and
    exclusive claims on everything (exclusive on everything is a barrier)."""
    kinds: list[st.SearchStrategy[Claim]] = []
    if paths:
        kinds.append(st.builds(shared, st.sampled_from([path(p) for p in paths])))
        kinds.append(st.builds(exclusive, st.sampled_from([path(p) for p in paths])))
    names = list(pools)
    if names:
        kinds.append(st.builds(units, st.sampled_from([pool(n) for n in names]), st.integers(1, 3)))
        kinds.append(st.builds(exclusive, st.sampled_from([pool(n) for n in names])))
    if devices:
        kinds.append(
            st.builds(
                lambda d, exclusive_: exclusive(d) if exclusive_ else shared(d),
                st.sampled_from([device(d) for d in devices]),
                st.booleans(),
            )
        )
    if everything:
        kinds.append(st.sampled_from([shared(EVERYTHING), exclusive(EVERYTHING)]))
    if not kinds:
        raise ValueError("claims() needs at least one kind of resource")
    return st.one_of(kinds)


def fake_tool_arguments(
    tool: FakeTool,
    *,
    paths: st.SearchStrategy[str] | None = None,
    durations: st.SearchStrategy[float] | None = None,
    failures: bool = True,
) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for a call of ``tool``: one or two ``paths`` (if it declares paths, or
    declares nothing), a ``duration`` and, with ``failures``, now and then a scripted
    ``fail``."""
    durations = durations if durations is not None else st.sampled_from([1.0, 2.0, 3.0, 0.0])
    fields: dict[str, st.SearchStrategy[Any]] = {"duration": durations}
    if tool.reads or tool.writes or tool.declares_nothing:
        where = paths if paths is not None else workspace_paths()
        fields["paths"] = st.lists(where, min_size=1, max_size=2)
    if failures:
        fields["fail"] = st.sampled_from([None, None, None, None, "start", "end"])
    return st.fixed_dictionaries(fields)


def tool_arguments(
    tool: KernelTool,
    *,
    paths: st.SearchStrategy[str] | None = None,
    text: st.SearchStrategy[str] | None = None,
) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for a call of ``tool`` (a :class:`~toolkernel.Tool`, built-in or yours),
    following its ``parameters_schema()``: its path arguments (those in its ``reads`` and
    ``writes``) drawn from ``paths`` (default :func:`workspace_paths`), its other strings from
    ``text`` (default: short strings over a few letters, so they collide), numbers and lists
    small, optional arguments now and then left out. For a :class:`FakeTool`, see
    :func:`fake_tool_arguments`.

    ::

        from toolkernel.tools import builtin_tools
        edit = {t.name: t for t in builtin_tools()}["Edit"]
        tool_arguments(edit, paths=workspace_paths(["a.py"]))
        # {"file_path": "./a.py", "old_string": "a", "new_string": "", "replace_all": True}
    """
    schema = getattr(tool, "parameters_schema", None)
    if not callable(schema):
        raise TypeError(
            f"tool_arguments() reads a tool's parameters_schema(); {tool!r} has none: pass a "
            f"strategy of its arguments instead"
        )
    where = paths if paths is not None else workspace_paths()
    names = (*getattr(tool, "reads", ()), *getattr(tool, "writes", ()))
    parameters = schema()
    properties = parameters.get("properties", {})
    overrides = {
        # A path argument that takes a list (``paths: list[str]``) gets one or two paths.
        name: st.lists(where, min_size=1, max_size=2)
        if _takes_list(properties.get(name))
        else where
        for name in names
    }
    return arguments_from_schema(
        parameters, overrides=overrides, text=TEXT if text is None else text
    )


def _takes_list(schema: Mapping[str, Any] | None) -> bool:
    if not schema:
        return False
    kinds = schema.get("type")
    if kinds == "array" or (isinstance(kinds, list) and "string" not in kinds):
        return True
    choices = schema.get("anyOf", ())
    return bool(choices) and not any(c.get("type") == "string" for c in choices)


ToolSet = Iterable[KernelTool] | Mapping[str, st.SearchStrategy[Mapping[str, Any]]]


@st.composite
def _batches(
    draw: st.DrawFn,
    arguments: dict[str, st.SearchStrategy[Mapping[str, Any]]],
    min_calls: int,
    max_calls: int,
    cancellations: bool,
    cancel_times: Sequence[float],
) -> CallBatch:
    names = list(arguments)
    size = draw(st.integers(min_calls, max_calls))
    calls = []
    for index in range(1, size + 1):
        name = draw(st.sampled_from(names))
        calls.append(ToolCall(f"c{index}", name, dict(draw(arguments[name]))))
    cancels: list[tuple[str, float]] = []
    if cancellations and calls:
        cancels = draw(
            st.lists(
                st.tuples(st.sampled_from([c.id for c in calls]), st.sampled_from(cancel_times)),
                max_size=2,
                unique_by=lambda item: item[0],
            )
        )
    return CallBatch(tuple(calls), tuple(cancels))


def batches(
    tools: ToolSet,
    *,
    paths: st.SearchStrategy[str] | None = None,
    min_calls: int = 1,
    max_calls: int = 8,
    durations: st.SearchStrategy[float] | None = None,
    failures: bool = True,
    cancellations: bool = False,
    cancel_times: Sequence[float] = (0.0, 0.5, 1.0, 1.5, 2.5),
    text: st.SearchStrategy[str] | None = None,
) -> st.SearchStrategy[CallBatch]:
    """Batches of ``min_calls`` to ``max_calls`` calls (ids ``c1``, ``c2``, ...) over ``tools``.

    ``tools`` is a list of tools: a :class:`FakeTool`'s arguments are drawn by
    :func:`fake_tool_arguments` (with ``paths``, ``durations`` and ``failures``), any other
    tool's (the built-ins, yours) by :func:`tool_arguments` from its parameters' JSON Schema,
    path arguments from ``paths`` and other strings from ``text`` (give it words of your files,
    so that an Edit's ``old_string`` is found). Or it is a mapping from tool names to
    strategies of their arguments, to choose them yourself (put ``tool_arguments(tool)`` or
    ``fake_tool_arguments(fake)`` in it for the others). With ``cancellations``, up to two
    calls of the batch are cancelled at one of ``cancel_times`` (seconds after it is submitted):
    :meth:`CallBatch.run` does that. Shrinks towards fewer calls, the first tool, shorter
    durations, no failures and no cancellations.
    """
    if isinstance(tools, Mapping):
        arguments = dict(tools)
    else:
        arguments = {}
        for tool in tools:
            if isinstance(tool, FakeTool):
                arguments[tool.name] = fake_tool_arguments(
                    tool, paths=paths, durations=durations, failures=failures
                )
            else:
                arguments[tool.name] = tool_arguments(tool, paths=paths, text=text)
    if not arguments:
        raise ValueError("batches() needs at least one tool")
    if not 0 <= min_calls <= max_calls:
        raise ValueError(f"need 0 <= min_calls <= max_calls, not {min_calls} and {max_calls}")
    return _batches(arguments, min_calls, max_calls, cancellations, tuple(cancel_times))

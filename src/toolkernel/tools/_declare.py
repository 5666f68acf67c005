"""Declaring tools: ``@tool`` on an async function, or a ``Tool`` subclass for tools with state.

A tool says what a call of it touches:

- ``reads=["path"]`` / ``writes=["path"]`` — names of arguments holding paths (a string, or a
  list of strings) that a call reads (shared lease) or writes (exclusive lease);
- ``claims=lambda args: [...]`` — any other claims, computed from the parsed arguments (devices,
  pools, paths built from several arguments); path claims are re-keyed through the workspace;
- ``read_only=True`` — a shared lease on the whole workspace (the coarse scheme, as a special case);
- nothing at all — the call is a barrier: exclusive on everything, so it is safe by default.

``claims=lambda args: []`` (an empty list) means the call needs no resources and runs freely.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, TypeVar, overload

from .._errors import InvalidArgumentsError
from ..kernel import KeyFunction, ToolContext
from ..locks import Claim, Mode, Path, path
from ._schema import ParameterSpec

__all__ = ["Tool", "FunctionTool", "tool"]

ClaimsFunction = Callable[[Mapping[str, Any]], Iterable[Claim]]
F = TypeVar("F", bound=Callable[..., Any])

# Module globals, read for every call: ``Mode.SHARED`` costs ~0.1 us on Python 3.11 (the enum
# metaclass's ``__getattr__`` hook).
_SHARED, _EXCLUSIVE = Mode.SHARED, Mode.EXCLUSIVE


def _is_lexical_key(resource: Path) -> bool:
    """True iff ``path(str(resource)) == resource``: re-keying it lexically changes nothing.

    So it is for every key ``path()`` made; a ``Path`` built by hand from raw parts may not be.
    """
    for part in resource.parts:
        if type(part) is not str or part in ("", ".", "..") or "/" in part or "\x00" in part:
            return False
    return True


def _path_values(tool_name: str, argument: str, value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    raise InvalidArgumentsError(
        f"{tool_name} argument {argument!r} must hold a path (a string), not {value!r}"
    )


class Tool:
    """A tool: a name, a description, parameters, declared claims, and ``run``.

    Subclass it for tools that keep state; define ``async def run(self, ctx, ...)`` with
    annotated keyword parameters, and set the class attributes you need::

        class Counter(Tool):
            '''Count calls.'''
            name = "Counter"
            def declare(self, arguments):      # optional; default: from reads/writes/...
                return [exclusive(device("counter"))]
            async def run(self, ctx, step: int = 1) -> int:
                self.total += step
                return self.total
    """

    name: str = ""
    description: str = ""
    reads: Sequence[str] = ()
    writes: Sequence[str] = ()
    read_only: bool = False
    wait_timeout: float | None = None
    run_timeout: float | None = None

    def __init__(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        reads: Sequence[str] | None = None,
        writes: Sequence[str] | None = None,
        claims: ClaimsFunction | None = None,
        read_only: bool | None = None,
        wait_timeout: float | None = None,
        run_timeout: float | None = None,
    ) -> None:
        self._spec = ParameterSpec.from_function(self._target(), skip_first=self._skips_ctx())
        self.name = name or self.name or type(self).__name__
        self.description = (
            description or self.description or self._spec.description or inspect.getdoc(self) or ""
        )
        self.reads = tuple(self.reads if reads is None else reads)
        self.writes = tuple(self.writes if writes is None else writes)
        self.read_only = self.read_only if read_only is None else read_only
        self._claims_function = claims
        if wait_timeout is not None:
            self.wait_timeout = wait_timeout
        if run_timeout is not None:
            self.run_timeout = run_timeout
        known = {p.name for p in self._spec.parameters}
        for argument in (*self.reads, *self.writes):
            if argument not in known:
                raise TypeError(
                    f"tool {self.name!r} declares path argument {argument!r}, "
                    f"but has no such parameter"
                )

    def _target(self) -> Callable[..., Any]:
        return self.run

    def _skips_ctx(self) -> bool:
        return True  # a bound method: ``self`` is gone, ``ctx`` comes first

    async def run(self, ctx: ToolContext, **arguments: Any) -> Any:
        """Do the work; override this."""
        raise NotImplementedError(f"tool {self.name!r} does not define run()")

    def declare(self, arguments: Mapping[str, Any]) -> Iterable[Claim] | None:
        """Claims beyond ``reads``, ``writes`` and ``read_only``; by default from ``claims=``.

        Override it in a subclass for claims computed from the arguments. Path claims returned
        here are spelled lexically (``path()``) and re-keyed through the workspace. Returning
        None, with no ``reads``/``writes``/``read_only`` either, declares nothing: the call is
        then exclusive on everything.
        """
        if self._claims_function is None:
            return None
        return self._claims_function(arguments)

    # -- the kernel's side (``toolkernel.kernel.KernelTool``) ---------------------------------

    def parse_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate arguments against the signature and its type hints."""
        return self._spec.validate(self.name, arguments)

    def claims(self, arguments: Mapping[str, Any], key: KeyFunction) -> Sequence[Claim] | None:
        """The call's claims with every path turned into its canonical key by ``key``.

        Path arguments named in ``reads``/``writes`` go to ``key`` exactly as the model spelled
        them (absolute, ``..`` through a symlink, ...), so the workspace decides what they mean.
        """
        declared = self.declare(arguments)
        reads, writes = self.reads, self.writes
        if declared is None and not (reads or writes or self.read_only):
            return None
        found: list[Claim] = []
        if self.read_only:
            found.append(Claim(key("."), _SHARED))
        if reads or writes:
            for names, mode in ((reads, _SHARED), (writes, _EXCLUSIVE)):
                for argument in names:
                    for raw in _path_values(self.name, argument, arguments[argument]):
                        found.append(Claim(key(raw), mode))
        if declared is None:
            return found
        lexical = key is path  # no workspace: keys are lexical, as ``path()`` made them
        for claim in declared:
            if (
                isinstance(claim, Claim)
                and isinstance(claim.resource, Path)
                and not (lexical and _is_lexical_key(claim.resource))
            ):
                claim = Claim(key(str(claim.resource)), claim.mode)
            found.append(claim)
        return found

    async def invoke(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> Any:
        result = self.run(ctx, **arguments)
        if inspect.isawaitable(result):
            result = await result
        return result

    def parameters_schema(self) -> dict[str, Any]:
        """JSON Schema of this tool's arguments object."""
        return self._spec.json_schema()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class FunctionTool(Tool):
    """A tool made from a function by :func:`tool`. Calling it calls the function."""

    def __init__(self, function: Callable[..., Any], **options: Any) -> None:
        self.function = function
        options.setdefault("name", function.__name__)
        super().__init__(**options)
        # ``invoke`` calls the function itself (one call less per tool call) unless a subclass
        # overrides ``run``.
        self._runner = function if type(self).run is FunctionTool.run else self.run
        self._runs_coroutine = inspect.iscoroutinefunction(self._runner)

    def _target(self) -> Callable[..., Any]:
        return self.function

    def run(self, ctx: ToolContext, **arguments: Any) -> Any:
        return self.function(ctx, **arguments)

    def invoke(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> Coroutine[Any, Any, Any]:
        if self._runs_coroutine:
            # The function's own coroutine is what the kernel awaits: no wrapper around it.
            return self._runner(ctx, **arguments)  # type: ignore[no-any-return]
        return super().invoke(ctx, arguments)

    def __call__(self, ctx: ToolContext, /, **arguments: Any) -> Any:
        return self.function(ctx, **arguments)


@overload
def tool(function: F, /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = ...,
    description: str | None = ...,
    reads: Sequence[str] | None = ...,
    writes: Sequence[str] | None = ...,
    claims: ClaimsFunction | None = ...,
    read_only: bool | None = ...,
    wait_timeout: float | None = ...,
    run_timeout: float | None = ...,
) -> Callable[[Callable[..., Awaitable[Any] | Any]], FunctionTool]: ...


def tool(
    function: Callable[..., Any] | None = None, /, **options: Any
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a tool from a function whose first parameter is the context.

    ::

        @tool(reads=["path"])
        async def read_file(ctx: ToolContext, path: str) -> str:
            '''Read a text file.'''
            return await ctx.fs.read_text(path)

    Used bare (``@tool``) or with no claims, the tool declares nothing: each call is a barrier.
    """
    if function is not None:
        return FunctionTool(function)

    def decorate(fn: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(fn, **options)

    return decorate

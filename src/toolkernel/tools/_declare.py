"""Declaring tools: ``@tool`` on an async function, or a ``Tool`` subclass for tools with state.

A tool says what a call of it touches:

- ``reads=["path"]`` / ``writes=["path"]`` — names of arguments holding paths (a string, or a
  list of strings) that a call reads (shared lease) or writes (exclusive lease);
- ``claims=lambda args: [...]`` — any other claims, computed from the parsed arguments (devices,
  pools, paths built from several arguments); path claims are re-keyed through the workspace;
- ``reads_workspace=True`` — a shared lease on the whole workspace: the call may read any file,
  runs beside other readers, and no write anywhere in the workspace runs beside it;
- nothing at all — the call is a barrier: exclusive on everything, so it is safe by default.

``claims=lambda args: []`` (an empty list) means the call needs no resources and runs freely.

A tool may also let its calls start before their leases are granted (``ahead=``, see
:func:`tool` and ``toolkernel.kernel._ahead``): ``ahead=True`` for one that only reads (its
run is then held till the grant and repeated if what it read changed meanwhile), or a function
answering an :class:`~toolkernel.kernel.Ahead` for one that commits its writes itself.

A tool is an ``async def``. A plain ``def`` is refused unless it says ``thread=True``: it then
runs in a worker thread (``anyio.to_thread.run_sync``), and its call holds its leases until the
thread returns. A thread can't be interrupted, so a call cancelled or timed out while its thread
runs keeps its leases (and its context keeps working) until the function returns, and its
result is ``CANCELLED`` (``TIMEOUT``) all the same: whatever the function returned is dropped.
Inside the thread, the context's async methods are called through the event loop:
``anyio.from_thread.run(ctx.fs.read_text, path)``.

Mistakes are caught here, when the tool is declared, with a :class:`ToolDeclarationError` that
names the tool and the fix, rather than when a model first calls it.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Never, TypeVar, cast, overload

import anyio
import anyio.lowlevel
import anyio.to_thread

from .._checks import check_seconds
from .._errors import (
    BarrierToolWarning,
    InvalidArgumentsError,
    ToolDeclarationError,
    WrongLoopError,
)
from ..kernel import Ahead, ChangedMeanwhile, KeyFunction, ToolContext
from ..kernel._messages import claims_not_a_list
from ..locks import Claim, Mode, Path, claims_overlap, exclusive, path, shared
from ._arguments import Arguments

__all__ = ["Tool", "FunctionTool", "tool"]

ClaimsFunction = Callable[[Mapping[str, Any]], Iterable[Claim]]
AheadFunction = Callable[[Mapping[str, Any], KeyFunction], Ahead | None]
F = TypeVar("F", bound=Callable[..., Coroutine[Any, Any, Any]])

# A module global: on Python 3.11 ``Mode.EXCLUSIVE`` costs ~0.1 us a read (the enum metaclass).
_EXCLUSIVE = Mode.EXCLUSIVE

_OPTIONS = (
    "name, description, reads, writes, claims, reads_workspace, ahead, wait_timeout, "
    "run_timeout, thread"
)
_READ_ONLY_IS_GONE = (
    "read_only= is now reads_workspace=, which says what it does: a shared lease on the whole "
    "workspace (the call may read any file; no write anywhere runs beside it). For a tool that "
    "touches no files, say claims=lambda args: [] instead; for one that reads the files its "
    "arguments name, reads=[...]"
)


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


def _argument_names(tool_name: str, option: str, names: Any) -> tuple[str, ...]:
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise ToolDeclarationError(
            f"tool {tool_name!r} {option}= must be a list of argument names, not {names!r}; "
            f"write {option}=[{names!r}]"
        )
    checked = []
    for name in names:
        if not isinstance(name, str):
            raise ToolDeclarationError(
                f"tool {tool_name!r} {option}= must name arguments by strings, not {name!r}"
            )
        checked.append(name)
    return tuple(checked)


def _ahead_function(tool_name: str, value: Any) -> AheadFunction | None:
    """The ``ahead`` a tool's calls are asked (None: they never run ahead), from the option's
    value: False or None, a function of ``(arguments, key)``, or True (``_reading_ahead``)."""
    if value is None or value is False:
        return None
    if value is True:
        return _reading_ahead
    if callable(value):
        try:
            inspect.signature(value).bind({}, path)
        except ValueError:  # no signature to read (a builtin): taken on trust
            return cast(AheadFunction, value)
        except TypeError:
            pass  # it can't be asked (arguments, key): said below
        else:
            return cast(AheadFunction, value)
    raise ToolDeclarationError(
        f"tool {tool_name!r} ahead= must be True (the tool only reads: its calls may run "
        f"before their leases are granted, and run again if what they read changed "
        f"meanwhile), False, or a function of (arguments, key) returning an Ahead or None "
        f"(for a tool that commits its writes itself, after await ctx.wait_granted()); "
        f"not {value!r}"
    )


def _reading_ahead(arguments: Mapping[str, Any], key: KeyFunction) -> Ahead:
    """``ahead=True``: a call that only reads may be speculated on."""
    return _SPECULATIVE


_SPECULATIVE = Ahead(speculative=True)


def _changed_what_it_read(meanwhile: Sequence[ChangedMeanwhile], claims: Sequence[Claim]) -> bool:
    """Whether a call that finished meanwhile changed what a reader claims: what it read,
    as ``ctx.fs`` lets it read nothing else."""
    return any(
        claims_overlap(change, claim)
        for earlier in meanwhile
        for change in earlier.changed
        for claim in claims
    )


async def _read_ahead(ctx: ToolContext, run: Callable[[], Awaitable[Any]]) -> Any:
    """Run a call of an ``ahead=True`` tool that started before its leases were granted.

    Reading is all it does, so its commit is its result: that (or what it raised) is held
    until the grant, and if a call that finished meanwhile changed anything it claims, the
    run is thrown away and made again, holding the leases (a second run never runs ahead).
    What it read before the grant was the tree an earlier command's commit had not reached
    yet, which that commit's change tells. A call claiming something exclusively (its
    ``claims=`` said so) may write: it runs once, granted."""
    if any(claim.is_exclusive for claim in ctx.claims):
        await ctx.wait_granted()
        return await run()
    failure: Exception | None = None
    try:
        output = await run()
    except Exception as exc:  # held, as an output would be (cancellation is not)
        failure, output = exc, None
    if _changed_what_it_read(await ctx.wait_granted(), ctx.claims):
        failure = None
        ctx.report_thrown_away()
        return await run()
    if failure is not None:
        raise failure
    return output


def _timeout(tool_name: str, option: str, value: Any) -> float | None:
    try:
        return check_seconds(option, value)
    except (TypeError, ValueError) as error:
        raise ToolDeclarationError(f"tool {tool_name!r} {error}") from None


class Tool:
    """A tool: a name, a description, parameters, declared claims, and ``async def run``.

    Subclass it for tools that keep state; define ``async def run(self, ctx, ...)`` with
    annotated parameters after the context, and set the class attributes you need (the options
    of :func:`tool`, which the constructor's keywords override)::

        class Counter(Tool):
            '''Count calls.'''
            name = "Counter"
            def declare(self, arguments):      # optional; default: from reads/writes/...
                return [exclusive(device("counter"))]
            async def run(self, ctx, step: int = 1) -> int:
                self.total += step
                return self.total

    With ``thread = True`` (or ``thread=True``), ``run`` is a plain ``def`` run in a worker
    thread, as for :func:`tool`.

    ``ahead = True`` (or ``ahead=True``) lets the calls of a tool that only reads run before
    their leases are granted, as for :func:`tool`. A subclass whose calls make their writes
    visible only at a commit of their own may define ``ahead(self, arguments, key)`` returning
    a :class:`~toolkernel.kernel.Ahead` instead (or pass such a function as ``ahead=``): the
    kernel may then start a call before its leases are granted, and ``run`` awaits
    ``ctx.wait_granted()`` before committing (``toolkernel.kernel.KernelTool``).

    Raises :class:`ToolDeclarationError` for a declaration that could not work (see
    :func:`tool`).
    """

    name: str = ""
    description: str = ""
    reads: Sequence[str] = ()
    writes: Sequence[str] = ()
    reads_workspace: bool = False
    ahead: bool | AheadFunction | None = None
    """The option as declared (True, False, a function) until the constructor has made it
    what the kernel asks each call (``KernelTool``'s optional ``ahead``): a function of
    ``(arguments, key)``, or None."""
    wait_timeout: float | None = None
    run_timeout: float | None = None
    thread: bool = False
    claims_follow_keys: ClassVar[bool] = True
    """True unless a subclass overrides :meth:`claims` (``__init_subclass__`` sees to it): the
    claims come from ``reads``, ``writes``, ``reads_workspace`` and :meth:`declare` (a function
    of the arguments), their paths through ``key`` alone, so a call that waited is checked by
    keying them again (``toolkernel.kernel.KernelTool.claims``)."""

    def __init_subclass__(cls, **options: Any) -> None:
        super().__init_subclass__(**options)
        if "claims_follow_keys" not in cls.__dict__:
            cls.claims_follow_keys = cls.claims is Tool.claims

    def __init__(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        reads: Sequence[str] | None = None,
        writes: Sequence[str] | None = None,
        claims: ClaimsFunction | None = None,
        reads_workspace: bool | None = None,
        ahead: bool | AheadFunction | None = None,
        wait_timeout: float | None = None,
        run_timeout: float | None = None,
        thread: bool | None = None,
        **unknown: Never,
    ) -> None:
        if name is None:
            name = self.name or self._default_name()
        if not isinstance(name, str) or not name.strip():
            raise ToolDeclarationError(
                f"a tool's name must be a non-empty string, not {name!r} (declaring "
                f"{self._what()}); give it name='...'"
            )
        self.name = name
        if unknown or hasattr(self, "read_only"):
            raise ToolDeclarationError(self._unknown_options(unknown))
        if thread is not None:
            self.thread = thread
        if not isinstance(self.thread, bool):
            raise ToolDeclarationError(
                f"tool {self.name!r} thread must be True or False, not {self.thread!r}"
            )
        self._check_async()
        self._arguments = Arguments.from_function(self.name, self._target())
        if description is not None and not isinstance(description, str):
            raise ToolDeclarationError(
                f"tool {self.name!r} description must be a string, not {description!r}"
            )
        self.description = (
            description
            or self.description
            or self._arguments.description
            or inspect.getdoc(self)
            or ""
        )
        self.reads = _argument_names(self.name, "reads", self.reads if reads is None else reads)
        self.writes = _argument_names(
            self.name, "writes", self.writes if writes is None else writes
        )
        if reads_workspace is not None:
            self.reads_workspace = reads_workspace
        if not isinstance(self.reads_workspace, bool):
            raise ToolDeclarationError(
                f"tool {self.name!r} reads_workspace must be True or False, "
                f"not {self.reads_workspace!r}"
            )
        if claims is not None and not callable(claims):
            raise ToolDeclarationError(
                f"tool {self.name!r} claims= must be a function of the arguments returning "
                f"claims, such as claims=lambda args: [exclusive(device('phone'))]; "
                f"not {claims!r}"
            )
        self._claims_function = claims
        option = self.ahead if ahead is None else ahead
        self._reads_ahead = option is True
        if self._reads_ahead and self.writes:
            raise ToolDeclarationError(
                f"tool {self.name!r}: ahead=True is for a tool that only reads, but it writes "
                f"{', '.join(self.writes)}; a tool whose writes wait for a commit of its own "
                f"passes a function of (arguments, key) returning an Ahead, and awaits "
                f"ctx.wait_granted() before it commits"
            )
        found = _ahead_function(self.name, option)
        if ahead is not None or found is not option:  # a subclass's own method stays its own
            self.ahead = found
        self.wait_timeout = _timeout(
            self.name, "wait_timeout", self.wait_timeout if wait_timeout is None else wait_timeout
        )
        self.run_timeout = _timeout(
            self.name, "run_timeout", self.run_timeout if run_timeout is None else run_timeout
        )
        known = {p.name for p in self._arguments.parameters}
        for argument in (*self.reads, *self.writes):
            if argument not in known:
                takes = ", ".join(sorted(known)) or "no arguments"
                raise ToolDeclarationError(
                    f"tool {self.name!r} declares path argument {argument!r}, but has no such "
                    f"parameter (it takes {takes}); name a parameter that holds a path"
                )

    def _default_name(self) -> str:
        return type(self).__name__

    def _what(self) -> str:
        return f"a {type(self).__name__}"

    def _unknown_options(self, unknown: Mapping[str, Any]) -> str:
        if "read_only" in unknown or hasattr(self, "read_only"):
            return f"tool {self.name!r}: {_READ_ONLY_IS_GONE}"
        names = ", ".join(repr(option) for option in sorted(unknown))
        return f"tool {self.name!r} has no option {names}; its options are {_OPTIONS}"

    def _target(self) -> Callable[..., Any]:
        """The function whose signature gives the parameters: ``run``, bound (``self`` gone)."""
        return self.run

    def _check_async(self) -> None:
        run = type(self).run
        if run is Tool.run and type(self).invoke is Tool.invoke:
            raise ToolDeclarationError(
                f"tool {self.name!r} ({type(self).__name__}) does not define run(); "
                f"define async def run(self, ctx: ToolContext, ...)"
            )
        _check_thread_option(self.name, f"{type(self).__name__}.run", run, self.thread)

    async def run(self, ctx: ToolContext, **arguments: Any) -> Any:
        """Do the work; override this."""
        raise NotImplementedError(f"tool {self.name!r} does not define run()")

    def declare(self, arguments: Mapping[str, Any]) -> Iterable[Claim] | None:
        """Claims beyond ``reads``, ``writes`` and ``reads_workspace``; by default from
        ``claims=``.

        Override it in a subclass for claims computed from the arguments. Path claims returned
        here are spelled lexically (``path()``) and re-keyed through the workspace. Returning
        None, with no ``reads``/``writes``/``reads_workspace`` either, declares nothing: the call
        is then exclusive on everything.
        """
        if self._claims_function is None:
            return None
        return self._claims_function(arguments)

    # -- the kernel's side (``toolkernel.kernel.KernelTool``) ---------------------------------

    def parse_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate arguments against the signature and its type hints (pydantic, strict)."""
        return self._arguments.validate(self.name, arguments)

    def claims(self, arguments: Mapping[str, Any], key: KeyFunction) -> Sequence[Claim] | None:
        """The call's claims with every path turned into its canonical key by ``key``.

        Path arguments named in ``reads``/``writes`` go to ``key`` exactly as the model spelled
        them (absolute, ``..`` through a symlink, ...), so the workspace decides what they mean.
        """
        declared = self.declare(arguments)
        if declared is not None and type(declared) is not list and type(declared) is not tuple:
            _check_declared(self.name, declared)
        reads, writes = self.reads, self.writes
        if declared is None and not (reads or writes or self.reads_workspace):
            return None
        found: list[Claim] = []
        if self.reads_workspace:
            found.append(shared(key(".")))
        if reads or writes:
            for names, make in ((reads, shared), (writes, exclusive)):
                for argument in names:
                    for raw in _path_values(self.name, argument, arguments[argument]):
                        found.append(make(key(raw)))
        if declared is None:
            return found
        lexical = key is path  # no workspace: keys are lexical, as ``path()`` made them
        for claim in declared:
            if (
                isinstance(claim, Claim)
                and isinstance(claim.resource, Path)
                and not (lexical and _is_lexical_key(claim.resource))
            ):
                make = exclusive if claim.mode is _EXCLUSIVE else shared
                claim = make(key(str(claim.resource)))
            found.append(claim)
        return found

    async def invoke(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> Any:
        """Run the tool with parsed arguments; its return value is the result's output."""
        if self._reads_ahead and ctx.ran_ahead:
            return await _read_ahead(ctx, functools.partial(self._run_once, ctx, arguments))
        return await self._run_once(ctx, arguments)

    async def _run_once(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> Any:
        if self.thread:
            return await _in_thread(self.run, ctx, arguments)
        return await self.run(ctx, **arguments)

    def parameters_schema(self) -> dict[str, Any]:
        """JSON Schema of this tool's arguments object."""
        return self._arguments.json_schema()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _check_declared(name: str, declared: object) -> None:
    """Claims returned as something other than a list: refused if it is one claim (a claim is
    not a list of them), a string or anything that can't be iterated."""
    if isinstance(declared, Claim | str | bytes) or not isinstance(declared, Iterable):
        raise claims_not_a_list(name, declared)


_NO_THREADS = (
    "A plain function has to run in a worker thread, and a thread can't be cancelled: a call "
    "that timed out or was cancelled goes on running until the function returns. Say "
    "thread=True to run it in a worker thread anyway (the call keeps its leases until the "
    "thread returns; a cancelled call's result is CANCELLED), or do the blocking work inside an "
    "async def with `await anyio.to_thread.run_sync(...)`."
)


def _check_thread_option(name: str, what: str, function: Any, thread: bool) -> None:
    """A plain ``def`` needs ``thread=True``; an ``async def`` must not have it."""
    is_async = inspect.iscoroutinefunction(function)
    if thread and is_async:
        raise ToolDeclarationError(
            f"tool {name!r}: thread=True runs a plain def in a worker thread, but {what} is an "
            f"async def, which runs in the event loop; drop thread=True"
        )
    if not thread and not is_async:
        raise ToolDeclarationError(f"tool {name!r}: {what} must be async def. {_NO_THREADS}")


async def _in_thread(
    function: Callable[..., Any], ctx: ToolContext, arguments: Mapping[str, Any]
) -> Any:
    """Run a plain function in a worker thread; the caller waits for it whatever happens.

    A cancellation waits for the thread to return, so the call's leases are held for as long as
    the function may touch what they cover; it then takes effect at the checkpoint after it,
    and the call ends CANCELLED (or TIMEOUT) rather than with an output nobody asked for any
    more. The shield keeps what the thread runs on the loop (``anyio.from_thread.run``) out of
    the call's cancellation too: the thread goes on to its end holding its leases, and under
    asyncio anyio would otherwise spin for ever on a limiter inside such a call.
    """
    with anyio.CancelScope(shield=True):
        output = await anyio.to_thread.run_sync(
            functools.partial(_run_sync, function, ctx, arguments), abandon_on_cancel=False
        )
    await anyio.lowlevel.checkpoint_if_cancelled()
    return output


def _run_sync(function: Callable[..., Any], ctx: ToolContext, arguments: Mapping[str, Any]) -> Any:
    """In the worker thread: the function's value, which must not be something to await.

    A coroutine out of a plain ``def`` is almost always ``ctx.fs.read_text(path)`` (or
    ``ctx.call``) called without going back to the loop: nothing of it ran. It is closed here,
    in the thread, the same on both loops (trio would refuse it in its own words; asyncio would
    hand it on as the output, and warn that it was never awaited).
    """
    output = function(ctx, **arguments)
    if inspect.isawaitable(output):
        name = getattr(output, "__qualname__", type(output).__qualname__)
        if inspect.iscoroutine(output):
            output.close()
        raise WrongLoopError(
            f"tool {ctx.tool_name!r} runs in a worker thread (thread=True) and returned "
            f"{name}(...), something to await, not a value: nothing of it ran. ctx.fs's "
            f"methods and ctx.call are async, and run on the kernel's event loop: from the "
            f"thread, call them through it, as in anyio.from_thread.run(ctx.fs.read_text, path); "
            f"or make the tool an async def (without thread=True) and await them"
        )
    return output


class FunctionTool(Tool):
    """A tool made from an async function by :func:`tool`. Calling it calls the function."""

    def __init__(self, function: Callable[..., Any], **options: Any) -> None:
        if not callable(function):
            raise ToolDeclarationError(
                f"tool() takes an async function, or options by keyword (such as "
                f"@tool(name={function!r})); not {function!r}"
            )
        self.function = function
        super().__init__(**options)
        # ``invoke`` returns the function's own coroutine (one call less per tool call) unless a
        # subclass overrides ``run``.
        self._runner = function if type(self).run is FunctionTool.run else self.run

    def _default_name(self) -> str:
        name = getattr(self.function, "__name__", "")
        return name if isinstance(name, str) and name.isidentifier() else ""

    def _target(self) -> Callable[..., Any]:
        return self.function

    def _what(self) -> str:
        return f"the function {self.function!r}"

    def _check_async(self) -> None:
        _check_thread_option(self.name, "the function", self.function, self.thread)
        if type(self).run is not FunctionTool.run and not inspect.iscoroutinefunction(
            type(self).run
        ):
            raise ToolDeclarationError(
                f"tool {self.name!r}: {type(self).__name__}.run must be async def (thread=True "
                f"runs the function in a worker thread, not run())"
            )

    async def run(self, ctx: ToolContext, **arguments: Any) -> Any:
        if self.thread:
            return await _in_thread(self.function, ctx, arguments)
        return await self.function(ctx, **arguments)

    def invoke(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> Coroutine[Any, Any, Any]:
        if self._reads_ahead and ctx.ran_ahead:
            return _read_ahead(ctx, functools.partial(self._run_once, ctx, arguments))
        return self._run_once(ctx, arguments)

    def _run_once(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> Coroutine[Any, Any, Any]:
        if self.thread and self._runner is self.function:
            return _in_thread(self.function, ctx, arguments)
        return self._runner(ctx, **arguments)

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
    reads_workspace: bool | None = ...,
    ahead: bool | AheadFunction | None = ...,
    wait_timeout: float | None = ...,
    run_timeout: float | None = ...,
    thread: bool | None = ...,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    function: Callable[..., Any] | None = None, /, **options: Any
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a tool from an ``async def`` function whose first parameter is the context.

    ::

        @tool(reads=["path"])
        async def read_file(ctx: ToolContext, path: str) -> str:
            '''Read a text file.

            Args:
                path: The file to read, relative to the workspace root.
            '''
            return await ctx.fs.read_text(path)

    The parameters after ``ctx`` are the arguments a model sends, validated strictly against
    their type hints (a string is not an int); the docstring's first part is the tool's
    description and its ``Args:`` lines describe the arguments in the JSON Schema.

    Options (all keywords, all optional):

    - ``name``: what models call it by; default: the function's name.
    - ``description``: what the model is told the tool does; default: the docstring's text
      before its ``Args:`` section.
    - ``reads``: names of arguments holding paths (a string, or a list of strings) that a call
      reads: a shared lease on each, so reads of one file run together.
    - ``writes``: names of arguments holding paths a call writes (or creates, moves, deletes):
      an exclusive lease on each, so a write runs alone on its file and everything under it.
    - ``claims``: a function of the parsed arguments returning more claims (devices, pools,
      paths built from several arguments): ``claims=lambda args: [exclusive(device("phone"))]``.
      Returning ``[]`` declares that the call needs nothing: it runs freely, beside anything.
    - ``reads_workspace``: ``True`` takes a shared lease on the whole workspace: the call may
      read any file, runs beside other readers, and no write anywhere runs beside it (writes
      wait for it, and it waits for earlier writes). For a tool that reads only the files its
      arguments name, ``reads=`` lets writes elsewhere go on.
    - ``ahead``: ``True`` for a tool that only reads (what its claims cover, through
      ``ctx.fs``): a call may then start before its leases are granted, beside an earlier
      call that itself runs ahead and has not committed yet (a sandboxed Bash command that
      writes what it reads); its result is held until the grant, and if a call that finished
      meanwhile changed anything it claims, it runs again, holding its leases, so what it
      returns is what a run in emission order gives. It passes no earlier call that writes
      directly (a ``Write``, an ``Edit``): it waits for that as ever. A function of
      ``(arguments, key)`` returning an :class:`~toolkernel.kernel.Ahead` (or None: not this
      call) is for a tool whose writes wait for a commit of its own: its tool awaits
      ``ctx.wait_granted()``, checks what changed meanwhile, and commits after it (before the
      grant, ``ctx.fs`` refuses every write). Default: calls wait for their grant.
    - ``wait_timeout``: seconds a call may wait for its leases before it ends ``TIMEOUT``
      (None: the kernel's default, ``open_kernel(wait_timeout=...)``); a call's own setting
      overrides it.
    - ``run_timeout``: seconds a call may run before it is cancelled and ends ``TIMEOUT``
      (None: the kernel's default); a call's own setting overrides it.
    - ``thread``: ``True`` on a plain ``def`` runs it in a worker thread. The call holds its
      leases until the thread returns, even when it is cancelled or times out meanwhile (a
      thread can't be interrupted); such a call's result is ``CANCELLED`` (``TIMEOUT``) and the
      function's return value is dropped. Inside the thread, reach the context's async methods
      with ``anyio.from_thread.run(ctx.fs.read_text, path)``.

    With none of ``reads``, ``writes``, ``claims`` or ``reads_workspace`` (as with a bare
    ``@tool``) the tool declares nothing, and each call is a barrier: exclusive on everything.
    That is safe and slow, so it is said once, with a
    :class:`~toolkernel.errors.BarrierToolWarning` pointing at the declaration;
    ``claims=lambda args: [exclusive(EVERYTHING)]`` asks for a barrier without it.

    Raises :class:`ToolDeclarationError` (a ``TypeError`` and a ``ValueError``) when the tool
    can't work: no ``ctx`` first, a plain ``def`` without ``thread=True`` (a worker thread
    can't be cancelled: say so with ``thread=True``, or use ``async def`` and
    ``anyio.to_thread.run_sync`` inside), ``thread=True`` on an ``async def``, ``reads`` or
    ``writes`` naming arguments it does not have, ``claims`` that is not callable, ``ahead``
    that is neither True, False nor a function of two arguments (or True with ``writes``), an empty
    name, a timeout that is negative or not a number, a parameter that can't be
    passed by keyword, a type hint that has no JSON Schema, or an unknown option.
    """
    if function is not None:
        return _warned_if_barrier(FunctionTool(function, **options))

    def decorate(fn: Callable[..., Any]) -> FunctionTool:
        return _warned_if_barrier(FunctionTool(fn, **options))

    return decorate


def _warned_if_barrier(made: FunctionTool) -> FunctionTool:
    """``made``, after a :class:`BarrierToolWarning` if it declares nothing: a tool declared
    bare runs each call alone, which is safe and slow, and nothing else would say so. The
    warning points at the line declaring the tool (the caller of ``tool`` or ``decorate``)."""
    if not (made.reads or made.writes or made.reads_workspace or made._claims_function):
        warnings.warn(_barrier(made.name), BarrierToolWarning, stacklevel=3)
    return made


def _barrier(name: str) -> str:
    return (
        f"tool {name!r} declares no claims, so each of its calls runs alone (a barrier: it "
        f"waits for every earlier call and every later call waits for it). Declare what it "
        f"touches: reads=[...] or writes=[...] naming the arguments that hold paths, "
        f"claims=lambda args: [...] for anything else, claims=lambda args: [] for a tool "
        f"that touches nothing; or claims=lambda args: [tk.exclusive(tk.EVERYTHING)] to keep "
        f"it a barrier without this warning"
    )

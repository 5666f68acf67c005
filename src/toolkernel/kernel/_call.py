"""Calls, results, statuses, and the lifecycle every call goes through."""

from __future__ import annotations

import dataclasses
import enum
import json
import warnings
from collections.abc import Mapping
from typing import Any

import attrs

from .._checks import check_priority, check_seconds
from ._content import Content

__all__ = ["ToolCall", "ToolResult", "Status", "CallState"]


def output_text(output: object) -> str:
    """A tool's output as the model reads it: text as it is, a :class:`Content` as its
    ``text()``, bytes as UTF-8 text, anything else as JSON (sets as lists, attrs classes,
    dataclasses and pydantic models as objects, anything JSON can't spell as its ``str``)."""
    if isinstance(output, str):
        return output
    if isinstance(output, Content):
        return output.text()
    if output is None:
        return ""
    if isinstance(output, (bytes, bytearray, memoryview)):
        return bytes(output).decode("utf-8", errors="replace")
    try:
        return json.dumps(output, default=_jsonable, ensure_ascii=False)
    except Exception:  # a cycle, NaN keys, a __str__ that raises, an int past the digit limit
        pass
    try:
        return str(output)
    except RecursionError:  # nested deeper than even its repr goes
        return f"({type(output).__name__} nested too deeply to show)"
    except Exception as failure:  # a __str__ that raises, an int past the digit limit
        return (
            f"({type(output).__name__} that can't be shown: str() raised {type(failure).__name__})"
        )


def _jsonable(value: object) -> object:
    if isinstance(value, Content):  # inside a list or a dict: what the model reads of it
        return value.text()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, (set, frozenset)):
        try:
            return sorted(value)
        except TypeError:
            return list(value)
    if isinstance(value, enum.Enum):
        return value.value
    if attrs.has(type(value)):
        return attrs.asdict(value, recurse=False)  # type: ignore[arg-type]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    dump = getattr(value, "model_dump", None)  # pydantic models
    if callable(dump):
        try:
            return dump(mode="json")
        except Exception:
            pass
    return str(value)


def _freeze_after(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def _check_priority(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    # The lease table refuses anything else when the call requests its leases; refuse it here,
    # where the mistake is made, rather than there, where it would escape from the kernel.
    check_priority(value)


def _check_timeout(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_seconds(attribute.name, value)


def _check_agent(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"agent must be a str or None, not {value!r}")


@attrs.frozen
class ToolCall:
    """One tool call as the model emitted it.

    ``arguments`` is a mapping or a JSON string (as OpenAI sends it); the kernel parses and
    validates it when the call is admitted, so a malformed one becomes an ERROR result.
    ``after`` names calls that must finish (successfully) first. ``priority`` lets a call
    overtake waiting calls of other batches, never conflicting earlier calls of its own.
    ``wait_timeout`` / ``run_timeout`` override the tool's and the kernel's limits, in seconds
    (None: keep theirs; ``math.inf``: no limit). The run limit covers the after-hooks too.
    ``agent`` names the agent making the call on a kernel several agents share: each keeps its
    own view of the files it read and wrote (None: the kernel's own). ``read_first`` marks a
    call a model made: its ``Write``, ``Edit`` or ``MultiEdit`` refuses a file the agent never
    read (the agent loop and the framework adapters set it; a program may leave it off).
    """

    id: str
    name: str
    arguments: Mapping[str, Any] | str = attrs.field(factory=dict)
    after: tuple[str, ...] = attrs.field(default=(), converter=_freeze_after, kw_only=True)
    priority: int = attrs.field(default=0, kw_only=True, validator=_check_priority)
    wait_timeout: float | None = attrs.field(default=None, kw_only=True, validator=_check_timeout)
    run_timeout: float | None = attrs.field(default=None, kw_only=True, validator=_check_timeout)
    agent: str | None = attrs.field(default=None, kw_only=True, validator=_check_agent)
    read_first: bool = attrs.field(default=False, kw_only=True)

    def arguments_json(self) -> str:
        """The arguments as a JSON string (as they would travel on the wire)."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, default=str)


class Status(enum.Enum):
    """How a call ended."""

    OK = "ok"
    """The tool returned normally."""
    ERROR = "error"
    """Unknown tool, bad arguments, the tool raised, undeclared access, deadlock, ..."""
    DENIED = "denied"
    """The permission policy, the approver or a before-hook refused it."""
    TIMEOUT = "timeout"
    """It waited for its leases, or ran, longer than allowed."""
    CANCELLED = "cancelled"
    """It was cancelled: by itself, its batch, or the kernel closing."""
    SKIPPED = "skipped"
    """A call it had to wait for (``after=``) did not succeed."""

    def __repr__(self) -> str:
        return f"Status.{self.name}"

    def __str__(self) -> str:
        # ``print(result.status)`` shows ``OK``, as the docs and messages write it.
        return self.name


@attrs.frozen
class ToolResult:
    """The outcome of one call. Every call gets exactly one, whatever happened.

    ``output`` is what the tool returned (OK) or None; ``error`` is a message written for the model
    to read and act on (every other status). Times are on trio's clock: ``queued_at`` when it was
    admitted, ``started_at`` when its leases were granted and it began running (None if it never
    ran), ``finished_at`` when it ended.

    ``error_type`` names the class of the exception behind every status but OK (one of
    toolkernel's own, such as ``"RunTimeoutError"`` or ``"PermissionDeniedError"``, or the tool's,
    such as ``"ValueError"``), so callers can tell failures apart without parsing ``error``.
    ``exception`` is that exception itself, traceback included, when there is one; it is not
    compared, printed or serialized.
    """

    call_id: str
    name: str
    status: Status
    output: Any = None
    error: str | None = None
    queued_at: float = 0.0
    started_at: float | None = None
    finished_at: float = 0.0
    error_type: str | None = None
    exception: BaseException | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def ok(self) -> bool:
        """True iff the status is OK."""
        return self.status is Status.OK

    @property
    def wait_time(self) -> float:
        """Seconds between admission and start (or end, if it never started)."""
        start = self.finished_at if self.started_at is None else self.started_at
        return start - self.queued_at

    @property
    def run_time(self) -> float:
        """Seconds it ran; 0 if it never started."""
        return 0.0 if self.started_at is None else self.finished_at - self.started_at

    def text(self) -> str:
        """What to show the model: the output as text, or the error message."""
        if self.status is Status.OK:
            return output_text(self.output)
        return self.error or self.status.value

    def __call__(self) -> ToolResult:
        # ``handle.result()``: ``CallHandle.result`` was a method and is a property now. This
        # keeps the old spelling working (itself) while callers move; it goes with the warning.
        warnings.warn(
            "CallHandle.result is a property now: write handle.result, not handle.result()",
            DeprecationWarning,
            stacklevel=2,
        )
        return self


class CallState(enum.Enum):
    """Where a call is in its lifecycle (the scheduler tracks finer stages within each)."""

    PENDING = "pending"
    """Admitted; waiting for dependencies, hooks, the policy or its turn to request leases."""
    QUEUED = "queued"
    """Its lease request is in the table, waiting for a grant. Not a task."""
    RUNNING = "running"
    """Leases granted; its task is running the tool."""
    FINISHED = "finished"
    """It has its result."""

    # Members are singletons compared by identity, so they may hash by identity too; the
    # inherited ``Enum.__hash__`` is Python code, and every move of every call looks a state up.
    __hash__ = object.__hash__


# The members as module globals, for the hot paths to compare with. On Python 3.11 reading
# ``CallState.RUNNING`` goes through the enum metaclass (about 0.1 us, a global about 0.01 us),
# and a call's way through the kernel reads a dozen of them (benchmarks/overhead.py). Every
# kernel module imports these rather than spelling the members out in its hot paths.
PENDING, QUEUED, RUNNING, FINISHED = (
    CallState.PENDING,
    CallState.QUEUED,
    CallState.RUNNING,
    CallState.FINISHED,
)
OK, ERROR, DENIED, TIMEOUT, CANCELLED, SKIPPED = (
    Status.OK,
    Status.ERROR,
    Status.DENIED,
    Status.TIMEOUT,
    Status.CANCELLED,
    Status.SKIPPED,
)


_MISSING = object()


def malformed(result: ToolResult) -> str | None:
    """What of ``result``, built by someone else (an after-hook), is not what a
    ``ToolResult`` holds, if anything: its fields are not checked when it is made (every
    call's result is made on the kernel's hot path), and one not made whole would fail the
    kernel as the call finishes."""

    def field(name: str) -> Any:
        return getattr(result, name, _MISSING)

    def is_time(value: object) -> bool:
        return type(value) is not bool and isinstance(value, int | float)

    if not isinstance(field("status"), Status):
        return "its status is not a Status"
    for name in ("error", "error_type"):
        if field(name) is not None and not isinstance(field(name), str):
            return f"its {name} is not a str or None"
    if not (is_time(field("queued_at")) and is_time(field("finished_at"))):
        return "its queued_at or finished_at is not a time"
    if field("started_at") is not None and not is_time(field("started_at")):
        return "its started_at is not a time or None"
    if field("exception") is not None and not isinstance(field("exception"), BaseException):
        return "its exception is not an exception or None"
    if field("output") is _MISSING or field("call_id") is _MISSING or field("name") is _MISSING:
        return "it was never made (a field is missing)"
    return None

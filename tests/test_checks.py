"""Each rule on a user's value is checked by one checker: the same bad value is refused with the
same exception type and the same message wherever the rule applies."""

from __future__ import annotations

import inspect
import json
import math
import pathlib
import re
from collections.abc import Callable
from typing import Any

import attrs
import pytest

import toolkernel as tk
from toolkernel import InvalidClaimError
from toolkernel._checks import (
    check_capacity,
    check_count,
    check_number,
    check_priority,
    check_seconds,
)
from toolkernel._replay import load_turns, recorded_call
from toolkernel.agent import Retry, ScriptedModel, Turn, run_agent
from toolkernel.cli import main
from toolkernel.errors import CapacityError
from toolkernel.kernel._options import KernelOptions
from toolkernel.leases import EtcdLeases, parse_leases
from toolkernel.leases._service import serve
from toolkernel.locks import LeaseTable

SECONDS_RULE = "must be a non-negative number of seconds or None"


async def _takes_path(ctx: tk.ToolContext, path: str) -> str:
    return path


def _tool_option(option: str) -> Callable[[Any], object]:
    return lambda value: tk.tool(claims=lambda args: [], **{option: value})(_takes_path)


# Where a number of seconds is given: (what the message names, how the value is given).
SECONDS_PLACES: dict[str, tuple[str, Callable[[Any], object]]] = {
    "checker": ("limit", lambda value: check_seconds("limit", value)),
    "call wait_timeout": (
        "wait_timeout",
        lambda value: tk.ToolCall("c1", "edit", {}, wait_timeout=value),
    ),
    "call run_timeout": (
        "run_timeout",
        lambda value: tk.ToolCall("c1", "edit", {}, run_timeout=value),
    ),
    "kernel wait_timeout": ("wait_timeout", lambda value: KernelOptions(wait_timeout=value)),
    "kernel run_timeout": ("run_timeout", lambda value: KernelOptions(run_timeout=value)),
    "tool wait_timeout": ("wait_timeout", _tool_option("wait_timeout")),
    "tool run_timeout": ("run_timeout", _tool_option("run_timeout")),
}


@pytest.mark.parametrize("place", SECONDS_PLACES)
@pytest.mark.parametrize(
    ("value", "error"),
    [
        (-1, ValueError),
        (-0.5, ValueError),
        (-math.inf, ValueError),
        (math.nan, ValueError),
        ("5", TypeError),
        (True, TypeError),
        ([1], TypeError),
    ],
)
def test_seconds_are_refused_alike_everywhere(place: str, value: Any, error: type) -> None:
    what, give = SECONDS_PLACES[place]
    message = f"{what} must be a non-negative number of seconds or None, not {value!r}"
    with pytest.raises(error, match=re.escape(message)):
        give(value)


@pytest.mark.parametrize("place", SECONDS_PLACES)
@pytest.mark.parametrize("value", [None, 0, 0.25, 3, math.inf])
def test_seconds_are_accepted_alike_everywhere(place: str, value: Any) -> None:
    SECONDS_PLACES[place][1](value)


# Where a priority is given; the lease table's InvalidClaimError is a ValueError.
PRIORITY_PLACES: dict[str, Callable[[Any], object]] = {
    "checker": check_priority,
    "call": lambda value: tk.ToolCall("c1", "edit", {}, priority=value),
    "lease table": lambda value: LeaseTable().request([tk.exclusive(tk.path("a"))], priority=value),
}


@pytest.mark.parametrize("place", PRIORITY_PLACES)
@pytest.mark.parametrize("value", [1.5, "1", True, None])
def test_priorities_are_refused_alike_everywhere(place: str, value: Any) -> None:
    with pytest.raises(ValueError, match=re.escape(f"priority must be an int, not {value!r}")):
        PRIORITY_PLACES[place](value)


@pytest.mark.parametrize("place", PRIORITY_PLACES)
@pytest.mark.parametrize("value", [-3, 0, 7])
def test_priorities_are_accepted_alike_everywhere(place: str, value: Any) -> None:
    PRIORITY_PLACES[place](value)


# -- a non-negative number (of seconds, finite, positive): one message, TypeError or ValueError --


def _emitted(value: Any) -> object:
    return Turn("", [tk.ToolCall("c1", "edit", {})], emitted=(value,))


def _traced(tmp_path: pathlib.Path, value: Any) -> object:
    trace = tmp_path / "trace.jsonl"
    call = {"id": "a", "tool": "Read", "args": {"file_path": "x.py"}, "duration_s": value}
    trace.write_text(json.dumps({"session": "s", "turn": 1, "calls": [call]}) + "\n")
    return load_turns(trace)


# Where a number is given: (what the message names, its rule, how the value is given).
NUMBER_PLACES: dict[str, tuple[str, str, Callable[[Any], object]]] = {
    "checker": ("x", "a non-negative number", lambda value: check_number("x", value)),
    "retry initial": (
        "Retry.initial",
        "a non-negative number of seconds",
        lambda value: Retry(initial=value),
    ),
    "retry multiplier": (
        "Retry.multiplier",
        "a non-negative number",
        lambda value: Retry(multiplier=value),
    ),
    "retry maximum": (
        "Retry.maximum",
        "a non-negative number of seconds",
        lambda value: Retry(maximum=value),
    ),
    "scripted emission time": ("an emission time", "a non-negative number of seconds", _emitted),
    "replayed call": (
        "the duration of call c1",
        "a finite, non-negative number of milliseconds",
        lambda value: recorded_call("c1", "Read", {"file_path": "a"}, value),
    ),
    "etcd ttl": (
        "ttl",
        "a finite, positive number of seconds",
        lambda value: EtcdLeases("127.0.0.1", 2379, value),
    ),
}


@pytest.mark.parametrize("place", NUMBER_PLACES)
@pytest.mark.parametrize(
    ("value", "error"),
    [(-1, ValueError), (-math.inf, ValueError), (math.nan, ValueError), ("5", TypeError)],
)
@pytest.mark.parametrize("none", [False, True])
def test_numbers_are_refused_alike_everywhere(
    place: str, value: Any, error: type, none: bool
) -> None:
    what, rule, give = NUMBER_PLACES[place]
    value = None if none else value  # None is no number here: a TypeError, as "5" is
    error = TypeError if none else error
    with pytest.raises(error, match=re.escape(f"{what} must be {rule}, not {value!r}")):
        give(value)


@pytest.mark.parametrize("place", NUMBER_PLACES)
@pytest.mark.parametrize("value", [0.25, 3])
def test_numbers_are_accepted_alike_everywhere(place: str, value: Any) -> None:
    NUMBER_PLACES[place][2](value)


@pytest.mark.parametrize(
    ("finite", "positive", "refused", "accepted"),
    [
        (False, False, [-1e-9], [0, math.inf]),
        (True, False, [math.inf], [0]),
        (False, True, [0, -0.0], [math.inf, 1e-9]),
        (True, True, [0, math.inf], [1e-9]),
    ],
)
def test_a_number_s_range_is_its_rule(
    finite: bool, positive: bool, refused: list[float], accepted: list[float]
) -> None:
    for value in refused:
        with pytest.raises(ValueError):
            check_number("x", value, finite=finite, positive=positive)
    for value in accepted:
        assert check_number("x", value, finite=finite, positive=positive) == value


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (-5, "must be a finite, non-negative number of seconds, not -5"),
        (math.inf, "must be a finite, non-negative number of seconds, not inf"),
        ("5", "TypeError: duration_s must be a finite, non-negative number of seconds, not '5'"),
    ],
)
def test_a_replayed_trace_s_durations_follow_the_rule(
    tmp_path: pathlib.Path, value: Any, why: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):  # a file's bad line: a ValueError
        _traced(tmp_path, value)


@pytest.mark.parametrize(
    ("ttl", "shown"), [("0", "0.0"), ("-1", "-1.0"), ("inf", "inf"), ("nan", "nan"), ("x", "'x'")]
)
def test_a_lease_url_s_ttl_follows_the_ttl_rule(ttl: str, shown: str) -> None:
    url = f"etcd://127.0.0.1:2379?ttl={ttl}"
    message = f"can't use leases={url!r}: ttl must be a finite, positive number of seconds, not"
    with pytest.raises(ValueError, match=re.escape(f"{message} {shown}")):
        parse_leases(url)
    assert parse_leases("etcd://127.0.0.1:2379?ttl=0.5") == EtcdLeases("127.0.0.1", 2379, 0.5)


@pytest.mark.parametrize(
    ("value", "error"), [(0, ValueError), (math.inf, ValueError), ("1", TypeError)]
)
async def test_the_lease_service_s_ttl_follows_the_ttl_rule(
    tmp_path: pathlib.Path, value: Any, error: type
) -> None:
    message = f"ttl must be a finite, positive number of seconds, not {value!r}"
    with pytest.raises(error, match=re.escape(message)):
        await serve(tmp_path, socket_path=str(tmp_path / "s.sock"), ttl=value)
    assert not (tmp_path / "s.sock").exists()  # refused before anything opened


@pytest.mark.parametrize(("ttl", "shown"), [("0", "0.0"), ("inf", "inf"), ("x", "'x'")])
def test_serve_s_ttl_follows_the_ttl_rule(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], ttl: str, shown: str
) -> None:
    with pytest.raises(SystemExit) as leaving:
        main(["serve", "--root", str(tmp_path), "--ttl", ttl])
    assert leaving.value.code == 2  # argparse's usage error
    message = f"argument --ttl: --ttl must be a finite, positive number of seconds, not {shown}"
    assert message in capsys.readouterr().err


async def test_the_agent_loop_s_numbers_follow_their_rules() -> None:
    async with tk.open_kernel() as kernel:
        for value, error in [(-1, ValueError), ("1", TypeError)]:
            message = (
                f"turn_timeout must be a non-negative number of seconds or None, not {value!r}"
            )
            with pytest.raises(error, match=re.escape(message)):
                await run_agent(ScriptedModel([]), kernel, "go", turn_timeout=value)
            with pytest.raises(error, match=re.escape("Retry.initial must be a non-negative")):
                await run_agent(ScriptedModel([]), kernel, "go", retry=Retry(initial=value))


# -- a count: an int of at least some minimum -----------------------------------------------------

# Where a count is given: (what the message names, its minimum, how the value is given).
COUNT_PLACES: dict[str, tuple[str, int, Callable[[Any], object]]] = {
    "checker": ("n", 2, lambda value: check_count("n", value, 2)),
    "kernel max_depth": ("max_depth", 0, lambda value: KernelOptions(max_depth=value)),
    "kernel max_concurrency": (
        "max_concurrency",
        1,
        lambda value: KernelOptions(max_concurrency=value),
    ),
    "retry attempts": ("Retry.attempts", 1, lambda value: Retry(attempts=value)),
}


@pytest.mark.parametrize("place", COUNT_PLACES)
@pytest.mark.parametrize("value", ["3", 2.0, True, [3]])
def test_counts_of_the_wrong_type_are_refused_alike_everywhere(place: str, value: Any) -> None:
    what, minimum, give = COUNT_PLACES[place]
    with pytest.raises(TypeError, match=re.escape(f"{what} must be an int >= {minimum}, not")):
        give(value)


@pytest.mark.parametrize("place", COUNT_PLACES)
def test_counts_below_their_minimum_are_refused_alike_everywhere(place: str) -> None:
    what, minimum, give = COUNT_PLACES[place]
    for value in (minimum - 1, -5):
        message = f"{what} must be an int >= {minimum}, not {value!r}"
        with pytest.raises(ValueError, match=re.escape(message)):
            give(value)
    give(minimum)
    give(minimum + 10)


async def test_open_kernel_s_counts_follow_the_count_rule() -> None:
    for options, error in [({"max_depth": -1}, ValueError), ({"max_concurrency": 2.5}, TypeError)]:
        with pytest.raises(error, match="must be an int >= "):
            async with tk.open_kernel(**options):
                pass  # pragma: no cover - never reached


# -- a pool's capacity: a positive int, its name a non-empty string --------------------------------

# Where pools are given; CapacityError and InvalidClaimError are ValueErrors, as the lease table
# has always raised.
POOL_PLACES: dict[str, Callable[[str, Any], object]] = {
    "checker": check_capacity,
    "kernel options": lambda name, capacity: KernelOptions(pools={name: capacity}),
    "lease table": lambda name, capacity: LeaseTable(pools={name: capacity}),
    "lease table set_capacity": lambda name, capacity: LeaseTable().set_capacity(name, capacity),
}


@pytest.mark.parametrize("place", POOL_PLACES)
@pytest.mark.parametrize("capacity", [0, -1, 1.5, "2", True, None])
def test_capacities_are_refused_alike_everywhere(place: str, capacity: Any) -> None:
    message = f"capacity of pool 'net' must be a positive int, not {capacity!r}"
    with pytest.raises(CapacityError, match=re.escape(message)):
        POOL_PLACES[place]("net", capacity)


@pytest.mark.parametrize("place", POOL_PLACES)
@pytest.mark.parametrize("name", ["", 3, None])
def test_pool_names_are_refused_alike_everywhere(place: str, name: Any) -> None:
    message = f"pool name must be a non-empty string, not {name!r}"
    with pytest.raises(InvalidClaimError, match=re.escape(message)):
        POOL_PLACES[place](name, 2)


@pytest.mark.parametrize("place", POOL_PLACES)
def test_capacities_are_accepted_alike_everywhere(place: str) -> None:
    POOL_PLACES[place]("net", 1)
    POOL_PLACES[place]("net", 64)


def test_the_kernel_refuses_a_bad_pool_with_its_options() -> None:
    with pytest.raises(CapacityError):
        KernelOptions(pools={"net": 0})  # not later, when the kernel's lease table is made


@pytest.mark.parametrize(
    ("pool", "message"),
    [
        ("net=0", "capacity of pool 'net' must be a positive int, not 0"),
        ("net=-2", "capacity of pool 'net' must be a positive int, not -2"),
        ("net=two", "capacity of pool 'net' must be a positive int, not 'two'"),
        ("=2", "pool name must be a non-empty string, not ''"),
        ("net", "write a pool as NAME=CAPACITY, not 'net'"),
    ],
)
def test_serve_s_pools_follow_the_pool_rule(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], pool: str, message: str
) -> None:
    with pytest.raises(SystemExit) as leaving:
        main(["serve", "--root", str(tmp_path), "--pool", pool])
    assert leaving.value.code == 2  # argparse's usage error
    assert f"argument --pool: {message}" in capsys.readouterr().err


# -- defaults: each is checked by the checker a given value is ---------------------------------


def test_every_kernel_option_default_passes_the_checker_a_given_value_does() -> None:
    defaults = KernelOptions()
    for field in attrs.fields(KernelOptions):
        assert field.validator is not None, f"{field.name} is not checked"
        # The validator a given value meets is the one the default met (attrs runs it on both).
        field.validator(defaults, field, getattr(defaults, field.name))


def test_open_kernel_s_defaults_are_kernel_options_defaults() -> None:
    """open_kernel gives every option to KernelOptions, its defaults included: they are
    checked there, by the checkers given values meet, and agree with KernelOptions'."""
    parameters = inspect.signature(tk.open_kernel).parameters
    given = {field.name: parameters[field.name].default for field in attrs.fields(KernelOptions)}
    assert KernelOptions(**given) == KernelOptions()


def test_a_bad_default_would_be_refused_as_a_given_value_is() -> None:
    @attrs.frozen(kw_only=True)
    class Badly(KernelOptions):  # a default out of range: refused when options are made
        wait_timeout: float | None = attrs.field(
            default=-1, validator=attrs.fields(KernelOptions).wait_timeout.validator
        )

    with pytest.raises(ValueError, match=re.escape(f"wait_timeout {SECONDS_RULE}, not -1")):
        Badly()

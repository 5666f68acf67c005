"""Each rule on a user's value is checked by one checker: the same bad value is refused with the
same exception type and the same message wherever the rule applies."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import pytest

import toolkernel as tk
from toolkernel._checks import check_priority, check_seconds
from toolkernel.kernel._options import KernelOptions
from toolkernel.locks import LeaseTable


async def _takes_path(ctx: tk.ToolContext, path: str) -> str:
    return path


def _tool_option(option: str) -> Callable[[Any], object]:
    return lambda value: tk.tool(**{option: value})(_takes_path)


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

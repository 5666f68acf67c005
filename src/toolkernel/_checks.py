"""One checker per rule a user's value must follow, so a rule reads, and fails, the same wherever
it is applied (a tool's declaration, a call, a kernel's options, an agent's loop).

A value of the wrong type is a ``TypeError``, a value of the right type out of range a
``ValueError``; the message names the option and the rule: ``"wait_timeout must be a
non-negative number of seconds or None, not -1"``. A caller that adds context (the tool being
declared) prefixes the message and keeps the rest.
"""

from __future__ import annotations

import math

from ._errors import CapacityError, InvalidClaimError

__all__ = [
    "check_capacity",
    "check_count",
    "check_number",
    "check_priority",
    "check_seconds",
    "check_ttl",
]


def check_seconds(what: str, value: object) -> float | None:
    """``value`` if it is None (no limit) or a non-negative number of seconds (``inf`` is no
    limit too, as in trio); a ``TypeError`` for anything not a number (``True`` included), a
    ``ValueError`` for a negative number or NaN."""
    if value is None:
        return None
    return _number(what, value, finite=False, positive=False, rule=_SECONDS)


def check_number(
    what: str, value: object, *, unit: str = "", finite: bool = False, positive: bool = False
) -> float:
    """``value`` if it is a non-negative number (of ``unit``: ``"seconds"``), or a positive one
    if ``positive``, a finite one if ``finite``; a ``TypeError`` for anything not a number (None
    and ``True`` included), a ``ValueError`` for one out of range or NaN:
    ``"ttl must be a finite, positive number of seconds, not 0"``."""
    sign = "positive" if positive else "non-negative"
    rule = f"must be a {'finite, ' if finite else ''}{sign} number{f' of {unit}' if unit else ''}"
    return _number(what, value, finite=finite, positive=positive, rule=rule)


def check_ttl(what: str, value: object) -> float:
    """``value`` if it is a finite, positive number of seconds: how long a silent client's
    leases last (etcd's ``?ttl=``, the lease service's ``ttl``); as :func:`check_number`."""
    return check_number(what, value, unit="seconds", finite=True, positive=True)


def check_count(what: str, value: object, minimum: int = 0) -> int:
    """``value`` if it is an int (``True`` is not) of at least ``minimum``; a ``TypeError`` for
    anything else, a ``ValueError`` for a smaller int: ``"max_depth must be an int >= 0, not -1"``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int >= {minimum}, not {value!r}")
    if value < minimum:
        raise ValueError(f"{what} must be an int >= {minimum}, not {value!r}")
    return value


def check_capacity(name: object, capacity: object) -> None:
    """Refuse a pool name or capacity a lease table can't hold, wherever pools are given (a
    kernel's options, a lease table, the lease service, ``serve --pool``): an
    ``InvalidClaimError`` for a name that is not a non-empty string, a ``CapacityError`` for a
    capacity that is not a positive int, of the wrong type included, as the lease table has
    always refused one (both are ``ValueError``)."""
    if not isinstance(name, str) or not name:
        raise InvalidClaimError(f"pool name must be a non-empty string, not {name!r}")
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise CapacityError(f"capacity of pool {name!r} must be a positive int, not {capacity!r}")


def _number(what: str, value: object, *, finite: bool, positive: bool, rule: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} {rule}, not {value!r}")
    # ``not nan >= 0`` holds too
    if not (value > 0 if positive else value >= 0) or (finite and math.isinf(value)):
        raise ValueError(f"{what} {rule}, not {value!r}")
    return value


def check_priority(value: object) -> int:
    """``value`` if it is an int (``True`` is not); a ``ValueError`` otherwise, as the lease
    table has always refused one (its ``InvalidClaimError`` is a ``ValueError``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"priority must be an int, not {value!r}")
    return value


_SECONDS = "must be a non-negative number of seconds or None"

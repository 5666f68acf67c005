"""One checker per rule a user's value must follow, so a rule reads, and fails, the same wherever
it is applied (a tool's declaration, a call, a kernel's options, an agent's loop).

A value of the wrong type is a ``TypeError``, a value of the right type out of range a
``ValueError``; the message names the option and the rule: ``"wait_timeout must be a
non-negative number of seconds or None, not -1"``. A caller that adds context (the tool being
declared) prefixes the message and keeps the rest.
"""

from __future__ import annotations

__all__ = ["check_priority", "check_seconds"]


def check_seconds(what: str, value: object) -> float | None:
    """``value`` if it is None (no limit) or a non-negative number of seconds (``inf`` is no
    limit too, as in trio); a ``TypeError`` for anything not a number (``True`` included), a
    ``ValueError`` for a negative number or NaN."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} {_SECONDS}, not {value!r}")
    if not value >= 0:  # ``not nan >= 0`` holds too
        raise ValueError(f"{what} {_SECONDS}, not {value!r}")
    return value


def check_priority(value: object) -> int:
    """``value`` if it is an int (``True`` is not); a ``ValueError`` otherwise, as the lease
    table has always refused one (its ``InvalidClaimError`` is a ``ValueError``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"priority must be an int, not {value!r}")
    return value


_SECONDS = "must be a non-negative number of seconds or None"

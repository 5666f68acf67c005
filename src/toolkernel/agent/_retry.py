"""How the agent loop retries a model request that failed for a reason that may pass."""

from __future__ import annotations

import math
from typing import Any

import attrs

from .._checks import check_count, check_number
from .._errors import ModelError

__all__ = ["Retry"]


def _seconds(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_number(f"Retry.{attribute.name}", value, unit="seconds")


def _non_negative(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_number(f"Retry.{attribute.name}", value)


def _at_least_one(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_count(f"Retry.{attribute.name}", value, 1)


def _fraction(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    message = f"Retry.{attribute.name} must be between 0 and 1, not {value!r}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(message)
    if not 0 <= value <= 1:
        raise ValueError(message)


@attrs.frozen
class Retry:
    """Exponential backoff for transient model errors (429, 5xx, timeouts, dropped connections).

    The n-th retry waits ``initial * multiplier ** (n - 1)`` seconds, at most ``maximum``, less
    up to ``jitter`` of it at random (so clients that failed together do not retry together).
    When the server said how long to wait (``Retry-After``), that is the wait, again at most
    ``maximum``. Errors that are not transient (400, 401, 404, ...) are never retried.
    ``Retry(attempts=1)`` never retries.
    """

    attempts: int = attrs.field(default=4, validator=_at_least_one)
    """Tries in all, the first included."""
    initial: float = attrs.field(default=1.0, validator=_seconds)
    """Seconds before the first retry."""
    multiplier: float = attrs.field(default=2.0, validator=_non_negative)
    """How much longer each wait is than the one before."""
    maximum: float = attrs.field(default=60.0, validator=_seconds)
    """The longest wait, in seconds, whatever the server asks."""
    jitter: float = attrs.field(default=0.25, validator=_fraction)
    """The largest fraction of a computed wait taken off at random."""

    def delay(self, retry: int, error: ModelError, draw: float) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first) after ``error``;
        ``draw`` is a random number in [0, 1)."""
        asked = error.retry_after
        # What a server (or a client of ours) said is used only if it is a number of seconds:
        # NaN, or something else, would reach ``sleep`` and fail the whole run.
        if isinstance(asked, int | float) and not isinstance(asked, bool) and not math.isnan(asked):
            return min(max(float(asked), 0.0), self.maximum)
        try:
            nominal = self.initial * self.multiplier ** (retry - 1)
        except OverflowError:  # many attempts: the wait long passed the maximum
            nominal = math.inf
        if math.isnan(nominal):  # an infinite initial wait times a multiplier of 0
            nominal = math.inf
        return min(nominal, self.maximum) * (1.0 - self.jitter * draw)

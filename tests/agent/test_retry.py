"""The backoff policy, as pure arithmetic."""

from __future__ import annotations

import pytest

from toolkernel.agent import ModelError, Retry

BUSY = ModelError("busy", transient=True, status=503)


def test_waits_grow_exponentially_up_to_the_maximum() -> None:
    retry = Retry(initial=1.0, multiplier=2.0, maximum=5.0, jitter=0.0)
    assert [retry.delay(n, BUSY, 0.5) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_jitter_only_shortens_a_wait_by_at_most_its_fraction() -> None:
    retry = Retry(initial=4.0, jitter=0.25)
    assert retry.delay(1, BUSY, 0.0) == 4.0
    assert retry.delay(1, BUSY, 0.999999) == pytest.approx(3.0, abs=1e-5)


def test_the_servers_retry_after_is_the_wait_capped_at_the_maximum() -> None:
    retry = Retry(maximum=30.0)
    assert retry.delay(1, ModelError("slow down", transient=True, retry_after=7.5), 0.9) == 7.5
    assert retry.delay(3, ModelError("slow down", transient=True, retry_after=600), 0.9) == 30.0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"attempts": 0}, "Retry.attempts must be an int >= 1, not 0"),
        ({"initial": -1}, "Retry.initial must be a non-negative number of seconds, not -1"),
        ({"jitter": 2}, "Retry.jitter must be between 0 and 1, not 2"),
    ],
)
def test_a_bad_policy_is_refused_where_it_is_made(options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Retry(**options)

"""KeyQueue against a plain sorted list: same keys, same order, whatever the operations."""

from __future__ import annotations

from bisect import bisect_left, insort

from hypothesis import given
from hypothesis import strategies as st

from toolkernel.locks._keyqueue import KeyQueue

from ..strategies import key_queue_operations as operations


@given(first=st.integers(min_value=-1_000, max_value=1_000), ops=operations)
def test_a_key_queue_keeps_the_keys_of_a_sorted_list(
    first: int, ops: list[tuple[str, int, float]]
) -> None:
    queue: KeyQueue | None = KeyQueue(first)
    model = [first]
    for op, value, where in ops:
        if queue is None:
            queue, model = KeyQueue(value), [value]
            continue
        if op == "add" and value not in model:
            queue.add(value)
            insort(model, value)
        elif op == "remove":
            key = model.pop(int(where * len(model)))
            if queue.remove(key):
                assert not model
                queue = None
                continue
        elif op == "replace" and value not in model:
            old = model.pop(int(where * len(model)))
            queue.replace(old, value)
            insort(model, value)
        assert len(queue) == len(model)
        assert queue.first == model[0] and queue.last() == model[-1]
        assert list(queue.after(None)) == model
        assert list(queue.after(value)) == [k for k in model if k > value]
        before = bisect_left(model, value)
        assert queue.last_before(value) == (model[before - 1] if before else None)


def test_draining_a_long_queue_from_the_front_keeps_its_list_short() -> None:
    # Taking from the front only moves an index; the dead prefix is dropped once it is half the
    # list, so a drained queue holds no more than about twice what it has left.
    queue = KeyQueue(0)
    for key in range(1, 10_000):
        queue.add(key)
    for key in range(9_990):
        assert not queue.remove(key)
    assert list(queue.after(None)) == list(range(9_990, 10_000))
    assert len(queue._items) <= 2 * len(queue) + 32

"""LeaseTable.requeue: new claims, same place in the queue."""

import pytest

from toolkernel.errors import ForeignLeaseError, LeaseReleaseError
from toolkernel.locks import LeaseTable, reads, writes


def test_requeued_request_waits_ahead_of_later_arrivals() -> None:
    table = LeaseTable()
    first = table.request([writes("x")])
    reader = table.request([reads("y")])
    later_writer = table.request([writes("y")])
    x_reader = table.request([reads("x")])
    # `first` learns it really needs y: it gives x back (x_reader gets it) and waits for y,
    # ahead of later_writer, which arrived after it.
    assert table.requeue(first, [writes("y")]) == (x_reader,)
    assert table.is_waiting(first) and table.is_held(x_reader)
    assert [info.id for info in table.snapshot().waiting] == [first, later_writer]
    assert table.release(reader) == (first,)
    assert table.release(first) == (later_writer,)


def test_requeue_granted_at_once_when_free() -> None:
    table = LeaseTable()
    lease = table.request([writes("x")])
    waiter = table.request([reads("x")])
    assert table.requeue(lease, [writes("z")]) == (lease, waiter)
    assert table.claims(lease) == (writes("z"),)


def test_requeue_checks_owner_and_existence() -> None:
    table = LeaseTable()
    owner = object()
    lease = table.request([writes("x")], owner=owner)
    before = table.snapshot()
    with pytest.raises(ForeignLeaseError):
        table.requeue(lease, [writes("y")])
    with pytest.raises(LeaseReleaseError):
        table.requeue(lease + 100, [writes("y")], owner=owner)
    assert table.snapshot() == before

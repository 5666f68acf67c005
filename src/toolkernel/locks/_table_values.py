"""What a :class:`~toolkernel.locks.LeaseTable` says about itself: immutable values."""

from __future__ import annotations

from collections.abc import Hashable

import attrs

from ._resources import Claim

__all__ = ["LeaseInfo", "LeaseTableSnapshot", "LeaseTableStatistics"]


@attrs.frozen
class LeaseInfo:
    """One request in a :class:`LeaseTableSnapshot`."""

    id: int
    """The lease id, which is also its arrival number."""
    claims: tuple[Claim, ...]
    """The canonical claim set."""
    held: bool
    """True once granted; False while waiting."""
    priority: int
    """The priority it was requested with."""
    effective_priority: int
    """The priority it queues at, after the cap by earlier waiting requests of its group."""
    group: Hashable
    """The group (batch) it was requested in, or None."""
    waits_for: tuple[int, ...]
    """While waiting: the ids of the requests it waits behind directly (see
    :meth:`LeaseTable.waits_for`)."""


@attrs.frozen
class LeaseTableSnapshot:
    """The whole state of a :class:`LeaseTable` as an immutable value (compares with ``==``)."""

    held: tuple[LeaseInfo, ...]
    """Granted leases, by id."""
    waiting: tuple[LeaseInfo, ...]
    """Waiting requests, in queue order (the order in which they will be considered)."""
    capacities: tuple[tuple[str, int], ...]
    """Pool capacities, by name."""


@attrs.frozen
class LeaseTableStatistics:
    """Cheap counts describing a :class:`LeaseTable`."""

    held: int
    """Number of granted leases."""
    waiting: int
    """Number of requests waiting for a grant."""
    shared_claims_held: int
    """Number of shared claims (including pool unit claims) inside granted leases."""
    exclusive_claims_held: int
    """Number of exclusive claims inside granted leases."""
    pool_units_held: tuple[tuple[str, int], ...]
    """For each pool with a capacity, the units held, by name."""
    requests_examined: int = 0
    """Waiting requests looked at by grant checks and grant scans since the table was made, each
    time one is looked at: a count of work, not of state. Guarantee 9 bounds it: queuing n
    requests and running or withdrawing them all adds O(n)."""

"""Resources, claims and the lease table: who may touch what, and when.

``LeaseTable`` is pure bookkeeping (no event loop, no I/O, no clock); ``LockManager`` lets tasks
wait on it. The rules live in ``_table.py``'s header.
"""

from ._manager import Lease as Lease
from ._manager import LockManager as LockManager
from ._manager import WouldBlock as WouldBlock
from ._resources import EVERYTHING as EVERYTHING
from ._resources import Claim as Claim
from ._resources import Device as Device
from ._resources import Everything as Everything
from ._resources import Mode as Mode
from ._resources import Path as Path
from ._resources import Pool as Pool
from ._resources import Resource as Resource
from ._resources import canonical_claims as canonical_claims
from ._resources import claims_conflict as claims_conflict
from ._resources import claims_overlap as claims_overlap
from ._resources import covers as covers
from ._resources import device as device
from ._resources import exclusive as exclusive
from ._resources import path as path
from ._resources import pool as pool
from ._resources import reads as reads
from ._resources import shared as shared
from ._resources import units as units
from ._resources import writes as writes
from ._table import LeaseInfo as LeaseInfo
from ._table import LeaseTable as LeaseTable
from ._table import LeaseTableSnapshot as LeaseTableSnapshot
from ._table import LeaseTableStatistics as LeaseTableStatistics

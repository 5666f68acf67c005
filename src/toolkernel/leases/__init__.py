"""Leases shared by several processes: a lease service on one machine, or etcd.

``open_kernel(leases=None)`` keeps leases in-process. ``leases="unix:PATH"`` sends a kernel's
requests to a lease service (``python -m toolkernel serve --root DIR``); ``leases="etcd://host:port"``
keeps them in etcd. Every backend grants by the rules of ``LeaseTable`` and stamps each grant with
a fencing token; write paths publish their visible changes through ``backend.fence(grant)``.
"""

from ._address import default_socket_path as default_socket_path
from ._address import find_service as find_service
from ._backend import Chmod as Chmod
from ._backend import Fence as Fence
from ._backend import FencedOut as FencedOut
from ._backend import Grant as Grant
from ._backend import LeaseBackend as LeaseBackend
from ._backend import MakeDirectory as MakeDirectory
from ._backend import Op as Op
from ._backend import RemoveDirectory as RemoveDirectory
from ._backend import Rename as Rename
from ._backend import SetTimes as SetTimes
from ._backend import Unlink as Unlink
from ._connect import EtcdLeases as EtcdLeases
from ._connect import UnixLeases as UnixLeases
from ._connect import connect as connect
from ._connect import open_leases as open_leases
from ._connect import parse_leases as parse_leases

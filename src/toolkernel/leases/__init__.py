"""Leases shared by several processes: a lease service on one machine, or etcd.

``open_kernel(leases=None)`` keeps leases in-process. ``leases="unix:PATH"`` sends a kernel's
requests to a lease service (``python -m toolkernel serve --root DIR``, which prints PATH;
:func:`find_service` finds it from the root); ``leases="etcd://host:port"`` keeps them in etcd.
Every backend grants by the rules of ``LeaseTable`` (all or nothing, conflict-aware FIFO in order
of arrival, hierarchical paths, pools, priorities) and stamps each grant with a fencing token;
write paths make their changes visible through ``backend.fence(grant).publish(op)``.

The lease service (one machine)
-------------------------------
One process owns one ``LeaseTable`` for a workspace root and listens on a Unix socket (mode
``0600`` in a ``0700`` directory, each peer's ``SO_PEERCRED`` checked: the same user, or root).
Frames are length-prefixed JSON with a version; a malformed one (nested too deep included) gets
an error reply and harms no one else, and a bug met serving one client drops that client only.
A client that exits, crashes or drops its connection loses everything at once: its leases are
released and its waiters withdrawn in the same step, with no TTL to wait out. A client paused
with its socket still open (SIGSTOP, a debugger, a swapped-out laptop) is caught by the
heartbeat: it pings every TTL/4, and the service revokes everything of a client silent for a TTL
(10 s by default, ``serve --ttl``) and closes its connection. Time the service itself was
stopped does not count as its clients' silence. Out of descriptors, it serves the clients it
has and accepts new ones once some are free.

Fencing: why the service makes the change itself
------------------------------------------------
A file system checks no fencing token. A client that asks "is my grant still held?" and then
renames leaves a window between the answer and the rename: paused there past its TTL, it writes
after its lease went to another client, and a token checked before the pause does not help. On
one machine there is a way to close the window: the service, which decides revocations, makes
the visible step. A write path prepares its change under a scratch name (a hidden ``*.tktmp``
beside the target, invisible to the tools), then asks the service to publish one op: a rename
over the target, an unlink, ``mkdir``, ``rmdir``, ``chmod``, times. The service checks that the
grant is held (token and all) and covers every key the op changes exclusively, then makes the
change beneath its own root descriptor, through directories opened without following links, in
the same step of its event loop. Revocation is another step of that loop, so no change lands
after its grant went away: by construction, not by timing. A rename whose source lies outside the
workspace (a sandbox's upper layer) is first moved by the client to a scratch name beside its
target, then published the same way. What it costs is measured by ``benchmarks/leases.py``
(a plain ``rename``, check-then-rename, and the published rename, each from a worker thread as
``ctx.fs`` writes are): both fences add one round trip to the service to the rename, so closing
the window costs no more than the fence that leaves it open. On a busy two-core machine the
round trip was 1.7-4 ms and the published rename 1.3-8x a plain rename, the check-then-rename
1.2-2.4x (runs disagreeing more than the two fences do); the service's grants were 6-15x fewer
per second than in-process, and a killed client's lease reached its waiter in about 9 ms.

Rejected: check-then-rename in the client (the window above); ``flock`` held by each holder
(released when a process dies, but a paused process keeps it, so one stopped client stalls
everyone with no way to take it back); passing the target's directory descriptor to the service
with ``SCM_RIGHTS`` (the service would have to trust the client's descriptor to lie beneath the
root; opening by key from its own root descriptor checks that for free); reconnecting behind the
caller's back (leases held before a reconnection can't be trusted after it: a lost connection
fails the grants, and the caller opens a new backend).

What it does not promise: the socket is local, so the service coordinates processes on one
machine only (etcd spans machines); a process that writes the workspace without toolkernel is
not fenced; a client paused *before* publishing is refused, but a change the service has begun
is finished.
"""

import warnings as _warnings

from .._errors import FencedOutError as FencedOutError
from ._address import default_socket_path as default_socket_path
from ._address import find_service as find_service
from ._backend import Chmod as Chmod
from ._backend import Fence as Fence
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

# Names renamed here, each with its new one: kept for one release, with a warning.
_MOVED = {"FencedOut": "FencedOutError"}


def __getattr__(name: str) -> object:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    message = f"toolkernel.leases.{name} is deprecated: use toolkernel.errors.{_MOVED[name]}"
    _warnings.warn(message, DeprecationWarning, stacklevel=2)
    return FencedOutError

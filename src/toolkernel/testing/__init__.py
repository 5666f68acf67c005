"""Help for testing code built on toolkernel (and toolkernel itself)."""

from ._clock import VirtualClockEventLoop as VirtualClockEventLoop
from ._clock import wait_all_tasks_blocked as wait_all_tasks_blocked

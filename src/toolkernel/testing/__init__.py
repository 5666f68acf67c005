"""Help for testing tools, and code built on toolkernel, for race freedom.

- :class:`FakeTool`: scripted durations (on the mock clock), scripted failures, declared claims.
- :class:`Recorder`: a kernel listener (``kernel.add_listener(recorder)``) whose ``.recording``
  holds each call's claims, wait and run intervals, and every file ``ctx.fs`` touched.
- :func:`check_race_free`: every pair of conflicting calls that overlapped in time, and every
  access outside a call's claims, as :class:`Violation` values.
- :func:`assert_serializable` (and ``await`` :func:`check_serializable`): calls run through the
  kernel end as they do one at a time: the same files, the same outcomes.
- :class:`CallBatch`: calls and the cancellations to make while they run.
- ``toolkernel.testing.strategies``: hypothesis strategies for path spellings, claims and
  batches (needs ``hypothesis``); ``toolkernel.testing.pytest_plugin``: fixtures for a kernel
  on virtual time, on both loops.
- Virtual time: :func:`virtual_clock` (trio) and :class:`VirtualClockEventLoop` (asyncio), which
  can wait for worker threads (:func:`hold_virtual_time_for_threads`) and follow real time
  while child processes work (:func:`real_time_for_processes`); and
  :func:`wait_all_tasks_blocked` for either loop.
"""

from ._batch import CallBatch as CallBatch
from ._clock import VirtualClockEventLoop as VirtualClockEventLoop
from ._clock import hold_virtual_time_for_threads as hold_virtual_time_for_threads
from ._clock import real_time_for_processes as real_time_for_processes
from ._clock import virtual_clock as virtual_clock
from ._clock import wait_all_tasks_blocked as wait_all_tasks_blocked
from ._fake import FakeTool as FakeTool
from ._fake import FakeToolError as FakeToolError
from ._race import OverlappingConflict as OverlappingConflict
from ._race import UndeclaredAccess as UndeclaredAccess
from ._race import Violation as Violation
from ._race import check_race_free as check_race_free
from ._recorder import CallRecording as CallRecording
from ._recorder import Interval as Interval
from ._recorder import Recorder as Recorder
from ._recorder import Recording as Recording
from ._serializable import assert_serializable as assert_serializable
from ._serializable import check_serializable as check_serializable
from ._serializable import tree_of as tree_of

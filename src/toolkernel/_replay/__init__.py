"""Recorded agent turns replayed under every scheduling strategy, side by side.

``python -m toolkernel replay TRACE.jsonl`` and ``benchmarks/scheduling.py`` both use this:
:func:`load_turns` reads recorded turns (with each call's claims, as toolkernel's tools declare
them, Bash's from ``shell_claims``); :func:`compare` runs them through the kernel on the mock
clock and computes what serial, coarse read/write, the parallelizable flag, dependency levels,
gathering everything and the order-preserving critical path would do; :func:`format_table`
prints it, :func:`timeline_svg` draws one turn.
"""

from ._kernel import KernelReplay as KernelReplay
from ._kernel import replay_on_kernel as replay_on_kernel
from ._read_only import is_read_only_command as is_read_only_command
from ._report import STRATEGIES as STRATEGIES
from ._report import Comparison as Comparison
from ._report import TurnSchedules as TurnSchedules
from ._report import compare as compare
from ._report import format_table as format_table
from ._report import schedules_of as schedules_of
from ._schedules import Schedule as Schedule
from ._schedules import coarse as coarse
from ._schedules import conflict_matrix as conflict_matrix
from ._schedules import critical_path as critical_path
from ._schedules import dependency_levels as dependency_levels
from ._schedules import gather as gather
from ._schedules import makespan as makespan
from ._schedules import parallelizable_flag as parallelizable_flag
from ._schedules import serial as serial
from ._schedules import unsafe_pairs as unsafe_pairs
from ._svg import timeline_svg as timeline_svg
from ._turns import BARRIER as BARRIER
from ._turns import CAP_MS as CAP_MS
from ._turns import KNOWN_TOOLS as KNOWN_TOOLS
from ._turns import RecordedCall as RecordedCall
from ._turns import RecordedTurn as RecordedTurn
from ._turns import capped as capped
from ._turns import claims_for as claims_for
from ._turns import is_read_only_call as is_read_only_call
from ._turns import load_turns as load_turns
from ._turns import per_tool_medians as per_tool_medians
from ._turns import recorded_call as recorded_call

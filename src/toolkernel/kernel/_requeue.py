"""A granted call put back in line, keeping its place: its paths changed meaning after the
grant, or its tool asked to hold more (``HoldMore``). The scheduler's decisions about it, made
through the few things of the scheduler's that :class:`Host` declares."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .._errors import InvalidCallError, InvalidClaimError
from ..locks import Claim, Path
from . import _messages as messages
from ._admission import compute_claims, keys_unchanged, with_more
from ._call import ERROR, Status
from ._leasing import Leasing
from ._record import FRESH, QUEUED, CallRecord, Stage

__all__ = ["MAX_REQUEUES", "Requeuing", "Host"]

MAX_REQUEUES = 3
"""How often a call may go back to the queue (its paths changed meaning, its tool asked for
more) before it fails."""


class Host(Protocol):
    """What putting a call back in line needs of the scheduler."""

    leasing: Leasing

    def now(self) -> float: ...

    def key(self, text: str) -> Path: ...

    def move(self, record: CallRecord, stage: Stage, now: float) -> None: ...

    def blocked(self, record: CallRecord) -> None:
        """``record`` waits: tally it, and say so if anyone listens."""

    def hand_slot_on(self, record: CallRecord) -> None:
        """``record`` gives up its slot (or its place in line for one)."""

    def break_wait_cycles(self) -> None: ...

    def requeue_leases(self, record: CallRecord, claims: tuple[Claim, ...]) -> bool:
        """Replace ``record``'s claims keeping its place in line: True if held at once."""

    def fail(self, record: CallRecord, status: Status, exception: BaseException) -> None:
        """Finish ``record`` with ``status`` and the exception that says why."""


class Requeuing:
    """Putting a granted call back in line."""

    def __init__(self, host: Host) -> None:
        self._host = host

    def confirm_keys(self, record: CallRecord) -> bool:
        """Recompute a granted call's claims (or, when they follow its keys alone, key the
        paths it spelled again: ``KernelTool.claims``); if a path now names something else (a
        symlink or a rename changed it since admission), send the call back to the queue keeping
        its place.

        Returns True if the call may run now with what it holds. A claims function or a
        workspace that fails now fails the call, as it would have at admission. A call granted
        in the step that admitted it is not looked at again: nothing ran in between, and what
        changes later, between this check and the I/O, ``ctx.fs`` refuses anyway (it opens
        what it checked, relative to directory descriptors, without following links).
        """
        if record.stage is FRESH or record.cancel_reason is not None or record.tool is None:
            return True  # keyed a moment ago, or it will not run anyway
        host = self._host
        if record.keyed is not None and keys_unchanged(record.keyed, host.key):
            return True  # its claims follow its keys alone, and those stand
        pools = host.leasing.pools
        keyed: list[tuple[str, Path]] | None = None if record.keyed is None else []
        try:
            fresh = compute_claims(record.tool, record.arguments, host.key, pools, keyed)
            if record.more_claims:
                fresh = with_more(record.name, fresh, record.more_claims, pools)
        except (InvalidCallError, InvalidClaimError) as exc:
            host.fail(record, ERROR, exc)
            return False
        if keyed is not None:
            record.keyed = tuple(keyed)
        if fresh == record.claims:
            return True
        return self._back_in_line(record, fresh, messages.paths_kept_changing)

    def hold_more(self, record: CallRecord, more: object, state: object) -> bool:
        """The call's tool asked to hold ``more`` as well (``HoldMore``): its run ends, and the
        call goes back in line, in its place, with its claims and ``more``. Returns True if it
        holds them at once (its tool may run again now); else it waits (holding nothing), and
        is started again when granted. A request that can't be met fails the call (the
        scheduler has ended its run and revoked its context already)."""
        assert record.claims is not None
        try:
            fresh = with_more(record.name, record.claims, more, self._host.leasing.pools)
        except InvalidClaimError as exc:
            self._host.fail(record, ERROR, exc)
            return False
        assert isinstance(more, list | tuple)
        record.more_claims, record.resumed = (*record.more_claims, *more), state
        return self._back_in_line(record, fresh, messages.asked_too_often)

    def _back_in_line(
        self, record: CallRecord, fresh: tuple[Claim, ...], too_often: Callable[[int], Exception]
    ) -> bool:
        """Requeue a granted call with ``fresh`` claims, keeping its place: True if it holds
        them at once; else it waits, its slot going to the next in line."""
        host = self._host
        record.requeues += 1
        if record.requeues > MAX_REQUEUES:
            host.fail(record, ERROR, too_often(MAX_REQUEUES))
            return False
        record.claims = fresh
        now = host.now()
        host.move(record, QUEUED, now)
        if host.requeue_leases(record, fresh):
            host.move(record, FRESH, now)  # keyed in this very step
            return True
        host.hand_slot_on(record)
        host.blocked(record)
        host.break_wait_cycles()
        return False

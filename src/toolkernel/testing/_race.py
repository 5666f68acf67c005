"""``check_race_free``: what in a recording would be a race.

Two kinds of violation, each judged from the recording alone (the claims each call requested,
the event order, the files it touched), not from what the kernel or ``ctx.fs`` decided:

- :class:`OverlappingConflict`: two calls whose claims conflict (``claims_conflict``: they
  overlap and one is exclusive) ran at the same time. A call and the calls it made through
  ``ctx.call`` are exempt: those run inside their parent's leases by design.
- :class:`UndeclaredAccess`: a call touched a file through ``ctx.fs`` that its claims do not
  cover (a read needs any claim on the path or an ancestor, a write an exclusive one). With
  ``ctx.fs`` such an access is refused, so this finds a tool that *tries*; it is checked again
  here, with its own few lines rather than ``ctx.fs``'s, so that a broken check there would be
  found too.

Pools are not judged: whether units fit depends on capacities the recording does not hold.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from ..locks import Claim, Everything, Mode, Path, claims_conflict
from ..tools import FileAccessed
from ._recorder import CallRecording, Recording

__all__ = ["Violation", "OverlappingConflict", "UndeclaredAccess", "check_race_free"]


@attrs.frozen
class Violation:
    """Something in a recording that a race-free kernel and honest tools never do."""

    def describe(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.describe()


def _name(call: CallRecording) -> str:
    return f"{call.call_id} ({call.name})"


@attrs.frozen
class OverlappingConflict(Violation):
    """Two calls with conflicting claims ran at the same time."""

    first: CallRecording
    second: CallRecording
    claims: tuple[tuple[Claim, Claim], ...]
    """The conflicting pairs: a claim of ``first``'s and one of ``second``'s."""

    def describe(self) -> str:
        a, b = self.first, self.second
        assert a.run is not None and b.run is not None
        pairs = ", ".join(f"{x} / {y}" for x, y in self.claims[:3])
        return (
            f"{_name(a)} ran {a.run.start:g}-{a.run.end:g} and {_name(b)} ran "
            f"{b.run.start:g}-{b.run.end:g} at the same time, holding conflicting claims "
            f"({pairs})"
        )


@attrs.frozen
class UndeclaredAccess(Violation):
    """A call touched a file its claims do not cover."""

    call: CallRecording
    access: FileAccessed

    def describe(self) -> str:
        need = "an exclusive claim" if self.access.write else "a claim"
        held = ", ".join(str(c) for c in self.call.claims) or "no claims"
        refused = "" if self.access.allowed else " (ctx.fs refused it)"
        return (
            f"{_name(self.call)} tried to {self.access.verb} {str(self.access.path)!r}, which "
            f"needs {need} on it or a directory above it; it held {held}{refused}"
        )


def _covers(claims: Iterable[Claim], key: Path, write: bool) -> bool:
    for claim in claims:
        if write and claim.mode is not Mode.EXCLUSIVE:
            continue
        resource = claim.resource
        if isinstance(resource, Everything):
            return True
        if isinstance(resource, Path) and key.parts[: len(resource.parts)] == resource.parts:
            return True
    return False


def _parents(recording: Recording) -> dict[int, CallRecording]:
    """Each call's parent in ``recording``, by the ``id()`` of the call, for those that have one.

    By ``serial``, since ids may repeat (two batches' ``c1``, each making a ``c1.1``). In a
    recording made by hand without serials, by id, as ids are then taken to be unique."""
    by_serial = {c.serial: c for c in recording if c.serial is not None}
    by_id = {c.call_id: c for c in recording}
    parents: dict[int, CallRecording] = {}
    for call in recording:
        if call.serial is not None:
            parent = None if call.parent_serial is None else by_serial.get(call.parent_serial)
        else:
            parent = None if call.parent is None else by_id.get(call.parent)
        if parent is not None:
            parents[id(call)] = parent
    return parents


def _related(a: CallRecording, b: CallRecording, parents: dict[int, CallRecording]) -> bool:
    """True if one of the two made the other (at any depth) through ``ctx.call``."""
    for child, elder in ((a, b), (b, a)):
        seen = {id(child)}  # a recording made by hand may make a call its own ancestor
        ancestor = parents.get(id(child))
        while ancestor is not None and id(ancestor) not in seen:
            if ancestor is elder:
                return True
            seen.add(id(ancestor))
            ancestor = parents.get(id(ancestor))
    return False


def check_race_free(recording: Recording) -> list[Violation]:
    """Every pair of conflicting calls that ran at the same time, and every file access outside
    a call's claims, in ``recording``; an empty list means none.

    ::

        assert check_race_free(recorder.recording) == []

    Each violation reads as a sentence (``str(violation)``).
    """
    violations: list[Violation] = []
    ran = sorted((c for c in recording if c.run is not None), key=lambda c: c.run.first)  # type: ignore[union-attr]
    parents = _parents(recording)
    # Sweep by start: each run is compared with the runs still open when it starts.
    open_runs: list[CallRecording] = []
    for call in ran:
        run = call.run
        assert run is not None
        open_runs = [c for c in open_runs if c.run is not None and c.run.last > run.first]
        for other in open_runs:
            if _related(call, other, parents):
                continue
            pairs = tuple(
                (x, y) for x in other.claims for y in call.claims if claims_conflict(x, y)
            )
            if pairs:
                violations.append(OverlappingConflict(other, call, pairs))
        open_runs.append(call)
    for call in recording:
        for access in call.accesses:
            if not _covers(call.claims, access.path, access.write):
                violations.append(UndeclaredAccess(call, access))
    return violations

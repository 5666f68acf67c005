"""A plain-text timeline of calls: live lines as calls start and finish, and a chart at the end.

Attach it to a kernel with ``kernel.add_listener(timeline)``; it only reads events.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from ..kernel import CallBlocked, CallEvent, CallFinished, CallQueued, CallStarted, Status

__all__ = ["Timeline"]


@attrs.define
class _Row:
    call_id: str
    name: str
    label: str
    queued: float
    started: float | None = None
    finished: float | None = None
    status: Status | None = None
    waited_for: tuple[str, ...] = ()
    contested: tuple[str, ...] = ()


@attrs.define(eq=False)
class Timeline:
    """Collects call events; prints live lines through ``echo`` (None: silent)."""

    echo: Callable[[str], None] | None = print
    labels: dict[str, str] = attrs.field(factory=dict)
    """Optional text shown after the tool name, per call id (e.g. the file it touches)."""
    _rows: dict[str, _Row] = attrs.field(factory=dict, init=False)
    _origin: float | None = attrs.field(default=None, init=False)

    def __call__(self, event: CallEvent) -> None:
        if self._origin is None:
            self._origin = event.time
        if isinstance(event, CallQueued):
            label = self.labels.get(event.call_id, "")
            self._rows[event.call_id] = _Row(event.call_id, event.name, label, event.time)
            return
        row = self._rows.get(event.call_id)
        if row is None:
            return
        if isinstance(event, CallBlocked):
            row.waited_for, row.contested = event.waits_for, event.resources
            self._say(
                event.time,
                "…",
                row,
                "waits for "
                + ", ".join(event.waits_for)
                + (f" on {', '.join(event.resources)}" if event.resources else ""),
            )
        elif isinstance(event, CallStarted):
            row.started = event.time
            self._say(event.time, "▶", row, "")
        elif isinstance(event, CallFinished):
            row.finished, row.status = event.time, event.result.status
            detail = (
                ""
                if event.result.ok
                else f"{event.result.status.value}: "
                + ((event.result.error or "").splitlines()[0][:70])
            )
            self._say(event.time, "■", row, detail)

    def _say(self, time: float, mark: str, row: _Row, detail: str) -> None:
        if self.echo is None:
            return
        assert self._origin is not None
        what = f"{row.call_id} {row.name} {row.label}".rstrip()
        self.echo(
            f"  {time - self._origin:6.2f}s {mark} {what}" + (f"  ({detail})" if detail else "")
        )

    def clear(self) -> None:
        """Forget collected calls (start a new chart)."""
        self._rows.clear()
        self._origin = None

    def chart(self, width: int = 50) -> str:
        """One line per call: a bar from start to finish, dots while it waited."""
        rows = list(self._rows.values())
        if not rows:
            return "(no calls)"
        origin = min(r.queued for r in rows)
        end = max((r.finished or r.queued) for r in rows)
        scale = width / max(end - origin, 1e-9)
        name_width = max(len(f"{r.call_id} {r.name} {r.label}".rstrip()) for r in rows)
        lines = []
        for r in rows:
            what = f"{r.call_id} {r.name} {r.label}".rstrip()
            queued = int((r.queued - origin) * scale)
            start = int(
                ((r.started if r.started is not None else r.finished or r.queued) - origin) * scale
            )
            stop = max(start + 1, int(((r.finished or r.queued) - origin) * scale))
            bar = (
                " " * queued
                + "·" * (start - queued)
                + ("█" * (stop - start) if r.started is not None else "✗")
            )
            note = ""
            if r.waited_for:
                note = "waited for " + ", ".join(r.waited_for)
                if r.contested:
                    note += " on " + ", ".join(r.contested)
            if r.status is not None and r.status is not Status.OK:
                note = (note + "; " if note else "") + r.status.value
            lines.append(f"  {what:<{name_width}} |{bar:<{width + 1}}| {note}".rstrip())
        lines.append(f"  {'':<{name_width}}  0s{'':>{width - 8}}{end - origin:5.2f}s")
        return "\n".join(lines)

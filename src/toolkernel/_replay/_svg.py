"""One turn's timeline under every strategy, drawn as an SVG picture (no dependency)."""

from __future__ import annotations

from xml.sax.saxutils import escape

from ._report import STRATEGIES, TurnSchedules

__all__ = ["timeline_svg"]

_COLOURS = {
    "Read": "#4e79a7",
    "Grep": "#76b7b2",
    "Glob": "#59a14f",
    "LS": "#59a14f",
    "ListDir": "#59a14f",
    "Edit": "#f28e2b",
    "MultiEdit": "#e15759",
    "Write": "#ff9da7",
    "Bash": "#9c755f",
    "TodoWrite": "#b07aa1",
    "WebFetch": "#edc948",
    "WebSearch": "#edc948",
}
_OTHER = "#bab0ac"
_ROW, _GAP, _LEFT, _WIDTH = 16, 34, 190, 640


def _label(call_id: str, tool: str, args: dict[str, object]) -> str:
    what = next((str(args[k]) for k in ("file_path", "path", "command") if k in args), "")
    text = f"{call_id} {tool} {what}".rstrip()
    return text if len(text) <= 30 else text[:29] + "…"


def timeline_svg(scheduled: TurnSchedules) -> str:
    """An SVG picture of ``scheduled.turn``: one panel per strategy, one row per call, a bar
    from its start to its end on a time axis shared by all panels; calls a strategy ran unsafely
    (beside or before a conflicting earlier call) are outlined in red."""
    calls = scheduled.turn.calls
    longest = max((scheduled.makespan(key) for _, key in STRATEGIES), default=0.0) or 1.0
    scale = _WIDTH / longest
    panel = len(calls) * _ROW + _GAP
    height = 40 + panel * len(STRATEGIES) + 20
    width = _LEFT + _WIDTH + 120
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="20" font-size="14" font-weight="bold">'
        f"{escape(scheduled.turn.label)}: {len(calls)} calls, each strategy</text>",
    ]
    conflicts = scheduled.conflicts
    y = 40
    for label, key in STRATEGIES:
        starts = scheduled.starts[key]
        span = scheduled.makespan(key)
        unsafe = {
            j
            for i in range(len(calls))
            for j in range(i + 1, len(calls))
            if conflicts[i][j]
            and calls[i].ms
            and calls[j].ms
            and starts[j] < starts[i] + calls[i].ms
        }
        out.append(
            f'<text x="10" y="{y + 12}" font-weight="bold">{escape(label)}</text>'
            f'<text x="{_LEFT + _WIDTH + 8}" y="{y + 12}">{span / 1000:.2f} s</text>'
        )
        for row, (call, start) in enumerate(zip(calls, starts, strict=True)):
            top = y + 18 + row * _ROW
            x = _LEFT + start * scale
            bar = max(call.ms * scale, 1.5)
            colour = _COLOURS.get(call.tool, _OTHER)
            outline = ' stroke="#d00" stroke-width="2"' if row in unsafe else ""
            text = escape(_label(call.id, call.tool, call.args))
            out.append(
                f'<text x="20" y="{top + 11}" fill="#444">{text}</text>'
                f'<rect x="{x:.1f}" y="{top}" width="{bar:.1f}" height="{_ROW - 3}" '
                f'fill="{colour}"{outline}><title>{text}: {start / 1000:.3f}-'
                f"{(start + call.ms) / 1000:.3f} s</title></rect>"
            )
        y += panel
    out.append(
        f'<line x1="{_LEFT}" y1="{y}" x2="{_LEFT + _WIDTH}" y2="{y}" stroke="#888"/>'
        f'<text x="{_LEFT}" y="{y + 14}">0 s</text>'
        f'<text x="{_LEFT + _WIDTH}" y="{y + 14}" text-anchor="end">{longest / 1000:.2f} s</text>'
    )
    out.append("</svg>")
    return "\n".join(out)

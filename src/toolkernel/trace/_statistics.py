"""``format_statistics``: a kernel's statistics as a few lines of text for people."""

from __future__ import annotations

from ..kernel import KernelStatistics

__all__ = ["format_statistics"]


def _milliseconds(seconds: float) -> str:
    return f"{seconds * 1000:,.0f}"


def format_statistics(
    statistics: KernelStatistics, *, hot: int = 5, seconds_per_unit: float = 1.0
) -> str:
    """Per tool: calls, errors by type, wait and run percentiles (ms); the peak concurrency;
    and the ``hot`` resources calls waited on longest.

    ::

        print(format_statistics(kernel.statistics()))

    ``seconds_per_unit``: what one unit of the kernel's clock is (``0.001`` for a mock clock
    counting milliseconds).
    """
    unit = seconds_per_unit

    def _ms(value: float) -> str:
        return _milliseconds(value * unit)

    lines = [
        f"  {statistics.finished} calls finished, at most {statistics.peak_running} running "
        f"at once ({statistics.running} running, {statistics.queued} queued, "
        f"{statistics.pending} pending now)",
        f"  {'tool':<18}{'calls':>6}{'errors':>7}  {'wait p50/p90/p99 ms':>20}  "
        f"{'run p50/p90/p99 ms':>20}",
    ]
    for tool in statistics.tools:
        waits = f"{_ms(tool.wait_p50)}/{_ms(tool.wait_p90)}/{_ms(tool.wait_p99)}"
        runs = f"{_ms(tool.run_p50)}/{_ms(tool.run_p90)}/{_ms(tool.run_p99)}"
        lines.append(f"  {tool.name:<18}{tool.count:>6}{tool.errors:>7}  {waits:>20}  {runs:>20}")
        if tool.errors_by_type:
            kinds = ", ".join(f"{kind} {count}" for kind, count in tool.errors_by_type)
            lines.append(f"  {'':<18}errors: {kinds}")
    if statistics.contention:
        lines.append("  where calls waited (total, longest, number of waits):")
        for item in statistics.contention[:hot]:
            lines.append(
                f"    {item.resource:<36} {item.total_wait * unit:9.3f} s "
                f"{item.max_wait * unit:9.3f} s "
                f"{item.waits:>6}"
            )
        more = len(statistics.contention) - hot
        if more > 0:
            lines.append(f"    ... and {more} more")
    else:
        lines.append("  no call waited for a lease")
    return "\n".join(lines)

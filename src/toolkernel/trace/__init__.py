"""What the kernel ran, for people: a live text timeline, Chrome traces for Perfetto, statistics
as text; OpenTelemetry spans in ``toolkernel.trace.otel`` (needs ``toolkernel[otel]``)."""

from ._chrome import ChromeTrace as ChromeTrace
from ._statistics import format_statistics as format_statistics
from ._timeline import Timeline as Timeline

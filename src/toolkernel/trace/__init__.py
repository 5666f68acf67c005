"""Traces of what the kernel ran: for now, a plain-text timeline of a session's calls."""

from ._timeline import Timeline as Timeline

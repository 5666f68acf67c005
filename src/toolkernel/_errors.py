"""The whole exception hierarchy of toolkernel.

Each exception subclasses the builtin it refines, so code that catches the builtin keeps working:
``InvalidClaimError`` is a ``ValueError``, ``UndeclaredAccessError`` a ``PermissionError``.
Messages are lower-case and name the rule and the object they are about.
"""

from __future__ import annotations

__all__ = [
    "ToolkernelError",
    "InvalidClaimError",
    "PathEscapeError",
    "CapacityError",
    "UnknownPoolError",
    "LeaseReleaseError",
    "ForeignLeaseError",
    "InvalidCallError",
    "UnknownToolError",
    "InvalidArgumentsError",
    "DependencyCycleError",
    "DeadlockError",
    "NestingDepthError",
    "UndeclaredAccessError",
    "ToolError",
    "IllegalTransitionError",
    "KernelClosedError",
]


class ToolkernelError(Exception):
    """Base class of every error toolkernel raises on purpose."""


# -- claims and leases -----------------------------------------------------------------------


class InvalidClaimError(ToolkernelError, ValueError):
    """A claim or a resource name breaks a rule (bad path, bad mode, bad unit count)."""


class PathEscapeError(InvalidClaimError):
    """A path resolves outside the root it must stay inside."""


class CapacityError(InvalidClaimError):
    """A pool claim asks for more units than the pool will ever have, or a capacity change would
    strand a holder or a waiter."""


class UnknownPoolError(InvalidClaimError, LookupError):
    """A claim names a pool whose capacity was never set."""


class LeaseReleaseError(ToolkernelError, RuntimeError):
    """A lease was released twice, or a release named a lease that is not held or waiting."""


class ForeignLeaseError(LeaseReleaseError):
    """A lease was released by someone other than its owner, or through the wrong manager."""


# -- calls and tools -------------------------------------------------------------------------


class InvalidCallError(ToolkernelError, ValueError):
    """A tool call cannot be admitted (duplicate id, unknown dependency, ...)."""


class UnknownToolError(InvalidCallError, LookupError):
    """A call names a tool the kernel does not have."""


class InvalidArgumentsError(InvalidCallError, TypeError):
    """A call's arguments are malformed or do not match the tool's parameters."""


class DependencyCycleError(InvalidCallError):
    """Calls wait for each other through ``after=``."""


class DeadlockError(ToolkernelError, RuntimeError):
    """A nested call would wait, through leases, for a call that is waiting for it."""


class NestingDepthError(ToolkernelError, RecursionError):
    """Nested calls went deeper than the kernel allows."""


class UndeclaredAccessError(ToolkernelError, PermissionError):
    """A tool touched a resource that its call did not declare (or declared only for reading)."""


class ToolError(ToolkernelError):
    """Raised by a tool to fail its call with a message meant for the model, without a traceback."""


class IllegalTransitionError(ToolkernelError, RuntimeError):
    """A call's lifecycle was asked to make a move its transition table does not allow."""


class KernelClosedError(ToolkernelError, RuntimeError):
    """Work was submitted to a kernel that is closing or closed."""

"""A kernel's options, checked once, when it is opened: a bad one is a plain ``TypeError`` or
``ValueError`` there, never an exception from inside the kernel later."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from .._checks import check_capacity, check_count, check_seconds
from ._policy import AfterHook, Approver, BeforeHook, Policy, allow_all

# check_seconds is re-exported for the kernel modules that still import it from here.
__all__ = ["KernelOptions", "check_seconds"]


def _seconds(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_seconds(attribute.name, value)


def _count(minimum: int) -> Any:
    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None and attribute.name == "max_concurrency":
            return
        check_count(attribute.name, value, minimum)

    return check


def _callable(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"{attribute.name} must be callable, not {value!r}")


def _callables(instance: object, attribute: attrs.Attribute[Any], value: tuple[Any, ...]) -> None:
    for hook in value:
        if not callable(hook):
            raise TypeError(f"{attribute.name} must hold callables, not {hook!r}")


def _tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(value)


def _pools(value: Mapping[str, int] | None) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"pools must map pool names to capacities, not {value!r}")
    return dict(value)


def _capacities(instance: object, attribute: attrs.Attribute[Any], value: dict[Any, Any]) -> None:
    for name, capacity in value.items():
        check_capacity(name, capacity)


@attrs.frozen(kw_only=True)
class KernelOptions:
    """Everything ``open_kernel`` takes besides the tools and the root (see its docstring)."""

    max_concurrency: int | None = attrs.field(default=None, validator=_count(1))
    pools: dict[str, int] = attrs.field(factory=dict, converter=_pools, validator=_capacities)
    policy: Policy = attrs.field(default=allow_all, validator=_callable)
    approver: Approver | None = attrs.field(default=None, validator=_callable)
    approval_timeout: float | None = attrs.field(default=300.0, validator=_seconds)
    before_hooks: tuple[BeforeHook, ...] = attrs.field(
        default=(), converter=_tuple, validator=_callables
    )
    after_hooks: tuple[AfterHook, ...] = attrs.field(
        default=(), converter=_tuple, validator=_callables
    )
    max_depth: int = attrs.field(default=8, validator=_count(0))
    wait_timeout: float | None = attrs.field(default=None, validator=_seconds)
    run_timeout: float | None = attrs.field(default=None, validator=_seconds)

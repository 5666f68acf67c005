"""Objects that only work when opened by their context manager have no public constructor."""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["NoPublicConstructor"]


class NoPublicConstructor(type):
    """As trio's ``Nursery``: ``Kernel(...)`` raises; ``open_kernel`` builds one with
    ``Kernel._create(...)``."""

    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            f"{cls.__module__}.{cls.__qualname__} has no public constructor; "
            f"use `async with toolkernel.open_kernel(...) as kernel:`"
        )

    def _create(cls, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*args, **kwargs)

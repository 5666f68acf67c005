"""``open_kernel(...)`` used without ``async with`` says to use ``async with``, whichever way it
was misused, rather than naming a class of ``contextlib``."""

from __future__ import annotations

import pytest

import toolkernel as tk
from toolkernel.errors import KernelNotOpenError, UsageError

USE = "use `async with tk.open_kernel(...) as kernel:`"


def test_a_kernel_assigned_and_used_says_to_open_it_with_async_with() -> None:
    opening = tk.open_kernel()
    with pytest.raises(KernelNotOpenError) as caught:
        opening.run  # type: ignore[attr-defined]  # noqa: B018
    message = str(caught.value)
    assert USE in message and "'run'" in message
    assert "_AsyncGeneratorContextManager" not in message
    assert isinstance(caught.value, UsageError) and isinstance(caught.value, AttributeError)
    assert not hasattr(opening, "submit")  # hasattr still answers, as for any attribute
    assert getattr(opening, "statistics", None) is None


async def test_an_awaited_open_kernel_says_to_open_it_with_async_with() -> None:
    with pytest.raises(KernelNotOpenError, match="can't be awaited") as caught:
        await tk.open_kernel()  # type: ignore[misc]
    assert USE in str(caught.value)
    assert isinstance(caught.value, TypeError)


def test_a_plain_with_says_async_with() -> None:
    needs = "needs `async with`, not `with`"
    with pytest.raises(KernelNotOpenError, match=needs) as caught, tk.open_kernel():  # type: ignore[attr-defined]
        pass
    assert USE in str(caught.value)
    assert isinstance(caught.value, TypeError)


async def test_async_with_still_opens_the_kernel() -> None:
    opening = tk.open_kernel()
    assert "async with" in repr(opening)
    async with opening as kernel:
        assert isinstance(kernel, tk.Kernel)
        assert kernel.statistics().running == 0
        assert kernel.leases == "in-process"  # no leases= given

"""A status prints as the docs and the messages write it: ``OK``, not ``Status.OK``."""

from __future__ import annotations

import toolkernel as tk


def test_a_status_prints_as_its_name_and_keeps_its_repr() -> None:
    assert str(tk.Status.OK) == "OK"
    assert f"{tk.Status.CANCELLED}" == "CANCELLED"
    assert repr(tk.Status.ERROR) == "Status.ERROR"
    assert tk.Status("ok") is tk.Status.OK

"""One writer for each piece of a call's state, read from the sources with ``ast``: the
scheduler alone sets a call's record (and its batch's), ``_leasing`` alone sets what a call
holds and waits for (its ``Hold``). Every other module of the kernel, the async layer first,
only reads them."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import attrs

from toolkernel import kernel
from toolkernel.kernel._record import Batch, CallRecord, Hold

KERNEL = Path(kernel.__file__).resolve().parent
RECORD_FIELDS = {f.name for f in attrs.fields(CallRecord)} | {f.name for f in attrs.fields(Batch)}
HOLD_FIELDS = set(Hold.__slots__)
# Objects of the async layer that happen to share a field's name (a tool's context has its
# ``resumed`` state too).
NOT_RECORDS = {"context"}


def _assigned(file: Path) -> Iterator[tuple[int, str, str]]:
    """Every ``x.field = ...`` (augmented, annotated, in a tuple, or by ``setattr``) in
    ``file`` on anything but ``self``: its line, the field, the statement."""
    for node in ast.walk(ast.parse(file.read_text(), str(file))):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in (
            "setattr",
            "object.__setattr__",
        ):
            if len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                yield node.lineno, str(node.args[1].value), ast.unparse(node)
            continue
        for target in targets:
            for one in target.elts if isinstance(target, ast.Tuple) else [target]:
                if not isinstance(one, ast.Attribute):
                    continue
                base = one.value
                if isinstance(base, ast.Name) and base.id in {"self", *NOT_RECORDS}:
                    continue
                yield node.lineno, one.attr, ast.unparse(one)


def _writers(fields: set[str], allowed: str) -> list[str]:
    return [
        f"{file.name}:{line}: {text}"
        for file in sorted(KERNEL.glob("*.py"))
        if file.name != allowed
        for line, field, text in _assigned(file)
        if field in fields
    ]


def test_only_the_scheduler_writes_a_record() -> None:
    assert _writers(RECORD_FIELDS - HOLD_FIELDS, "_scheduler.py") == []


def test_only_leasing_writes_what_a_call_holds() -> None:
    assert _writers(HOLD_FIELDS, "_leasing.py") == []


def test_the_check_sees_a_write() -> None:
    source = KERNEL / "_leasing.py"
    fields = {field for _, field, _ in _assigned(source)}
    assert {"slot", "waiting_in", "wait_token"} <= fields

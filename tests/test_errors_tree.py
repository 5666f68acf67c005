"""The exception tree drawn in ``_errors``' docstring is the real class hierarchy."""

import re

import toolkernel
import toolkernel.kernel
from toolkernel import _errors

_LINE = re.compile(r"^(?P<indent> *)[*x+] (?P<name>\w+)(?: \((?P<builtins>[\w, ]+)\))?")


def _drawn() -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """Each drawn class: (its drawn parent, the builtins drawn beside it)."""
    doc = _errors.__doc__ or ""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    drawn: dict[str, tuple[str | None, tuple[str, ...]]] = {}
    parents: list[str] = []
    for line in block.splitlines():
        match = _LINE.match(line.removeprefix("    "))
        assert match, f"can't read the tree's line {line!r}"
        depth = len(match["indent"]) // 2
        name = match["name"]
        assert name not in drawn, f"{name} is drawn twice"
        del parents[depth:]
        builtins = tuple(b.strip() for b in (match["builtins"] or "").split(",") if b.strip())
        drawn[name] = (parents[-1] if parents else None, builtins)
        parents.append(name)
    return drawn


def _real() -> dict[str, tuple[str | None, tuple[str, ...]]]:
    real: dict[str, tuple[str | None, tuple[str, ...]]] = {}
    for name in _errors.__all__:
        cls = getattr(_errors, name)
        ours = [b for b in cls.__bases__ if issubclass(b, _errors.ToolkernelError)]
        assert len(ours) <= 1, f"{name} has more than one parent in the tree"
        others = tuple(b.__name__ for b in cls.__bases__ if b not in ours)
        real[name] = (ours[0].__name__ if ours else None, others)
    return real


def test_the_drawn_tree_is_the_class_hierarchy() -> None:
    assert _drawn() == _real()


def test_every_exception_class_is_in_the_tree() -> None:
    defined = {
        name
        for name, value in vars(_errors).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    assert defined == set(_errors.__all__) == set(_drawn())


def test_every_exception_is_public() -> None:
    public = (toolkernel, toolkernel.kernel)  # HoldMore is the kernel's, not a failure
    missing = [n for n in _errors.__all__ if not any(hasattr(m, n) for m in public)]
    assert not missing

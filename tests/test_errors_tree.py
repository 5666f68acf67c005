"""The exception tree drawn in ``_errors``' docstring is the real class hierarchy."""

import re
from pathlib import Path

import toolkernel.errors
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
        assert cls.__name__ == name, f"{name} is an alias of {cls.__name__}, not a class"
        ours = [b for b in cls.__bases__ if issubclass(b, _errors.ToolkernelError)]
        assert len(ours) <= 1, f"{name} has more than one parent in the tree"
        others = tuple(b.__name__ for b in cls.__bases__ if b not in ours)
        real[name] = (ours[0].__name__ if ours else None, others)
    return real


def test_the_drawn_tree_is_the_class_hierarchy() -> None:
    assert _drawn() == _real()


def test_every_exception_class_is_in_the_tree() -> None:
    defined = {
        value.__name__
        for value in vars(_errors).values()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    assert defined == set(_errors.__all__) == set(_drawn())


def test_a_handful_of_bases_under_the_root() -> None:
    """Call outcomes and mistakes in the code that uses the kernel under a base each."""
    children = {cls.__name__ for cls in _errors.ToolkernelError.__subclasses__()}
    assert children == {"CallFailedError", "UsageError", "ModelError"}


def test_hold_more_is_outside_exception() -> None:
    """A signal to the kernel: a tool's ``except Exception`` must not swallow it."""
    assert not issubclass(_errors.HoldMore, Exception)
    assert issubclass(_errors.HoldMore, BaseException)


def test_the_old_name_of_fenced_out_is_an_alias() -> None:
    assert _errors.FencedOut is _errors.FencedOutError


def test_every_exception_is_public() -> None:
    missing = [n for n in _errors.__all__ if n not in vars(toolkernel.errors)]
    assert not missing
    assert toolkernel.kernel.HoldMore is _errors.HoldMore  # the kernel's, not a failure


_DOCS_LINE = re.compile(r"^(?P<indent> *)- \[`(?P<name>\w+)`\]")


def test_the_reference_page_draws_the_same_tree() -> None:
    # docs/reference/errors.md draws the tree as a nested list, four spaces a level.
    page = Path(__file__).resolve().parent.parent / "docs" / "reference" / "errors.md"
    drawn: dict[str, str | None] = {}
    parents: list[str] = []
    for line in page.read_text().splitlines():
        match = _DOCS_LINE.match(line)
        if match is None:
            continue
        depth = len(match["indent"]) // 4
        del parents[depth:]
        drawn[match["name"]] = parents[-1] if parents else None
        parents.append(match["name"])
    assert drawn == {name: parent for name, (parent, _) in _drawn().items()}

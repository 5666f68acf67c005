"""The public API, derived from the modules themselves (as trio's ``test_exports`` does): every
public module's exports are the reviewed list kept in ``public_api.txt``, so nothing public goes
untracked; each has a docstring, and each loads.

A module is public when no part of its dotted name starts with ``_``. What it exports is its
``__all__`` if it has one, else what its source names at the top level: a re-export
(``from ._x import Y as Y``, under ``TYPE_CHECKING`` too for what loads on first use), a
function, a class or an assignment whose name does not start with ``_``. Adding a public name
fails here until its line (``module name``, in sorted order) is written in ``public_api.txt``,
where a review sees it; so does removing one. What a private package re-exports must load too.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import types
from pathlib import Path

import pytest

import toolkernel

RECORDED = Path(__file__).with_name("public_api.txt")


def _is_private(name: str) -> bool:
    return any(part.startswith("_") for part in name.split(".")[1:])


def _deprecated(path: Path) -> bool:
    """A package or module kept only as a deprecated alias: its docstring says so first."""
    source = path / "__init__.py" if path.is_dir() else path
    docstring = ast.get_docstring(ast.parse(source.read_text())) or ""
    return docstring.startswith("Deprecated:")


def _walk() -> list[tuple[str, bool]]:
    """Every module of the package and whether it is a package, without importing a deprecated
    alias (importing one warns, and warnings are errors)."""
    found: list[tuple[str, bool]] = []

    def visit(paths: list[str], prefix: str) -> None:
        for info in pkgutil.iter_modules(paths, prefix):
            here = Path(paths[0]) / info.name.rsplit(".", 1)[-1]
            if info.ispkg and _deprecated(here):
                continue
            found.append((info.name, info.ispkg))
            if info.ispkg:
                visit([str(here)], info.name + ".")

    visit(list(toolkernel.__path__), "toolkernel.")
    return found


def public_modules() -> list[str]:
    found = ["toolkernel"]
    for name, _ in _walk():
        if not _is_private(name):
            found.append(name)
    return sorted(found)


def private_packages() -> list[str]:
    return sorted(name for name, is_package in _walk() if is_package and _is_private(name))


def _top_level_names(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in tree.body:
        body = [node]
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            body = node.body
        for stmt in body:
            if isinstance(stmt, ast.ImportFrom | ast.Import):
                names += [a.asname for a in stmt.names if a.asname and a.asname == a.name]
                names += [  # "import a.b as b" re-exports b too
                    a.asname
                    for a in stmt.names
                    if isinstance(stmt, ast.Import) and a.asname and a.name.endswith(f".{a.asname}")
                ]
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.append(stmt.name)
            elif isinstance(stmt, ast.Assign):
                names += [t.id for t in stmt.targets if isinstance(t, ast.Name)]
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                names.append(stmt.target.id)
    return [n for n in names if not n.startswith("_")]


def exports(name: str) -> list[str]:
    module = importlib.import_module(name)
    declared = getattr(module, "__all__", None)
    if declared is not None:
        return sorted(declared)
    assert module.__file__ is not None
    return sorted(set(_top_level_names(ast.parse(Path(module.__file__).read_text()))))


def current() -> list[str]:
    return [f"{module} {name}" for module in public_modules() for name in exports(module)]


def recorded() -> list[str]:
    lines = RECORDED.read_text().splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def test_every_public_name_is_recorded() -> None:
    now, then = current(), recorded()
    added = sorted(set(now) - set(then))
    gone = sorted(set(then) - set(now))
    assert not added, f"public but not recorded in {RECORDED.name}: {added}"
    assert not gone, f"recorded in {RECORDED.name} but no longer public: {gone}"
    assert then == sorted(then), f"{RECORDED.name} is not sorted"


@pytest.mark.parametrize("module_name", public_modules())
def test_each_public_module_has_a_docstring(module_name: str) -> None:
    assert (importlib.import_module(module_name).__doc__ or "").strip(), module_name


@pytest.mark.parametrize("module_name", public_modules())
def test_each_exported_name_loads_and_is_documented(module_name: str) -> None:
    """Reachable from its module (a lazy or private re-export included), with a docstring of its
    own when it is a class, a function or a module."""
    module = importlib.import_module(module_name)
    undocumented = []
    for name in exports(module_name):
        value = getattr(module, name)  # warnings are errors: nothing recorded is deprecated
        if isinstance(value, type):
            doc = value.__dict__.get("__doc__")
        elif isinstance(value, types.ModuleType) or inspect.isroutine(value):
            doc = value.__doc__
        else:
            continue  # a constant: documented where it is defined
        if not (doc or "").strip():
            undocumented.append(name)
    assert not undocumented, f"{module_name}: no docstring for {undocumented}"


@pytest.mark.parametrize("package_name", private_packages())
def test_what_a_private_package_re_exports_loads(package_name: str) -> None:
    package = importlib.import_module(package_name)
    assert package.__file__ is not None
    names = _top_level_names(ast.parse(Path(package.__file__).read_text()))
    missing = [name for name in names if getattr(package, name, None) is None]
    assert not missing, f"{package_name} re-exports {missing}, which do not load"

"""The package's import graph: no cycle between modules, and no import from a higher layer.

The graph is read from the sources with ``ast``: every ``import`` and ``from ... import`` of a
``toolkernel`` module, at module level, inside functions and under ``TYPE_CHECKING`` alike (a
function-local import is still an arrow, whether it loads on first use or dodges a cycle), and
``importlib.import_module`` with a literal name. ``from package import name`` is an arrow to the
submodule ``package.name`` where there is one, else to the package. The layers are the ones the
contributors' page (docs/contributing.md) declares under "Layers, lowest first".

The no-follow file primitives are checked to stay in the lowest layer: no other module names a
flag set with ``O_NOFOLLOW`` of its own (a sandbox module spells it nowhere), a directory opened
relative to another takes ``_beneath``'s flags, and ``_nofollow`` imports the standard library
alone (the sandbox's rename supervisor, a script, loads it without the package).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import toolkernel

PACKAGE = Path(toolkernel.__file__).resolve().parent
LAYERS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "contributing.md"


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the package: its dotted name, its file, whether it is a package."""
    found = {}
    for file in sorted(PACKAGE.rglob("*.py")):
        parts = list(file.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (file, is_package)
    return found


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The module of the package that ``name`` (a module or a name in one) lives in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imported(module: str) -> Iterator[tuple[str, int]]:
    """The package's modules ``module`` imports, each with the line that imports it."""
    file, is_package = MODULES[module]
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(file.read_text(), str(file))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            names = [
                f"{source}.{alias.name}" if f"{source}.{alias.name}" in MODULES else source
                for alias in node.names
            ]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            name = node.args[0].value
            names = [package + name if name.startswith(".") else name]
        else:
            continue
        for name in names:
            owner = _owner(name) if name.split(".")[0] == "toolkernel" else None
            if owner is not None and owner != module:
                yield owner, node.lineno


GRAPH = {module: dict(_imported(module)) for module in MODULES}


def _cycles() -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in GRAPH:
        if start in index:
            continue
        work = [(start, iter(GRAPH[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(GRAPH[target])))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_graph_is_read() -> None:
    # Arrows of every kind the reader knows: module level, function level, import_module.
    assert "toolkernel.locks" in GRAPH["toolkernel.kernel._kernel"]
    assert "toolkernel.leases._etcd" in GRAPH["toolkernel.leases._connect"]
    assert "toolkernel._beneath" in GRAPH["toolkernel.tools._workspace"]
    assert len(GRAPH) > 150


def test_no_import_cycle() -> None:
    cycles = _cycles()
    assert not cycles, "modules importing each other, through others or directly: " + "; ".join(
        " <-> ".join(cycle) for cycle in cycles
    )


def _layers() -> list[list[str]]:
    """The declared layers, lowest first: each a list of the package's top-level names."""
    text = LAYERS_PAGE.read_text()
    start = text.index("Layers, lowest first")
    layers = []
    for line in text[start:].splitlines()[1:]:
        if layers and (not line.strip() or line.lstrip().startswith("- ")):
            break  # the list ends at a blank line or the next item of the page's list
        matched = re.match(r"\d+\. (.*)", line.strip())
        if matched is not None:
            layers.append(re.findall(r"`(\w+)`", matched.group(1)))
        elif layers:  # an item's next line
            named = re.findall(r"`(\w+)`", line)
            layers[-1].extend(name for name in named if name not in layers[-1])
    return layers


def _top(module: str) -> str:
    """The layer's name for ``module``: its top-level package or module under ``toolkernel``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "toolkernel"


def test_every_module_is_in_a_layer() -> None:
    declared = [name for layer in _layers() for name in layer]
    assert len(declared) == len(set(declared)), "a name in two layers"
    assert {_top(module) for module in MODULES} == set(declared)


def test_no_import_from_a_higher_layer() -> None:
    level = {name: number for number, layer in enumerate(_layers()) for name in layer}
    upward = [
        f"{module} (layer {level[_top(module)] + 1}) imports {target} "
        f"(layer {level[_top(target)] + 1}) at line {line}"
        for module, targets in GRAPH.items()
        for target, line in targets.items()
        if level[_top(target)] > level[_top(module)]
    ]
    assert not upward, "\n".join(upward)


# -- the no-follow primitives: defined once, in the lowest layer ----------------------------------

NO_FOLLOW = "toolkernel._nofollow"
"""Where the no-follow flag sets and walks are defined (``_beneath`` re-exports them)."""
FOLLOWING_DIRECTORY_STEPS = {
    ("toolkernel.sandbox._renames", "_inside"): "resolves a caller's path as rename(2) does"
}
"""Directories opened relative to a descriptor with flags of their own, and why."""


def _spells(node: ast.AST, flag: str, *, in_calls: bool = True) -> bool:
    """Whether ``node`` names ``flag`` (``os.O_NOFOLLOW`` or a bare name); with ``in_calls``
    False, only outside the calls in it (``fd = os.open(..., flags)`` names no flag set)."""
    pending = [node]
    while pending:
        inner = pending.pop()
        if (isinstance(inner, ast.Attribute) and inner.attr == flag) or (
            isinstance(inner, ast.Name) and inner.id == flag
        ):
            return True
        if in_calls or not isinstance(inner, ast.Call):
            pending.extend(ast.iter_child_nodes(inner))
    return False


def _tree(module: str) -> ast.Module:
    file = MODULES[module][0]
    return ast.parse(file.read_text(), str(file))


def test_no_follow_flag_sets_are_defined_once() -> None:
    # A module naming its own O_NOFOLLOW set is a copy of the walk's rules: it takes them from
    # _beneath instead. A sandbox module spells none at all, named or not.
    copies: set[str] = set()
    for module in MODULES:
        if module == NO_FOLLOW:
            continue
        in_sandbox = module.startswith("toolkernel.sandbox.")
        for node in ast.walk(_tree(module)):
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                named = node.value is not None and _spells(node.value, "O_NOFOLLOW", in_calls=False)
            else:
                named = False
            spelled = in_sandbox and isinstance(node, (ast.Attribute, ast.Name))
            if named or (spelled and _spells(node, "O_NOFOLLOW")):
                copies.add(f"{module}, line {getattr(node, 'lineno', '?')}")
    found = "; ".join(sorted(copies))
    assert not copies, f"O_NOFOLLOW spelled outside _beneath's flag sets: {found}"


def _directory_steps(module: str) -> Iterator[tuple[str, int]]:
    """The ``os.open(..., dir_fd=...)`` calls of ``module`` whose flags spell ``O_DIRECTORY``:
    each with the function it is in and its line."""
    for function in ast.walk(_tree(module)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "open"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "os"
                and any(keyword.arg == "dir_fd" for keyword in node.keywords)
            ):
                continue
            flags = node.args[1:2] + [k.value for k in node.keywords if k.arg == "flags"]
            if any(_spells(flag, "O_DIRECTORY") for flag in flags):
                yield function.name, node.lineno


def test_directories_are_opened_beneath_with_the_shared_flags() -> None:
    # A directory opened relative to another is a step of a walk: it takes _beneath's flags
    # (DIRECTORY_FLAGS, LOOK_FLAGS) or its walks, so no step can forget O_NOFOLLOW.
    steps = {
        f"{module}.{function}, line {line}"
        for module in MODULES
        if module != NO_FOLLOW
        for function, line in _directory_steps(module)
        if (module, function) not in FOLLOWING_DIRECTORY_STEPS
    }
    assert not steps, "a directory opened with flags of its own: " + "; ".join(sorted(steps))
    for module, function in FOLLOWING_DIRECTORY_STEPS:
        assert any(name == function for name, _ in _directory_steps(module)), "stale exception"


def test_the_no_follow_walk_loads_without_the_package() -> None:
    # The sandbox's rename supervisor, a script, imports it by itself (sandbox._renames._moves):
    # it may import the standard library only, and nothing relative.
    imported = set()
    for node in ast.walk(_tree(NO_FOLLOW)):
        if isinstance(node, ast.ImportFrom):
            assert not node.level, f"a relative import at line {node.lineno}"
            imported.add((node.module or "").split(".")[0])
        elif isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
    assert imported - {"__future__"} <= sys.stdlib_module_names

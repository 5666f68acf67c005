"""The package's import graph: no cycle between modules, and no import from a higher layer.

The graph is read from the sources with ``ast``: every ``import`` and ``from ... import`` of a
``toolkernel`` module, at module level, inside functions and under ``TYPE_CHECKING`` alike (a
function-local import is still an arrow, whether it loads on first use or dodges a cycle), and
``importlib.import_module`` with a literal name. ``from package import name`` is an arrow to the
submodule ``package.name`` where there is one, else to the package. The layers are the ones the
README declares under "Layers, lowest first".
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import toolkernel

PACKAGE = Path(toolkernel.__file__).resolve().parent
README = Path(__file__).resolve().parent.parent / "README.md"


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
    """The README's layers, lowest first: each a list of the package's top-level names."""
    text = README.read_text()
    start = text.index("Layers, lowest first")
    layers = []
    for line in text[start:].splitlines()[1:]:
        if layers and (not line.strip() or line.lstrip().startswith("- ")):
            break  # the list ends at a blank line or the next item of the README's list
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

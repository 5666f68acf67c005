"""The public surface: each name exported once, a small top level, the old spellings kept for a
release, and ``import toolkernel`` light. The names themselves: ``test_exports.py``."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import toolkernel
import toolkernel._replay
import toolkernel.agent
import toolkernel.formats
import toolkernel.formats.anthropic
import toolkernel.formats.openai
import toolkernel.kernel
import toolkernel.leases
import toolkernel.locks
import toolkernel.mcp
import toolkernel.replay
import toolkernel.testing
import toolkernel.testing.strategies
import toolkernel.tools
import toolkernel.trace
import toolkernel.trace.otel

PACKAGE = Path(toolkernel.__file__).parent

# Every public name is in public_api.txt, checked against the modules themselves and checked to
# load (test_exports.py). The replay harness left the public API for the command line's use;
# what the command line uses of it stays.
REPLAY_HARNESS = ["load_turns", "compare", "format_table", "timeline_svg"]


def test_the_command_lines_replay_harness_is_there() -> None:
    missing = [name for name in REPLAY_HARNESS if not hasattr(toolkernel._replay, name)]
    assert not missing, f"toolkernel._replay lacks {missing}"


def test_init_modules_only_reexport_each_name_once() -> None:
    for init in PACKAGE.rglob("__init__.py"):
        if "sample-project" in init.parts:
            continue
        tree = ast.parse(init.read_text())
        if (ast.get_docstring(tree) or "").startswith("Deprecated:"):
            continue  # an old path kept for one release, handing over the new package
        seen: set[str] = set()
        lazy: list[str] = []  # names the module's __getattr__ loads on first use
        for node in tree.body:
            imports = [node] if isinstance(node, ast.ImportFrom) else []
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                # What loads on first use, named for type checkers and for this test.
                assert all(isinstance(n, ast.ImportFrom) for n in node.body), init
                imports = node.body  # type: ignore[assignment]
                lazy += [alias.name for n in imports for alias in n.names]  # type: ignore[attr-defined]
            for found in imports:
                for alias in found.names:
                    # "from ._x import Y as Y" is how a public name is re-exported.
                    assert alias.asname == alias.name, f"{init}: {alias.name} not re-exported"
                    assert alias.name not in seen, f"{init}: {alias.name} exported twice"
                    seen.add(alias.name)
            if imports or isinstance(node, ast.If):
                continue
            if isinstance(node, ast.Import):  # the standard library, kept private
                assert all(a.asname == f"_{a.name}" for a in node.names), f"{init}: public import"
                continue
            if isinstance(node, ast.FunctionDef):
                assert node.name == "__getattr__" and (lazy or "_MOVED =" in init.read_text()), (
                    f"{init}: unexpected {node.name}"
                )
                continue
            allowed = (ast.Expr, ast.Assign)  # the docstring, __version__, TYPE_CHECKING, _MOVED
            assert isinstance(node, allowed), f"{init}: unexpected {type(node).__name__}"
        module = importlib.import_module(".".join(init.relative_to(PACKAGE.parent).parent.parts))
        for name in lazy:  # each one served by __getattr__
            assert getattr(module, name) is not None, f"{init}: {name} does not load"


def test_the_top_level_is_small() -> None:
    public = [name for name in vars(toolkernel) if not name.startswith("_")]
    exported = [n for n in public if not isinstance(getattr(toolkernel, n), type(toolkernel))]
    assert len(exported) <= 45, sorted(exported)


def test_moved_names_still_import_with_a_warning() -> None:
    for name, (module, attribute) in toolkernel._MOVED.items():  # type: ignore[attr-defined]
        with pytest.warns(DeprecationWarning, match=module.replace(".", r"\.")):
            found = getattr(toolkernel, name)
        assert found is getattr(importlib.import_module(module), attribute)
    with pytest.warns(DeprecationWarning, match=r"toolkernel\.errors\.FencedOutError"):
        assert toolkernel.leases.FencedOut is toolkernel.FencedOutError  # type: ignore[attr-defined]
    with pytest.warns(DeprecationWarning, match="command line"):
        assert toolkernel.agent.DEMO_TURNS  # type: ignore[attr-defined]
    with pytest.warns(DeprecationWarning, match="command line"):
        assert toolkernel.replay.load_turns is toolkernel._replay.load_turns
    with pytest.raises(AttributeError):
        toolkernel.NoSuchName  # type: ignore[attr-defined]  # noqa: B018


def test_version() -> None:
    assert isinstance(toolkernel.__version__, str)


def test_importing_toolkernel_loads_the_core_only() -> None:
    code = "import sys, toolkernel; print(' '.join(m for m in sys.modules if m.startswith('tool')))"
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    loaded = set(ran.stdout.split())
    later = ("shell", "sandbox", "mcp", "integrations", "agent", "formats", "_replay", "cli")
    for name in loaded:
        parts = name.split(".")
        assert not any(part in later for part in parts), f"import toolkernel loads {name}"
    assert "toolkernel.tools" in loaded and "toolkernel.kernel" in loaded

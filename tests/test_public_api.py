"""The public surface: every name DESIGN.md promises is there, and exported once."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import toolkernel
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

PROMISED = {
    toolkernel: [
        "tool",
        "Tool",
        "ToolContext",
        "ToolCall",
        "ToolResult",
        "Content",
        "Status",
        "open_kernel",
        "Kernel",
        "CallHandle",
        "CallQueued",
        "CallBlocked",
        "CallStarted",
        "CallProgress",
        "CallFinished",
        "reads",
        "writes",
        "device",
        "pool",
        "path",
        "shared",
        "exclusive",
        "units",
        "Mode",
        "Claim",
        "LeaseTable",
        "LockManager",
        "Workspace",
    ],
    toolkernel.locks: [
        "LeaseTable",
        "LockManager",
        "Claim",
        "Mode",
        "path",
        "device",
        "pool",
        "shared",
        "exclusive",
        "units",
        "reads",
        "writes",
    ],
    toolkernel.tools: ["builtin_tools", "Workspace", "tool", "Tool", "shell_claims", "ShellRules"],
    toolkernel.formats: ["openai", "anthropic", "wire_names", "DEPENDS_ON"],
    toolkernel.formats.openai: [
        "calls_from_chat",
        "chat_tool_messages",
        "calls_from_responses",
        "responses_outputs",
        "chat_tools",
        "responses_tools",
    ],
    toolkernel.formats.anthropic: ["calls_from_message", "tool_results", "tools"],
    toolkernel.mcp: ["stdio_tools", "http_tools", "MCPTool", "MCPToolError", "MCPServerGoneError"],
    toolkernel.agent: [
        "run_agent",
        "AgentOutcome",
        "Step",
        "StopReason",
        "Retry",
        "Model",
        "ScriptedModel",
        "OpenAICompatibleModel",
        "ModelError",
        "CALLS_PROMPT",
        "StepStarted",
        "ModelReplied",
        "ModelRetrying",
        "TodosUpdated",
        "AgentEvent",
        "Turn",
        "DEMO_TURNS",
    ],
    toolkernel.testing: [
        "FakeTool",
        "Recorder",
        "Recording",
        "check_race_free",
        "Violation",
        "assert_serializable",
        "check_serializable",
        "CallBatch",
        "VirtualClockEventLoop",
        "virtual_clock",
        "hold_virtual_time_for_threads",
        "wait_all_tasks_blocked",
    ],
    toolkernel.testing.strategies: ["path_spellings", "workspace_paths", "claims", "batches"],
    toolkernel.trace: ["Timeline", "ChromeTrace", "format_statistics"],
    toolkernel.trace.otel: ["ToolCallSpans"],
    toolkernel.replay: ["load_turns", "compare", "format_table", "timeline_svg"],
    toolkernel.leases: [
        "open_leases",
        "connect",
        "parse_leases",
        "find_service",
        "LeaseBackend",
        "Grant",
        "Fence",
        "FencedOut",
        "Rename",
    ],
    toolkernel.kernel: [
        "ResourceContention",
        "KernelStatistics",
        "ToolStatistics",
        "Content",
        "KernelListener",
        "FileAccessListener",
        "LeaseListener",
    ],
}


def test_promised_names_exist() -> None:
    for module, names in PROMISED.items():
        missing = [name for name in names if not hasattr(module, name)]
        assert not missing, f"{module.__name__} lacks {missing}"


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
            if isinstance(node, ast.FunctionDef):
                assert node.name == "__getattr__" and lazy, f"{init}: unexpected {node.name}"
                continue
            allowed = (ast.Expr, ast.Assign)  # the docstring, __version__, TYPE_CHECKING
            assert isinstance(node, allowed), f"{init}: unexpected {type(node).__name__}"
        module = importlib.import_module(".".join(init.relative_to(PACKAGE.parent).parent.parts))
        for name in lazy:  # each one served by __getattr__
            assert getattr(module, name) is not None, f"{init}: {name} does not load"


def test_version() -> None:
    assert isinstance(toolkernel.__version__, str)


def test_importing_toolkernel_loads_the_core_only() -> None:
    code = "import sys, toolkernel; print(' '.join(m for m in sys.modules if m.startswith('tool')))"
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    loaded = set(ran.stdout.split())
    later = ("shell", "sandbox", "mcp", "integrations", "agent", "formats", "replay", "cli")
    for name in loaded:
        parts = name.split(".")
        assert not any(part in later for part in parts), f"import toolkernel loads {name}"
    assert "toolkernel.tools" in loaded and "toolkernel.kernel" in loaded

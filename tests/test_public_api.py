"""The public surface: every name DESIGN.md promises is there, and exported once."""

import ast
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
        seen: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    # "from ._x import Y as Y" is how a public name is re-exported.
                    assert alias.asname == alias.name, f"{init}: {alias.name} not re-exported"
                    assert alias.name not in seen, f"{init}: {alias.name} exported twice"
                    seen.add(alias.name)
            else:
                allowed = (ast.Expr, ast.Assign)  # the docstring, __version__
                assert isinstance(node, allowed), f"{init}: unexpected {type(node).__name__}"


def test_version() -> None:
    assert isinstance(toolkernel.__version__, str)

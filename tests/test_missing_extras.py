"""A feature whose extra is not installed says which extra to install.

Each case runs in a fresh interpreter where the extra's package can't be imported
(``sys.modules[name] = None``, as Python does for a package that is not there).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from toolkernel._extras import install_command

ROOT = Path(__file__).resolve().parent.parent


def run(missing: list[str], code: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    prelude = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in missing)
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("missing", ["mcp", "jsonschema", "re2"])
def test_importing_toolkernel_mcp_without_its_extra_names_the_extra(missing: str) -> None:
    ran = run([missing], "import toolkernel.mcp")
    assert ran.returncode != 0
    last = ran.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: toolkernel.mcp needs the 'mcp' extra")
    assert f"({missing} is not installed)" in last
    assert last.endswith(f"is not installed): {install_command('mcp')}")


def test_opentelemetry_spans_without_their_extra_name_the_extra() -> None:
    ran = run(["opentelemetry"], "import toolkernel.trace.otel")
    assert ran.returncode != 0
    last = ran.stderr.strip().splitlines()[-1]
    assert last == (
        "ImportError: toolkernel.trace.otel needs the 'otel' extra (opentelemetry is not "
        f"installed): {install_command('otel')}"
    )


def test_the_kernel_itself_needs_no_extra() -> None:
    missing = ["mcp", "jsonschema", "re2", "rich", "prompt_toolkit", "tree_sitter", "httpx"]
    ran = run(missing, "import toolkernel, toolkernel.tools, toolkernel.agent; print('ok')")
    assert (ran.returncode, ran.stdout) == (0, "ok\n"), ran.stderr


@pytest.mark.parametrize("missing", ["rich", "prompt_toolkit"])
def test_the_console_without_its_extra_names_the_extra(missing: str, tmp_path: Path) -> None:
    code = (
        f"from toolkernel.cli import main; sys.exit(main(['console', '--root', {str(tmp_path)!r}]))"
    )
    ran = run([missing], code)
    assert ran.returncode == 2
    assert ran.stderr.strip() == (
        f"console: the console needs the 'cli' extra ({missing} is not installed): "
        f"{install_command('cli')}"
    )


def test_in_this_checkout_the_command_is_an_editable_install_of_it() -> None:
    # The tests run on this clone, installed editable (./run-tests) or on sys.path: either way
    # the command that adds an extra is pip's editable install of this very directory, never
    # the bare name, which is not on PyPI and could be someone else's package.
    ran = run(
        ["rich"], "from toolkernel.cli import main; sys.exit(main(['console', '--root', '.']))"
    )
    assert ran.stderr.strip().endswith(f": pip install -e '{ROOT}[cli]'"), ran.stderr


def test_the_consoles_mcp_option_without_its_extra_names_the_extra(tmp_path: Path) -> None:
    code = (
        "from toolkernel.cli import main; "
        f"sys.exit(main(['console', '--root', {str(tmp_path)!r}, '--mcp', 'mcp-server-git']))"
    )
    ran = run(["mcp"], code)
    assert ran.returncode == 2
    assert install_command("mcp") in ran.stderr
    assert "Traceback" not in ran.stderr


def test_the_bash_tool_without_the_parser_says_once_that_every_command_is_a_barrier(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    code = """
        import warnings
        import anyio
        import toolkernel as tk
        from toolkernel.tools import builtin_tools, shell_claims

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            [bash] = [t for t in builtin_tools(bash=True) if t.name == "Bash"]
            [again] = [t for t in builtin_tools(bash=True) if t.name == "Bash"]
        for warning in caught:
            print("warning:", warning.category.__name__, warning.message)
        print("description:", bash.description.splitlines()[-1])
        print("a barrier:", shell_claims("cat a.txt") == [tk.exclusive(tk.path("."))])

        async def main():
            async with tk.open_kernel([bash], root=".") as kernel:
                for call_id in ("c1", "c2"):
                    call = tk.ToolCall(call_id, "Bash", {"command": "cat a.txt"})
                    [result] = await kernel.run([call])
                    print(call_id, result.status, repr(result.output))

        anyio.run(main)
    """
    ran = run(["tree_sitter", "tree_sitter_bash"], code, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    note = (
        "Every command runs alone, holding the whole workspace (a barrier): the shell parser is "
        f"not installed ({install_command('shell')} for tree-sitter and tree-sitter-bash)."
    )
    lines = ran.stdout.splitlines()
    assert lines[:2] == [f"warning: RuntimeWarning the Bash tool: {note}", f"description: {note}"]
    assert lines[2] == "a barrier: True"
    # The note follows the output, which comes first and whole, as the command printed it.
    assert lines[3:] == [f"c1 OK {'hello' + chr(10) * 2 + f'({note})'!r}", "c2 OK 'hello\\n'"]


@pytest.mark.parametrize(("missing", "options"), [("mcp", []), ("uvicorn", ["--http", "0"])])
def test_the_mcp_command_without_its_extra_names_the_extra(
    missing: str, options: list[str], tmp_path: Path
) -> None:
    argv = ["mcp", "--root", str(tmp_path), "--leases", "none", *options]
    ran = run([missing], f"from toolkernel.cli import main; sys.exit(main({argv!r}))")
    assert ran.returncode == 2
    assert ran.stderr.startswith(f"mcp: the mcp command needs the 'mcp' extra ({missing} is not")
    assert "Traceback" not in ran.stderr


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("demo", ["demo"]),
        ("replay", ["replay", "turns.jsonl"]),
        ("serve", ["serve", "--root", "."]),
    ],
)
def test_the_commands_that_run_on_trio_without_it_name_the_trio_extra(
    command: str, argv: list[str]
) -> None:
    ran = run(["trio"], f"from toolkernel.cli import main; sys.exit(main({argv!r}))")
    assert ran.returncode == 2
    assert ran.stderr.strip() == (
        f"{command}: the {command} command needs the 'trio' extra (trio is not installed): "
        f"{install_command('trio')}"
    )


def test_the_replay_harness_without_trio_names_the_trio_extra() -> None:
    ran = run(["trio"], "import toolkernel._replay")
    last = ran.stderr.strip().splitlines()[-1]
    assert last == (
        "ImportError: toolkernel._replay needs the 'trio' extra (trio is not installed): "
        f"{install_command('trio')}"
    )

"""An asyncio program needs no trio: toolkernel imports it only when it runs on trio.

trio is the ``[trio]`` extra. Each case runs in a fresh interpreter where any import of trio
fails (a ``sys.meta_path`` finder that refuses it, as if it were not installed), and checks
that the program never even tried.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

BLOCK_TRIO = """
import sys

class _NoTrio:
    tried = []

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "trio":
            _NoTrio.tried.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoTrio())
"""


def run_without_trio(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_TRIO + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def test_an_asyncio_kernel_runs_without_trio_installed(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    code = """
        import asyncio
        import anyio
        import toolkernel as tk
        import toolkernel.testing, toolkernel.trace, toolkernel.tools, toolkernel.agent
        from toolkernel.locks import LockManager, WouldBlock
        from toolkernel.tools import builtin_tools

        async def main():
            async with tk.open_kernel(builtin_tools(), root=".") as kernel:
                results = await kernel.run([
                    tk.ToolCall("c1", "Read", {"file_path": "a.txt"}),
                    tk.ToolCall("c2", "Edit", {"file_path": "a.txt", "old_string": "one",
                                               "new_string": "two"}),
                    tk.ToolCall("c3", "Grep", {"pattern": "two", "output_mode": "content"}),
                ], timeout=30)
                print(*(f"{r.call_id} {r.status}" for r in results))
            manager = LockManager()
            async with manager.acquire([tk.writes("a.txt")]):
                try:
                    manager.acquire_nowait([tk.reads("a.txt")])
                except anyio.WouldBlock as blocked:
                    print("would block:", type(blocked) is WouldBlock)

        asyncio.run(main())
        print(open("a.txt").read(), end="")
        print("tried to import:", _NoTrio.tried or "nothing of trio")
    """
    ran = run_without_trio(code, tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        "c1 OK c2 OK c3 OK",
        "would block: True",
        "two",
        "tried to import: ['trio']",  # once, for trio's WouldBlock as a base class
    ]


def test_the_asyncio_virtual_clock_runs_without_trio(tmp_path: Path) -> None:
    code = """
        import asyncio, time
        import toolkernel as tk
        from toolkernel.testing import VirtualClockEventLoop, wait_all_tasks_blocked

        @tk.tool(claims=lambda args: [])
        async def nap(ctx: tk.ToolContext, seconds: float) -> str:
            await asyncio.sleep(seconds)
            return "rested"

        async def main():
            await wait_all_tasks_blocked()
            async with tk.open_kernel([nap]) as kernel:
                [result] = await kernel.run([tk.ToolCall("c1", "nap", {"seconds": 3600})])
            print(result.status, result.output)

        started = time.monotonic()
        loop = VirtualClockEventLoop()
        loop.run_until_complete(main())
        loop.close()
        print("fast:", time.monotonic() - started < 30)
        print("trio loaded:", any(m.split(".")[0] == "trio" for m in sys.modules))
    """
    ran = run_without_trio(code, tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["OK rested", "fast: True", "trio loaded: False"]

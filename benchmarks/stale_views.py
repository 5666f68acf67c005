"""What the stale-view check costs an edit: read then write one small file through ``ctx.fs``,
as Edit does, with the agent's view kept and checked (``fresh=True``) and without.

    python benchmarks/stale_views.py [--quick]
"""

from __future__ import annotations

import sys
import tempfile
import time

import trio

import toolkernel as tk
from toolkernel.tools import FileAccess, FileView, Workspace


async def edits(fs: FileAccess, n: int, fresh: bool) -> float:
    start = time.perf_counter()
    for i in range(n):
        data = await fs.read_bytes("a.txt", max_bytes=1 << 24, fresh=fresh)
        await fs.write_bytes("a.txt", data[:-1] + bytes([48 + i % 10]), fresh=fresh)
    return (time.perf_counter() - start) / n


def small_file(root: str) -> None:
    with open(f"{root}/a.txt", "wb") as file:
        file.write(b"x" * 4096)


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        small_file(root)
        with Workspace(root) as workspace:
            claims = [tk.writes("a.txt")]
            off = FileAccess(workspace, claims)
            on = FileAccess(workspace, claims, view=FileView(), read_first=True)
            rows = {"views off": [], "views on": []}
            for _ in range(3):  # interleaved, best of three
                rows["views off"].append(await edits(off, n, False))
                await on.read_bytes("a.txt", as_seen=True)  # the other run changed it since
                rows["views on"].append(await edits(on, n, True))
    base = min(rows["views off"])
    for name, times in rows.items():
        best = min(times)
        print(f"{name:10} {best * 1e6:8.1f} us an edit  {best / base:5.2f}x")


if __name__ == "__main__":
    trio.run(main, 200 if "--quick" in sys.argv else 2000)

"""The demo: tasks that share files through the lock manager, with a timeline of who waited."""

from __future__ import annotations

import trio

from .locks import Claim, LockManager, reads, writes

_STEPS: list[tuple[str, list[Claim], float]] = [
    ("read a.py", [reads("src/a.py")], 0.20),
    ("read b.py", [reads("src/b.py")], 0.20),
    ("edit a.py", [writes("src/a.py")], 0.10),
    ("read a.py again", [reads("src/a.py")], 0.10),
    ("edit b.py", [writes("src/b.py")], 0.10),
    ("rewrite src/", [writes("src")], 0.10),
]


def run_demo() -> int:
    async def main() -> None:
        manager = LockManager()
        start = trio.current_time()
        lines: list[tuple[float, float, str]] = []

        async def step(name: str, claims: list[Claim], seconds: float) -> None:
            async with manager.acquire(claims):
                began = trio.current_time() - start
                await trio.sleep(seconds)
                lines.append((began, trio.current_time() - start, name))

        async with trio.open_nursery() as nursery:
            for name, claims, seconds in _STEPS:
                nursery.start_soon(step, name, claims, seconds)
                await trio.lowlevel.checkpoint()  # keep emission order
        for began, ended, name in sorted(lines):
            bar = " " * int(began * 50) + "#" * max(1, int((ended - began) * 50))
            print(f"{name:>16} {began:5.2f}-{ended:5.2f}s |{bar}")
        serial = sum(seconds for _, _, seconds in _STEPS)
        print(f"makespan {max(e for _, e, _ in lines):.2f}s; one by one it would be {serial:.2f}s")

    trio.run(main)
    return 0

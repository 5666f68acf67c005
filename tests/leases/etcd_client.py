"""A lease client in a process of its own, driven by the etcd tests through JSON lines.

``python etcd_client.py URL ROOT`` connects, prints ``{"ready": true}``, then reads one command
a line on stdin and answers on stdout:

- ``{"acquire": NAME, "claims": [[mode, path], ...]}``: waits in the background; prints
  ``{"granted": NAME, "token": T, "at": MONOTONIC}`` when granted;
- ``{"release": NAME}``: prints ``{"released": NAME, "at": MONOTONIC}``;
- ``{"publish": NAME, "file": PATH, "text": TEXT}``: writes TEXT to a scratch file and renames it
  over PATH through the grant's fence; prints ``{"published": NAME}`` or ``{"fenced": NAME}``;
- ``{"stress": N, "seed": S, "paths": [...], "log": FILE}``: N rounds of acquire, hold a few
  milliseconds, release, on random claims over ``paths``; each grant appended to FILE as
  ``[claims, token, granted_at, released_at]``; prints ``{"stressed": N}``.
"""

from __future__ import annotations

import json
import random
import sys
import time
from typing import Any

import anyio

from toolkernel.errors import FencedOutError
from toolkernel.leases import LeaseBackend, Rename, open_leases
from toolkernel.locks import Claim, exclusive, path, shared


def claims_of(items: list[list[str]]) -> list[Claim]:
    return [(exclusive if mode == "w" else shared)(path(p)) for mode, p in items]


def append(file: str, line: str) -> None:
    with open(file, "a") as f:
        f.write(line)


def say(message: dict[str, Any]) -> None:
    print(json.dumps(message), flush=True)


async def main(url: str, root: str) -> None:
    async with open_leases(url, root) as backend:
        assert backend is not None
        await serve(backend, root)


async def serve(backend: LeaseBackend, root: str) -> None:
    grants: dict[str, Any] = {}
    say({"ready": True})

    async def acquire(name: str, claims: list[Claim]) -> None:
        grant = await backend.acquire(claims, label=name)
        grants[name] = grant
        say({"granted": name, "token": grant.token, "at": time.monotonic()})

    def publish(name: str, file: str, text: str) -> None:
        scratch = f".{file}.{random.randrange(1 << 30):x}.tktmp"
        with open(f"{root}/{scratch}", "w") as f:
            f.write(text)
        backend.fence(grants[name]).publish(Rename((scratch,), (file,)))

    async def stress(n: int, seed: int, paths: list[str], log: str) -> None:
        rng = random.Random(seed)
        for _ in range(n):
            items = [[rng.choice("rw"), rng.choice(paths)] for _ in range(rng.randint(1, 2))]
            grant = await backend.acquire(claims_of(items))
            granted_at = time.monotonic()
            await anyio.sleep(rng.uniform(0, 0.01))
            released_at = time.monotonic()
            backend.release(grant)
            line = json.dumps([items, grant.token, granted_at, released_at]) + "\n"
            await anyio.to_thread.run_sync(append, log, line)
        say({"stressed": n})

    async with anyio.create_task_group() as tg:
        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline)
            if not line:
                break
            command = json.loads(line)
            if "acquire" in command:
                tg.start_soon(acquire, command["acquire"], claims_of(command["claims"]))
            elif "release" in command:
                backend.release(grants.pop(command["release"]))
                say({"released": command["release"], "at": time.monotonic()})
            elif "publish" in command:
                name = command["publish"]
                try:
                    await anyio.to_thread.run_sync(publish, name, command["file"], command["text"])
                except FencedOutError:
                    say({"fenced": name})
                else:
                    say({"published": name})
            elif "stress" in command:
                tg.start_soon(
                    stress, command["stress"], command["seed"], command["paths"], command["log"]
                )
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], backend="trio")

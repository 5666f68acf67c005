"""A client of the lease service in its own process, driven by the tests.

``python lease_worker.py hold URL ROOT PATH``: take an exclusive lease on PATH, print
``held TOKEN``, then obey lines on stdin: ``publish CONTENT`` (write CONTENT to PATH through the
fence; prints ``ok`` or ``fenced``), ``release``, ``exit``.

``python lease_worker.py churn URL ROOT SEED ROUNDS OUT``: connect, write ``OUT.ready`` and wait
for a line on stdin (so that several workers churn at once, however slowly each started),
then take random sets of leases on a few paths, hold each a moment, release; record each hold
(monotonic times right after the grant and right before the release, the token, the claims) as
JSON lines in OUT.
"""

from __future__ import annotations

import json
import random
import sys
import time

import anyio
import anyio.to_thread

from toolkernel.errors import FencedOutError
from toolkernel.leases import Rename, open_leases
from toolkernel.locks import Claim, Mode, Path, path, pool, reads, units, writes

PATHS = ("a", "a/b", "a/b/c", "a/d", "e", "e/f")


async def hold(url: str, root: str, target: str) -> None:
    async with open_leases(url, root) as backend:
        assert backend is not None
        grant = await backend.acquire([writes(target)])
        print("held", grant.token, flush=True)
        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline)
            command, _, argument = line.strip().partition(" ")
            if command == "publish":
                scratch = f".{target}.worker.tktmp"
                await anyio.Path(root, scratch).write_text(argument)
                fence = backend.fence(grant)
                try:
                    await anyio.to_thread.run_sync(
                        fence.publish, Rename((scratch,), path(target).parts)
                    )
                except FencedOutError:
                    print("fenced", flush=True)
                else:
                    print("ok", flush=True)
            elif command == "release":
                backend.release(grant)
                print("released", flush=True)
            else:
                return


def random_claims(rng: random.Random) -> list[Claim]:
    claims = []
    for n in range(rng.randint(1, 3)):
        if n == 0 and rng.random() < 0.3:  # one pool claim at most: two could pass capacity
            claims.append(units(pool("net"), rng.randint(1, 2)))
        else:
            where = rng.choice(PATHS)
            claims.append(writes(where) if rng.random() < 0.5 else reads(where))
    return claims


def encode(claim: Claim) -> list[object]:
    resource = claim.resource
    name = "/".join(resource.parts) if isinstance(resource, Path) else f"pool:{resource}"
    return [name, claim.mode is Mode.EXCLUSIVE, claim.units]


async def churn(url: str, root: str, seed: int, rounds: int, out: str) -> None:
    rng = random.Random(seed)
    records = []
    async with open_leases(url, root, pools={"net": 2}) as backend:
        assert backend is not None
        await anyio.Path(out + ".ready").touch()
        await anyio.to_thread.run_sync(sys.stdin.readline)
        for _ in range(rounds):
            grant = await backend.acquire(random_claims(rng))
            start = time.monotonic()
            await anyio.sleep(rng.random() * 0.004)
            end = time.monotonic()
            backend.release(grant)
            records.append(
                {
                    "start": start,
                    "end": end,
                    "token": grant.token,
                    "claims": [encode(c) for c in grant.claims],
                }
            )
    await anyio.Path(out).write_text("".join(json.dumps(r) + "\n" for r in records))


def main() -> None:
    mode, url, root, *rest = sys.argv[1:]
    if mode == "hold":
        anyio.run(hold, url, root, rest[0], backend="trio")
    else:
        seed, rounds, out = rest
        anyio.run(churn, url, root, int(seed), int(rounds), out, backend="asyncio")


if __name__ == "__main__":
    main()

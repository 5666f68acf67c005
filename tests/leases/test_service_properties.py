"""Property: several clients of a real lease service get exactly the grants one in-process
``LeaseTable`` gives when fed the same requests, releases, withdrawals and disconnections in the
same order of arrival."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkernel.leases import Grant, open_leases
from toolkernel.leases._client import UnixLeaseClient
from toolkernel.locks import Claim, LeaseTable, device, exclusive, pool, reads, units, writes

from .service_harness import Service, running_service

CLAIMS = [
    reads("p"),
    writes("p"),
    writes("p"),
    reads("p/a"),
    writes("p/a"),
    writes("p/a/b"),
    reads("p/c"),
    units(pool("net"), 1),
    units(pool("net"), 2),
    exclusive(device("phone")),
]
CLIENTS = 3
POOLS = {"net": 2}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with running_service(tmp_path_factory.mktemp("ws"), pools="net=2") as running:
        yield running


claim_sets = st.lists(st.sampled_from(CLAIMS), min_size=1, max_size=2).filter(
    lambda claims: sum(c.units for c in claims if c.resource == pool("net")) <= 2
)
operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("request"),
            st.integers(0, CLIENTS - 1),
            claim_sets,
            st.sampled_from([0, 1]),
        ),
        st.tuples(st.just("release"), st.integers(0, CLIENTS - 1), st.integers(0, 50)),
        st.tuples(st.just("disconnect"), st.integers(0, CLIENTS - 1)),
    ),
    max_size=16,
)


class Run:
    """The service's side and the model's side of one example, side by side."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.model = LeaseTable(pools={"net": 2})
        # Each client: the connection, its owner in the model, and events to close it.
        self.clients: list[tuple[UnixLeaseClient, object, anyio.Event, anyio.Event]] = []
        self.model_ids: dict[int, int] = {}  # request label -> model lease id
        self.open: dict[int, tuple[int, anyio.CancelScope]] = {}  # label -> (client, scope)
        self.granted: dict[int, Grant] = {}

    async def connect(self, tasks: anyio.abc.TaskGroup, index: int) -> None:
        """Open client ``index`` in a task of its own, which holds it open until told."""
        opened = anyio.Event()
        close = anyio.Event()
        closed = anyio.Event()
        box: list[UnixLeaseClient] = []

        async def hold_open() -> None:
            try:
                async with open_leases(self.service.url, self.service.root, pools=POOLS) as c:
                    assert isinstance(c, UnixLeaseClient)
                    box.append(c)
                    opened.set()
                    await close.wait()
            finally:
                closed.set()

        tasks.start_soon(hold_open)
        await opened.wait()
        entry = (box[0], object(), close, closed)
        if index < len(self.clients):
            self.clients[index] = entry
        else:
            self.clients.append(entry)

    async def request(
        self, tasks: anyio.abc.TaskGroup, index: int, claims: list[Claim], priority: int
    ) -> None:
        label = len(self.model_ids)
        owner = self.clients[index][1]
        self.model_ids[label] = self.model.request(
            claims, priority=priority, group=owner, owner=owner
        )
        scope = anyio.CancelScope()
        self.open[label] = (index, scope)
        client = self.clients[index][0]

        async def acquire() -> None:
            # ConnectionError: its client was disconnected while it waited.
            with scope, contextlib.suppress(ConnectionError):
                self.granted[label] = await client.acquire(claims, priority=priority)

        tasks.start_soon(acquire)
        await anyio.lowlevel.checkpoint()  # let it send its request now, in this order

    def release(self, index: int, pick: int) -> None:
        mine = [label for label, (owner, _) in self.open.items() if owner == index]
        if not mine:
            return
        label = mine[pick % len(mine)]
        _, scope = self.open.pop(label)
        self.model.release(self.model_ids[label], owner=self.clients[index][1])
        grant = self.granted.pop(label, None)
        if grant is not None:
            self.clients[index][0].release(grant)
        else:
            scope.cancel()  # withdraws it

    async def disconnect(self, tasks: anyio.abc.TaskGroup, index: int) -> None:
        _, owner, close, closed = self.clients[index]
        for label, (holder, scope) in list(self.open.items()):
            if holder == index:  # in arrival order, as the service drops them
                del self.open[label]
                self.granted.pop(label, None)
                self.model.release(self.model_ids[label], owner=owner)
                scope.cancel()
        close.set()
        await closed.wait()
        await self.connect(tasks, index)
        with anyio.fail_after(10):
            while (await self.clients[index][0].status())["connections"] != CLIENTS:  # noqa: ASYNC110
                await anyio.sleep(0.005)

    async def check(self) -> None:
        for client, *_ in self.clients:
            await client.ping()
        for _ in range(5):
            await anyio.lowlevel.checkpoint()  # the woken acquire tasks record their grants
        held = {label for label in self.open if self.model.is_held(self.model_ids[label])}
        assert set(self.granted) == held


# Each example runs on a real service: fewer than the profile's examples for the pure table.
@settings(max_examples=min(settings().max_examples, 30))
@given(ops=operations)
def test_the_service_grants_what_one_lease_table_grants(service: Service, ops: list) -> None:  # type: ignore[type-arg]
    async def main() -> None:
        run = Run(service)
        async with anyio.create_task_group() as tasks:
            for index in range(CLIENTS):
                await run.connect(tasks, index)
            for op in ops:
                if op[0] == "request":
                    await run.request(tasks, op[1], op[2], op[3])
                elif op[0] == "release":
                    run.release(op[1], op[2])
                else:
                    await run.disconnect(tasks, op[1])
                await run.check()
            for _, _, close, _ in run.clients:
                close.set()

    anyio.run(main, backend="trio")

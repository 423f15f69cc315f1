"""A real Placement on loopback for every test, with a fresh database.

Each test gets its own ``openstack-placement`` service (a child process on
127.0.0.1, SQLite in ``tmp_path``) so it may stop, restart and fill it as
it likes.  Starting one costs ~0.7 s of the child's imports, so the pool
always has the next one starting while a test runs: a test waits only for
what is left of that.

Skipped (failed under CI) when openstack-placement is not installed.
"""

from __future__ import annotations

import importlib.util
import pathlib
import uuid as uuidlib

import pytest

from virtdriver.drivers.fake import FakeDriver
from virtdriver.placement.embedded import PlacementServer
from virtdriver.placement.ownership import TrackerOwnership
from virtdriver.placement.result import SyncResult
from virtdriver.placement.sync import Syncer
from virtdriver.resource_tracker.tracker import ResourceTracker


class _Pool:
    """Servers started ahead of need (``depth`` of them)."""

    def __init__(self, base: pathlib.Path, depth: int = 2) -> None:
        self.base = base
        self.count = 0
        self.depth = depth
        self.spares: list[PlacementServer] = []
        self.stopping: list[PlacementServer] = []

    def _spawn(self) -> PlacementServer:
        self.count += 1
        directory = self.base / f"placement-{self.count}"
        directory.mkdir()
        return PlacementServer(directory / "placement.db").start()

    def take(self) -> PlacementServer:
        while len(self.spares) < self.depth + 1:
            self.spares.append(self._spawn())
        server = self.spares.pop(0)
        self.spares.append(self._spawn())
        return server.wait_ready()

    def release(self, server: PlacementServer) -> None:
        server.stop(wait=False)
        self.stopping.append(server)

    def close(self) -> None:
        for server in self.spares + self.stopping:
            server.stop()


@pytest.fixture(scope="session")
def placement_pool(tmp_path_factory, in_ci):
    if importlib.util.find_spec("placement") is None:
        message = ("openstack-placement is not installed; `./run setup` "
                   "installs it")
        if in_ci:
            pytest.fail(message)
        pytest.skip(message)
    pool = _Pool(tmp_path_factory.mktemp("placement"))
    yield pool
    pool.close()


@pytest.fixture
def placement(placement_pool) -> PlacementServer:
    """A running Placement with an empty database, stopped afterwards."""
    server = placement_pool.take()
    yield server
    placement_pool.release(server)


@pytest.fixture
def client(placement):
    """A fresh client for the test's Placement."""
    return placement.client()


class Api:
    """Another writer: raw Placement calls through its own client."""

    def __init__(self, server: PlacementServer) -> None:
        self.client = server.client()

    def providers(self) -> dict[str, dict]:
        return {p["uuid"]: p for p in self.client.list_providers()}

    def traits(self, uuid: str) -> set[str]:
        return set(self.client.get_part(uuid, "traits")[1])

    def inventories(self, uuid: str) -> dict:
        return self.client.get_part(uuid, "inventories")[1]

    def aggregates(self, uuid: str) -> set[str]:
        return set(self.client.get_part(uuid, "aggregates")[1])

    def set_traits(self, uuid: str, traits) -> None:
        for name in traits:
            if name.startswith("CUSTOM_"):
                self.client.ensure_trait(name)
        generation, _ = self.client.get_part(uuid, "traits")
        self.client.put_part(uuid, "traits", generation, sorted(traits))

    def add_traits(self, uuid: str, *names: str) -> None:
        self.set_traits(uuid, self.traits(uuid) | set(names))

    def remove_traits(self, uuid: str, *names: str) -> None:
        self.set_traits(uuid, self.traits(uuid) - set(names))

    def set_aggregates(self, uuid: str, aggregates) -> None:
        generation, _ = self.client.get_part(uuid, "aggregates")
        self.client.put_part(uuid, "aggregates", generation,
                             sorted(aggregates))

    def allocate(self, provider: str, resources: dict[str, int]) -> str:
        consumer = str(uuidlib.uuid4())
        self.client.request("PUT", f"/allocations/{consumer}", body={
            "allocations": {provider: {"resources": resources}},
            "project_id": str(uuidlib.uuid4()),
            "user_id": str(uuidlib.uuid4()),
            "consumer_generation": None, "consumer_type": "INSTANCE"})
        return consumer

    def free(self, consumer: str) -> None:
        self.client.request("DELETE", f"/allocations/{consumer}")


@pytest.fixture
def api(placement) -> Api:
    return Api(placement)


class Host:
    """A fake-driver host through the real ResourceTracker, with the
    sync's ownership callable."""

    def __init__(self, state_dir: pathlib.Path, preset: str = "numa2-ht"
                 ) -> None:
        self.driver = FakeDriver(preset)
        self.driver.init_host("host")
        self.state_dir = state_dir
        self.tracker = ResourceTracker(self.driver, state_dir=state_dir)
        self.owned = TrackerOwnership(self.tracker)
        self._syncers: dict[int, Syncer] = {}
        self.update()

    def update(self) -> None:
        self.owned.note(self.tracker.update_all())

    def sync(self, client, **options) -> SyncResult:
        """One sync as an agent runs it: its Syncer for this client, the
        tracker's ownership, the providers the tracker removed."""
        syncer = self._syncers.setdefault(
            id(client), Syncer(client, self.state_dir))
        result = syncer.sync(self.tree, owned_for=self.owned,
                             remove=self.owned.gone, **options)
        self.owned.synced(result)
        return result

    @property
    def tree(self):
        return self.tracker.tree

    def uuid(self, name: str) -> str:
        return self.tree.data(name).uuid

    @property
    def root(self):
        return self.tree.roots[0]


@pytest.fixture
def host(tmp_path) -> Host:
    return Host(tmp_path / "state")

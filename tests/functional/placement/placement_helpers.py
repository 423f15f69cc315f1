"""Helpers for the Placement tests: a server pool, another writer
(:class:`Api`), a tracked host (:class:`Host`), expectations."""

from __future__ import annotations

import contextlib
import pathlib
import sqlite3
import uuid as uuidlib

from virtdriver.drivers.fake import FakeDriver
from virtdriver.placement.loopback import PlacementServer
from virtdriver.placement.marker import agent_aggregate
from virtdriver.placement.ownership import TrackerOwnership
from virtdriver.placement.result import SyncResult
from virtdriver.placement.sync import Syncer
from virtdriver.resource_tracker.tracker import ResourceTracker


class Pool:
    """Placement services for the tests: one shared by most tests,
    emptied before each (:func:`empty_database`), and dedicated ones for
    tests that stop theirs.  Starting a service costs ~0.7 s of CPU;
    emptying one a transaction on its SQLite file."""

    def __init__(self, base: pathlib.Path) -> None:
        self.base = base
        self.count = 0
        self.shared: PlacementServer | None = None
        self.stopping: list[PlacementServer] = []

    def _spawn(self) -> PlacementServer:
        self.count += 1
        directory = self.base / f"placement-{self.count}"
        directory.mkdir()
        return PlacementServer(directory / "placement.db").start()

    def take_shared(self) -> PlacementServer:
        """The shared service, emptied (restarted if a test stopped it)."""
        if self.shared is None:
            self.shared = self._spawn()
        if not self.shared.running:
            self.shared.start()
        self.shared.wait_ready()
        empty_database(self.shared.db)
        return self.shared

    def take_own(self) -> PlacementServer:
        """A new service with a new database."""
        return self._spawn().wait_ready()

    def release(self, server: PlacementServer) -> None:
        if server is not self.shared:
            server.stop(wait=False)
            self.stopping.append(server)

    def close(self) -> None:
        for server in [self.shared, *self.stopping]:
            if server is not None:
                server.stop()


#: What a test can add to a Placement database, emptied between tests:
#: every row of the tables a test fills, and the CUSTOM_ traits and
#: resource classes (the standard ones Placement syncs once a process
#: stay).  Placement keeps nothing of these between requests (its name
#: caches are per request), so the service sees an empty Placement.
EMPTIED = (
    "DELETE FROM allocations", "DELETE FROM consumers",
    "DELETE FROM projects", "DELETE FROM users",
    "DELETE FROM consumer_types", "DELETE FROM inventories",
    "DELETE FROM resource_provider_traits",
    "DELETE FROM resource_provider_aggregates",
    "DELETE FROM placement_aggregates", "DELETE FROM resource_providers",
    r"DELETE FROM traits WHERE name LIKE 'CUSTOM\_%' ESCAPE '\'",
    r"DELETE FROM resource_classes WHERE name LIKE 'CUSTOM\_%' ESCAPE '\'",
)


def empty_database(db: pathlib.Path) -> None:
    """Empty the shared service's SQLite database in one transaction (a
    few hundred requests a run fewer than emptying it through the API:
    a tenth of the Placement tests' requests, all Placement CPU)."""
    with contextlib.closing(sqlite3.connect(db, timeout=60)) as connection:
        with connection:
            for statement in EMPTIED:
                connection.execute(statement)


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


class Host:
    """A driver's nodes through the real ResourceTracker (the fake
    driver's ``numa2-ht`` host by default), synced as an agent does."""

    def __init__(self, state_dir: pathlib.Path, driver=None) -> None:
        if driver is None:
            driver = FakeDriver("numa2-ht")
        self.driver = driver
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
        return self.tree.record(name).uuid

    @property
    def root(self):
        return self.tree.roots[0]

    @property
    def marker(self) -> str:
        """This host's marking aggregate (its state directory's)."""
        return agent_aggregate(self.state_dir)


def expected_writes(tree, known_custom=frozenset(), *, marked=True) -> int:
    """The writes a first sync of ``tree`` into an empty Placement needs:
    a create per provider, an inventory, traits and aggregates PUT for
    each that has some (every one when ``marked``: the agent's marking
    aggregate, as a ``Syncer`` syncs), one PUT per CUSTOM_ resource class
    and trait."""
    providers = tree.providers()
    customs = {rc for p in providers for rc in p.inventory
               if rc.startswith("CUSTOM_")}
    customs |= {t for p in providers for t in p.traits
                if t.startswith("CUSTOM_")}
    return (len(providers) + sum(bool(p.inventory) for p in providers)
            + sum(bool(p.traits) for p in providers)
            + sum(bool(p.aggregates) or marked for p in providers)
            + len(customs - known_custom))


def assert_placement_equals(api: Api, tree) -> None:
    """Every provider of the tree is in Placement with its parent,
    inventories and traits (at least: others may add foreign ones)."""
    found = api.providers()
    for provider in tree.providers():
        remote = found[provider.uuid]
        assert remote["name"] == provider.name
        assert remote["parent_provider_uuid"] == provider.parent_uuid
        assert remote["root_provider_uuid"] == provider.root_uuid
        assert api.inventories(provider.uuid) == {
            rc: rec.as_dict() for rc, rec in provider.inventory.items()}
        assert provider.traits <= api.traits(provider.uuid)


def reads_without_state(tree) -> int:
    """What a sync of ``tree`` reads when its sync state has no record of
    it (lost, edited, of another Placement): the listing, three parts per
    provider, and the allocations of each provider offering memory beside
    huge pages (where an allocation from before small-page ``MEMORY_MB``
    may hold memory twice: ``docs/provider-tree.md``, "Memory")."""
    pages = sum(1 for uuid in tree.get_provider_uuids()
                if "MEMORY_MB" in (inv := tree.data(uuid).inventory)
                and any(rc.startswith("CUSTOM_MEM_PAGE_SIZE_")
                        for rc in inv))
    return 1 + 3 * len(tree) + pages


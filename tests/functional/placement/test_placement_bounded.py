"""An agent reads only what it owns, whatever the cloud's size: its
providers carry its marking aggregate and one ``member_of`` listing
finds them (real Placement on loopback; requests and answer bytes
counted through the client)."""

from __future__ import annotations

import json
import sqlite3
import uuid as uuidlib

import pytest
from placement_helpers import Host

from virtdriver.drivers.fake import FakeDriver
from virtdriver.placement.client import PlacementClient

FOREIGN = 200
#: A timestamp as Placement's SQLite rows hold them (naive UTC).
NOW = "2026-01-01 00:00:00.000000"


class Counting(PlacementClient):
    """A client that remembers each answer: method, path, query, size of
    its JSON body, and the provider uuids it names."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.answers: list[tuple[str, str, dict, int, set[str]]] = []

    def _send(self, method, path, **kwargs):
        body = super()._send(method, path, **kwargs)
        text = json.dumps(body)
        named = {p["uuid"] for p in (body or {}).get("resource_providers",
                                                        ())} \
            if isinstance(body, dict) else set()
        self.answers.append((method, path, dict(kwargs.get("params") or {}),
                             len(text), named))
        return body

    def cycle(self, host: Host):
        """One sync of ``host``; the result and the answers it read."""
        start = len(self.answers)
        result = host.sync(self)
        return result, self.answers[start:]


def counting(placement) -> Counting:
    return placement.client(Counting)


def seed_foreign(api, count: int) -> set[str]:
    """``count`` roots of nobody we know, through the API, a tenth in an
    aggregate."""
    made = set()
    others = str(uuidlib.uuid4())
    for i in range(count):
        uuid = str(uuidlib.uuid4())
        api.client.create_provider(uuid, f"foreign-{i}", None)
        if i % 10 == 0:
            api.set_aggregates(uuid, {others})
        made.add(uuid)
    return made


def seed_foreign_rows(server, count: int = FOREIGN) -> set[str]:
    """``count`` foreign providers written straight into the service's
    SQLite database (a few ms, where the API takes seconds): roots with
    one child each, a tenth of the roots in another aggregate."""
    rows, links, made = [], [], set()
    with sqlite3.connect(server.db) as db:
        first = 1 + db.execute(
            "SELECT COALESCE(MAX(id), 0) FROM resource_providers"
        ).fetchone()[0]
        aggregate = 1 + db.execute(
            "SELECT COALESCE(MAX(id), 0) FROM placement_aggregates"
        ).fetchone()[0]
        for n in range(count):
            rid, uuid = first + n, str(uuidlib.uuid4())
            root = rid if n % 2 == 0 else rid - 1
            rows.append((rid, uuid, f"foreign-{n}", 1, root,
                         None if root == rid else root, NOW, NOW))
            if n % 20 == 0:
                links.append((rid, aggregate))
            made.add(uuid)
        db.executemany(
            "INSERT INTO resource_providers (id, uuid, name, generation, "
            "root_provider_id, parent_provider_id, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            rows)
        db.execute("INSERT INTO placement_aggregates (id, uuid, created_at) "
                   "VALUES (?, ?, ?)", (aggregate, str(uuidlib.uuid4()), NOW))
        db.executemany("INSERT INTO resource_provider_aggregates "
                       "(resource_provider_id, aggregate_id, created_at) "
                       "VALUES (?, ?, ?)", [(*link, NOW) for link in links])
    return made


@pytest.fixture
def synced(tmp_path, placement):
    """A host synced once, and its counting client."""
    client = counting(placement)
    host = Host(tmp_path / "state")
    assert host.sync(client).ok
    return host, client


def ours(host: Host) -> set[str]:
    return {p.uuid for p in host.tree.providers()}


def test_a_steady_cycle_reads_only_ours_among_many_foreign(
        tmp_path, own_placement):
    client = counting(own_placement)
    host = Host(tmp_path / "state")
    assert host.sync(client).ok
    _, quiet = client.cycle(host)
    foreign = seed_foreign_rows(own_placement)
    # Placement itself sees them all.
    assert foreign <= {p["uuid"] for p in client.list_providers()}
    client.answers.clear()

    result, answers = client.cycle(host)

    assert result.ok and not result.changed, result.describe()
    assert result.counts.by_method == {"GET": 1}
    [(method, path, params, size, named)] = answers
    assert (method, path, params) == ("GET", "/resource_providers",
                                      {"member_of": host.marker})
    assert named == ours(host) and not named & foreign
    # The same bytes as with no foreign provider at all.
    assert size == quiet[0][3]


def test_every_provider_of_ours_carries_the_mark_and_no_foreign_one(
        tmp_path, placement, api):
    foreign = seed_foreign(api, 10)
    host = Host(tmp_path / "state")

    first = host.sync(counting(placement))

    assert first.ok, first.describe()
    for uuid in ours(host):
        assert host.marker in api.aggregates(uuid)
    assert not any(host.marker in api.aggregates(u) for u in foreign)
    # The first sync read its own trees, never the whole cloud.
    assert first.counts.reads == 3   # GET /, the marked list, one in_tree


def test_a_provider_unmarked_by_an_operator_is_found_and_marked_again(synced, api):
    host, client = synced
    root = host.root.uuid
    cell = next(p.uuid for p in host.tree.providers() if p.parent_uuid)
    rack = str(uuidlib.uuid4())
    # The operator replaces the aggregates: ours is gone from both.
    api.set_aggregates(root, {rack})
    api.set_aggregates(cell, set())

    result, answers = client.cycle(host)

    assert result.ok, result.describe()
    assert api.aggregates(root) == {rack, host.marker}
    assert api.aggregates(cell) == {host.marker}
    assert result.counts.writes == 2   # the two aggregates PUTs
    trees = [params for _, _, params, _, _ in answers if "in_tree" in params]
    assert trees == [{"in_tree": root}]
    again = host.sync(client)
    assert again.ok and again.counts.by_method == {"GET": 1}


def test_an_operators_aggregates_on_our_providers_survive(synced, api):
    host, client = synced
    root = host.root.uuid
    rack = str(uuidlib.uuid4())
    api.set_aggregates(root, {rack, host.marker})

    for _ in range(3):
        host.update()
        result = host.sync(client)
        assert result.ok and result.counts.writes == 0, result.describe()

    assert api.aggregates(root) == {rack, host.marker}
    assert result.counts.by_method == {"GET": 1}


def test_a_provider_deleted_by_someone_is_created_again(synced, api):
    host, client = synced
    cell = next(p for p in host.tree.providers() if p.parent_uuid)
    api.client.delete_provider(cell.uuid)

    result = host.sync(client)

    assert result.ok and result.get(cell.uuid).created, result.describe()
    assert host.marker in api.aggregates(cell.uuid)
    assert host.sync(client).counts.by_method == {"GET": 1}


def test_two_agents_sharing_no_state_directory_never_meet(
        tmp_path, placement, api):
    a = Host(tmp_path / "a")
    b = Host(tmp_path / "b", FakeDriver("numa4-large"))
    client_a, client_b = counting(placement), counting(placement)
    assert a.marker != b.marker
    assert b.sync(client_b).ok
    theirs = {uuid: p["generation"] for uuid, p in api.providers().items()}
    assert set(theirs) == ours(b)

    assert a.sync(client_a).ok
    a.update()
    assert a.sync(client_a).ok
    b.update()
    assert b.sync(client_b).ok

    read_by_a = set().union(*(named for *_, named in client_a.answers))
    read_by_b = set().union(*(named for *_, named in client_b.answers))
    assert read_by_a == ours(a) and read_by_b == ours(b)
    now = api.providers()
    assert {uuid: now[uuid]["generation"] for uuid in theirs} == theirs
    for uuid in ours(b):
        assert a.marker not in api.aggregates(uuid)


def test_an_upgrade_from_unmarked_providers_marks_them_once(
        tmp_path, placement, api):
    client = counting(placement)
    host = Host(tmp_path / "state")
    # As a release before marks synced: one in_tree read per root.
    assert host.sync(client, marker=None).ok
    assert not any(api.aggregates(uuid) for uuid in ours(host))

    result = host.sync(client)

    assert result.ok, result.describe()
    for uuid in ours(host):
        assert api.aggregates(uuid) == {host.marker}
    # The marked listing, the tree, each provider's aggregates; a PUT each.
    assert result.counts.by_method == {"GET": 2 + 3, "PUT": 3}
    assert host.sync(client).counts.by_method == {"GET": 1}

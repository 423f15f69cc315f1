"""50 bare-metal nodes (the ironic driver through the real tracker)
synced to a real Placement: first sync, steady state, gone nodes, a node
with allocations, inspection traits the data stops naming."""

from __future__ import annotations

import json
import os
import uuid as uuidlib

import os_traits
import pytest

from placement_helpers import Host, assert_placement_equals, expected_writes

from virtdriver.drivers.ironic import IronicDriver

NODES = 50
#: Enough for the other cases (many roots, one listing), cheaper.
FEW = 24
_tick = iter(range(1, 10**6))


def node_uuid(i: int) -> str:
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"test-node-{i}"))


def nodes(count: int = FEW, *, raid: frozenset[int] | None = None,
          skip: frozenset[int] = frozenset()) -> list[dict]:
    """``count`` nodes; every third has CUSTOM_RAID5 unless ``raid``
    says which do."""
    raid = frozenset(range(0, count, 3)) if raid is None else raid
    found = []
    for i in range(count):
        if i in skip:
            continue
        traits = [os_traits.HW_CPU_X86_AVX2]
        if i in raid:
            traits.append("CUSTOM_RAID5")
        found.append({
            "uuid": node_uuid(i), "name": f"rack{i // 20}-u{i % 20:02d}",
            "resource_class": "baremetal.gold" if i % 2 else
            "baremetal.silver",
            # Every tenth node is not usable: its one unit is reserved
            # (reserved == total, microversion 1.26).
            "provision_state": "manageable" if i % 10 == 9 else "available",
            "traits": traits})
    return found


def write_inventory(path, entries) -> None:
    path.write_text(json.dumps({"nodes": entries}))
    tick = next(_tick) * 1_000_000_000
    os.utime(path, ns=(tick, tick))


@pytest.fixture
def inventory(tmp_path, request):
    path = tmp_path / "nodes.json"
    write_inventory(path, nodes(getattr(request, "param", FEW)))
    return path


@pytest.fixture
def farm(tmp_path, inventory) -> Host:
    return Host(tmp_path / "state", IronicDriver(inventory_path=inventory))


@pytest.mark.parametrize("inventory", [NODES], indirect=True)
def test_first_and_steady_sync_of_many_nodes(farm, client, api):
    first = farm.sync(client)

    assert first.ok, first.describe()
    assert len(farm.tree) == NODES
    assert_placement_equals(api, farm.tree)
    # GET /, the marked listing (empty), one in_tree per new root.
    assert first.counts.reads == 2 + NODES
    assert first.counts.writes == expected_writes(farm.tree)
    reserved = [p for p in farm.tree.providers()
                if any(r.reserved == r.total for r in p.inventory.values())]
    assert len(reserved) == NODES // 10
    for provider in reserved:
        inventory = api.inventories(provider.uuid)
        assert all(r["reserved"] == r["total"] == 1
                   for r in inventory.values())

    for _ in range(2):
        farm.update()
        steady = farm.sync(client)
        assert steady.ok and not steady.changed
        assert steady.counts.by_method == {"GET": 1}


def test_a_gone_node_is_deleted_but_not_while_it_has_allocations(
        farm, client, api, inventory):
    farm.sync(client)
    busy, idle = node_uuid(4), node_uuid(5)
    consumer = api.allocate(busy, {"CUSTOM_BAREMETAL_SILVER": 1})

    write_inventory(inventory, nodes(skip=frozenset({4, 5})))
    farm.update()
    assert not farm.tree.exists(busy) and not farm.tree.exists(idle)
    result = farm.sync(client)

    assert idle not in api.providers()
    assert result.get(idle).deleted
    assert busy in api.providers()
    kept = result.get(busy)
    assert not kept.deleted and "allocations" in kept.kept
    assert result.kept == (kept,)
    # The rest did not move: no other write than the two deletions.
    assert result.counts.by_method.get("DELETE") == 2
    assert result.counts.writes == 2

    # Still kept while the allocation lasts; deleted once it is gone.
    again = farm.sync(client)
    assert again.get(busy).kept and busy in api.providers()
    api.free(consumer)
    last = farm.sync(client)
    assert last.get(busy).deleted and busy not in api.providers()
    assert farm.sync(client).outcomes == ()


def test_an_inspection_trait_the_data_stops_naming_leaves_placement(
        farm, client, api, inventory):
    farm.sync(client)
    node = node_uuid(0)
    assert "CUSTOM_RAID5" in api.traits(node)
    api.add_traits(node, "CUSTOM_OPERATOR_NOTE")

    write_inventory(inventory, nodes(raid=frozenset()))
    farm.update()
    result = farm.sync(client)

    assert result.ok
    traits = api.traits(node)
    assert "CUSTOM_RAID5" not in traits
    assert {"CUSTOM_OPERATOR_NOTE", os_traits.HW_CPU_X86_AVX2} <= traits
    # Every node that had RAID5 lost it; no other provider was written.
    raid_nodes = len(range(0, FEW, 3))
    assert result.counts.writes == raid_nodes
    assert sum(bool(o.traits_removed) for o in result.outcomes) == raid_nodes


def test_a_node_one_tracker_did_not_create_is_never_deleted(
        tmp_path, inventory, client, api):
    """A new tracker (a restart) whose inventory no longer lists a node:
    only the sync state names it, so it stays in Placement — the state
    is a cache, never a proof of ownership."""
    first = Host(tmp_path / "state", IronicDriver(inventory_path=inventory))
    first.sync(client)
    gone = node_uuid(7)
    write_inventory(inventory, nodes(skip=frozenset({7})))

    restarted = Host(tmp_path / "state",
                     IronicDriver(inventory_path=inventory))
    result = restarted.sync(client)

    assert gone in api.providers()
    assert "does not vouch" in result.get(gone).kept
    assert result.counts.by_method.get("DELETE") is None
    # Reported once: the state forgets it, later syncs are quiet.
    assert restarted.sync(client).outcomes == ()

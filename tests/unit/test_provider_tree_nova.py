"""The behaviours of Nova's ProviderTree that drivers and report clients
rely on, on ours: copies, data() snapshots, Nova's inventory comparison,
subtree, sharing providers, resources, no-op trait calls."""

from __future__ import annotations

import copy
import pickle
import threading

import os_resource_classes as orc
import os_traits
import pytest

from virtdriver.providers.inventory import MAX_INT, Inventory
from virtdriver.resource_tracker.provider_tree import (
    SHARED_LOCK, InvalidProvider, ProviderNotFound, ProviderTree,
    ProviderTreeError)

CN = "c0000000-0000-4000-8000-000000000000"
CN2 = "c0000000-0000-4000-8000-0000000000c2"
AGG = "a0000000-0000-4000-8000-000000000001"
FULL = {"total": 8, "reserved": 0, "min_unit": 1, "max_unit": 8,
        "step_size": 1, "allocation_ratio": 16.0}


def build(lock=None) -> ProviderTree:
    tree = ProviderTree(lock)
    tree.new_root("cn", CN, generation=0)
    tree.new_child("cn_NUMA0", CN)
    tree.update_inventory("cn_NUMA0", {orc.VCPU: dict(FULL),
                                       orc.MEMORY_MB: {"total": 1024}})
    tree.update_traits("cn", [os_traits.COMPUTE_NODE])
    tree.update_aggregates("cn", [AGG])
    return tree


@pytest.fixture
def tree() -> ProviderTree:
    return build(threading.RLock())


def test_data_is_a_copy_of_plain_containers_the_caller_may_change(tree):
    data = tree.data("cn_NUMA0")
    assert type(data.inventory) is dict
    assert all(type(record) is dict for record in data.inventory.values())
    # the fields given, as Nova's deep copy holds them
    assert data.inventory == {orc.VCPU: FULL, orc.MEMORY_MB: {"total": 1024}}
    assert data.inventory.get(orc.DISK_GB) is None
    data.inventory[orc.VCPU]["reserved"] = 3
    del data.inventory[orc.MEMORY_MB]
    root = tree.data("cn")
    assert type(root.traits) is set and type(root.aggregates) is set
    root.traits.add(os_traits.HW_CPU_X86_AVX)
    root.aggregates.clear()
    # nothing the caller did shows in the tree
    assert tree.data("cn_NUMA0").inventory[orc.VCPU]["reserved"] == 0
    assert tree.data("cn").traits == {os_traits.COMPUTE_NODE}
    assert tree.data("cn").aggregates == {AGG}
    # and the changed dict goes back in
    assert tree.update_inventory("cn_NUMA0", data.inventory)
    record = tree.record("cn_NUMA0").inventory
    assert set(record) == {orc.VCPU} and record[orc.VCPU].reserved == 3


def test_data_has_novas_fields_in_novas_order_plus_root_uuid(tree):
    data = tree.data("cn_NUMA0")
    uuid, name, generation, parent, inventory, traits, aggs, resources = \
        data[:8]
    assert (name, parent, generation, resources) == ("cn_NUMA0", CN, None,
                                                      {})
    assert data.root_uuid == CN and uuid == tree.record("cn_NUMA0").uuid


def test_inventory_is_compared_the_way_nova_compares_it(tree):
    given = {orc.VCPU: dict(FULL), orc.MEMORY_MB: {"total": 1024}}
    assert not tree.has_inventory_changed("cn_NUMA0", given)
    # a field left out is not compared, and the stored value stays
    del given[orc.VCPU]["allocation_ratio"]
    assert not tree.has_inventory_changed("cn_NUMA0", given)
    assert not tree.update_inventory("cn_NUMA0", given)
    assert tree.record("cn_NUMA0").inventory[
        orc.VCPU].allocation_ratio == 16.0
    # a field the stored record was not given is a change, even a default
    given[orc.MEMORY_MB]["reserved"] = 0
    assert tree.has_inventory_changed("cn_NUMA0", given)
    assert tree.update_inventory("cn_NUMA0", given)
    assert tree.data("cn_NUMA0").inventory[orc.MEMORY_MB] == {
        "total": 1024, "reserved": 0}
    # a different set of classes is a change
    assert tree.has_inventory_changed("cn_NUMA0", {orc.VCPU: FULL})


@pytest.mark.parametrize("asked", [
    None, [], "VCPU", {orc.VCPU: None}, {orc.VCPU: {"total": "8"}},
    {orc.VCPU: {"total": -1}, orc.MEMORY_MB: {"total": 1024}},
    {"not a class": {"total": 1}}, {orc.VCPU: {"colour": 1}}])
def test_has_inventory_changed_never_raises_for_values(tree, asked):
    assert tree.has_inventory_changed("cn_NUMA0", asked) is True
    before = tree.record("cn_NUMA0")
    with pytest.raises(InvalidProvider):
        tree.update_inventory("cn_NUMA0", asked)
    assert tree.record("cn_NUMA0") is before


def test_has_inventory_changed_still_raises_for_an_unknown_provider(tree):
    with pytest.raises(ProviderNotFound):
        tree.has_inventory_changed("nope", {})


def test_max_unit_defaults_to_placements_and_may_exceed_total(tree):
    tree.update_inventory("cn", {orc.VCPU: {"total": 4},
                                 orc.PCPU: {"total": 4, "max_unit": 64}})
    inventory = tree.record("cn").inventory
    assert inventory[orc.VCPU].max_unit == MAX_INT
    assert inventory[orc.PCPU].max_unit == 64


def test_a_deep_copy_is_independent_and_shares_the_lock(tree):
    copied = copy.deepcopy(tree)
    assert copied.lock is tree.lock
    assert copied.to_json() == tree.to_json()
    copied.update_inventory("cn_NUMA0", {})
    copied.new_child("cn_pgpu0", CN)
    tree.add_traits("cn", os_traits.HW_CPU_X86_AVX)
    assert tree.record("cn_NUMA0").inventory and not tree.exists("cn_pgpu0")
    assert os_traits.HW_CPU_X86_AVX not in copied.record("cn").traits
    assert copied.subtree_stamp(CN) != tree.subtree_stamp(CN)


def test_trees_share_one_lock_unless_given_their_own():
    assert ProviderTree().lock is ProviderTree().lock is SHARED_LOCK
    own = threading.RLock()
    assert ProviderTree(own).lock is own


@pytest.mark.parametrize("own_lock", [True, False])
def test_pickle_round_trips(own_lock):
    tree = build(threading.RLock() if own_lock else None)
    tree.update_resources("cn", {"CUSTOM_R": {"r1", "r2"}})
    back = pickle.loads(pickle.dumps(tree))
    assert back.to_json() == tree.to_json()
    assert back.data("cn_NUMA0") == tree.data("cn_NUMA0")
    assert back.data("cn").resources == {"CUSTOM_R": {"r1", "r2"}}
    assert back.subtree_stamp(CN) == tree.subtree_stamp(CN)
    assert (back.lock is SHARED_LOCK) is not own_lock
    back.update_inventory("cn_NUMA0", {})
    assert tree.record("cn_NUMA0").inventory


def test_subtree_holds_one_root_and_is_independent(tree):
    tree.new_root("cn2", CN2)
    sub = tree.subtree(CN)
    assert sub.get_provider_uuids() == tree.get_provider_uuids(CN)
    assert not sub.exists("cn2") and sub.lock is tree.lock
    sub.update_inventory("cn_NUMA0", {})
    assert tree.record("cn_NUMA0").inventory
    with pytest.raises(ProviderTreeError, match="not a root"):
        tree.subtree("cn_NUMA0")
    with pytest.raises(ProviderNotFound):
        tree.subtree("nope")


def test_has_sharing_provider(tree):
    assert not tree.has_sharing_provider(orc.DISK_GB)
    tree.new_root("nfs", CN2)
    tree.update_inventory("nfs", {orc.DISK_GB: {"total": 100}})
    assert not tree.has_sharing_provider(orc.DISK_GB)
    tree.add_traits("nfs", os_traits.MISC_SHARES_VIA_AGGREGATE)
    assert tree.has_sharing_provider(orc.DISK_GB)
    assert not tree.has_sharing_provider(orc.VCPU)


def test_update_resources_keeps_deep_copies(tree):
    resource = {"id": "pmem0"}
    with pytest.raises(InvalidProvider, match="resources"):
        tree.update_resources("cn", {"CUSTOM_PMEM": [resource]})  # unhashable
    resources = {"CUSTOM_PMEM": {"pmem0", "pmem1"}}
    assert tree.update_resources("cn", resources)
    assert not tree.update_resources("cn", resources)
    handed = tree.data("cn").resources
    handed["CUSTOM_PMEM"].clear()
    assert tree.data("cn").resources == resources
    with pytest.raises(ProviderNotFound):
        tree.update_resources("nope", {})


def test_adding_or_removing_no_traits_is_a_no_op_even_for_no_provider(tree):
    assert tree.add_traits("bogus-uuid") is False
    assert tree.remove_traits("bogus-uuid") is False
    with pytest.raises(ProviderNotFound):
        tree.add_traits("bogus-uuid", os_traits.COMPUTE_NODE)


def test_records_still_read_without_a_copy(tree):
    assert tree.record("cn") is tree.record(CN)
    assert tree.record("cn_NUMA0").inventory[orc.VCPU] == Inventory(
        8, 0, 1, 8, 1, 16.0)

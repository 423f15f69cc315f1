"""ProviderTree: Nova-compatible calls, validation, snapshots, diff, JSON."""

from __future__ import annotations

import json
import threading
import uuid

import os_resource_classes as orc
import os_traits
import pytest

from virtdriver.providers.inventory import MAX_INT, Inventory
from virtdriver.resource_tracker.provider_tree import (
    InvalidProvider, ProviderExists, ProviderNotFound, ProviderTree,
    ProviderTreeError, TreeSnapshot, diff)

CN = "c0000000-0000-4000-8000-000000000000"
NUMA0 = "c0000000-0000-4000-8000-000000000001"
NUMA1 = "c0000000-0000-4000-8000-000000000002"
PF = "c0000000-0000-4000-8000-000000000003"
AGG = "a0000000-0000-4000-8000-000000000000"
AGG2 = "a0000000-0000-4000-8000-000000000001"
AVX = os_traits.HW_CPU_X86_AVX
SSE = os_traits.HW_CPU_X86_SSE
CUSTOM = "CUSTOM_GOLD"


@pytest.fixture
def tree() -> ProviderTree:
    """cn1 -> numa0 -> pf0, cn1 -> numa1."""
    tree = ProviderTree()
    tree.new_root("cn1", CN, generation=1)
    tree.new_child("numa0", "cn1", NUMA0)
    tree.new_child("numa1", CN, NUMA1)
    tree.new_child("pf0", "numa0", PF)
    return tree


# -- creating, finding, removing -------------------------------------------


def test_every_provider_is_found_by_name_and_by_uuid(tree):
    for name, provider_uuid in [("cn1", CN), ("numa0", NUMA0),
                                ("numa1", NUMA1), ("pf0", PF)]:
        assert tree.record(name) is tree.record(provider_uuid)
        assert tree.record(name).uuid == provider_uuid
        assert tree.exists(name) and tree.exists(provider_uuid)
    assert not tree.exists("nope")
    assert len(tree) == 4


def test_records_know_parent_root_and_generation(tree):
    pf = tree.record("pf0")
    assert (pf.parent_uuid, pf.root_uuid, pf.generation) == (NUMA0, CN, None)
    assert tree.record("cn1").parent_uuid is None
    assert tree.record("cn1").root_uuid == CN
    assert tree.record("cn1").generation == 1


def test_a_uuid_is_made_up_when_not_given():
    tree = ProviderTree()
    made = tree.new_root("cn1")
    assert str(uuid.UUID(made)) == made
    assert tree.new_child("numa0", made) != made


def test_provider_uuids_list_parents_before_children(tree):
    assert tree.get_provider_uuids() == [CN, NUMA0, PF, NUMA1]
    assert tree.get_provider_uuids("numa0") == [NUMA0, PF]
    assert tree.get_provider_uuids_in_tree("pf0") == [CN, NUMA0, PF, NUMA1]
    assert [root.name for root in tree.roots] == ["cn1"]


def test_roots_keep_creation_order():
    tree = ProviderTree()
    names = [f"node{n}" for n in range(5)]
    for name in reversed(names):
        tree.new_root(name)
    assert [root.name for root in tree.roots] == names[::-1]


def test_remove_takes_the_subtree_and_frees_its_names(tree):
    tree.remove("numa0")
    assert tree.get_provider_uuids() == [CN, NUMA1]
    assert not tree.exists("pf0") and not tree.exists(PF)
    assert tree.new_child("pf0", "numa1", PF) == PF
    assert tree.record("pf0").parent_uuid == NUMA1


def test_removing_a_root_leaves_other_roots(tree):
    other = tree.new_root("cn2")
    tree.remove(CN)
    assert tree.get_provider_uuids() == [other]


@pytest.mark.parametrize("name, new_uuid, taken", [
    ("numa0", None, "numa0"),          # name taken
    ("numa9", NUMA0, NUMA0),           # uuid taken
    (NUMA1, None, NUMA1),              # name is another provider's uuid
])
def test_names_and_uuids_are_unique_in_the_tree(tree, name, new_uuid, taken):
    with pytest.raises(ProviderExists) as err:
        tree.new_child(name, "cn1", new_uuid)
    assert err.value.value == taken
    assert "cannot add provider" in str(err.value)
    assert isinstance(err.value, ValueError)
    assert len(tree) == 4


def test_a_provider_may_be_named_by_its_own_uuid():
    tree = ProviderTree()
    node = "d0000000-0000-4000-8000-000000000000"
    assert tree.new_root(node, node) == node
    assert tree.record(node).name == node


def test_unknown_provider_is_a_value_error_naming_it(tree):
    for call in (lambda: tree.record("ghost"), lambda: tree.remove("ghost"),
                 lambda: tree.new_child("x", "ghost"),
                 lambda: tree.update_traits("ghost", [])):
        with pytest.raises(ProviderNotFound, match="'ghost'"):
            call()
    assert issubclass(ProviderNotFound, ValueError)


@pytest.mark.parametrize("name, new_uuid, field, text", [
    ("", None, "name", "1 to 200"),
    ("x" * 201, None, "name", "1 to 200"),
    ("cn9", CN.upper(), "uuid", CN),          # hint gives canonical form
    ("cn9", "not-a-uuid", "uuid", "uuid4"),
])
def test_bad_names_and_uuids_are_refused(name, new_uuid, field, text):
    tree = ProviderTree()
    with pytest.raises(InvalidProvider) as err:
        tree.new_root(name, new_uuid)
    assert err.value.field == field
    assert text in err.value.hint or text in err.value.reason
    assert len(tree) == 0


@pytest.mark.parametrize("generation", [-1, True, "3", 1.0])
def test_bad_generations_are_refused(tree, generation):
    with pytest.raises(InvalidProvider, match="generation"):
        tree.update_traits("cn1", [], generation=generation)
    assert tree.record("cn1").generation == 1


# -- inventory ---------------------------------------------------------------


def test_inventory_gets_placements_defaults_max_unit_included(tree):
    assert tree.update_inventory("numa0", {orc.VCPU: {"total": 8}})
    record = tree.record("numa0").inventory[orc.VCPU]
    assert record == Inventory(8, 0, 1, MAX_INT, 1, 1.0)
    assert record.given == ("total",)
    assert record["total"] == 8 and record["allocation_ratio"] == 1.0
    with pytest.raises(KeyError):
        record["bogus"]
    assert tree.has_inventory("numa0") and not tree.has_inventory("numa1")


def test_update_inventory_says_whether_anything_changed(tree):
    full = {"total": 8, "reserved": 0, "min_unit": 1, "max_unit": 8,
            "step_size": 1, "allocation_ratio": 1.0}
    assert tree.update_inventory("numa0", {orc.VCPU: full})
    # Nova's rule: a field left out is not compared (the stored one stays)
    assert not tree.has_inventory_changed("numa0", {orc.VCPU: {"total": 8}})
    assert not tree.update_inventory("numa0", {orc.VCPU: {"total": 8}})
    assert tree.record("numa0").inventory[orc.VCPU].max_unit == 8
    assert not tree.update_inventory("numa0", {orc.VCPU: Inventory(8, 0, 1, 8)})
    assert tree.has_inventory_changed("numa0", {orc.VCPU: {"total": 9}})
    assert tree.update_inventory("numa0", {})
    assert tree.record("numa0").inventory == {}


def test_generation_is_stored_even_when_nothing_else_changes(tree):
    tree.update_inventory("numa0", {orc.VCPU: {"total": 8}})
    assert not tree.update_inventory("numa0", {orc.VCPU: {"total": 8}},
                                     generation=7)
    assert tree.record("numa0").generation == 7


def test_inventory_records_are_read_only(tree):
    tree.update_inventory("numa0", {orc.VCPU: {"total": 8}})
    inventory = tree.record("numa0").inventory
    with pytest.raises(TypeError):
        inventory[orc.VCPU] = Inventory(1)
    with pytest.raises(AttributeError):
        inventory[orc.VCPU].total = 1


@pytest.mark.parametrize("record, field", [
    ({"total": 0}, "total"),
    ({"total": MAX_INT + 1}, "total"),
    ({"total": 8.0}, "total"),
    ({"total": True}, "total"),
    ({"reserved": 1}, "total"),                      # total missing
    ({"total": 8, "reserved": -1}, "reserved"),
    ({"total": 8, "reserved": 9}, "reserved"),
    ({"total": 8, "min_unit": 0}, "min_unit"),
    ({"total": 8, "min_unit": MAX_INT + 1}, "min_unit"),
    ({"total": 8, "max_unit": 0}, "max_unit"),
    ({"total": 8, "max_unit": MAX_INT + 1}, "max_unit"),
    ({"total": 8, "step_size": 0}, "step_size"),
    ({"total": 8, "allocation_ratio": -1.5}, "allocation_ratio"),
    ({"total": 8, "allocation_ratio": 4e38}, "allocation_ratio"),
    ({"total": 8, "allocation_ratio": float("inf")}, "allocation_ratio"),
    ({"total": 8, "allocation_ratio": "16"}, "allocation_ratio"),
    ({"total": 8, "colour": 1}, "colour"),
])
def test_each_inventory_rule_names_provider_class_and_field(tree, record,
                                                            field):
    tree.update_inventory("numa0", {orc.VCPU: {"total": 2}})
    before = tree.record("numa0")
    with pytest.raises(InvalidProvider) as err:
        tree.update_inventory("numa0", {orc.MEMORY_MB: {"total": 1},
                                        orc.VCPU: record})
    assert err.value.field == f"inventories.{orc.VCPU}.{field}"
    assert str(err.value).startswith(f"provider 'numa0' ({NUMA0}): ")
    assert tree.record("numa0") is before  # unchanged on error


def test_validation_is_no_stricter_than_placement(tree):
    # Placement's schema lets max_unit exceed total (up to 2**31-1) and
    # checks neither min_unit against max_unit nor a ratio of 0 (capacity
    # 0 is allowed from microversion 1.26 on).
    assert tree.update_inventory("numa0", {
        orc.VCPU: {"total": 8, "max_unit": MAX_INT},
        orc.MEMORY_MB: {"total": 8, "min_unit": 5, "max_unit": 4},
        orc.DISK_GB: {"total": 8, "allocation_ratio": 0}})
    inventory = tree.record("numa0").inventory
    assert inventory[orc.VCPU].max_unit == MAX_INT
    assert inventory[orc.DISK_GB].allocation_ratio == 0.0
    with pytest.raises(InvalidProvider, match="greater than total"):
        tree.update_inventory("numa0", {orc.VCPU: {"total": 8,
                                                   "reserved": 9}})


def test_reserved_may_equal_total_and_custom_classes_are_allowed(tree):
    assert tree.update_inventory("numa0", {
        orc.VCPU: {"total": 4, "reserved": 4},
        "CUSTOM_FPGA": {"total": 1, "allocation_ratio": 2}})
    assert tree.record("numa0").inventory["CUSTOM_FPGA"].allocation_ratio == 2.0


@pytest.mark.parametrize("inventory, text", [
    ({"VCPUS": {"total": 1}}, "'VCPUS' is neither"),
    ({"CUSTOM_": {"total": 1}}, "'CUSTOM_' is neither"),
    ({"custom_x": {"total": 1}}, "'custom_x' is neither"),
    ({7: {"total": 1}}, "7 is not a string"),
    ({orc.VCPU: 8}, "is a int, not a mapping"),
    ([orc.VCPU], "is a list, not a mapping"),
])
def test_bad_resource_classes_and_shapes_are_refused(tree, inventory, text):
    with pytest.raises(InvalidProvider, match="provider 'numa0'") as err:
        tree.update_inventory("numa0", inventory)
    assert text in str(err.value)


# -- traits and aggregates -----------------------------------------------------


def test_trait_calls_say_whether_anything_changed(tree):
    assert tree.update_traits("cn1", [AVX, CUSTOM])
    assert not tree.update_traits("cn1", {CUSTOM, AVX})
    assert tree.add_traits("cn1", SSE)
    assert not tree.add_traits("cn1", SSE)
    assert tree.remove_traits("cn1", AVX, "CUSTOM_NEVER_SET")
    assert not tree.remove_traits("cn1", AVX)
    assert tree.record("cn1").traits == {SSE, CUSTOM}
    assert tree.has_traits("cn1", [SSE]) and not tree.has_traits("cn1", [AVX])
    assert tree.have_traits_changed("cn1", [SSE])
    assert not tree.have_traits_changed("cn1", [SSE, CUSTOM])


@pytest.mark.parametrize("trait", ["hw_cpu_x86_avx", "CUSTOM_lower",
                                   "CUSTOM_", "HW-CPU", "X" * 256])
def test_invalid_traits_name_provider_and_trait(tree, trait):
    tree.add_traits("numa1", AVX)
    with pytest.raises(InvalidProvider) as err:
        tree.add_traits("numa1", SSE, trait)
    assert err.value.field == "traits"
    assert f"provider 'numa1' ({NUMA1})" in str(err.value)
    assert repr(trait) in str(err.value)
    assert tree.record("numa1").traits == {AVX}


def test_a_well_formed_name_os_traits_lacks_is_kept_as_placement_would(tree):
    # A newer os-traits (and Placement) may hold it; Nova's tests set one.
    assert tree.add_traits("numa1", "HW_CPU_X86_NOT_YET_A_TRAIT")
    assert tree.record("numa1").traits == {"HW_CPU_X86_NOT_YET_A_TRAIT"}


def test_a_single_string_is_not_taken_as_a_list_of_traits(tree):
    with pytest.raises(InvalidProvider, match="not a single string"):
        tree.update_traits("cn1", AVX)


def test_aggregate_calls_mirror_the_trait_calls(tree):
    assert tree.update_aggregates("cn1", [AGG], generation=4)
    assert tree.add_aggregates("cn1", AGG2)
    assert tree.in_aggregates("cn1", [AGG, AGG2])
    assert tree.remove_aggregates("cn1", AGG)
    assert tree.record("cn1").aggregates == {AGG2}
    assert tree.record("cn1").generation == 4
    assert not tree.have_aggregates_changed("cn1", [AGG2])
    with pytest.raises(InvalidProvider, match="aggregates: 'agg1'"):
        tree.add_aggregates("cn1", "agg1")


# -- snapshots and diff ----------------------------------------------------------


def test_a_snapshot_is_unaffected_by_later_writes(tree):
    tree.update_inventory("pf0", {orc.SRIOV_NET_VF: {"total": 4}})
    snap = tree.snapshot()
    json_before = snap.to_json()
    tree.update_inventory("pf0", {orc.SRIOV_NET_VF: {"total": 8}})
    tree.add_traits("numa1", AVX)
    tree.new_child("numa2", "cn1")
    tree.new_child("pf1", "numa0")       # numa0's child set was shared
    tree.remove("numa1")
    assert snap.to_json() == json_before
    assert snap.get_provider_uuids() == [CN, NUMA0, PF, NUMA1]
    assert snap.record("pf0").inventory[orc.SRIOV_NET_VF].total == 4
    assert isinstance(snap, TreeSnapshot) and snap.snapshot() is snap
    assert not hasattr(snap, "update_inventory")


def test_unchanged_providers_are_shared_between_snapshots(tree):
    first = tree.snapshot()
    tree.add_traits("pf0", AVX)
    second = tree.snapshot()
    assert second.record("cn1") is first.record("cn1")
    assert second.record("pf0") is not first.record("pf0")


def test_diff_of_equal_trees_is_empty(tree):
    assert not diff(tree.snapshot(), tree)
    assert len(diff(tree, ProviderTree.from_json(tree.to_json()))) == 0


def test_diff_lists_every_kind_of_change_in_sync_order(tree):
    tree.update_inventory("numa0", {orc.VCPU: {"total": 4},
                                    orc.MEMORY_MB: {"total": 1024}})
    tree.update_traits("numa0", [AVX])
    tree.update_aggregates("numa0", [AGG])
    old = tree.snapshot()
    tree.update_inventory("numa0", {orc.VCPU: {"total": 8},
                                    orc.PCPU: {"total": 2}})
    tree.update_traits("numa0", [SSE])
    tree.update_aggregates("numa0", [AGG2])
    tree.remove("numa1")
    tree.remove("pf0")
    added = tree.new_child("numa2", "cn1")
    tree.add_traits("numa2", CUSTOM)
    tree.update_traits("cn1", [], generation=9)  # generation only: no change

    changes = diff(old, tree)
    assert changes.deleted == [NUMA1, PF]   # reverse of the old order
    assert changes.created == [added]
    assert changes.get(CN) is None
    numa0 = changes.get(NUMA0)
    assert dict(numa0.inventory) == {
        orc.MEMORY_MB: (Inventory(1024), None),
        orc.PCPU: (None, Inventory(2)),
        orc.VCPU: (Inventory(4), Inventory(8))}
    assert (numa0.traits_added, numa0.traits_removed) == ({SSE}, {AVX})
    assert (numa0.aggregates_added, numa0.aggregates_removed) == (
        {AGG2}, {AGG})
    assert changes.get(added).traits_added == {CUSTOM}
    assert [entry.uuid for entry in changes] == [NUMA1, PF, NUMA0, added]


def test_diff_deletes_children_before_parents(tree):
    old = tree.snapshot()
    tree.remove("cn1")
    changes = diff(old, tree)
    assert changes.deleted == [NUMA1, PF, NUMA0, CN]
    assert changes.created == []


def test_diff_reports_renames_and_reparenting(tree):
    old = tree.snapshot()
    tree.populate_from_iterable([
        {"uuid": NUMA1, "name": "numa-one", "parent_provider_uuid": CN},
        {"uuid": PF, "name": "pf0", "parent_provider_uuid": NUMA1}])
    changes = diff(old, tree)
    assert changes.get(NUMA1).renamed_from == "numa1"
    assert [(e.uuid, e.deleted, e.created) for e in changes
            if e.uuid == PF] == [(PF, True, False), (PF, False, True)]


# -- populate_from_iterable --------------------------------------------------


def test_populate_adds_in_any_order_and_replaces_subtrees(tree):
    tree.update_traits("numa0", [AVX])
    new_uuid = "c0000000-0000-4000-8000-0000000000ff"
    tree.populate_from_iterable([
        {"uuid": new_uuid, "name": "pf9", "parent_provider_uuid": NUMA0},
        {"uuid": NUMA0, "name": "numa0", "parent_provider_uuid": CN,
         "generation": 3}])
    assert tree.get_provider_uuids() == [CN, NUMA1, NUMA0, new_uuid]
    assert tree.record("numa0").traits == frozenset()   # replaced, as Nova
    assert tree.record("numa0").generation == 3
    assert not tree.exists(PF)


@pytest.mark.parametrize("dicts, text", [
    ([{"uuid": PF, "name": "x", "parent_provider_uuid": AGG}],
     "neither in the tree nor among the providers given"),
    ([{"uuid": AGG, "name": "a", "parent_provider_uuid": AGG2},
      {"uuid": AGG2, "name": "b", "parent_provider_uuid": AGG}],
     "cycle"),
    ([{"uuid": AGG, "name": "a"}, {"uuid": AGG, "name": "b"}],
     "given for two providers"),
    ([{"uuid": AGG, "name": "numa1"}], "already the name or uuid"),
    ([{"uuid": AGG, "name": "a", "traits": ["nope"]}], "'nope'"),
])
def test_populate_is_all_or_nothing(tree, dicts, text):
    before = tree.to_json()
    with pytest.raises(ProviderTreeError, match=text):
        tree.populate_from_iterable(dicts)
    assert tree.to_json() == before


# -- JSON ------------------------------------------------------------------------


def test_json_has_placements_shapes(tree):
    tree.update_inventory("numa0", {orc.VCPU: {"total": 8, "reserved": 1}})
    tree.update_traits("numa0", [SSE, AVX])
    tree.update_aggregates("numa0", [AGG2, AGG])
    document = tree.to_json()
    assert [p["uuid"] for p in document["providers"]] == [CN, NUMA0, PF,
                                                          NUMA1]
    assert document["providers"][1] == {
        "uuid": NUMA0, "name": "numa0", "parent_provider_uuid": CN,
        "root_provider_uuid": CN, "generation": None,
        "inventories": {orc.VCPU: {
            "total": 8, "reserved": 1, "min_unit": 1, "max_unit": MAX_INT,
            "step_size": 1, "allocation_ratio": 1.0}},
        "traits": sorted([SSE, AVX]), "aggregates": [AGG, AGG2]}
    assert json.loads(json.dumps(document)) == document


def test_json_round_trips_from_dict_and_text(tree):
    tree.update_inventory("pf0", {orc.SRIOV_NET_VF: {"total": 4}})
    tree.add_traits("pf0", CUSTOM)
    document = tree.to_json()
    assert ProviderTree.from_json(document).to_json() == document
    assert ProviderTree.from_json(json.dumps(document)).to_json() == document


def test_from_json_accepts_children_before_parents(tree):
    document = tree.to_json()
    document["providers"].append(document["providers"].pop(0))  # root last
    assert ProviderTree.from_json(document).to_json() == tree.to_json()


@pytest.mark.parametrize("edit, field", [
    (lambda doc: doc["providers"][1].update(colour="red"), "colour"),
    (lambda doc: doc["providers"][1].pop("name"), "name"),
    (lambda doc: doc["providers"][1].update(root_provider_uuid=NUMA1),
     "root_provider_uuid"),
    (lambda doc: doc["providers"][1]["inventories"].update(
        VCPU={"total": -1}), "inventories.VCPU.total"),
    (lambda doc: doc["providers"][1].update(generation="1"), "generation"),
    (lambda doc: doc.pop("providers"), "providers"),
    (lambda doc: doc["providers"].append(3), "(provider)"),
])
def test_from_json_names_the_bad_field(tree, edit, field):
    document = tree.to_json()
    edit(document)
    with pytest.raises(InvalidProvider) as err:
        ProviderTree.from_json(document)
    assert err.value.field == field


def test_from_json_refuses_text_that_is_not_json():
    with pytest.raises(InvalidProvider, match="is not JSON"):
        ProviderTree.from_json("{providers")


# -- porting and threads ---------------------------------------------------------


def nova_style_update_provider_tree(provider_tree, nodename):
    """What a Nova driver's update_provider_tree does, verbatim calls."""
    inventory = {orc.VCPU: {"total": 16, "min_unit": 1, "max_unit": 16,
                            "step_size": 1, "allocation_ratio": 16.0,
                            "reserved": 0},
                 orc.MEMORY_MB: {"total": 4096, "reserved": 512}}
    provider_tree.update_inventory(nodename, inventory)
    for cell in range(2):
        name = f"{nodename}_NUMA{cell}"
        if not provider_tree.exists(name):
            provider_tree.new_child(name, nodename)
        provider_tree.update_inventory(name, {orc.PCPU: {"total": 4}})
    traits = set(provider_tree.record(nodename).traits)
    traits.add(AVX)
    provider_tree.update_traits(nodename, traits)
    provider_tree.add_traits(nodename, os_traits.COMPUTE_NODE)
    return [root.uuid for root in provider_tree.roots]


def test_nova_driver_code_ports_over_unchanged():
    tree = ProviderTree()
    tree.new_root("host1", CN, generation=0)
    assert nova_style_update_provider_tree(tree, "host1") == [CN]
    assert nova_style_update_provider_tree(tree, "host1") == [CN]  # idempotent
    assert len(tree.get_provider_uuids(CN)) == 3
    assert tree.record("host1").traits == {AVX, os_traits.COMPUTE_NODE}
    assert tree.record("host1_NUMA1").inventory[orc.PCPU].total == 4


def test_concurrent_writers_and_snapshots_stay_consistent():
    tree = ProviderTree()
    root = tree.new_root("root")
    snapshots = []

    def worker(number: int) -> None:
        for child in range(200):
            provider = tree.new_child(f"w{number}-{child}", root)
            tree.add_traits(provider, CUSTOM)
            if child % 50 == 0:
                snapshots.append(tree.snapshot())

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(tree) == 1 + 4 * 200
    assert all(tree.record(u).traits == {CUSTOM}
               for u in tree.get_provider_uuids()[1:])
    for snap in snapshots:
        uuids = snap.get_provider_uuids()
        assert len(uuids) == len(snap) and uuids[0] == root
        assert all(snap.record(u).parent_uuid == root for u in uuids[1:])

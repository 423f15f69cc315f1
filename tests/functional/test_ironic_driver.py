"""IronicDriver, loaded by name through stevedore, against a real ProviderTree.

Inventories are real files in ``tmp_path``.  Every rewrite sets a distinct
modification time (``os.utime``) so change detection never depends on the
file system's timestamp granularity.
"""

from __future__ import annotations

import itertools
import json
import os
import pathlib

import os_traits
import pytest

from virtdriver.capabilities.traits.capability_flags import CAPABILITY_TRAITS
from virtdriver.capabilities.traits.model import TraitState
from virtdriver.conf import make_conf
from virtdriver.drivers import ironic, ironic_inventory
from virtdriver.drivers.base import DriverError, NodeNotFoundError
from virtdriver.drivers.ironic import (
    IRONIC_CAPABILITIES, InventoryReadError, IronicDriver)
from virtdriver.drivers.loader import available_drivers, load_driver
from virtdriver.resource_tracker.provider_tree import ProviderTree

GOLD = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
SILVER = "2c5e9a51-7f0e-4e55-9a43-0d3b2f7e8a10"
RC = "CUSTOM_BAREMETAL_GOLD"
_ticks = itertools.count(1)


def node(uuid: str = GOLD, **fields) -> dict:
    return {"uuid": uuid, "name": "rack1-u07" if uuid == GOLD else "rack2-u01",
            "resource_class": "baremetal.gold", **fields}


def write(path: pathlib.Path, *nodes: dict, text: str | None = None) -> None:
    path.write_text(json.dumps({"nodes": list(nodes)}) if text is None
                    else text)
    tick = next(_ticks) * 1_000_000_000
    os.utime(path, ns=(tick, tick))


@pytest.fixture
def inventory(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "nodes.json"
    write(path, node(traits=["CUSTOM_RAID5"]), node(SILVER))
    return path


@pytest.fixture
def driver(inventory: pathlib.Path) -> IronicDriver:
    loaded = load_driver("ironic", inventory_path=str(inventory))
    loaded.init_host("conductor-1")
    return loaded


def update_all(driver: IronicDriver, tree: ProviderTree) -> None:
    for nodename in driver.get_available_nodes():
        driver.update_provider_tree(tree, nodename)


# --- loading and nodes -----------------------------------------------------

def test_loads_by_name_through_stevedore(driver: IronicDriver) -> None:
    assert type(driver) is IronicDriver
    info = {i.name: i for i in available_drivers()}["ironic"]
    assert info.ok and info.target == "virtdriver.drivers.ironic:IronicDriver"


def test_an_inventory_file_is_required() -> None:
    with pytest.raises(DriverError, match="pass inventory_path="):
        load_driver("ironic")


def test_nodes_are_uuids_sorted_and_names_are_aliases(
        driver: IronicDriver) -> None:
    assert driver.get_available_nodes() == sorted([GOLD, SILVER])
    caps = driver.node_capabilities("rack1-u07")
    assert caps.nodename == GOLD
    assert caps.facts["name"] == "rack1-u07"
    assert caps.facts["placement_resource_class"] == RC
    with pytest.raises(NodeNotFoundError, match="'rack9'"):
        driver.node_capabilities("rack9")


def test_nodes_before_init_host_is_an_error(inventory) -> None:
    with pytest.raises(DriverError, match="call init_host"):
        IronicDriver(inventory_path=inventory).get_available_nodes()


# --- the tree --------------------------------------------------------------

def test_one_root_per_node_named_and_identified_by_its_uuid(
        driver: IronicDriver) -> None:
    tree = ProviderTree()
    update_all(driver, tree)
    assert [(r.name, r.uuid, r.parent_uuid) for r in tree.roots] == [
        (GOLD, GOLD, None), (SILVER, SILVER, None)]
    record = tree.record(GOLD).inventory[RC]
    assert (record.total, record.reserved, record.min_unit, record.max_unit,
            record.step_size, record.allocation_ratio) == (1, 0, 1, 1, 1, 1.0)
    assert list(tree.record(GOLD).inventory) == [RC]


@pytest.mark.parametrize("fields, reserved", [
    ({}, 0), ({"provision_state": "active"}, 0),
    ({"maintenance": True}, 1), ({"provision_state": "manageable"}, 1),
    ({"provision_state": "cleaning"}, 1),
    ({"provision_state": "active", "maintenance": True}, 1)])
def test_unavailable_nodes_reserve_their_unit(
        tmp_path, fields, reserved) -> None:
    path = tmp_path / "nodes.yaml"
    write(path, text=json.dumps([node(**fields)]))  # JSON is valid YAML
    drv = load_driver("ironic", inventory_path=path)
    drv.init_host("c")
    tree = ProviderTree()
    drv.update_provider_tree(tree, GOLD)
    assert tree.record(GOLD).inventory[RC].reserved == reserved


def test_full_trait_list_is_asserted_with_evidence(
        driver: IronicDriver, inventory) -> None:
    tree = ProviderTree()
    update_all(driver, tree)
    assert "CUSTOM_RAID5" in tree.record(GOLD).traits
    assert "CUSTOM_RAID5" not in tree.record(SILVER).traits
    (evidence,) = driver.node_capabilities(GOLD).traits.results[
        "CUSTOM_RAID5"].evidence
    assert evidence.sentence() == (
        f"node rack1-u07 ({GOLD}) inspection data lists CUSTOM_RAID5")
    assert evidence.source == str(inventory)


def test_capability_traits_follow_the_capabilities_dict(driver) -> None:
    tree = ProviderTree()
    tree.new_root(GOLD, GOLD)
    tree.add_traits(GOLD, os_traits.COMPUTE_VOLUME_MULTI_ATTACH)
    driver.update_provider_tree(tree, GOLD)
    traits = tree.record(GOLD).traits
    assert {os_traits.COMPUTE_IMAGE_TYPE_RAW, os_traits.COMPUTE_IMAGE_TYPE_QCOW2,
            os_traits.COMPUTE_NET_ATTACH_INTERFACE} <= traits
    assert os_traits.COMPUTE_IMAGE_TYPE_VMDK not in traits
    # Owned everywhere: setting it cannot turn multiattach on.
    assert os_traits.COMPUTE_VOLUME_MULTI_ATTACH not in traits


def test_every_capability_is_declared() -> None:
    assert set(CAPABILITY_TRAITS) <= set(IRONIC_CAPABILITIES)
    assert IRONIC_CAPABILITIES["supports_multiattach"] is False


def test_image_type_exclude_list_from_conf(inventory, tmp_path) -> None:
    conf_file = tmp_path / "virtdriver.conf"
    conf_file.write_text("[compute]\nimage_type_exclude_list = qcow2\n")
    drv = load_driver("ironic", inventory_path=inventory,
                      conf=make_conf(config_files=[conf_file]))
    drv.init_host("c")
    report = drv.node_capabilities(GOLD).traits
    assert os_traits.COMPUTE_IMAGE_TYPE_QCOW2 in report.unasserted
    assert os_traits.COMPUTE_IMAGE_TYPE_RAW in report.asserted


def test_trait_changes_add_and_remove(driver, inventory) -> None:
    tree = ProviderTree()
    update_all(driver, tree)
    tree.add_traits(SILVER, "CUSTOM_RAID5")  # e.g. set by an earlier tool
    write(inventory, node(), node(SILVER, trait_changes={
        "add": ["CUSTOM_GPU"], "remove": ["CUSTOM_RAID5"]}))
    driver.update_provider_tree(tree, SILVER)
    traits = tree.record(SILVER).traits
    assert "CUSTOM_GPU" in traits and "CUSTOM_RAID5" not in traits
    assert driver.node_capabilities(SILVER).traits.results[
        "CUSTOM_RAID5"].evidence[0].detail == "lists CUSTOM_RAID5 as removed"


def test_foreign_traits_survive_and_owned_ones_are_reasserted(
        driver) -> None:
    tree = ProviderTree()
    update_all(driver, tree)
    tree.add_traits(GOLD, "CUSTOM_RACK_7", os_traits.COMPUTE_STATUS_DISABLED)
    tree.remove_traits(GOLD, "CUSTOM_RAID5")
    # CUSTOM_RAID5 is owned on GOLD only: set by hand on SILVER, it stays.
    tree.add_traits(SILVER, "CUSTOM_RAID5")
    update_all(driver, tree)
    assert {"CUSTOM_RACK_7", os_traits.COMPUTE_STATUS_DISABLED,
            "CUSTOM_RAID5"} <= tree.record(GOLD).traits
    assert "CUSTOM_RAID5" in tree.record(SILVER).traits


def test_ownership_is_per_node_and_the_class_one_is_the_union(
        driver) -> None:
    gold, silver = driver.ownership_for(GOLD), driver.ownership_for(SILVER)
    assert gold.owns("CUSTOM_RAID5") and not silver.owns("CUSTOM_RAID5")
    assert silver.owns(os_traits.COMPUTE_IMAGE_TYPE_RAW)
    assert driver.ownership.static == gold.static | silver.static
    for nodename in driver.get_available_nodes():
        report = driver.node_capabilities(nodename).traits
        assert report.invalid == ()
        assert set(report.results) == driver.ownership_for(nodename).static


def test_a_trait_no_longer_named_is_removed_once_then_foreign(
        driver, inventory) -> None:
    tree = ProviderTree()
    update_all(driver, tree)
    write(inventory, node(traits=[]), node(SILVER))
    assert driver.ownership_for(GOLD).owns("CUSTOM_RAID5")
    assert driver.node_capabilities(GOLD).traits.state("CUSTOM_RAID5") \
        is TraitState.UNASSERTED
    driver.update_provider_tree(tree, GOLD)
    assert "CUSTOM_RAID5" not in tree.record(GOLD).traits
    # Removed and forgotten: now someone else's to set.
    assert not driver.ownership_for(GOLD).owns("CUSTOM_RAID5")
    assert not driver.ownership.owns("CUSTOM_RAID5")
    tree.add_traits(GOLD, "CUSTOM_RAID5")
    driver.update_provider_tree(tree, GOLD)
    assert "CUSTOM_RAID5" in tree.record(GOLD).traits


def test_a_trait_set_by_others_is_not_taken_over_when_dropped(
        driver, inventory) -> None:
    """Only what the driver itself set is remembered as stale."""
    tree = ProviderTree()
    write(inventory, node(trait_changes={"remove": ["CUSTOM_RAID5"]}))
    driver.update_provider_tree(tree, GOLD)
    write(inventory, node())
    tree.add_traits(GOLD, "CUSTOM_RAID5")
    driver.update_provider_tree(tree, GOLD)
    assert "CUSTOM_RAID5" in tree.record(GOLD).traits


def test_inspection_data_may_not_name_capability_traits(
        driver, inventory) -> None:
    write(inventory, node(traits=[os_traits.COMPUTE_VOLUME_MULTI_ATTACH]))
    with pytest.raises(InventoryReadError) as info:
        driver.get_available_nodes(refresh=True)
    assert f"node 0 ({GOLD})" in str(info.value)
    assert "COMPUTE_VOLUME_MULTI_ATTACH" in str(info.value)


# --- re-reading ------------------------------------------------------------

def test_file_changes_are_picked_up_on_the_next_update(
        driver, inventory) -> None:
    tree = ProviderTree()
    update_all(driver, tree)
    write(inventory, node(traits=["CUSTOM_RAID5", "CUSTOM_GPU"],
                          maintenance=True, name="rack1-u08"), node(SILVER))
    driver.update_provider_tree(tree, GOLD)
    assert "CUSTOM_GPU" in tree.record(GOLD).traits
    assert tree.record(GOLD).inventory[RC].reserved == 1
    # Renamed: same provider, the name is a fact.
    assert tree.record(GOLD).name == GOLD
    assert driver.node_capabilities("rack1-u08").facts["name"] == "rack1-u08"


@pytest.mark.parametrize("text, reason", [
    ("{not json", "not valid JSON"),
    (json.dumps({"nodes": [{"uuid": GOLD}]}), f"node 0 ({GOLD}): "
     "resource_class is required"),
])
def test_a_bad_file_raises_naming_it_and_leaves_the_tree_alone(
        driver, inventory, text, reason) -> None:
    tree = ProviderTree()
    update_all(driver, tree)
    before = tree.to_json()
    write(inventory, text=text)
    for nodename in (GOLD, SILVER):
        with pytest.raises(InventoryReadError) as info:
            driver.update_provider_tree(tree, nodename)
        assert str(inventory) in str(info.value)
        assert reason in info.value.reason
        assert "fix the file" in str(info.value)
    assert tree.to_json() == before
    # The last good inventory stands; refreshing does not drop nodes.
    with pytest.raises(InventoryReadError):
        driver.get_available_nodes(refresh=True)
    assert driver.get_available_nodes() == sorted([GOLD, SILVER])
    write(inventory, node(traits=["CUSTOM_GPU"]), node(SILVER))
    driver.update_provider_tree(tree, GOLD)
    assert "CUSTOM_GPU" in tree.record(GOLD).traits


def test_a_missing_file_fails_init_host_naming_it(tmp_path) -> None:
    missing = tmp_path / "absent.yaml"
    drv = IronicDriver(inventory_path=missing)
    with pytest.raises(InventoryReadError, match=str(missing)):
        drv.init_host("c")


def test_the_file_is_parsed_once_per_change_not_once_per_node(
        driver, inventory, monkeypatch) -> None:
    reads = []
    real = ironic.load_inventory
    monkeypatch.setattr(ironic, "load_inventory",
                        lambda path: reads.append(path) or real(path))
    tree = ProviderTree()
    for _ in range(3):
        update_all(driver, tree)
    assert reads == []
    write(inventory, text="[")
    for _ in range(3):
        with pytest.raises(InventoryReadError):
            driver.update_provider_tree(tree, GOLD)
    assert len(reads) == 1  # a broken file is not re-parsed until it changes
    write(inventory, node(), node(SILVER))
    update_all(driver, tree)
    assert len(reads) == 2
    driver.get_available_nodes(refresh=True)
    assert len(reads) == 2  # refresh re-parses only a changed file
    write(inventory, node(traits=["CUSTOM_GPU"]), node(SILVER))
    driver.get_available_nodes(refresh=True)
    assert len(reads) == 3


def test_refresh_sees_a_rewrite_that_keeps_size_and_times(
        driver, inventory, monkeypatch) -> None:
    """An edit in place within one timestamp tick of the read keeps the
    whole stat signature (simulated here: the watch's stat answers the
    old one); refresh compares the content while the change is recent."""
    watch = driver._watch
    same = watch.stat()
    monkeypatch.setattr(watch, "stat", lambda: same)
    inventory.write_text(inventory.read_text().replace("rack1-u07",
                                                       "rack1-u09"))
    assert driver.node_capabilities(GOLD).facts["name"] == "rack1-u07"
    driver.get_available_nodes(refresh=True)
    assert driver.node_capabilities(GOLD).facts["name"] == "rack1-u09"


def test_refresh_of_an_old_unchanged_file_reads_nothing(
        driver, inventory, monkeypatch) -> None:
    opened = []
    real_read = ironic_inventory.read_regular
    monkeypatch.setattr(ironic_inventory, "RACY_NS", -10**18)
    monkeypatch.setattr(ironic_inventory, "read_regular",
                        lambda *a, **k: opened.append(a[0])
                        or real_read(*a, **k))
    driver.get_available_nodes(refresh=True)   # verifies once: now trusted
    assert opened == [str(inventory)]
    driver.get_available_nodes(refresh=True)
    driver.node_capabilities(GOLD)
    assert opened == [str(inventory)]


def test_a_removed_node_is_dropped_and_its_provider_left_to_the_tracker(
        driver, inventory) -> None:
    tree = ProviderTree()
    update_all(driver, tree)
    write(inventory, node(traits=["CUSTOM_RAID5"]))
    assert driver.get_available_nodes(refresh=True) == [GOLD]
    with pytest.raises(NodeNotFoundError, match=SILVER):
        driver.update_provider_tree(tree, SILVER)
    assert tree.exists(SILVER)  # the driver never removes providers


def test_each_report_is_the_report_its_results_make(driver, inventory):
    """Reports are grouped from the capability results' groups plus the
    node's own traits (no regrouping per node): the same as a report
    built from the results the plain way, for asserted, removed and
    stale traits alike."""
    from virtdriver.capabilities.traits.derive import TraitReport
    from virtdriver.capabilities.traits.ownership import Ownership
    tree = ProviderTree()
    update_all(driver, tree)     # GOLD: CUSTOM_RAID5 set by the driver
    write(inventory, node(trait_changes={"add": ["CUSTOM_GPU"],
                                         "remove": ["CUSTOM_NVME"]}),
          node(SILVER, traits=["CUSTOM_RAID1"]))
    for nodename in (GOLD, SILVER):
        report = driver.node_capabilities(nodename).traits
        plain = TraitReport(dict(report.results),
                            Ownership(frozenset(report.results)))
        for state in TraitState:
            assert report.names(state) == plain.names(state)
        assert report.ownership == plain.ownership
        assert report.to_json() == plain.to_json()
        assert driver.ownership_for(nodename).static == report.ownership.static
    gold = driver.node_capabilities(GOLD).traits
    assert {"CUSTOM_GPU"} <= gold.asserted
    assert {"CUSTOM_NVME", "CUSTOM_RAID5"} <= gold.unasserted  # RAID5: stale


def test_a_reread_keeps_unchanged_nodes_and_shows_changed_facts(
        driver, inventory):
    """Nodes whose entry did not change keep their record (so their
    stamps stay identical); any change, even 64 -> 64.0, is a new one."""
    before = {name: driver.node_stamp(name) for name in (GOLD, SILVER)}
    write(inventory, node(traits=["CUSTOM_RAID5"]),
          node(SILVER, properties={"cpus": 64.0}))
    driver.get_available_nodes(refresh=True)
    assert driver.node_stamp(GOLD)[0] is before[GOLD][0]
    assert driver.node_stamp(SILVER) != before[SILVER]
    write(inventory, node(traits=["CUSTOM_RAID5"]),
          node(SILVER, properties={"cpus": 64}))
    driver.get_available_nodes(refresh=True)
    facts = driver.node_capabilities(SILVER).facts["properties"]
    assert type(facts["cpus"]) is int
    assert driver.node_stamp(GOLD)[0] is before[GOLD][0]

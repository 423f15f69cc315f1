"""The resource tracker end to end with the fake driver's presets."""

from __future__ import annotations

import json
import logging

import os_traits
import pytest

from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.drivers.base import DriverError, NodeNotFoundError
from virtdriver.drivers.fake import FakeDriver
from virtdriver.drivers.ironic import IronicDriver
from virtdriver.resource_tracker.ledger import LedgerError
from virtdriver.resource_tracker.provider_tree import ProviderTree
from virtdriver.resource_tracker.tracker import (
    ResourceTracker, UpdateAllError)

NODE = "fake-numa2-ht"
FOREIGN = os_traits.COMPUTE_STATUS_DISABLED      # Nova's, not the driver's
UNSUPPORTED = os_traits.HW_CPU_X86_AVX512F       # owned; not on the root
STALE = "CUSTOM_DEV_VENDORID_10DE"               # owned by prefix
GOLD = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
SILVER = "2c5e9a51-7f0e-4e55-9a43-0d3b2f7e8a10"


class FakeWithDevicesDriver(FakeDriver):
    """A fake that owns dynamic device traits (CUSTOM_DEV_VENDORID_*), as a
    driver with PCI children would, and reports none right now."""

    @property
    def ownership(self) -> Ownership:
        return super().ownership.union(
            Ownership(prefixes=("CUSTOM_DEV_VENDORID_",)))


def driver(preset="numa2-ht", cls=FakeWithDevicesDriver):
    found = cls(preset)
    found.init_host("compute-1")
    return found


@pytest.fixture
def tracker(tmp_path):
    return ResourceTracker(driver(), state_dir=tmp_path)


def test_first_update_creates_root_and_numa_children(tracker):
    result = tracker.update_available_resource(NODE)
    root = tracker.tree.record(NODE)
    assert os_traits.COMPUTE_NODE in root.traits
    assert [tracker.tree.record(u).name
            for u in tracker.tree.get_provider_uuids(NODE)] == [
        NODE, f"{NODE}_NUMA0", f"{NODE}_NUMA1"]
    assert len(result.diff.created) == 3 and result.drift.empty
    assert tracker.ledger[root.uuid] == root.traits
    assert tracker.ledger_path == tracker.ledger_path.parent / \
        "ledger-fakewithdevices.json"
    assert tracker.ledger_path.is_file()


def test_second_update_changes_nothing(tracker):
    tracker.update_available_resource(NODE)
    result = tracker.update_available_resource(NODE)
    assert not result.diff and result.drift.empty


def test_foreign_trait_survives_updates(tracker):
    tracker.update_available_resource(NODE)
    tracker.tree.add_traits(NODE, FOREIGN)
    for _ in range(2):
        result = tracker.update_available_resource(NODE)
        assert FOREIGN in tracker.tree.record(NODE).traits
        assert not result.diff and result.drift.empty
    assert FOREIGN not in tracker.ledger[tracker.tree.record(NODE).uuid]


def test_owned_trait_removed_by_others_is_reasserted_and_reported(
        tracker, caplog):
    tracker.update_available_resource(NODE)
    tracker.tree.remove_traits(NODE, os_traits.COMPUTE_NODE)
    with caplog.at_level(logging.WARNING):
        result = tracker.update_available_resource(NODE)
    assert os_traits.COMPUTE_NODE in tracker.tree.record(NODE).traits
    assert result.drift.removed_by_others == {NODE: {os_traits.COMPUTE_NODE}}
    assert result.diff.get(tracker.tree.record(NODE).uuid).traits_added == {
        os_traits.COMPUTE_NODE}
    assert f"removed by others: {os_traits.COMPUTE_NODE}" in caplog.text


def test_owned_unsupported_trait_added_by_others_is_removed_and_reported(
        tracker):
    tracker.update_available_resource(NODE)
    tracker.tree.add_traits(NODE, UNSUPPORTED, FOREIGN)
    result = tracker.update_available_resource(NODE)
    assert UNSUPPORTED not in tracker.tree.record(NODE).traits
    assert FOREIGN in tracker.tree.record(NODE).traits
    assert result.drift.added_by_others == {NODE: {UNSUPPORTED}}
    assert not result.drift.removed_by_others


def test_ledger_survives_restart_and_drift_is_still_detected(tmp_path):
    first = ResourceTracker(driver(), state_dir=tmp_path)
    first.update_available_resource(NODE)
    # The restarted service rebuilds its tree (from Placement, here JSON)
    # and someone has meanwhile removed an owned trait.
    tree = ProviderTree.from_json(first.tree.to_json())
    tree.remove_traits(NODE, os_traits.COMPUTE_NODE)
    second = ResourceTracker(driver(), state_dir=tmp_path, tree=tree)
    assert second.ledger == first.ledger
    result = second.update_available_resource(NODE)
    assert result.drift.removed_by_others == {NODE: {os_traits.COMPUTE_NODE}}


def test_corrupt_ledger_is_a_clear_error(tmp_path):
    path = tmp_path / "ledger-fakewithdevices.json"
    path.write_text("{truncated")
    with pytest.raises(LedgerError) as info:
        ResourceTracker(driver(), state_dir=tmp_path)
    assert str(path) in str(info.value)
    assert f"delete {path}; the next update rebuilds it from the driver's " \
           "owned names — nothing foreign is lost" in str(info.value)
    path.unlink()                     # the documented recovery works
    ResourceTracker(driver(), state_dir=tmp_path).update_all()


def test_tampered_ledger_never_removes_foreign_trait(tmp_path, caplog):
    first = ResourceTracker(driver(), state_dir=tmp_path)
    first.update_available_resource(NODE)
    first.tree.add_traits(NODE, FOREIGN, "HW_GPU_API_VULKAN")
    uuid = first.tree.record(NODE).uuid
    document = json.loads(first.ledger_path.read_text())
    document["providers"][uuid] += [FOREIGN, "HW_GPU_API_VULKAN"]
    first.ledger_path.write_text(json.dumps(document))
    second = ResourceTracker(driver(), state_dir=tmp_path, tree=first.tree)
    with caplog.at_level(logging.WARNING):
        result = second.update_available_resource(NODE)
    assert {FOREIGN, "HW_GPU_API_VULKAN"} <= second.tree.record(NODE).traits
    assert result.drift.empty
    assert "tampered or stale ledger" in caplog.text
    assert FOREIGN not in second.ledger[uuid]


def test_lost_ledger_still_removes_unsupported_owned_traits(tracker):
    tracker.update_available_resource(NODE)
    tracker.tree.add_traits(NODE, UNSUPPORTED, STALE, FOREIGN)
    tracker.ledger_path.unlink()
    restarted = ResourceTracker(tracker.driver, state_dir=
                                tracker.ledger_path.parent, tree=tracker.tree)
    result = restarted.update_available_resource(NODE)
    traits = restarted.tree.record(NODE).traits
    assert UNSUPPORTED not in traits and STALE not in traits
    assert FOREIGN in traits
    assert result.drift.empty          # no baseline without a ledger
    assert restarted.ledger[restarted.tree.record(NODE).uuid] == \
        traits - {FOREIGN}
    assert restarted.ledger_path.is_file()


class _TwoHosts(FakeDriver):
    """Two described hosts; ``nodes`` says which are there now."""

    def __init__(self, preset="numa2-ht"):
        super().__init__(preset)
        self.others = {"small": FakeDriver("small")}
        self.gone = set()

    def init_host(self, host):
        super().init_host(host)
        for other in self.others.values():
            other.init_host(host)

    def _by_node(self):
        found = {name: d for d in self.others.values()
                 for name in d.get_available_nodes()}
        found.update((n, FakeDriver) for n in super().get_available_nodes())
        return {n: d for n, d in found.items() if n not in self.gone}

    def get_available_nodes(self, refresh=False):
        return sorted(self._by_node())

    def update_provider_tree(self, tree, nodename, allocations=None):
        owner = self._by_node().get(nodename)
        if owner is None:
            raise NodeNotFoundError(nodename, self.get_available_nodes())
        if owner is FakeDriver:
            return super().update_provider_tree(tree, nodename)
        return owner.update_provider_tree(tree, nodename)


def test_update_all_removes_providers_of_gone_nodes_only(tmp_path):
    tracker = ResourceTracker(driver(cls=_TwoHosts), state_dir=tmp_path)
    results = tracker.update_all()
    assert sorted(results) == [NODE, "fake-small"]
    foreign_root = tracker.tree.new_root("sharing-provider")
    tracker.driver.gone.add(NODE)
    results = tracker.update_all()
    assert not tracker.tree.exists(NODE)
    assert tracker.tree.exists("fake-small")
    assert tracker.tree.exists(foreign_root)
    assert len(results[NODE].diff.deleted) == 3
    assert not results["fake-small"].diff
    assert all(tracker.tree.exists(uuid) for uuid in tracker.ledger)


class _Failing(FakeDriver):
    """Writes into the tree, then fails, as a half-done update would."""

    fail = False

    def update_provider_tree(self, tree, nodename, allocations=None):
        super().update_provider_tree(tree, nodename)
        if self.fail:
            tree.new_root("half-done")
            tree.remove(f"{nodename}_NUMA1")
            raise DriverError("hypervisor went away")


def test_driver_error_leaves_tree_and_ledger_unchanged(tmp_path):
    tracker = ResourceTracker(driver(cls=_Failing), state_dir=tmp_path)
    tracker.update_available_resource(NODE)
    tracker.tree.add_traits(NODE, UNSUPPORTED)
    before = tracker.tree.to_json()
    ledger_text = tracker.ledger_path.read_text()
    tracker.driver.fail = True
    with pytest.raises(DriverError, match="hypervisor went away"):
        tracker.update_available_resource(NODE)
    assert tracker.tree.to_json() == before
    with pytest.raises(UpdateAllError, match="1 of 1 nodes failed"):
        tracker.update_all()
    assert tracker.tree.to_json() == before
    assert tracker.ledger_path.read_text() == ledger_text


def test_unknown_node_changes_nothing(tracker):
    tracker.update_available_resource(NODE)
    before = tracker.tree.to_json()
    with pytest.raises(NodeNotFoundError):
        tracker.update_available_resource("no-such-node")
    assert tracker.tree.to_json() == before


def test_unsaveable_ledger_undoes_the_update(tracker, monkeypatch):
    tracker.update_available_resource(NODE)
    tracker.tree.remove(f"{NODE}_NUMA1")
    tracker.ledger_path.unlink()       # so this update must write one
    before = tracker.tree.to_json()

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.replace", full)
    with pytest.raises(LedgerError, match="cannot write it"):
        tracker.update_available_resource(NODE)
    assert tracker.tree.to_json() == before
    assert not tracker.ledger_path.exists()


def ironic_driver(path, *nodes):
    path.write_text(json.dumps({"nodes": list(nodes)}))
    found = IronicDriver(inventory_path=str(path))
    found.init_host("conductor-1")
    return found


def ironic_nodes():
    gold = {"uuid": GOLD, "name": "rack1-u07", "resource_class": "gold",
            "traits": ["CUSTOM_RAID5"]}
    return gold, {**gold, "uuid": SILVER, "name": "rack2-u01"}


def test_ironic_trait_dropped_from_inspection_data_is_removed(tmp_path):
    """In one process the driver remembers what it set, and removes it."""
    path = tmp_path / "nodes.json"
    gold, silver = ironic_nodes()
    tracker = ResourceTracker(ironic_driver(path, gold, silver),
                              state_dir=tmp_path)
    tracker.update_all()
    path.write_text(json.dumps({"nodes": [{**gold, "traits": []}, silver]}))
    result = tracker.update_available_resource("rack1-u07")   # name alias
    assert "CUSTOM_RAID5" not in tracker.tree.record(GOLD).traits
    assert "CUSTOM_RAID5" in tracker.tree.record(SILVER).traits
    assert result.diff.get(GOLD).traits_removed == {"CUSTOM_RAID5"}


def test_ironic_ledger_is_trusted_only_within_the_nodes_ownership(
        tmp_path, caplog):
    """After a restart (or a tampered ledger), a ledger entry on node A is
    not trusted just because node B's data names the same trait: the trait
    might be an operator's, so it stays (do less, never more)."""
    path = tmp_path / "nodes.json"
    gold, silver = ironic_nodes()
    first = ResourceTracker(ironic_driver(path, {**gold, "traits": []},
                                          silver), state_dir=tmp_path)
    first.update_all()
    first.tree.add_traits(GOLD, "CUSTOM_RAID5", "CUSTOM_RACK_7")  # by hand
    document = json.loads(first.ledger_path.read_text())
    document["providers"][GOLD].append("CUSTOM_RAID5")            # tampered
    first.ledger_path.write_text(json.dumps(document))
    second = ResourceTracker(ironic_driver(path, {**gold, "traits": []},
                                           silver),
                             state_dir=tmp_path, tree=first.tree)
    with caplog.at_level(logging.WARNING):
        result = second.update_available_resource(GOLD)
    assert {"CUSTOM_RAID5", "CUSTOM_RACK_7"} <= second.tree.record(GOLD).traits
    assert not result.diff
    assert "ledger lists CUSTOM_RAID5, which the driver does not own on " \
        "this node" in caplog.text
    assert "CUSTOM_RAID5" not in second.ledger[GOLD]

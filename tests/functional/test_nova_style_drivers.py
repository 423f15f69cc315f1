"""Drivers written the way Nova's drivers treat ProviderTree, run through the
resource tracker: deep copies, edited ``data().inventory`` dicts written
back, a VGPU-like reshape from the root into children, ``subtree()``."""

from __future__ import annotations

import copy

import os_resource_classes as orc
import pytest

from virtdriver.drivers.fake import FakeDriver
from virtdriver.resource_tracker.tracker import ResourceTracker

NODE = "fake-numa2-ht"
NUMA0, NUMA1 = f"{NODE}_NUMA0", f"{NODE}_NUMA1"


class NovaStyleDriver(FakeDriver):
    """The fake driver, then a Nova-style edit of what it wrote."""

    def __init__(self) -> None:
        super().__init__("numa2-ht")
        self.init_host("compute-1")
        self.seen: list = []

    def node_stamp(self, nodename: str) -> None:
        return None  # no fast-path promise: every update runs the driver

    def update_provider_tree(self, tree, nodename, allocations=None) -> None:
        super().update_provider_tree(tree, nodename, allocations)
        self.edit(tree, nodename)

    def edit(self, tree, nodename) -> None:
        raise NotImplementedError


class DeepCopyDriver(NovaStyleDriver):
    """Edits a deep copy's data().inventory dicts, then writes them back."""

    def edit(self, tree, nodename) -> None:
        scratch = copy.deepcopy(tree)
        inventory = scratch.data(NUMA0).inventory
        inventory[orc.VCPU]["reserved"] = 2              # plain dicts
        del inventory[orc.MEMORY_MB]
        assert inventory.get(orc.DISK_GB) is None
        assert scratch.update_inventory(NUMA0, inventory)
        # The copy is independent: the tracker's tree is as the fake left it.
        self.seen.append((tree.record(NUMA0).inventory[orc.VCPU].reserved,
                          orc.MEMORY_MB in tree.record(NUMA0).inventory))
        tree.update_inventory(NUMA0, scratch.data(NUMA0).inventory)


class ReshapeDriver(NovaStyleDriver):
    """VGPU inventory on the root at first, then on two pGPU children."""

    reshaped = False

    def edit(self, tree, nodename) -> None:
        root = tree.data(nodename)
        if not self.reshaped:
            inventory = root.inventory
            inventory[orc.VGPU] = {"total": 4, "max_unit": 4}
            tree.update_inventory(nodename, inventory)
            return
        inventory = root.inventory
        moved = inventory.pop(orc.VGPU, None)
        tree.update_inventory(nodename, inventory)
        for name in ("pgpu0", "pgpu1"):
            child = f"{nodename}_{name}"
            if not tree.exists(child):
                tree.new_child(child, nodename)
            total = moved["total"] // 2 if moved else 2
            tree.update_inventory(child, {orc.VGPU: {"total": total,
                                                     "max_unit": total}})


class SubtreeDriver(NovaStyleDriver):
    """Reads and scribbles on subtree(), then reserves 1 of each class."""

    def edit(self, tree, nodename) -> None:
        sub = tree.subtree(nodename)
        uuids = sub.get_provider_uuids()
        self.seen.append(uuids == tree.get_provider_uuids(nodename))
        sub.update_inventory(NUMA1, {})              # never reaches the tree
        for uuid in uuids:
            if tree.has_inventory(uuid):
                inventory = tree.data(uuid).inventory
                for record in inventory.values():
                    record["reserved"] = 1
                tree.update_inventory(uuid, inventory)


def run(driver, tmp_path):
    tracker = ResourceTracker(driver, state_dir=tmp_path)
    return tracker, tracker.update_available_resource(NODE)


def test_a_deep_copy_edited_and_written_back(tmp_path):
    driver = DeepCopyDriver()
    tracker, result = run(driver, tmp_path)
    inventory = tracker.tree.record(NUMA0).inventory
    assert inventory[orc.VCPU].reserved == 2
    assert orc.MEMORY_MB not in inventory
    assert orc.MEMORY_MB in tracker.tree.record(NUMA1).inventory
    assert driver.seen == [(0, True)]
    created = result.diff.get(tracker.tree.record(NUMA0).uuid)
    assert created.created and set(created.inventory) == {
        orc.VCPU, "CUSTOM_MEM_PAGE_SIZE_2048"}
    # The next update: the fake writes its records again, the copy is
    # edited the same way, so the tree ends as it was: nothing to sync.
    again = tracker.update_available_resource(NODE)
    assert not again.diff
    assert driver.seen == [(0, True), (0, True)]


def test_vgpu_inventory_reshaped_from_the_root_into_children(tmp_path):
    driver = ReshapeDriver()
    tracker, _ = run(driver, tmp_path)
    assert tracker.tree.record(NODE).inventory[orc.VGPU].total == 4
    driver.reshaped = True
    result = tracker.update_available_resource(NODE)
    tree = tracker.tree
    assert orc.VGPU not in tree.record(NODE).inventory
    children = [f"{NODE}_pgpu0", f"{NODE}_pgpu1"]
    assert [tree.record(name).inventory[orc.VGPU].total
            for name in children] == [2, 2]
    assert [tree.record(uuid).name for uuid in tree.get_provider_uuids(
        NODE)][-2:] == children
    root = result.diff.get(tree.record(NODE).uuid)
    assert root.inventory[orc.VGPU][1] is None           # gone from root
    assert {tree.record(uuid).name for uuid in result.diff.created} == set(
        children)
    assert not tracker.update_available_resource(NODE).diff


def test_a_driver_working_on_subtree(tmp_path):
    driver = SubtreeDriver()
    tracker, _ = run(driver, tmp_path)
    assert driver.seen == [True]
    for name in (NUMA0, NUMA1):
        inventory = tracker.tree.record(name).inventory
        assert inventory and all(record.reserved == 1
                                 for record in inventory.values())


def test_a_failing_nova_style_edit_leaves_the_tree_as_it_was(tmp_path):
    driver = DeepCopyDriver()
    tracker, _ = run(driver, tmp_path)
    before = tracker.tree.to_json()

    def broken(tree, nodename):
        inventory = tree.data(NUMA0).inventory
        inventory[orc.VCPU]["reserved"] = inventory[orc.VCPU]["total"] + 1
        tree.update_inventory(NUMA0, inventory)     # Placement would refuse

    driver.edit = broken
    with pytest.raises(Exception, match="greater than total"):
        tracker.update_available_resource(NODE)
    assert tracker.tree.to_json() == before

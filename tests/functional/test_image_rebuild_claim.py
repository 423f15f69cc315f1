"""ResourceTracker.rebuild_claim with implied image traits: the tracker's
own tree answers, as a compute service calls it (the fake numa2-ht host,
whose root has x86_64 and qcow2/raw image traits and no device models)."""

from __future__ import annotations

import uuid as uuidlib

import os_traits
import pytest

from virtdriver.claims.model import Flavor, Instance
from virtdriver.claims.rebuild import RebuildRefused
from virtdriver.conf import make_conf
from virtdriver.drivers.fake import FakeDriver
from virtdriver.resource_tracker.tracker import ResourceTracker

NODE = "fake-numa2-ht"


@pytest.fixture
def tracker(tmp_path) -> ResourceTracker:
    driver = FakeDriver("numa2-ht", conf=make_conf([]))
    driver.init_host("compute-1")
    made = ResourceTracker(driver, state_dir=tmp_path)
    made.update_all()
    return made


def holder(tracker, props=None) -> Instance:
    cell = tracker.tree.record(f"{NODE}_NUMA0").uuid
    return Instance(str(uuidlib.uuid4()), Flavor(2, 1024, {}), props or {},
                    {cell: {"VCPU": 2}})


def test_an_implied_trait_on_the_root_passes(tracker):
    assert os_traits.HW_ARCH_X86_64 in tracker.tree.record(NODE).traits
    tracker.rebuild_claim(holder(tracker), {"hw_architecture": "amd64"})


def test_an_implied_trait_the_host_lacks_is_refused_naming_the_property(
        tracker):
    bus = os_traits.COMPUTE_STORAGE_BUS_IDE
    assert bus not in tracker.tree.record(NODE).traits
    with pytest.raises(RebuildRefused) as refused:
        tracker.rebuild_claim(holder(tracker), {"hw_disk_bus": "IDE"})
    (conflict,) = refused.value.conflicts
    assert conflict.details["implied_by"] == {bus: "hw_disk_bus='IDE'"}
    assert f"requires {bus} (hw_disk_bus='IDE')" in str(refused.value)


def test_a_typo_is_refused_as_invalid_and_the_same_image_passes(tracker):
    vm = holder(tracker, {"hw_disk_bus": "ide"})
    # The instance already runs with it: nothing new to prove.
    tracker.rebuild_claim(vm, {"hw_disk_bus": "ide"})
    with pytest.raises(RebuildRefused) as refused:
        tracker.rebuild_claim(vm, {"hw_disk_bus": "idee"})
    assert [c.kind for c in refused.value.conflicts] == ["invalid"]


def test_the_disk_format_is_checked_against_the_tree(tracker):
    root = tracker.tree.record(NODE).traits
    assert os_traits.COMPUTE_IMAGE_TYPE_QCOW2 in root
    assert os_traits.COMPUTE_IMAGE_TYPE_VMDK not in root
    vm = holder(tracker)
    tracker.rebuild_claim(vm, {}, disk_format="qcow2")
    with pytest.raises(RebuildRefused) as refused:
        tracker.rebuild_claim(vm, {}, disk_format="vmdk")
    (conflict,) = refused.value.conflicts
    assert conflict.details["implied_by"] == {
        os_traits.COMPUTE_IMAGE_TYPE_VMDK: "disk_format='vmdk'"}

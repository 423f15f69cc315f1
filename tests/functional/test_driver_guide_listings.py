"""The NUMA driver of ``docs/driver-authors.md`` (section 9), run from the
page's own listing: its tree, the traits on its child providers, a claim
on its ``node_resources``, and a vendor change replacing the dynamic
trait (issue 30)."""

from __future__ import annotations

import importlib.util
import pathlib
import re

import os_resource_classes as orc
import os_traits
import pytest

from virtdriver.claims.documents import instance_from_document
from virtdriver.claims.fit import DoesNotFit
from virtdriver.resource_tracker.tracker import ResourceTracker

GUIDE = pathlib.Path(__file__).resolve().parents[2] / "docs" / \
    "driver-authors.md"
LISTING = re.compile(r"^<!-- listing: (\S+) -->\n```python\n(.*?)^```$",
                     re.MULTILINE | re.DOTALL)
HOST = "numa-host"


@pytest.fixture
def module(tmp_path):
    listings = dict(LISTING.findall(GUIDE.read_text()))
    path = tmp_path / "numa_driver.py"
    path.write_text(listings["numa_driver.py"])
    spec = importlib.util.spec_from_file_location("guide_numa_driver", path)
    found = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(found)
    return found


def tracker_for(module, tmp_path, **kwargs) -> ResourceTracker:
    driver = module.NumaDriver(**kwargs)
    driver.init_host(HOST)
    return ResourceTracker(driver, state_dir=tmp_path / "state",
                           driver_name="numa-example")


def test_the_guides_numa_driver_builds_cells_and_a_device_child(
        module, tmp_path):
    tracker = tracker_for(module, tmp_path)
    tracker.update_all()
    tree = tracker.tree
    root = tree.data(HOST)
    assert os_traits.COMPUTE_NODE in root.traits
    for cell in (f"{HOST}_NUMA0", f"{HOST}_NUMA1"):
        data = tree.data(cell)
        assert data.parent_uuid == root.uuid
        assert data.traits == {os_traits.HW_NUMA_ROOT}
        assert data.inventory[orc.VCPU]["total"] == 4
    gpu = tree.data(f"{HOST}_GPU0")
    assert gpu.parent_uuid == tree.data(f"{HOST}_NUMA0").uuid
    assert gpu.traits == {"CUSTOM_DEV_VENDORID_10DE"}

    tracker.tree.add_traits(f"{HOST}_GPU0", "CUSTOM_RACK_7")
    tracker.driver.gpu_vendor = "1af4"
    tracker.update_all()
    assert tree.data(f"{HOST}_GPU0").traits == {
        "CUSTOM_DEV_VENDORID_1AF4", "CUSTOM_RACK_7"}


def test_a_claim_fits_on_its_node_resources(module, tmp_path):
    tracker = tracker_for(module, tmp_path)
    tracker.update_all()

    def instance(number: int, vcpus: int):
        return instance_from_document({
            "uuid": f"00000000-0000-4000-8000-{number:012d}",
            "flavor": {"vcpus": vcpus, "memory_mb": 1024, "extra_specs": {
                "hw:numa_nodes": "1", "hw:cpu_policy": "shared"}}},
            "test")

    fit = tracker.instance_claim(instance(1, 2), HOST)
    assert len(fit.cells) == 1
    with pytest.raises(DoesNotFit):
        tracker.instance_claim(instance(2, 8), HOST)


def test_a_reshape_with_placement_embedded_reads_the_claims(
        module, tmp_path):
    """ClaimsAllocations: with Placement embedded, the allocations a
    reshaping driver is given are its node's claims, on its providers."""
    from virtdriver.drivers.base import ReshapeNeeded
    from virtdriver.placement.allocations import ClaimsAllocations

    given = []

    class Reshaping(module.NumaDriver):
        def update_provider_tree(self, tree, nodename, allocations=None):
            if self.reshape and allocations is None:
                raise ReshapeNeeded()
            given.append(allocations)
            super().update_provider_tree(tree, nodename, allocations)

    driver = Reshaping()
    driver.reshape = False
    driver.init_host(HOST)
    tracker = ResourceTracker(driver, state_dir=tmp_path / "state",
                              driver_name="numa-example")
    tracker.allocations = ClaimsAllocations(tracker)
    tracker.update_all()
    consumer = "00000000-0000-4000-8000-000000000007"
    fit = tracker.instance_claim(instance_from_document({
        "uuid": consumer, "flavor": {"vcpus": 2, "memory_mb": 1024,
                                     "extra_specs": {"hw:numa_nodes": "1"}}},
        "test"), HOST)
    cell = tracker.tree.data(f"{HOST}_NUMA{fit.cells[0].host_cell}").uuid
    driver.reshape = True
    tracker.update_all()
    assert given[-1] == {consumer: {
        "allocations": {cell: {"resources": {"VCPU": 2, "MEMORY_MB": 1024}}},
        "consumer_generation": None, "project_id": None, "user_id": None}}
    assert tracker.reshapes == {}   # the driver moved nothing

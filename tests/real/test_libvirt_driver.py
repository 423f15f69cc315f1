"""The libvirt driver against real libvirt: test:///default and qemu:///embed."""

from __future__ import annotations

import pathlib

import os_resource_classes as orc
import os_traits
import pytest

from virtdriver.cpuset import parse_cpuset
from virtdriver.drivers.libvirt.driver import LibvirtDriver, node_uuid
from virtdriver.drivers.loader import load_driver
from virtdriver.resource_tracker.provider_tree import ProviderTree

pytestmark = pytest.mark.real
SYS_NODES = pathlib.Path("/sys/devices/system/node")
SYS_ONLINE = pathlib.Path("/sys/devices/system/cpu/online")


@pytest.fixture(scope="module")
def embed_driver(embed_uri):
    driver = load_driver("libvirt", uri=embed_uri)
    driver.init_host("compute-1")
    yield driver
    driver.cleanup_host("compute-1")


@pytest.fixture(scope="module")
def embed_tree(embed_driver):
    tree = ProviderTree()
    embed_driver.update_provider_tree(tree, "compute-1")
    return tree


def test_numa_cells_are_those_of_sysfs(embed_driver, embed_tree):
    if not SYS_NODES.is_dir():
        pytest.skip(f"{SYS_NODES} not present")
    sysfs = sorted(int(p.name[4:]) for p in SYS_NODES.glob("node[0-9]*"))
    facts = embed_driver.node_capabilities("compute-1").facts
    assert facts["numa_cells"] == sysfs
    children = [embed_tree.record(u).name for u in
                embed_tree.get_provider_uuids("compute-1")[1:]]
    assert children == [f"compute-1_NUMA{i}" for i in sysfs]


def test_online_cpus_are_those_of_sysfs(embed_driver, embed_tree):
    online = parse_cpuset(SYS_ONLINE.read_text())
    facts = embed_driver.node_capabilities("compute-1").facts
    assert set(facts["online_cpus"]) == online
    vcpus = sum(embed_tree.record(u).inventory[orc.VCPU].total
                for u in embed_tree.get_provider_uuids("compute-1")[1:])
    assert vcpus == len(online)  # no pinning: every online CPU is shared


def test_storage_bus_traits_include_virtio(embed_tree):
    root = embed_tree.record("compute-1")
    assert root.uuid == node_uuid("compute-1")
    assert os_traits.COMPUTE_STORAGE_BUS_VIRTIO in root.traits
    assert os_traits.COMPUTE_NODE in root.traits
    assert orc.DISK_GB in root.inventory


def test_test_driver_host(virtdriver_state_dir):
    driver = LibvirtDriver(uri="test:///default")
    driver.init_host("test-host")
    tree = ProviderTree()
    driver.update_provider_tree(tree, "test-host")
    facts = driver.node_capabilities("test-host").facts
    assert facts["numa_cells"] == [0, 1]
    assert facts["domain_capabilities"][0]["read"] is False
    assert "not supported" in facts["domain_capabilities"][0]["error"]
    root = tree.record("test-host")
    # Domain capabilities are unknown here: nothing read from them is set.
    assert not any(t.startswith("COMPUTE_STORAGE_BUS_") for t in root.traits)
    assert [tree.record(u).name for u in tree.get_provider_uuids()][1:] == \
        ["test-host_NUMA0", "test-host_NUMA1"]
    driver.cleanup_host("test-host")

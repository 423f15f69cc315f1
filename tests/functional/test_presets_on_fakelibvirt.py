"""The fake driver's presets, served by fakelibvirt to the real libvirt
driver, give the same NUMA resources as the fake driver itself."""

from __future__ import annotations

import os_traits
import pytest

from virtdriver.drivers.fake import FakeDriver
from virtdriver.drivers.fake_host import PRESETS
from virtdriver.drivers.libvirt.driver import LibvirtDriver
from virtdriver.fakelibvirt.presets import preset_documents
from virtdriver.resource_tracker.provider_tree import ProviderTree


def cells(tree, root):
    return [({rc: (inv.total, inv.reserved, inv.allocation_ratio)
              for rc, inv in tree.record(uuid).inventory.items()})
            for uuid in tree.get_provider_uuids(root)[1:]]


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_libvirt_driver_on_a_preset_matches_the_fake_driver(
        preset, fakelibvirt, fake_libvirt_host):
    uri = fake_libvirt_host(preset_documents(preset), name=preset)
    libvirt_driver = LibvirtDriver(uri=uri)
    libvirt_driver.init_host("node")
    real_tree = ProviderTree()
    libvirt_driver.update_provider_tree(real_tree, "node")

    fake = FakeDriver(preset)
    fake.init_host("node")
    (fake_node,) = fake.get_available_nodes()
    fake_tree = ProviderTree()
    fake.update_provider_tree(fake_tree, fake_node)

    assert cells(real_tree, "node") == cells(fake_tree, fake_node)
    assert len(cells(real_tree, "node")) == PRESETS[preset]["cells"]
    root = real_tree.record("node").traits
    assert os_traits.COMPUTE_STORAGE_BUS_VIRTIO in root  # from domcaps
    hyperthreaded = PRESETS[preset].get("threads_per_core", 1) > 1
    assert (os_traits.HW_CPU_HYPERTHREADING in root) is hyperthreaded

"""publish_host: the NUMA tree of one host, nested or flat, kept current."""

from __future__ import annotations

import os_resource_classes as orc
import os_traits

from virtdriver.capabilities.traits.derive import derive_traits
from virtdriver.capabilities.traits.model import DerivationInputs
from virtdriver.capabilities.traits.registry import LIBVIRT_FAMILIES
from virtdriver.conf.pinning import PinningConfig
from virtdriver.drivers.fake_host import spec_from_dict
from virtdriver.drivers.host_resources import host_resources
from virtdriver.drivers.host_tree import (
    cell_provider_name, page_resource_class, publish_host)
from virtdriver.resource_tracker.provider_tree import ProviderTree


DEFAULT_PINNING = PinningConfig()


def publish(tree, cells=2, nested=True, pinning=DEFAULT_PINNING, **spec):
    host = spec_from_dict({"cells": cells, **spec}).host_capabilities()
    report = derive_traits(DerivationInputs(host=host), LIBVIRT_FAMILIES)
    publish_host(tree, "node", host=host,
                 resources=host_resources(host, None, pinning),
                 report=report, disk_gb=50, nested=nested)
    return tree


def names(tree):
    return [tree.record(u).name for u in tree.get_provider_uuids()]


def test_names_and_page_classes():
    assert cell_provider_name("cmp1", 3) == "cmp1_NUMA3"
    assert page_resource_class(2048) == "CUSTOM_MEM_PAGE_SIZE_2048"
    assert page_resource_class(1048576) == "CUSTOM_MEM_PAGE_SIZE_1048576"


def test_lost_cells_are_removed_and_new_ones_added():
    tree = publish(ProviderTree(), cells=3)
    assert names(tree) == ["node", "node_NUMA0", "node_NUMA1", "node_NUMA2"]
    publish(tree, cells=1)
    assert names(tree) == ["node", "node_NUMA0"]


def test_children_of_others_are_left_alone():
    tree = publish(ProviderTree())
    tree.new_child("node_gpu0", "node")
    tree.new_child("node_NUMA7_extra", "node_NUMA0")
    publish(tree, cells=1)
    assert "node_gpu0" in names(tree)


def test_switching_to_flat_moves_inventory_to_the_root():
    tree = publish(ProviderTree(), pages_per_cell={2048: 8})
    publish(tree, nested=False, pages_per_cell={2048: 8})
    assert names(tree) == ["node"]
    inventory = tree.record("node").inventory
    assert inventory[orc.VCPU].total == 8
    assert inventory[page_resource_class(2048)].total == 16
    assert inventory[orc.DISK_GB].total == 50
    assert os_traits.HW_NUMA_ROOT not in tree.record("node").traits


def test_zero_totals_are_left_out_and_reservations_kept():
    tree = publish(ProviderTree(), cells=1, pinning=PinningConfig(
        cpu_dedicated_set=frozenset({0, 1}), reserved_host_memory_mb=1024))
    inventory = tree.record("node_NUMA0").inventory
    assert orc.VCPU not in inventory
    assert inventory[orc.PCPU].total == 2
    assert inventory[orc.PCPU].allocation_ratio == 1.0
    assert inventory[orc.MEMORY_MB].reserved == 1024


def test_cpu_traits_sit_on_the_cells_not_the_root():
    tree = publish(ProviderTree(), cpu={"model": "x", "features": ["avx2"]})
    root = tree.record("node").traits
    assert os_traits.HW_CPU_X86_AVX2 not in root
    # The default cpu_mode (host-model) has no domain capabilities here:
    # the feature is unknown, so it is neither added nor removed.
    tree.add_traits("node_NUMA0", os_traits.HW_CPU_X86_AVX2)
    tree.add_traits("node", os_traits.HW_CPU_X86_AVX2)
    publish(tree, cpu={"model": "x", "features": ["avx2"]})
    assert os_traits.HW_CPU_X86_AVX2 in tree.record("node_NUMA0").traits
    # On the root it is an owned trait no root family answers: removed.
    assert os_traits.HW_CPU_X86_AVX2 not in tree.record("node").traits

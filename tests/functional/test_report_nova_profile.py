"""``virtdriver report --profile nova`` on real libvirt (test:///default):
Nova's flat root beside the NUMA-child tree of the same host."""

from __future__ import annotations

import json

import os_resource_classes as orc
import os_traits
import pytest

from virtdriver import cli

URI = "test:///default"


def report(capsys, *extra):
    status = cli.main(["report", "--uri", URI, "--format", "json", *extra])
    assert status == 0
    return json.loads(capsys.readouterr().out)["providers"]


def test_nova_profile_puts_the_numa_trees_resources_on_one_root(capsys):
    numa = report(capsys)
    nova = report(capsys, "--profile", "nova")
    assert len(numa) > 1 and len(nova) == 1
    (root,) = nova
    assert root["uuid"] == numa[0]["uuid"]  # the same compute node
    cells = [p for p in numa if p["parent_provider_uuid"]]
    inventories = root["inventories"]

    def summed(rc):
        return sum(c["inventories"].get(rc, {}).get("total", 0)
                   for c in cells)

    assert inventories[orc.VCPU]["total"] == summed(orc.VCPU)
    # Nova's MEMORY_MB: all of the host's memory, not only small pages.
    assert inventories[orc.MEMORY_MB]["total"] >= summed(orc.MEMORY_MB)
    assert not any(rc.startswith("CUSTOM_MEM_PAGE_SIZE_")
                   for rc in inventories)
    assert inventories[orc.DISK_GB] == numa[0]["inventories"][orc.DISK_GB]
    # The CPU traits the NUMA tree puts on cells are on the root here.
    cell_traits = set().union(*(c["traits"] for c in cells))
    assert cell_traits - {os_traits.HW_NUMA_ROOT} <= set(root["traits"])


def test_profile_is_refused_for_other_drivers(capsys):
    status = cli.main(["report", "--driver", "fake", "--profile", "nova"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("virtdriver: --profile applies only to --driver "
                          "libvirt")


@pytest.mark.parametrize("profile", ["nova", "numa"])
def test_traits_are_derived_again_only_for_a_new_reading(monkeypatch,
                                                         tmp_path, profile):
    from virtdriver.drivers.libvirt import driver as libvirt_driver
    from virtdriver.resource_tracker.provider_tree import ProviderTree

    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path))
    derived = []
    real = libvirt_driver.trait_report

    def counting(*args, **kwargs):
        derived.append(True)
        return real(*args, **kwargs)

    monkeypatch.setattr(libvirt_driver, "trait_report", counting)
    driver = libvirt_driver.LibvirtDriver(uri=URI, profile=profile)
    driver.init_host("node")
    tree = ProviderTree()
    driver.update_provider_tree(tree, "node")
    first = tree.data("node").traits
    driver.update_provider_tree(tree, "node")
    assert len(derived) == 1
    driver.refresh()
    driver.update_provider_tree(tree, "node")
    assert len(derived) == 2
    assert tree.data("node").traits == first


def test_an_unknown_profile_is_refused():
    from virtdriver.drivers.base import DriverError
    from virtdriver.drivers.libvirt.driver import LibvirtDriver

    with pytest.raises(DriverError, match="unknown tree profile 'flat'; "
                                          "use one of numa, nova"):
        LibvirtDriver(uri=URI, profile="flat")

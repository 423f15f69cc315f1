"""The fake driver, loaded by name, publishing a NUMA tree of a preset."""

from __future__ import annotations

import json

import os_resource_classes as orc
import os_traits
import pytest

from virtdriver import cli
from virtdriver.conf.options import make_conf
from virtdriver.drivers.base import DriverError
from virtdriver.drivers.loader import load_driver
from virtdriver.resource_tracker.provider_tree import ProviderTree


def publish(driver, tree=None):
    tree = tree or ProviderTree()
    for node in driver.get_available_nodes():
        driver.update_provider_tree(tree, node)
    return tree


def fake(host="numa2-ht", **kwargs):
    driver = load_driver("fake", host=host, **kwargs)
    driver.init_host("compute-1")
    return driver


def test_preset_gives_root_and_one_child_per_cell():
    tree = publish(fake())
    root = tree.record("fake-numa2-ht")
    assert {os_traits.COMPUTE_NODE, os_traits.HW_CPU_HYPERTHREADING,
            os_traits.HW_ARCH_X86_64} <= root.traits
    assert os_traits.HW_NUMA_ROOT not in root.traits
    for cell in (0, 1):
        child = tree.record(f"fake-numa2-ht_NUMA{cell}")
        assert child.parent_uuid == root.uuid
        assert os_traits.HW_NUMA_ROOT in child.traits
        inventory = child.inventory
        assert inventory[orc.VCPU].total == 16
        assert inventory[orc.VCPU].allocation_ratio == 4.0
        # 32 GiB a cell, 2 GiB of it in 2 MiB pages: offered once, as
        # pages; MEMORY_MB is the small-page rest.
        assert inventory[orc.MEMORY_MB].total == 32768 - 2048
        assert inventory["CUSTOM_MEM_PAGE_SIZE_2048"].total == 1024
        assert orc.PCPU not in inventory
    assert tree.record("fake-numa2-ht_NUMA0").inventory[orc.MEMORY_MB] \
        .reserved == 512
    assert tree.record("fake-numa2-ht_NUMA1").inventory[orc.MEMORY_MB] \
        .reserved == 0


def test_pinning_splits_dedicated_and_shared(tmp_path):
    conf_file = tmp_path / "virtdriver.conf"
    conf_file.write_text("[compute]\ncpu_dedicated_set = 0-7\n"
                         "cpu_shared_set = 16-23\n")
    tree = publish(fake(conf=make_conf(config_files=[conf_file])))
    cell0 = tree.record("fake-numa2-ht_NUMA0").inventory
    cell1 = tree.record("fake-numa2-ht_NUMA1").inventory
    assert cell0[orc.PCPU].total == 8 and orc.VCPU not in cell0
    assert cell1[orc.VCPU].total == 8 and orc.PCPU not in cell1


def test_pinning_outside_the_host_is_refused_at_init(tmp_path):
    conf_file = tmp_path / "virtdriver.conf"
    conf_file.write_text("[compute]\ncpu_dedicated_set = 0-3,40\n")
    with pytest.raises(DriverError) as info:
        fake("small", conf=make_conf(config_files=[conf_file]))
    assert "cpu_dedicated_set" in str(info.value)
    assert "40" in str(info.value)


def test_flat_mode_puts_everything_on_the_root():
    tree = publish(fake(nested=False))
    assert tree.get_provider_uuids() == [tree.record("fake-numa2-ht").uuid]
    inventory = tree.record("fake-numa2-ht").inventory
    assert inventory[orc.VCPU].total == 32
    assert inventory[orc.MEMORY_MB].total == 65536 - 2 * 2048


def test_foreign_traits_survive_and_owned_ones_come_back():
    driver = fake()
    tree = publish(driver)
    tree.add_traits("fake-numa2-ht", "CUSTOM_RACK_7",
                    os_traits.HW_GPU_API_VULKAN)
    tree.remove_traits("fake-numa2-ht", os_traits.COMPUTE_NODE)
    tree.add_traits("fake-numa2-ht", os_traits.COMPUTE_STATUS_DISABLED)
    publish(driver, tree)
    traits = tree.record("fake-numa2-ht").traits
    assert {"CUSTOM_RACK_7", os_traits.HW_GPU_API_VULKAN,
            os_traits.COMPUTE_STATUS_DISABLED,
            os_traits.COMPUTE_NODE} <= traits


def test_extra_traits_and_described_cpu():
    tree = publish(fake({"name": "box", "cells": 1, "traits": [
        "CUSTOM_RACK_7"], "cpu": {"model": "x", "features": ["avx2"]}}))
    assert "CUSTOM_RACK_7" in tree.record("box").traits
    assert os_traits.HW_CPU_X86_AVX2 in tree.record("box_NUMA0").traits


def test_extra_traits_may_not_shadow_derived_ones():
    with pytest.raises(DriverError, match="HW_CPU_X86_AVX2 are derived"):
        fake({"cells": 1, "traits": [os_traits.HW_CPU_X86_AVX2]})


def test_every_emitted_trait_is_owned():
    driver = fake("numa4-large")
    report = driver.node_capabilities("fake-numa4-large").traits
    tree = publish(driver)
    for uuid in tree.get_provider_uuids():
        for trait in tree.record(uuid).traits:
            assert driver.ownership.owns(trait)
    assert report.invalid == ()


def test_cli_tree_json_for_a_preset(capsys):
    status = cli.main(["report", "--driver", "fake", "--host-spec",
                       "numa4-large", "--format", "json"])
    document = json.loads(capsys.readouterr().out)
    assert status == 0
    names = [p["name"] for p in document["providers"]]
    assert names[0] == "fake-numa4-large"
    assert names[1:] == [f"fake-numa4-large_NUMA{i}" for i in range(4)]
    assert document["providers"][1]["inventories"][
        "CUSTOM_MEM_PAGE_SIZE_1048576"]["total"] == 16


def test_cli_tree_text_and_errors(capsys):
    assert cli.main(["report", "--driver", "fake", "--flat"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("fake-small (")
    assert "VCPU 4 x4" in out
    assert cli.main(["report", "--driver", "fake", "--host-spec",
                     "nope"]) == cli.EXIT_FAILURE
    assert "neither a preset" in capsys.readouterr().err
    assert cli.main(["report", "--driver", "nosuch"]) == cli.EXIT_FAILURE
    assert "fake" in capsys.readouterr().err


def test_cli_pinning_options_override_the_config_file(tmp_path, capsys):
    conf_file = tmp_path / "virtdriver.conf"
    conf_file.write_text("[compute]\ncpu_dedicated_set = 0-3\n"
                         "reserved_host_memory_mb = 2048\n")
    status = cli.main([
        "report", "--driver", "fake", "--host-spec", "numa2-ht", "--format",
        "json", "--config-file", str(conf_file),
        "--cpu-dedicated-set", "0-7,16-23", "--cpu-shared-set", "8-15",
        "--reserved-huge-pages", "node:1,size:2048,count:24"])
    providers = json.loads(capsys.readouterr().out)["providers"]
    assert status == 0
    cell0, cell1 = (p["inventories"] for p in providers[1:])
    assert cell0["PCPU"]["total"] == 8 and cell0["VCPU"]["total"] == 8
    assert cell0["MEMORY_MB"]["reserved"] == 2048   # from the file
    assert cell1["PCPU"]["total"] == 8 and "VCPU" not in cell1
    assert cell1["CUSTOM_MEM_PAGE_SIZE_2048"]["reserved"] == 24


def test_cli_pinning_outside_the_host_names_the_cpus(capsys):
    status = cli.main(["report", "--driver", "fake", "--cpu-dedicated-set",
                       "0-9"])
    assert status == cli.EXIT_FAILURE
    err = capsys.readouterr().err
    assert "cpu_dedicated_set names CPUs 4-9, which this host does not " \
           "have" in err


@pytest.mark.parametrize("text, named", [
    ("[compute]\ncpu_dedicated_set = a-b\n", "[compute] cpu_dedicated_set"),
    ("[compute]\ncpu_allocation_ratio = inf\n",
     "[compute] cpu_allocation_ratio = inf must be a finite number"),
    ("[libvirt]\ncpu_mode = custom\n", "cpu_mode = custom needs"),
])
def test_bad_options_are_a_driver_error_at_init(text, named, tmp_path):
    path = tmp_path / "virtdriver.conf"
    path.write_text(text)
    driver = load_driver("fake", host="small",
                         conf=make_conf(config_files=[path]))

    with pytest.raises(DriverError, match="^fake driver options: bad "
                       "configuration") as info:
        driver.init_host("compute-1")
    assert named in str(info.value)


def test_described_cpu_is_the_guest_cpu_unless_configured(tmp_path):
    path = tmp_path / "virtdriver.conf"
    path.write_text("[libvirt]\ncpu_mode = none\n")
    host = {"name": "t", "cells": 1, "cores_per_cell": 2,
            "threads_per_core": 1, "memory_mb_per_cell": 1024,
            "cpu": {"features": ["avx2"]}}
    described = fake(host=host).node_capabilities("t")
    configured = fake(host=host, conf=make_conf(config_files=[path])
                      ).node_capabilities("t")

    avx2 = os_traits.HW_CPU_X86_AVX2
    assert described.traits.results[avx2].state.value == "asserted"
    assert configured.traits.results[avx2].state.value == "unasserted"

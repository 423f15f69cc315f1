"""The "nova" tree profile: Nova's flat root, Nova's ratios, Nova's
reshape protocol, Nova's option names."""

from __future__ import annotations

import os_resource_classes as orc
import os_traits
import pytest
from oslo_config import cfg

from virtdriver.capabilities.traits.derive import derive_traits
from virtdriver.capabilities.traits.model import (
    DerivationInputs, TraitState)
from virtdriver.capabilities.traits.registry import LIBVIRT_FAMILIES
from virtdriver.conf.nova import from_nova_conf
from virtdriver.conf.pinning import PinningConfig, pinning_config
from virtdriver.conf.reader import ConfigError
from virtdriver.drivers.fake_host import spec_from_dict
from virtdriver.drivers.host_resources import host_resources
from virtdriver.drivers.host_tree import publish_host
from virtdriver.drivers.nova_tree import (
    NovaProfile, move_vcpu_to_pcpu, nova_inventory, pcpu_reshape_needed,
    publish_nova)
from virtdriver.resource_tracker.provider_tree import ProviderTree


def host_and_report(**spec):
    host = spec_from_dict({"cells": 2, **spec}).host_capabilities()
    return host, derive_traits(DerivationInputs(host=host), LIBVIRT_FAMILIES)


DEFAULT_PROFILE = NovaProfile()
DEFAULT_PINNING = PinningConfig()


def publish(tree, profile=DEFAULT_PROFILE, pinning=DEFAULT_PINNING, **spec):
    host, report = host_and_report(**spec)
    resources = host_resources(host, None, pinning)
    publish_nova(tree, "node", resources=resources, report=report,
                 profile=profile, disk_gb=40)
    return tree, host, resources


def test_everything_on_the_root_memory_with_pages_no_page_inventory():
    tree, host, resources = publish(ProviderTree(),
                                    pages_per_cell={2048: 512})
    assert [tree.data(u).name for u in tree.get_provider_uuids()] == ["node"]
    inventory = tree.data("node").inventory
    assert set(inventory) == {orc.VCPU, orc.MEMORY_MB, orc.DISK_GB}
    all_memory = sum(c.memory_kib for c in host.cells) // 1024
    assert inventory[orc.MEMORY_MB]["total"] == all_memory
    assert inventory[orc.MEMORY_MB]["reserved"] == 512
    assert inventory[orc.VCPU]["total"] == len(host.cpu_ids)
    assert inventory[orc.VCPU]["allocation_ratio"] == 4.0


def test_dedicated_and_shared_cpus_and_reserved_host_cpus():
    host, _ = host_and_report()
    cpus = sorted(host.cpu_ids)
    pinning = PinningConfig(cpu_dedicated_set=frozenset(cpus[:2]),
                            cpu_shared_set=frozenset(cpus[2:]))
    tree, _, _ = publish(ProviderTree(), NovaProfile(reserved_host_cpus=1),
                         pinning)
    inventory = tree.data("node").inventory
    assert inventory[orc.PCPU]["total"] == 2
    assert inventory[orc.PCPU]["allocation_ratio"] == 1.0
    assert inventory[orc.VCPU]["total"] == len(cpus) - 2
    assert inventory[orc.VCPU]["reserved"] == 1


def test_ratios_follow_novas_precedence():
    tree, _, _ = publish(ProviderTree(), NovaProfile(
        initial_cpu_allocation_ratio=8.0, initial_ram_allocation_ratio=1.5))
    inventory = tree.data("node").inventory
    assert inventory[orc.VCPU]["allocation_ratio"] == 8.0
    assert inventory[orc.MEMORY_MB]["allocation_ratio"] == 1.5
    # An operator's ratio set through Placement stays (no option set)...
    inventory[orc.VCPU]["allocation_ratio"] = 3.0
    tree.update_inventory("node", inventory)
    publish(tree, NovaProfile(initial_cpu_allocation_ratio=8.0))
    assert tree.data("node").inventory[orc.VCPU]["allocation_ratio"] == 3.0
    # ...until the option is set: it wins over everything.
    publish(tree, NovaProfile(cpu_allocation_ratio=2.0))
    assert tree.data("node").inventory[orc.VCPU]["allocation_ratio"] == 2.0


def test_foreign_traits_survive_owned_ones_follow_the_host():
    tree, _, _ = publish(ProviderTree())
    _, report = host_and_report()
    owned_absent = next(t for t in sorted(report.results)
                        if report.state(t) is TraitState.UNASSERTED)
    tree.add_traits("node", "CUSTOM_OPERATOR", os_traits.COMPUTE_NODE,
                    os_traits.COMPUTE_STATUS_DISABLED, owned_absent)
    publish(tree)
    traits = tree.data("node").traits
    assert {"CUSTOM_OPERATOR", os_traits.COMPUTE_NODE,
            os_traits.COMPUTE_STATUS_DISABLED} <= traits
    assert owned_absent not in traits


def test_numa_cells_of_the_numa_profile_go_others_stay():
    tree = ProviderTree()
    host, report = host_and_report()
    publish_host(tree, "node", host=host, report=report,
                 resources=host_resources(host, None, PinningConfig()))
    tree.new_child("node_gpu", "node")
    publish(tree)
    names = sorted(tree.data(u).name for u in tree.get_provider_uuids())
    assert names == ["node", "node_gpu"]


def test_reshape_is_asked_only_when_pinned_guests_move():
    asked = []

    def pinned():
        asked.append(True)
        return True

    vcpu_only = {orc.VCPU: {}}
    both = {orc.VCPU: {}, orc.PCPU: {}}
    assert pcpu_reshape_needed(vcpu_only, both, pinned)
    assert not pcpu_reshape_needed(both, both, pinned)       # already PCPU
    assert not pcpu_reshape_needed({}, both, pinned)         # new node
    assert not pcpu_reshape_needed(vcpu_only, vcpu_only, pinned)
    assert len(asked) == 1  # the database is asked only when it matters
    assert not pcpu_reshape_needed(vcpu_only, both, lambda: False)


def test_move_vcpu_to_pcpu_moves_pinned_consumers_only():
    allocations = {
        "pinned": {"allocations": {"root": {"resources": {
            orc.VCPU: 2, orc.MEMORY_MB: 512}}}},
        "floating": {"allocations": {"root": {"resources": {orc.VCPU: 1}}}},
        "elsewhere": {"allocations": {"other": {"resources": {
            orc.VCPU: 4}}}},
    }
    moved = move_vcpu_to_pcpu(allocations, "root",
                              {"pinned", "elsewhere"}.__contains__)
    assert moved == ["pinned"]
    assert allocations["pinned"]["allocations"]["root"]["resources"] == {
        orc.PCPU: 2, orc.MEMORY_MB: 512}
    assert allocations["floating"]["allocations"]["root"]["resources"] == {
        orc.VCPU: 1}
    assert allocations["elsewhere"]["allocations"]["other"]["resources"] == {
        orc.VCPU: 4}


def test_zero_totals_are_left_out():
    host, _ = host_and_report()
    pinning = PinningConfig(cpu_dedicated_set=frozenset(host.cpu_ids))
    inventory = nova_inventory(host_resources(host, None, pinning),
                               NovaProfile(), {}, None)
    assert orc.VCPU not in inventory and orc.DISK_GB not in inventory


def nova_style_conf(values=None):
    """A ConfigOpts with Nova's own option names and groups (as
    nova.conf.CONF has them)."""
    conf = cfg.ConfigOpts()
    conf.register_opts([
        cfg.FloatOpt("cpu_allocation_ratio"),
        cfg.FloatOpt("ram_allocation_ratio"),
        cfg.FloatOpt("disk_allocation_ratio"),
        cfg.FloatOpt("initial_cpu_allocation_ratio", default=4.0),
        cfg.FloatOpt("initial_ram_allocation_ratio", default=1.0),
        cfg.FloatOpt("initial_disk_allocation_ratio", default=1.0),
        cfg.IntOpt("reserved_host_cpus", default=0),
        cfg.IntOpt("reserved_host_memory_mb", default=512),
        cfg.IntOpt("reserved_host_disk_mb", default=0),
        cfg.MultiOpt("reserved_huge_pages", item_type=cfg.types.Dict()),
    ])
    conf.register_opts([cfg.StrOpt("cpu_dedicated_set"),
                        cfg.StrOpt("cpu_shared_set"),
                        cfg.ListOpt("image_type_exclude_list", default=[])],
                       group="compute")
    conf.register_opts([cfg.StrOpt("virt_type", default="kvm"),
                        cfg.StrOpt("cpu_mode"),
                        cfg.ListOpt("cpu_models", default=[]),
                        cfg.ListOpt("cpu_model_extra_flags", default=[]),
                        cfg.ListOpt("hw_machine_type")],
                       group="libvirt")
    conf([])
    for (group, name), value in (values or {}).items():
        conf.set_override(name, value, group)
    return conf


def test_novas_names_and_groups_are_read():
    nova = nova_style_conf({
        (None, "initial_cpu_allocation_ratio"): 16.0,
        (None, "ram_allocation_ratio"): 1.5,
        (None, "reserved_host_cpus"): 2,
        (None, "reserved_host_memory_mb"): 1024,
        (None, "reserved_host_disk_mb"): 1025,
        (None, "reserved_huge_pages"): [
            {"node": "0", "size": "2048", "count": "64"}],
        ("compute", "cpu_dedicated_set"): "2-3",
        ("compute", "cpu_shared_set"): "0-1",
        ("libvirt", "cpu_mode"): "custom",
        ("libvirt", "cpu_models"): ["Haswell"],
    })
    conf, profile = from_nova_conf(nova)
    assert profile == NovaProfile(
        cpu_allocation_ratio=None, ram_allocation_ratio=1.5,
        initial_cpu_allocation_ratio=16.0, reserved_host_cpus=2,
        reserved_host_memory_mb=1024, reserved_disk_gb=2)
    pinning = pinning_config(conf)
    assert pinning.cpu_dedicated_set == {2, 3}
    assert pinning.cpu_shared_set == {0, 1}
    assert pinning.reserved_host_memory_mb == 1024
    assert [r.entry for r in pinning.reserved_huge_pages] == [
        "node:0,size:2048,count:64"]
    assert conf.libvirt.cpu_mode == "custom"
    assert conf.libvirt.cpu_models == ["Haswell"]


def test_a_virt_type_virtdriver_does_not_model_is_refused():
    with pytest.raises(ConfigError, match=r"\[libvirt\] virt_type = uml"):
        from_nova_conf(nova_style_conf({("libvirt", "virt_type"): "uml"}))

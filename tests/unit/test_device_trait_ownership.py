"""No device trait can leak: every name offer_traits emits, over the
corpus and builder hosts, is valid and owned by the libvirt driver's
registry (or by the rule that names it), and its family is the one that
declares it."""

from __future__ import annotations

import pytest

from tests.device_hosts import gpu, mdev, parsed, sriov_nic
from virtdriver.capabilities.devices.parser import parse_node_devices
from virtdriver.capabilities.devices.rules import (
    DeviceRules, MdevRule, parse_pci_rule)
from virtdriver.capabilities.devices.selection import select_devices
from virtdriver.capabilities.errors import CapabilityXMLError
from virtdriver.capabilities.traits.device_providers import (
    FAMILIES, RULE_FAMILY, offer_traits, rule_ownership)
from virtdriver.capabilities.traits.model import TraitState
from virtdriver.capabilities.traits.names import invalid_reason
from virtdriver.capabilities.traits.registry import (
    LIBVIRT_FAMILIES, LIBVIRT_OWNERSHIP)
from virtdriver.drivers.device_tree import family_of

ANY_PCI = DeviceRules((parse_pci_rule(
    '{"vendor_id": "*", "traits": "gold,HW_GPU_API_VULKAN"}', "r1"),))


def corpus_readings(corpus_dir):
    for path in sorted((corpus_dir / "nodedev").glob("*.xml")):
        try:
            yield path.name, parse_node_devices([(path.name,
                                                  path.read_bytes())])
        except CapabilityXMLError:
            continue  # libvirt's -invalid files, refused as libvirt does


def all_types(devices):
    return DeviceRules(mdev=tuple(MdevRule(t) for t in dict.fromkeys(
        t.type_id for p in devices.mdev_parents for t in p.mdev_types)))


def check(devices, rules):
    owned = LIBVIRT_OWNERSHIP.union(rule_ownership(rules))
    emitted = 0
    for offer in select_devices(devices, rules):
        for result in offer_traits(offer):
            emitted += 1
            assert result.state is TraitState.ASSERTED
            assert invalid_reason(result.trait) is None, result.trait
            assert owned.owns(result.trait), f"{result.trait} would leak"
            assert result.evidence, result.trait
            if result.family != RULE_FAMILY:
                assert family_of(result.trait) == result.family
    return emitted


def test_the_device_families_are_in_the_registry():
    for family in FAMILIES:
        assert family in LIBVIRT_FAMILIES
        for prefix in family.prefixes:
            assert prefix.startswith("CUSTOM_") and prefix.endswith("_")
            assert LIBVIRT_OWNERSHIP.owns(prefix + "X")
    assert not LIBVIRT_OWNERSHIP.owns("CUSTOM_RACK_7")
    assert not LIBVIRT_OWNERSHIP.owns("CUSTOM_PCI_8086_1572")  # a class


def test_every_corpus_device_trait_is_owned(corpus_dir):
    emitted = 0
    for _name, devices in corpus_readings(corpus_dir):
        emitted += check(devices, ANY_PCI)
        emitted += check(devices, all_types(devices))
    assert emitted > 20  # not vacuous


@pytest.mark.parametrize("devices", [
    parsed([gpu("0000:84:00.0"), mdev("3b3e6d7a-0000-4000-8000-"
                                       "000000000001", "nvidia-35",
                                       "0000:84:00.0")]),
    parsed(sriov_nic("0000:3b:00.0", 8)),
], ids=["gpu", "sriov"])
def test_every_builder_device_trait_is_owned(devices):
    vfs = DeviceRules((parse_pci_rule('{"product_id": "154c", "traits": '
                                      '"Fast Lane"}', "r"),))
    assert check(devices, all_types(devices)) + check(devices, vfs)


def test_rule_traits_are_owned_only_while_a_rule_names_them():
    owned = rule_ownership(ANY_PCI)
    assert owned.owns("CUSTOM_GOLD") and owned.owns("HW_GPU_API_VULKAN")
    assert not rule_ownership(DeviceRules()).owns("CUSTOM_GOLD")

"""Which devices the rules expose, and as what; the refusals name both
rules.  Hosts are fakelibvirt builder documents and libvirt's own corpus,
read by the real node-device parser."""

from __future__ import annotations

import os_resource_classes as orc
import os_traits
import pytest

from tests.device_hosts import (
    ACCEL, corpus_devices, gpu, mdev, parsed, sriov_nic)
from virtdriver.capabilities.devices.rules import (
    DeviceRules, MdevRule, parse_pci_rule)
from virtdriver.capabilities.devices.selection import (
    MDEV, PCI, VF_POOL, SelectionError, select_devices)
from virtdriver.capabilities.traits.device_providers import offer_traits
from virtdriver.fakelibvirt.nodedev_builder import MdevType, pci_device

U1, U2 = ("3b3e6d7a-0000-4000-8000-000000000001",
          "3b3e6d7a-0000-4000-8000-000000000002")


def spec(*texts):
    return tuple(parse_pci_rule(t, f"[pci] device_spec #{i}")
                 for i, t in enumerate(texts, 1))


def rules(*texts, mdev=()):
    return DeviceRules(spec(*texts), tuple(mdev))


HOST = parsed([gpu("0000:84:00.0", numa=1), gpu("0000:85:00.0", numa=None),
               *sriov_nic("0000:3b:00.0", 4, numa=0),
               pci_device("0000:d8:00.0", 0x15b3, 0x101b, numa_node=1,
                          class_id=ACCEL)])


def test_an_unlisted_device_is_never_exposed():
    assert select_devices(HOST, DeviceRules()) == ()
    assert select_devices(HOST, rules('{"vendor_id": "1af4"}')) == ()
    assert select_devices(HOST, DeviceRules(
        mdev=(MdevRule("nvidia-99"),))) == ()


def test_a_plain_function_is_one_unit_of_nova_default_class():
    (offer,) = select_devices(HOST, rules(
        '{"vendor_id": "15b3", "product_id": "101b"}'))
    assert (offer.key, offer.kind, offer.total, offer.numa_node) == (
        "pci_0000_d8_00_0", PCI, 1, 1)
    assert offer.resource_class == "CUSTOM_PCI_15B3_101B"
    assert offer.rule == "[pci] device_spec #1"


def test_vfs_are_pooled_on_their_pf_provider():
    (offer,) = select_devices(HOST, rules(
        '{"vendor_id": "8086", "product_id": "154c", '
        '"resource_class": "nic_vf", "traits": "fast"}'))
    assert (offer.key, offer.kind, offer.total) == (
        "pci_0000_3b_00_0", VF_POOL, 4)
    assert offer.resource_class == "CUSTOM_NIC_VF"
    assert offer.rule_traits == ("CUSTOM_FAST",)
    assert offer.device.name == "pci_0000_3b_00_0"  # the PF stands for it


def test_a_pf_address_lists_its_vfs_too_so_both_are_refused():
    with pytest.raises(SelectionError) as info:
        select_devices(HOST, rules('{"address": "0000:3b:00.0"}'))
    assert "[pci] device_spec #1" in str(info.value)
    assert "PF 0000:3b:00.0" in str(info.value)


def test_a_pf_and_its_vfs_by_two_rules_are_refused_naming_both():
    with pytest.raises(SelectionError) as info:
        select_devices(HOST, rules('{"product_id": "1572"}',
                                   '{"product_id": "154c"}'))
    message = str(info.value)
    assert "#1" in message and "#2" in message


def test_vfs_of_one_pf_with_different_classes_or_traits_are_refused():
    with pytest.raises(SelectionError, match="#1.*#2"):
        select_devices(HOST, rules(
            '{"address": "0000:3c:00.0", "resource_class": "a"}',
            '{"product_id": "154c", "resource_class": "b"}'))
    with pytest.raises(SelectionError, match="traits"):
        select_devices(HOST, rules(
            '{"address": "0000:3c:00.0", "traits": "red"}',
            '{"product_id": "154c"}'))


def test_nova_defect_sold_twice_passthrough_and_mdev_parent_refused():
    """Nova exposes one GPU both as VGPU and as a PCI device."""
    with pytest.raises(SelectionError) as info:
        select_devices(HOST, rules('{"vendor_id": "10de"}',
                                   mdev=[MdevRule("nvidia-35")]))
    message = str(info.value)
    assert "[pci] device_spec #1" in message
    assert "[devices] enabled_mdev_types nvidia-35" in message


def test_mdev_parents_vgpu_on_display_total_is_existing_plus_available():
    host = parsed([gpu("0000:84:00.0", numa=1),
                   mdev(U1, "nvidia-35", "0000:84:00.0"),
                   mdev(U2, "nvidia-35", "0000:84:00.0")])
    (offer,) = select_devices(host, rules(mdev=[MdevRule("nvidia-35")]))
    assert (offer.key, offer.kind, offer.resource_class) == (
        "pci_0000_84_00_0", MDEV, orc.VGPU)
    assert (offer.existing, offer.total) == (2, 18)


def test_mdev_class_of_a_non_display_parent_and_from_the_option(corpus_dir):
    host = corpus_devices(corpus_dir, "pci_0000_02_10_7_mdev_types.xml")
    (offer,) = select_devices(host, rules(mdev=[MdevRule("foo2")]))
    assert offer.resource_class == "CUSTOM_MDEV_FOO2" and offer.total == 2
    (offer,) = select_devices(host, rules(
        mdev=[MdevRule("foo2", mdev_class="CUSTOM_CRYPTO")]))
    assert offer.resource_class == "CUSTOM_CRYPTO"


def test_nova_defect_max_instances_caps_instead_of_deleting():
    """Nova drops a parent's provider once max_instances is reached;
    here the type's total is capped and every parent keeps a provider."""
    host = parsed([gpu(f"0000:8{i}:00.0") for i in range(3)]
                  + [mdev(U1, "nvidia-35", "0000:82:00.0")])
    offers = select_devices(host, rules(
        mdev=[MdevRule("nvidia-35", max_instances=20)]))
    assert [(o.key, o.total, o.capped) for o in offers] == [
        ("pci_0000_80_00_0", 16, 0), ("pci_0000_81_00_0", 4, 12),
        ("pci_0000_82_00_0", 1, 16)]  # never below the existing mdev


def test_one_active_type_per_parent():
    two = (MdevType("nvidia-35", None, 16), MdevType("nvidia-36", None, 8))
    host = parsed([gpu("0000:84:00.0", types=two),
                   gpu("0000:85:00.0", types=two)])
    offers = select_devices(host, rules(mdev=[
        MdevRule("nvidia-35"),
        MdevRule("nvidia-36", device_addresses=("0000:85:00.0",))]))
    assert [(o.key, o.mdev_type.type_id) for o in offers] == [
        ("pci_0000_84_00_0", "nvidia-35"), ("pci_0000_85_00_0", "nvidia-36")]
    with pytest.raises(SelectionError, match="one active type"):
        select_devices(host, rules(mdev=[
            MdevRule("nvidia-35", device_addresses=("0000:84:00.0",)),
            MdevRule("nvidia-36", device_addresses=("0000:84:00.0",))]))


def test_nova_defect_non_pci_mdev_parents_are_offered(corpus_dir):
    """Nova assumes every mdev parent has a PCI address and crashes on
    s390's AP matrix and CSS devices."""
    host = corpus_devices(corpus_dir, "ap_matrix_mdev_types.xml",
                          "css_0_0_fffe_mdev_types.xml")
    offers = select_devices(host, rules(mdev=[
        MdevRule("vfio_ap-passthrough"),
        MdevRule("vfio_ccw-io", device_addresses=("0.0.fffe",))]))
    assert [(o.key, o.resource_class, o.total, o.numa_node)
            for o in offers] == [
        ("ap_matrix", "CUSTOM_MDEV_VFIO_AP_PASSTHROUGH", 65536, None),
        ("css_0_0_fffe", "CUSTOM_MDEV_VFIO_CCW_IO", 1, None)]


def test_first_matching_rule_wins_as_in_nova():
    (offer,) = select_devices(HOST, rules(
        '{"address": "*:d8:*.*", "resource_class": "first"}',
        '{"vendor_id": "15b3", "resource_class": "second"}'))
    assert offer.resource_class == "CUSTOM_FIRST"


def test_names_too_long_for_placement():
    long_type = "t" * 300
    host = parsed([gpu("0000:84:00.0", class_id=ACCEL,
                       types=(MdevType(long_type, None, 2),))])
    with pytest.raises(SelectionError, match="longer than 255.*mdev_class"):
        select_devices(host, rules(mdev=[MdevRule(long_type)]))
    (offer,) = select_devices(host, rules(mdev=[
        MdevRule(long_type, mdev_class="CUSTOM_LONG")]))
    traits = {r.trait for r in offer_traits(offer)}
    assert traits and not any(t.startswith("CUSTOM_MDEV_TYPE_")
                              for t in traits)
    with pytest.raises(SelectionError, match="resource_class"):
        select_devices(HOST, rules('{"vendor_id": "15b3", '
                                   f'"resource_class": "{"r" * 260}"}}'))


def test_a_physical_network_device_is_neutrons_not_a_provider():
    """As in Nova: a device tagged with a physnet is for Neutron SR-IOV
    ports, not a Placement provider."""
    assert select_devices(HOST, rules(
        '{"product_id": "154c", "physical_network": "physnet1"}')) == ()
    (offer,) = select_devices(HOST, rules(
        '{"product_id": "154c", "physical_network": "physnet1", '
        '"address": "0000:3c:00.0"}', '{"product_id": "154c"}'))
    assert offer.total == 3  # the physnet VF is not in the pool


def test_only_the_first_type_without_addresses_is_the_default():
    """Nova: later types without device_addresses are not used."""
    host = parsed([gpu("0000:84:00.0",
                       types=(MdevType("nvidia-36", None, 8),))])
    assert select_devices(host, rules(mdev=[
        MdevRule("nvidia-35"), MdevRule("nvidia-36")])) == ()
    (offer,) = select_devices(host, rules(mdev=[
        MdevRule("nvidia-36"), MdevRule("nvidia-35")]))
    assert offer.mdev_type.type_id == "nvidia-36"


def test_a_pf_named_by_a_plain_hex_dict_lists_its_vfs_as_in_nova():
    with pytest.raises(SelectionError, match="PF 0000:3b:00.0"):
        select_devices(HOST, rules('{"address": {"domain": "0000", '
                                   '"bus": "3b", "slot": "00", '
                                   '"function": "0"}}'))
    # a pattern that is not plain hex names no single PF
    (offer,) = select_devices(HOST, rules(
        '{"address": {"bus": "3[b]", "slot": "00", "function": "0"}}'))
    assert offer.kind == "pci" and offer.key == "pci_0000_3b_00_0"


def test_an_sriov_gpu_vf_as_mdev_parent_and_its_pf_passed_through():
    """NVIDIA's SR-IOV GPUs carve mdevs from VFs: passing the PF through
    would sell them twice."""
    pf = "0000:41:00.0"
    host = parsed([pci_device(pf, 0x10DE, 0x2236, class_id=0x030200,
                              virtual_functions=["0000:41:00.4"]),
                   pci_device("0000:41:00.4", 0x10DE, 0x2236,
                              class_id=0x030200, physical_function=pf,
                              mdev_types=[MdevType("nvidia-700", None, 1)])])
    with pytest.raises(SelectionError) as info:
        select_devices(host, rules(
            '{"address": {"bus": "41", "slot": "00", "function": "0"}}',
            mdev=[MdevRule("nvidia-700")]))
    assert "its PF 0000:41:00.0" in str(info.value)
    assert "#1" in str(info.value) and "nvidia-700" in str(info.value)


def test_hw_nic_sriov_on_a_vf_pool_and_on_a_pf_passed_through_whole():
    def traits(spec):
        (offer,) = select_devices(HOST, rules(spec))
        return {r.trait for r in offer_traits(offer)}

    assert os_traits.HW_NIC_SRIOV in traits('{"product_id": "154c"}')
    assert os_traits.HW_NIC_SRIOV in traits('{"product_id": "1572"}')
    assert os_traits.HW_NIC_SRIOV not in traits('{"vendor_id": "15b3"}')

"""libvirt 9.0's own node-device XML (its test data) reads into the device
model: every file, with the values each one is there to show."""

from __future__ import annotations

import pytest

from virtdriver.capabilities import CapabilityXMLError
from virtdriver.capabilities.devices import (
    Mdev, MdevParent, MdevType, PCIAddress, PCIDevice)
from virtdriver.capabilities.devices.parser import (
    parse_node_device, parse_node_device_stream, parse_node_devices)

from tests.corpus import CORPUS, corpus_files

NODEDEV = CORPUS / "nodedev"
FILES = corpus_files("nodedev")
#: The files libvirt's schema test expects to fail, and libvirt's parser
#: refuses (a CCW device number past 0xffff).
INVALID = [f for f in FILES if f.stem.endswith("-invalid")]
STREAM = "mdevctl-list-multiple.out.xml"


def read(name: str):
    return parse_node_device((NODEDEV / name).read_bytes(), name)


@pytest.mark.parametrize("path", [f for f in FILES if f not in INVALID
                                  and f.name != STREAM],
                         ids=lambda p: p.name)
def test_every_valid_corpus_document_reads(path):
    device = parse_node_device(path.read_bytes(), path.name)
    assert device is None or device.name


def test_the_corpus_is_all_there(corpus_dir):
    assert len(FILES) == 51
    assert len(INVALID) == 3


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_ccw_numbers_are_refused_as_libvirt_refuses_them(path):
    with pytest.raises(CapabilityXMLError) as info:
        parse_node_device(path.read_bytes(), path.name)
    assert info.value.source == path.name
    assert info.value.reason == ("<devno>: text '0x10000' is out of range "
                                 "(at most 0xffff)")
    assert info.value.line is not None


def test_mdevctl_listing_holds_five_mdevs_on_three_kinds_of_parent(
        corpus_dir):
    mdevs = parse_node_device_stream((NODEDEV / STREAM).read_bytes(), STREAM)
    assert all(isinstance(m, Mdev) for m in mdevs)
    assert [(m.parent, m.type_id) for m in mdevs] == [
        ("pci_0000_00_02_0", "i915-GVTg_V5_4"),
        ("pci_0000_00_02_0", "i915-GVTg_V5_4"),
        ("pci_0000_00_02_0", "i915-GVTg_V5_8"),
        ("ap_matrix", "vfio_ap-passthrough"),
        ("css_0_0_0052", "vfio_ccw-io")]
    assert mdevs[0].uuid == "200f228a-c80a-4d50-bfb7-f5a0e4e34045"


def test_a_pf_with_vfs_and_max_count(corpus_dir):
    device = read("pci_0000_02_10_7_sriov_vfs.xml")
    assert isinstance(device, PCIDevice)
    assert device.is_pf and not device.is_vf
    assert [str(vf) for vf in device.virtual_functions] == [
        "0000:02:00.2", "0000:02:00.3", "0000:02:00.4", "0000:02:00.5"]
    assert device.max_virtual_functions == 4  # no maxCount: those listed
    assert read("pci_0000_02_10_7_sriov_zero_vfs_max_count.xml"
                ).max_virtual_functions == 3


def test_a_vf_names_its_pf(corpus_dir):
    device = read("pci_0000_02_10_7_sriov.xml")
    assert device.is_vf and not device.is_pf
    assert device.physical_function == PCIAddress(0, 2, 0, 1)
    assert device.numa_node == 0 and device.iommu_group == 31


def test_ids_are_lowercase_four_hex_digits_and_class_is_read(corpus_dir):
    device = read("pci_0000_42_00_0_vpd.xml")
    assert (device.vendor_id, device.product_id) == ("15b3", "a2d6")
    assert device.class_code == 0x020000 and not device.is_display
    assert device.vendor_name == "Mellanox Technologies"
    assert device.vpd_serial == "MT2113X00000"  # the read-only one
    assert device.parent is None
    assert read("pci_8086_0c0c_snd_hda_intel.xml").product_id == "0c0c"


def test_mdev_types_of_a_pci_parent(corpus_dir):
    device = read("pci_0000_02_10_7_mdev_types.xml")
    assert device.mdev_types == (
        MdevType("foo1", "bar1", "vfio-pci", 1),
        MdevType("foo2", "bar2", "vfio-pci", 2))
    assert device.is_mdev_parent


def test_s390_mdev_parents_are_read_not_crashed_on(corpus_dir):
    matrix = read("ap_matrix_mdev_types.xml")
    css = read("css_0_0_fffe_mdev_types_channel_dev_addr.xml")
    assert matrix == MdevParent("ap_matrix", "ap_matrix", (MdevType(
        "vfio_ap-passthrough", "VFIO AP Passthrough Device", "vfio-ap",
        65536),), None, "computer")
    assert (css.kind, css.address) == ("css", "0.0.fffe")
    assert css.mdev_types[0].device_api == "vfio-ccw"
    # without mdev types, not an mdev parent (vfio_ap / vfio_ccw unbound)
    assert read("ap_matrix.xml") is None and read("css_0_0_ffff.xml") is None


def test_mdev_uuid_from_uuid_element_or_from_the_name(corpus_dir):
    assert read("mdev_cc000052_9b13_9b13_9b13_cc23009b1326.xml").uuid == \
        "cc000052-9b13-9b13-9b13-cc23009b1326"
    dashes = read("mdev_ee0b88c4_f554_4dc1_809d_b2a01e8e48ad.xml")
    assert dashes.uuid == "ee0b88c4-f554-4dc1-809d-b2a01e8e48ad"
    assert (dashes.parent, dashes.iommu_group) == ("ap_matrix", 0)


def test_other_devices_are_of_no_interest(corpus_dir):
    for name in ("computer.xml", "net_00_13_02_b9_f9_d3.xml",
                 "usb_device_1d6b_1_0000_00_1d_0.xml", "drm_renderD129.xml",
                 "pci_8086_27c5_scsi_host.xml", "ccw_0_0_ffff.xml"):
        assert read(name) is None, name


def test_the_whole_corpus_as_one_listing(corpus_dir):
    # One host cannot hold every file (several describe pci_0000_02_10_7);
    # keep the first of each name, as a listing would name each once.
    seen, documents = set(), []
    for path in FILES:
        if path in INVALID or path.name == STREAM:
            continue
        device = parse_node_device(path.read_bytes(), path.name)
        if device is not None and device.name not in seen:
            seen.add(device.name)
            documents.append((path.name, path.read_bytes()))
    reading = parse_node_devices(documents, source="corpus")
    # libvirt reads <bus>4294967295</bus>; no PCI function has that bus
    assert reading.ignored == (("pci_0000_00_02_0", "not a usable PCI "
                                "function: PCI bus 0xffffffff is out of "
                                "range (0 to 0xff)"),)
    assert reading.by_address("0000:42:00.0").vpd_serial == "MT2113X00000"
    assert [p.name for p in reading.other_mdev_parents] == [
        "ap_matrix", "css_0_0_fffe"]
    assert reading.mdevs_of("pci_0000_00_02_0")
    assert list(reading.pci) == sorted(reading.pci, key=lambda d: d.address)


def test_a_listing_naming_a_device_twice_is_refused(corpus_dir):
    data = (NODEDEV / "pci_1002_71c4.xml").read_bytes()
    with pytest.raises(CapabilityXMLError, match="described twice"):
        parse_node_devices([("a", data), ("b", data)])

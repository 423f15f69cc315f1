"""Node-device XML from hostile or broken hands is refused, never trusted.

Each bad value is planted in a document the fakelibvirt builder writes as
libvirt 9.0 does; the parse must fail with CapabilityXMLError naming the
document, the element and its line — never succeed, never raise anything
else.
"""

from __future__ import annotations

import pytest
from lxml import etree

from virtdriver.capabilities import CapabilityXMLError
from virtdriver.capabilities.devices.parser import (
    MAX_DEVICE_BYTES, parse_node_device, parse_node_device_stream,
    parse_node_devices)
from virtdriver.fakelibvirt.nodedev_builder import (
    MdevType, mdev_device, pci_device)

GPU = pci_device("0000:81:00.0", 0x10DE, 0x1EB8, numa_node=1,
                 class_id=0x030200, iommu_group=40,
                 mdev_types=[MdevType("nvidia-222", "GRID T4-1B", 16)]).xml
VF = pci_device("0000:82:00.2", 0x8086, 0x154C,
                physical_function="0000:82:00.0").xml
MDEV = mdev_device("4b20d080-1b54-4048-85b3-a6a62d165c01", "nvidia-222",
                   "0000:81:00.0").xml
BAD_NUMBERS = ["x", "-1", "", "1.5", "9" * 21, "\u0663", "1_0", "0x"]


def plant(xml: str, xpath: str, attr: str | None, value: str
          ) -> tuple[bytes, int]:
    root = etree.fromstring(xml.encode())
    target = root.xpath(xpath)[0]
    if attr is None:
        target.text = value
    else:
        target.set(attr, value)
    data = etree.tostring(root, pretty_print=True)
    return data, etree.fromstring(data).xpath(xpath)[0].sourceline


def refused(data: bytes | str, source: str = "planted.xml"
            ) -> CapabilityXMLError:
    with pytest.raises(CapabilityXMLError) as info:
        parse_node_device(data, source)
    assert info.value.source == source
    return info.value


@pytest.mark.parametrize("value", BAD_NUMBERS)
@pytest.mark.parametrize("xml,xpath,attr", [
    (GPU, "/device/capability/bus", None),
    (GPU, "/device/capability/function", None),
    (GPU, "/device/capability/class", None),
    (GPU, "/device/capability/vendor", "id"),
    (GPU, "/device/capability/product", "id"),
    (GPU, "/device/capability/numa", "node"),
    (GPU, "/device/capability/iommuGroup", "number"),
    (GPU, "//type/availableInstances", None),
    (VF, "//capability[@type='phys_function']/address", "bus"),
    (VF, "//capability[@type='phys_function']/address", "domain"),
])
def test_bad_numbers_are_refused_at_their_element(xml, xpath, attr, value):
    data, line = plant(xml, xpath, attr, value)
    if value == "-1" and attr == "node":  # libvirt's "no NUMA node"
        assert parse_node_device(data).numa_node is None
        return
    error = refused(data)
    assert error.line == line
    assert error.reason.startswith(f"<{xpath.rsplit('/', 1)[-1]}")
    assert any(words in error.reason for words in (
        "not a non-negative integer", "not a hexadecimal non-negative",
        "out of range", "larger than any 64-bit value"))


@pytest.mark.parametrize("xml,xpath,attr,value,limit", [
    (GPU, "/device/capability/vendor", "id", "0x10000", "0xffff"),
    (GPU, "/device/capability/class", None, "0x1000000", "0xffffff"),
    (GPU, "/device/capability/domain", None, "4294967296", "0xffffffff"),
    (VF, "//capability[@type='phys_function']/address", "slot", "0x20",
     "0x1f"),
    (VF, "//capability[@type='phys_function']/address", "function", "8",
     "0x7"),
])
def test_values_past_their_width_are_refused(xml, xpath, attr, value, limit):
    data, line = plant(xml, xpath, attr, value)
    error = refused(data)
    assert error.line == line
    assert f"out of range (at most {limit})" in error.reason


def test_an_octal_looking_address_is_refused_as_ambiguous():
    # libvirt would read '010' as octal 8; it always writes 0x
    data, _ = plant(VF, "//capability[@type='phys_function']/address",
                    "bus", "010")
    assert "not a non-negative integer" in refused(data).reason


def test_a_dtd_or_entity_is_refused_unexpanded():
    laughs = ('<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa">'
              '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
              "<device><name>&b;</name></device>")
    assert "DTD or entities" in refused(laughs).reason
    external = ('<!DOCTYPE device SYSTEM "file:///etc/passwd">'
                "<device><name>x</name></device>")
    assert "DTD or entities" in refused(external).reason


def test_an_oversized_document_is_refused_unparsed():
    padding = " " * MAX_DEVICE_BYTES
    error = refused(GPU.replace("</device>", padding + "</device>"))
    assert "over the limit" in error.reason


@pytest.mark.parametrize("xml,reason", [
    ("<capabilities/>", "root element is <capabilities>, expected <device>"),
    ("<device><capability type='pci'/></device>", "<device> has no <name>"),
    ("<device><name>x</name><capability/></device>",
     "<capability>: required attribute type is missing"),
    ("<device><name>x</name><capability type='pci'><domain>0</domain>"
     "<bus>0</bus><slot>0</slot></capability></device>",
     "<capability>: PCI address has no <function>"),
    ("<device><name>x</name><capability type='pci'><domain>0</domain>"
     "<bus>0</bus><slot>0</slot><function>0</function></capability>"
     "</device>", "<capability>: PCI device has no <vendor id> or "
     "<product id>"),
    ("<device><name>x</name><capability type='pci'><bus>0</bus>"
     "<bus>1</bus></capability></device>", "<bus>: given twice"),
    ("<device><name>m</name><capability type='mdev'/></device>",
     "<capability>: mdev has no <type id>"),
    ("<device><name>m</name><capability type='mdev'><type id='t'/>"
     "<uuid>not-a-uuid</uuid></capability></device>",
     "<uuid>: 'not-a-uuid' is not a UUID"),
    ("<device", "malformed XML"),
    ("", "document is empty"),
])
def test_broken_documents_say_what_is_wrong(xml, reason):
    assert refused(xml).reason.startswith(reason)


def test_a_pf_link_naming_two_pfs_is_refused():
    root = etree.fromstring(VF.encode())
    link = root.find(".//capability[@type='phys_function']")
    link.append(etree.fromstring(etree.tostring(link[0])))
    assert "names 2 addresses, not one" in refused(
        etree.tostring(root)).reason


def test_an_mdev_type_listed_twice_is_refused():
    root = etree.fromstring(GPU.encode())
    types = root.find(".//capability[@type='mdev_types']")
    types.append(etree.fromstring(etree.tostring(types[0])))
    assert "listed twice" in refused(etree.tostring(root)).reason


def test_a_stream_holds_only_device_documents():
    with pytest.raises(CapabilityXMLError, match="<domain> where a <device>"):
        parse_node_device_stream(GPU + "<domain/>", "s")
    with pytest.raises(CapabilityXMLError, match="XML declaration"):
        parse_node_device_stream('<?xml version="1.0"?>' + GPU, "s")
    with pytest.raises(CapabilityXMLError, match="DTD or entities"):
        parse_node_device_stream(GPU + '<!DOCTYPE x [<!ENTITY a "b">]>', "s")
    assert len(parse_node_device_stream(GPU + VF + MDEV, "s")) == 3


def test_two_devices_at_one_address_are_refused():
    other = GPU.replace("pci_0000_81_00_0", "pci_elsewhere")
    with pytest.raises(CapabilityXMLError) as info:
        parse_node_devices([("first", GPU), ("second", other)])
    assert info.value.source == "second"
    assert "PCI address 0000:81:00.0 is described twice (first by first)" \
        in info.value.reason


def test_builder_documents_read_back_as_built():
    gpu = parse_node_device(GPU, "gpu")
    assert (gpu.vendor_id, gpu.product_id, gpu.numa_node,
            gpu.iommu_group) == ("10de", "1eb8", 1, 40)
    assert gpu.is_display and gpu.mdev_types[0].available_instances == 16
    assert gpu.address.nova_suffix == gpu.name == "pci_0000_81_00_0"
    mdev = parse_node_device(MDEV, "mdev")
    assert (mdev.uuid, mdev.parent) == (
        "4b20d080-1b54-4048-85b3-a6a62d165c01", "pci_0000_81_00_0")

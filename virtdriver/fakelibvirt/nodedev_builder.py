"""Build node device documents (``virNodeDevice.XMLDesc()``): the
``computer`` root, PCI (with SR-IOV, mdev types, VPD) and mdev.

The shapes follow libvirt 9.0's node device formatter: ``pci_DDDD_BB_SS_F``
names, decimal ``<domain>/<bus>/<slot>/<function>``, hex ``id`` attributes,
``<capability>`` sub-elements in the order phys_function, virt_functions,
mdev_types, vpd, iommuGroup, numa, pci-express.  vDPA, CSS and AP devices
are in :mod:`.nodedev_kinds`.  mdev devices are named
``mdev_<uuid>_<parent address>`` (underscores), as libvirt names them since
7.3 so the same UUID may exist under two parents.
"""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lxml import etree

from virtdriver.fakelibvirt._builder_xml import sub, to_xml
from virtdriver.fakelibvirt.nodedev_mdev import mdev_name


@dataclass(frozen=True)
class NodeDevice:
    """A node device as a fake host serves it.

    Attributes:
        name: the libvirt device name (``pci_0000_81_00_0``).
        xml: its ``XMLDesc()`` document.
        capabilities: capability types, as libvirt's ``listCaps()``
            returns them (``pci``, plus ``mdev_types`` where offered; not
            the SR-IOV sub-capabilities, which libvirt does not list).
        parent: the parent device's name.
    """

    name: str
    xml: str
    capabilities: tuple[str, ...]
    parent: str | None = None


@dataclass(frozen=True)
class MdevType:
    """A mediated device type a PCI device offers (``<mdev_types>``)."""

    id: str
    name: str | None = None
    available_instances: int = 1
    device_api: str = "vfio-pci"


@dataclass(frozen=True)
class VPD:
    """A PCI device's Vital Product Data (``<capability type='vpd'>``).

    Attributes:
        name: the product name string.
        serial_number, part_number, change_level, manufacture_id: the
            read-only fields libvirt names.
        vendor_fields: read-only vendor fields by index (``"0"``-``"9"``,
            ``"A"``-``"Z"``).
        asset_tag: the read-write asset tag, if any.
    """

    name: str
    serial_number: str | None = None
    part_number: str | None = None
    change_level: str | None = None
    manufacture_id: str | None = None
    vendor_fields: Mapping[str, str] = field(default_factory=dict)
    asset_tag: str | None = None


def computer_device(uuid: str | None = None, *, hostname: str = "fakehost",
                    vendor: str | None = None, version: str | None = None,
                    serial: str | None = None,
                    firmware_vendor: str | None = None,
                    firmware_version: str | None = None,
                    release_date: str | None = None) -> NodeDevice:
    """The root device ``computer`` (``<capability type='system'>``), the
    parent of every device udev finds under no other.

    ``uuid`` (the system UUID) defaults to one derived from ``hostname``,
    so a host built twice is the same host.  libvirt writes ``<firmware>``
    even when it knows nothing of it, as here.
    """
    root = etree.Element("device")
    sub(root, "name", "computer")
    cap = sub(root, "capability", type="system")
    hardware = sub(cap, "hardware")
    for tag, value in (("vendor", vendor), ("version", version),
                       ("serial", serial)):
        if value is not None:
            sub(hardware, tag, value)
    sub(hardware, "uuid", uuid or str(uuid_module.uuid5(
        uuid_module.NAMESPACE_DNS, f"computer.{hostname}")))
    firmware = sub(cap, "firmware")
    for tag, value in (("vendor", firmware_vendor),
                       ("version", firmware_version),
                       ("release_date", release_date)):
        if value is not None:
            sub(firmware, tag, value)
    return NodeDevice("computer", to_xml(root), ("system",), None)


def pci_name(address: str) -> str:
    """libvirt's name for the PCI device at ``DDDD:BB:SS.F``."""
    domain, bus, slot, function = _split(address)
    return f"pci_{domain:04x}_{bus:02x}_{slot:02x}_{function:x}"


def pci_device(address: str, vendor_id: int, product_id: int, *,
               numa_node: int | None = None, class_id: int = 0x020000,
               vendor_name: str | None = None,
               product_name: str | None = None,
               driver: str | None = None, parent: str = "computer",
               iommu_group: int | None = None,
               physical_function: str | None = None,
               virtual_functions: Sequence[str] = (),
               max_vfs: int | None = None,
               mdev_types: Sequence[MdevType] = (),
               vpd: VPD | None = None) -> NodeDevice:
    """A PCI device (``<capability type='pci'>``).

    Args:
        address: ``DDDD:BB:SS.F`` (hex), e.g. ``0000:81:00.0``.
        vendor_id, product_id: PCI ids (``0x8086``, ``0x10fb``).
        numa_node: the cell the device sits on; ``None`` leaves ``<numa>``
            out, as libvirt does when the kernel reports ``-1``.
        class_id: PCI class code (``0x020000`` Ethernet, ``0x030000`` VGA).
        physical_function: address of the PF, for a VF.
        virtual_functions: addresses of this PF's VFs; ``max_vfs`` is the
            ``maxCount`` (defaults to their number).
        mdev_types: mediated device types this device offers.
        vpd: its Vital Product Data (listed as capability ``vpd``).
        iommu_group: the group number; the group lists this device only.
    """
    domain, bus, slot, function = _split(address)
    root = etree.Element("device")
    name = pci_name(address)
    sub(root, "name", name)
    sub(root, "path", f"/sys/bus/pci/devices/{_canonical(address)}")
    sub(root, "parent", parent)
    if driver:
        sub(sub(root, "driver"), "name", driver)
    cap = sub(root, "capability", type="pci")
    sub(cap, "class", f"0x{class_id:06x}")
    for tag, value in (("domain", domain), ("bus", bus), ("slot", slot),
                       ("function", function)):
        sub(cap, tag, value)
    sub(cap, "product", product_name, id=f"0x{product_id:04x}")
    sub(cap, "vendor", vendor_name, id=f"0x{vendor_id:04x}")
    caps = ["pci"]
    if physical_function:
        _address(sub(cap, "capability", type="phys_function"),
                 physical_function)
    if virtual_functions or max_vfs:
        vfs = sub(cap, "capability", type="virt_functions",
                  maxCount=max_vfs if max_vfs is not None
                  else len(virtual_functions))
        for vf in virtual_functions:
            _address(vfs, vf)
    if mdev_types:
        mdev_types_element(cap, mdev_types)
        caps.append("mdev_types")
    if vpd is not None:
        _vpd(sub(cap, "capability", type="vpd"), vpd)
        caps.append("vpd")
    if iommu_group is not None:
        _address(sub(cap, "iommuGroup", number=iommu_group), address)
    if numa_node is not None:
        sub(cap, "numa", node=numa_node)
    return NodeDevice(name, to_xml(root), tuple(caps), parent)


def mdev_device(uuid: str, mdev_type: str, parent_address: str, *,
                iommu_group: int = 0,
                driver: str = "vfio_mdev") -> NodeDevice:
    """A mediated device created from ``mdev_type`` on a PCI parent."""
    parent = pci_name(parent_address)
    name = mdev_name(uuid, _canonical(parent_address))
    root = etree.Element("device")
    sub(root, "name", name)
    sub(root, "path",
        f"/sys/devices/pci0000:00/{_canonical(parent_address)}/{uuid}")
    sub(root, "parent", parent)
    sub(sub(root, "driver"), "name", driver)
    cap = sub(root, "capability", type="mdev")
    sub(cap, "type", id=mdev_type)
    sub(cap, "uuid", uuid)
    sub(cap, "parent_addr", _canonical(parent_address))
    sub(cap, "iommuGroup", number=iommu_group)
    return NodeDevice(name, to_xml(root), ("mdev",), parent)


def mdev_types_element(parent: etree._Element,
                       mdev_types: Sequence[MdevType]) -> None:
    """Append ``<capability type='mdev_types'>`` listing ``mdev_types``."""
    types = sub(parent, "capability", type="mdev_types")
    for mdev_type in mdev_types:
        type_el = sub(types, "type", id=mdev_type.id)
        if mdev_type.name:
            sub(type_el, "name", mdev_type.name)
        sub(type_el, "deviceAPI", mdev_type.device_api)
        sub(type_el, "availableInstances", mdev_type.available_instances)


def _vpd(cap: etree._Element, vpd: VPD) -> None:
    sub(cap, "name", vpd.name)
    readonly = sub(cap, "fields", access="readonly")
    for tag, value in (("change_level", vpd.change_level),
                       ("manufacture_id", vpd.manufacture_id),
                       ("part_number", vpd.part_number),
                       ("serial_number", vpd.serial_number)):
        if value is not None:
            sub(readonly, tag, value)
    for index, value in sorted(vpd.vendor_fields.items()):
        sub(readonly, "vendor_field", value, index=index)
    if vpd.asset_tag is not None:
        sub(sub(cap, "fields", access="readwrite"), "asset_tag",
            vpd.asset_tag)


def _split(address: str) -> tuple[int, int, int, int]:
    try:
        domain, bus, rest = address.split(":")
        slot, function = rest.split(".")
        return int(domain, 16), int(bus, 16), int(slot, 16), int(function, 16)
    except ValueError:
        raise ValueError(f"PCI address {address!r}: expected DDDD:BB:SS.F "
                         "in hex, e.g. '0000:81:00.0'") from None


def _canonical(address: str) -> str:
    domain, bus, slot, function = _split(address)
    return f"{domain:04x}:{bus:02x}:{slot:02x}.{function:x}"


def _address(parent: etree._Element, address: str) -> None:
    domain, bus, slot, function = _split(address)
    sub(parent, "address", domain=f"0x{domain:04x}", bus=f"0x{bus:02x}",
        slot=f"0x{slot:02x}", function=f"0x{function:x}")

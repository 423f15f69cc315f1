"""Build node device documents (``virNodeDevice.XMLDesc()``): PCI and mdev.

The shapes follow libvirt 9.0's node device formatter: ``pci_DDDD_BB_SS_F``
names, decimal ``<domain>/<bus>/<slot>/<function>``, hex ``id`` attributes,
``<capability>`` sub-elements in the order phys_function, virt_functions,
mdev_types, iommuGroup, numa, pci-express.  mdev devices are named
``mdev_<uuid>_<parent address>`` (underscores), as libvirt names them since
7.3 so the same UUID may exist under two parents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lxml import etree

from virtdriver.fakelibvirt._builder_xml import sub, to_xml


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
               mdev_types: Sequence[MdevType] = ()) -> NodeDevice:
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
        types = sub(cap, "capability", type="mdev_types")
        for mdev_type in mdev_types:
            type_el = sub(types, "type", id=mdev_type.id)
            if mdev_type.name:
                sub(type_el, "name", mdev_type.name)
            sub(type_el, "deviceAPI", mdev_type.device_api)
            sub(type_el, "availableInstances", mdev_type.available_instances)
        caps.append("mdev_types")
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
    suffix = parent.removeprefix("pci_")
    name = f"mdev_{uuid.replace('-', '_')}_{suffix}"
    root = etree.Element("device")
    sub(root, "name", name)
    sub(root, "path",
        f"/sys/devices/pci0000:00/{_canonical(parent_address)}/{uuid}")
    sub(root, "parent", parent)
    sub(sub(root, "driver"), "name", driver)
    cap = sub(root, "capability", type="mdev")
    sub(cap, "type", id=mdev_type)
    sub(cap, "uuid", uuid)
    sub(cap, "iommuGroup", number=iommu_group)
    return NodeDevice(name, to_xml(root), ("mdev",), parent)


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

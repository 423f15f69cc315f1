"""A fake host's ``devices:`` list → the devices and the rules that list
them, so its device providers come out of the libvirt driver's selection
and publication code (:mod:`virtdriver.capabilities.devices.selection`,
:mod:`virtdriver.drivers.device_tree`).

Each entry (every described device is exposed)::

    devices:
      - {address: "0000:81:00.0", vendor_id: "8086", product_id: "1572",
         numa_node: 0}                         # a PCI function, 1 unit
      - {address: "0000:82:00.0", vendor_id: "8086", product_id: "1572",
         vfs: 4, numa_node: 1}                 # a PF: its 4 VFs pooled
      - {address: "0000:84:00.0", vendor_id: "10de", product_id: "1eb8",
         mdev_type: nvidia-35, instances: 4}   # an mdev parent (VGPU)

``numa_node`` (a cell id, or absent/``null``: no NUMA node, the device
hangs off the root), ``resource_class`` and ``traits`` (a rule's tags, as
``[pci] device_spec`` reads them).  A PF's VFs are at its bus, slot
``0x10 + i // 8``, function ``i % 8``, product ``vf_product_id`` (default
the PF's).  An mdev parent is a display controller (``VGPU``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from virtdriver.capabilities.devices.model import (
    HostDevices, MdevType, PCIAddress, PCIDevice)
from virtdriver.capabilities.devices.rules import (
    DeviceRules, MdevRule, parse_pci_rule)

_KEYS = {"address", "vendor_id", "product_id", "numa_node", "vfs",
         "vf_product_id", "mdev_type", "instances", "resource_class",
         "traits"}
#: Most VFs one described PF may have (PCI SR-IOV's limit).
MAX_VFS = 256


def fake_devices(entries: Sequence[Mapping[str, Any]], cells: int,
                 source: str) -> tuple[HostDevices, DeviceRules]:
    """The devices and rules of a ``devices:`` list.

    Raises:
        ValueError: naming the entry and field at fault.
    """
    pci: list[PCIDevice] = []
    rules = []
    mdev: dict[str, list[str]] = {}
    for index, entry in enumerate(entries, 1):
        where = f"{source}: devices #{index}"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where} is not a mapping")
        unknown = sorted(set(entry) - _KEYS)
        if unknown:
            raise ValueError(f"{where}: unknown field {unknown[0]!r}; "
                             f"known: {', '.join(sorted(_KEYS))}")
        try:
            address = PCIAddress.parse(str(entry.get("address", "")))
        except ValueError as exc:
            raise ValueError(f"{where}: address: {exc}") from None
        numa = entry.get("numa_node")
        if numa is not None and (not isinstance(numa, int)
                                 or isinstance(numa, bool)
                                 or not 0 <= numa < cells):
            raise ValueError(f"{where}: numa_node {numa!r} is not a cell "
                             f"id 0-{cells - 1} (or null)")
        vendor = _hex(where, "vendor_id", entry.get("vendor_id"))
        product = _hex(where, "product_id", entry.get("product_id"))
        tags = {k: entry[k] for k in ("resource_class", "traits")
                if k in entry}
        vfs = _count(where, "vfs", entry.get("vfs", 0), MAX_VFS)
        if entry.get("mdev_type") is not None:
            type_id = str(entry["mdev_type"])
            count = _count(where, "instances", entry.get("instances", 1),
                           1 << 16)
            pci.append(PCIDevice(
                address.nova_suffix, address, vendor, product, 0x030000,
                numa, mdev_types=(MdevType(type_id, type_id, "vfio-pci",
                                           count),), source=where))
            mdev.setdefault(type_id, []).append(str(address))
            continue
        if not vfs:
            pci.append(PCIDevice(address.nova_suffix, address, vendor,
                                 product, 0x020000, numa, source=where))
            rules.append(_rule({"address": str(address), **tags}, where))
            continue
        vf_product = _hex(where, "vf_product_id",
                          entry.get("vf_product_id", product))
        members = tuple(PCIAddress(address.domain, address.bus,
                                   0x10 + i // 8, i % 8) for i in range(vfs))
        pci.append(PCIDevice(address.nova_suffix, address, vendor, product,
                             0x020000, numa, virtual_functions=members,
                             max_virtual_functions=vfs, source=where))
        for vf in members:
            pci.append(PCIDevice(vf.nova_suffix, vf, vendor, vf_product,
                                 0x020000, numa, physical_function=address,
                                 source=where))
            rules.append(_rule({"address": str(vf), **tags}, where))
    seen: set[PCIAddress] = set()
    for device in pci:
        if device.address in seen:
            raise ValueError(f"{source}: devices: {device.address} is "
                             "described twice (a PF's VFs take slots "
                             "0x10 and up of its bus)")
        seen.add(device.address)
    return (HostDevices.build(pci, source=source),
            DeviceRules(tuple(rules), tuple(
                MdevRule(t, tuple(a)) for t, a in sorted(mdev.items()))))


def _rule(spec: dict, where: str):
    try:
        return parse_pci_rule(json.dumps(spec), where)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _hex(where: str, key: str, value: Any) -> str:
    text = str(value or "")
    try:
        number = int(text, 16)
    except ValueError:
        number = -1
    if not 0 <= number <= 0xFFFF or len(text) > 4:
        raise ValueError(f"{where}: {key} {value!r} is not 1 to 4 hex "
                         "digits")
    return f"{number:04x}"


def _count(where: str, key: str, value: Any, maximum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) \
            or not 0 <= value <= maximum:
        raise ValueError(f"{where}: {key} {value!r} is not a whole number "
                         f"0-{maximum}")
    return value

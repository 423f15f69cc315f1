"""Device hosts for tests: fakelibvirt's node-device builders, parsed by
the real parser, and the libvirt corpus' own node-device documents."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from virtdriver.capabilities.devices.parser import parse_node_devices
from virtdriver.capabilities.devices.model import HostDevices
from virtdriver.fakelibvirt.nodedev_builder import (
    MdevType, NodeDevice, mdev_device, pci_device)

NVIDIA, T4 = 0x10DE, 0x1EB8
INTEL, X710, X710_VF = 0x8086, 0x1572, 0x154C
MELLANOX, CX6 = 0x15B3, 0x101B
DISPLAY, ETHERNET, ACCEL = 0x030200, 0x020000, 0x120000


def gpu(address: str, *, numa: int | None = 0,
        types: Sequence[MdevType] = (MdevType("nvidia-35", "GRID T4-1B", 16),),
        vendor: int = NVIDIA, product: int = T4,
        class_id: int = DISPLAY) -> NodeDevice:
    """A GPU offering mdev types."""
    return pci_device(address, vendor, product, numa_node=numa,
                      class_id=class_id, mdev_types=types)


def sriov_nic(pf: str, vfs: int, *, numa: int | None = 1,
              vendor: int = INTEL, product: int = X710,
              vf_product: int = X710_VF) -> list[NodeDevice]:
    """A PF and ``vfs`` VFs (functions 1.. of bus+1), all listed."""
    domain, bus, rest = pf.split(":")
    vf_addresses = [f"{domain}:{int(bus, 16) + 1:02x}:{i // 8:02x}.{i % 8}"
                    for i in range(vfs)]
    return [pci_device(pf, vendor, product, numa_node=numa,
                       virtual_functions=vf_addresses, max_vfs=max(vfs, 1))] + [
        pci_device(vf, vendor, vf_product, numa_node=numa,
                   physical_function=pf) for vf in vf_addresses]


def mdev(uuid: str, type_id: str, parent: str) -> NodeDevice:
    """An existing mdev of ``type_id`` on the PCI parent at ``parent``."""
    return mdev_device(uuid, type_id, parent)


def parsed(devices: Iterable[NodeDevice], source: str = "builder"
           ) -> HostDevices:
    """The devices as the driver would read them."""
    return parse_node_devices(((d.name, d.xml) for d in devices),
                              source=source)


def corpus_devices(corpus_dir, *names: str) -> HostDevices:
    """Corpus node-device documents (file names), read as one listing."""
    return parse_node_devices(
        ((name, (corpus_dir / "nodedev" / name).read_bytes())
         for name in names), source="corpus")


def set_devices(fake, node_devices: Iterable[NodeDevice]) -> None:
    """Make ``node_devices`` the fake host's devices from now on, as a
    hot-plug would: through fakelibvirt's node-device table when it has
    one (unplugged, plugged, replaced), else by new documents."""
    new = {d.name: d for d in node_devices}
    try:
        from virtdriver.fakelibvirt.nodedev_state import table_for
    except ImportError:  # a fakelibvirt that serves its documents as is
        import dataclasses
        from types import MappingProxyType
        fake.documents = dataclasses.replace(
            fake.documents, node_devices=MappingProxyType(
                {name: d.xml for name, d in new.items()}))
        return
    table = table_for(fake)
    for name in table.names():
        if name not in new and name != "computer" and table.get(name):
            table.remove(name)
    for name, device in new.items():
        state = table.get(name)
        if state is None:
            table.add(device)
        elif state.xml != device.xml:
            table.replace(device)
